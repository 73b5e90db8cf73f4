"""The notebook builder: cells -> ky_court_pipeline.ipynb, deterministic and faithful."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from notebook_builder import build

REPO_ROOT = Path(__file__).resolve().parent.parent


def code_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def write_cells(directory: Path, modules: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "__init__.py").write_text("")
    for name, source in modules.items():
        (directory / f"{name}.py").write_text(textwrap.dedent(source).lstrip("\n"))
    return directory


def run_builder(*args: str, module: bool = False) -> subprocess.CompletedProcess:
    command = ([sys.executable, "-m", "notebook_builder.build"] if module
               else [sys.executable, str(REPO_ROOT / "notebook_builder" / "build.py")])
    return subprocess.run(command + list(args), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------- determinism


def test_two_builds_are_byte_identical(tmp_path):
    first, second = tmp_path / "first.ipynb", tmp_path / "second.ipynb"
    build.write_notebook(first)
    build.write_notebook(second)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes().endswith(b"}\n")


def test_builds_in_separate_processes_are_byte_identical(tmp_path):
    # A fresh interpreter each time, so per-process randomness (hash seeds,
    # nbformat's random cell ids) would show.
    outputs = []
    for index in range(2):
        output = tmp_path / f"build{index}.ipynb"
        result = run_builder("--output", str(output))
        assert result.returncode == 0, result.stderr
        outputs.append(output.read_bytes())
    assert outputs[0] == outputs[1]


def test_notebook_has_stable_ids_no_outputs_and_fixed_metadata():
    notebook = build.build_notebook()
    assert (notebook.nbformat, notebook.nbformat_minor) == (4, 5)
    assert notebook.metadata == build.NOTEBOOK_METADATA
    ids = [cell.id for cell in notebook.cells]
    assert len(ids) == len(set(ids))
    assert ids[:4] == ["title-md", "form-code", "bootstrap-code", "library-md"]
    assert "c00-config-code" in ids and ids[ids.index("run-md") + 1] == "c01-form-run"
    assert ids[-3:] == ["c95-run-run", "c97-report-run", "c98-search-run"]
    for cell in code_cells(notebook):
        assert cell.outputs == [] and cell.execution_count is None
        assert cell.metadata in ({}, {"cellView": "form"})


def test_every_cell_whose_title_hides_its_code_carries_colabs_cellview_form():
    notebook = build.build_notebook()
    hidden = {cell.id for cell in code_cells(notebook)
              if any(line.startswith("#@title") and 'display-mode: "form"' in line for line in cell.source.splitlines())}
    assert {cell.id for cell in code_cells(notebook) if cell.metadata.get("cellView") == "form"} == hidden
    library = [cell.id for cell in code_cells(notebook) if cell.id.endswith("-code")]
    assert len(library) > 20 and set(library) <= hidden            # every library cell, the form, the setup
    assert {cell.id for cell in code_cells(notebook)} == hidden     # and the Run cells: every code cell


def test_the_run_text_names_every_phase_a_session_runs_by_default():
    from notebook_builder.cells.c00_config import KNOB_BY_NAME
    text = next(cell.source for cell in build.build_notebook().cells if cell.id == "run-md")
    for phase in ("restore", *KNOB_BY_NAME["PHASES"].default, "verify"):
        assert re.search(rf"\b{phase}\b", text), phase


def test_cell_ids_are_valid_nbformat_ids_even_for_long_names():
    for name in ("c00_config", "drive_store", "c99_" + "x" * 100):
        for kind in ("md", "code"):
            identifier = build.cell_id(name, kind)
            assert 1 <= len(identifier) <= 64 and identifier.endswith("-" + kind)
            assert all(char.isalnum() or char in "-_" for char in identifier)
    assert build.cell_id("c20_store", "code") == "c20-store-code"


def test_output_passes_nbformat_validate(tmp_path):
    path = build.write_notebook(tmp_path / "nb.ipynb")
    notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    nbformat.validate(notebook)   # raises ValidationError on an invalid notebook
    assert nbformat.validator.iter_validate(notebook) is not None and not list(
        nbformat.validator.iter_validate(notebook))
    assert len(notebook.cells) == len(build.cell_sources())


# ---------------------------------------------------------------- check


def test_committed_notebook_equals_a_fresh_build():
    committed = REPO_ROOT / "ky_court_pipeline.ipynb"
    assert committed.exists(), "ky_court_pipeline.ipynb is missing: run python notebook_builder/build.py"
    assert not build.is_stale(committed), build.STALE_MESSAGE.format(path=committed.name)


def test_check_passes_on_a_fresh_build_and_catches_a_stale_notebook(tmp_path):
    notebook_path = build.write_notebook(tmp_path / "ky_court_pipeline.ipynb")
    passed = run_builder("--check", "--output", str(notebook_path))
    assert passed.returncode == 0, passed.stderr

    notebook = nbformat.read(notebook_path, as_version=4)
    notebook.cells[-1].source += "\n# edited by hand"
    nbformat.write(notebook, notebook_path)
    failed = run_builder("--check", "--output", str(notebook_path))
    assert failed.returncode == 1
    assert "ky_court_pipeline.ipynb is stale: run python notebook_builder/build.py" in failed.stderr
    # --check writes nothing.
    assert "# edited by hand" in notebook_path.read_text()


def test_check_treats_a_missing_notebook_as_stale(tmp_path):
    result = run_builder("--check", "--output", str(tmp_path / "ky_court_pipeline.ipynb"), module=True)
    assert result.returncode == 1 and "is stale" in result.stderr


def test_check_catches_a_whitespace_only_difference(tmp_path):
    notebook_path = build.write_notebook(tmp_path / "nb.ipynb")
    notebook_path.write_bytes(notebook_path.read_bytes().rstrip(b"\n"))
    assert build.is_stale(notebook_path)


# ------------------------------------------------------- faithful cells


def test_every_code_cell_compiles():
    cells = code_cells(build.build_notebook())
    compiled = [compile(cell.source, f"<cell {cell.id}>", "exec") for cell in cells]  # SyntaxError fails
    assert len(compiled) == len(cells) > 10


def test_cells_follow_module_order_with_drive_store_after_the_store(tmp_path):
    cells_dir = write_cells(tmp_path / "cells", {
        "c00_config": '"""Config."""\nA = 1\n',
        "c10_database": '"""Database."""\nB = 2\n',
        "c20_store": '"""Store."""\nC = 3\n',
        "c25_extra": '"""Extra."""\nD = 4\n',
        "c90_verify": '"""Verify."""\nE = 5\n',
        "drive_store": '"""Drive."""\nF = 6\n',
    })
    order = [path.stem for path in build.cell_module_paths(cells_dir)]
    assert order == ["c00_config", "c10_database", "c20_store", "drive_store", "c25_extra", "c90_verify"]
    ids = [identifier for identifier, _, _ in build.cell_sources(cells_dir)]
    assert "init-code" not in " ".join(ids) and "__init__" not in " ".join(ids)
    assert ids[-1:] == ["c90-verify-code"]


def test_a_new_cell_module_needs_no_builder_change(tmp_path):
    cells_dir = write_cells(tmp_path / "cells", {
        "c00_config": '"""Config."""\nA = 1\n',
        "c42_new_stage": '"""A stage nobody told the builder about."""\nfrom .c00_config import A\n\nB = A\n',
    })
    sources = build.cell_sources(cells_dir)
    assert ("c42-new-stage-code", "code",
            '#@title c42_new_stage: A stage nobody told the builder about. { display-mode: "form" }\n'
            '"""A stage nobody told the builder about.\n"""\nB = A') in sources


def test_only_intra_package_imports_and_the_docstring_are_removed():
    source = textwrap.dedent('''\
        """Module docstring.

        Second paragraph.
        """
        from __future__ import annotations

        import os
        from pathlib import Path
        from .c00_config import (
            Config,
            ConfigError,
        )
        from notebook_builder.cells.c10_database import Database
        from .c20_store import LocalStore as _LocalStore


        def open_it(cfg: Config) -> Path:
            """Function docstrings stay."""
            from .drive_store import open_drive_store
            import json
            return Path(os.fspath(cfg.WORKSPACE))


        if False:
            from .c35_context import Context
        ''')
    docstring, code = build.transform_source(source, "c99_sample")
    assert docstring == "Module docstring.\n\nSecond paragraph."
    assert code == textwrap.dedent('''\
        from __future__ import annotations

        import os
        from pathlib import Path
        _LocalStore = LocalStore


        def open_it(cfg: Config) -> Path:
            """Function docstrings stay."""
            import json
            return Path(os.fspath(cfg.WORKSPACE))


        if False:
            pass''')
    compile(code, "c99_sample", "exec")


def test_committed_cells_keep_every_non_intra_import_and_drop_every_intra_one():
    notebook = build.build_notebook()
    cells_by_id = {cell.id: cell for cell in notebook.cells}
    for path in build.cell_module_paths():
        module_tree = ast.parse(path.read_text())
        cell_tree = ast.parse(cells_by_id[build.cell_id(path.stem, "code")].source)

        def imports(tree, intra):
            return sorted(ast.dump(node) for node in ast.walk(tree)
                          if isinstance(node, (ast.Import, ast.ImportFrom))
                          and (build._intra_package_target(node) is not None) == intra)

        assert imports(cell_tree, intra=True) == [], path.stem
        assert imports(cell_tree, intra=False) == imports(module_tree, intra=False), path.stem


def test_from_future_stays_the_first_statement_of_its_cell():
    for cell in code_cells(build.build_notebook()):
        body = ast.parse(cell.source).body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]   # the module's docstring may stand before it, as in a module
        for index, node in enumerate(body):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                assert index == 0, cell.id


def test_library_cells_are_collapsed_and_main_blocks_are_short_cells_collapsed_too():
    notebook = build.build_notebook()
    for cell in code_cells(notebook):
        first = cell.source.splitlines()[0]
        if cell.id == "c98-search-run":        # a form of its own: the fields show, the code hides
            assert first == '#@title Search the archive { display-mode: "form" }'
            assert "FORM_SEARCH_QUERY = " in cell.source
        elif cell.id.endswith("-run"):
            assert first.startswith("#@title ") and first.endswith('{ display-mode: "form" }'), cell.id
            assert len(cell.source.splitlines()) <= 12, cell.id
        else:
            assert first.startswith("#@title ") and first.endswith('{ display-mode: "form" }'), cell.id
            if cell.id != "bootstrap-code":   # the setup cell runs in place, before the library
                assert '__name__ == "__main__"' not in cell.source, cell.id
    run = next(cell for cell in notebook.cells if cell.id == "c95-run-run")
    assert "run_session(" in run.source


@pytest.mark.parametrize("line, reason", [
    ("from . import c00_config", "binds modules"),
    ("import notebook_builder.cells.c00_config", "binds a module"),
    ("from ..simcourt import server", "outside cells/"),
    ("from .c00_config import A; B = 2", "its own lines"),
])
def test_imports_the_notebook_could_not_run_stop_the_build(tmp_path, line, reason):
    with pytest.raises(build.BuildError, match=reason):
        build.transform_source(f"{line}\n", "c50_bad")


@pytest.mark.parametrize("modules, reason", [
    ({"c00_config": '"""Config."""\nfrom .c10_database import B\n', "c10_database": "B = 2\n"},
     "comes later"),
    ({"c00_config": '"""Config."""\nfrom .helpers import B\n', "helpers": "B = 2\n"},
     "not a notebook cell"),
])
def test_an_import_of_a_later_cell_or_a_non_cell_stops_the_build(tmp_path, modules, reason):
    with pytest.raises(build.BuildError, match=reason):
        build.build_notebook(write_cells(tmp_path / "cells", modules))


# ------------------------------------------------ one shared namespace


def top_level_bindings(source: str) -> tuple[dict[str, str], dict[str, str]]:
    """(names defined by def/class/assignment, names bound by import -> what they import)."""
    defined: dict[str, str] = {}
    imported: dict[str, str] = {}

    def bind_target(target: ast.AST, kind: str) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.setdefault(node.id, kind)

    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.setdefault(node.name, type(node).__name__)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                bind_target(target, "assignment")
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.target is not None:
            bind_target(node.target, "assignment")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                imported[bound] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return defined, imported


def shared_namespace_conflicts(cells: list[tuple[str, str]]) -> list[str]:
    """Names two cells bind to different objects in the notebook's one namespace."""
    defined_in: dict[str, str] = {}
    imported_as: dict[str, tuple[str, str]] = {}
    conflicts = []
    for cell_name, source in cells:
        defined, imported = top_level_bindings(source)
        for name in defined:
            if name.startswith("__") and name.endswith("__"):
                continue
            if name in defined_in:
                conflicts.append(f"{name}: defined in {defined_in[name]} and {cell_name}")
            elif name in imported_as:
                conflicts.append(f"{name}: imported in {imported_as[name][0]}, defined in {cell_name}")
            defined_in.setdefault(name, cell_name)
        for name, origin in imported.items():
            if name in defined_in:
                conflicts.append(f"{name}: defined in {defined_in[name]}, imported in {cell_name}")
            elif name in imported_as and imported_as[name][1] != origin:
                conflicts.append(f"{name}: {imported_as[name][1]} in {imported_as[name][0]}, "
                                 f"{origin} in {cell_name}")
            imported_as.setdefault(name, (cell_name, origin))
    return conflicts


def test_no_two_cells_bind_the_same_top_level_name_to_different_objects():
    cells = [(cell.id, cell.source) for cell in code_cells(build.build_notebook())]
    assert shared_namespace_conflicts(cells) == []


def test_the_namespace_check_sees_real_conflicts_and_allows_shared_imports():
    assert shared_namespace_conflicts([
        ("a", "import os\nfrom pathlib import Path\nlog = 1\n"),
        ("b", "import os\nfrom pathlib import Path\n"),
    ]) == []
    assert shared_namespace_conflicts([("a", "log = 1\n"), ("b", "def log(): pass\n")]) == [
        "log: defined in a and b"]
    assert shared_namespace_conflicts([("a", "from typing import Any\n"), ("b", "Any = object\n")]) == [
        "Any: imported in a, defined in b"]
    assert shared_namespace_conflicts([("a", "from json import loads\n"), ("b", "from pickle import loads\n")])


# ------------------------------------------------------ bootstrap cell


def bootstrap_cell() -> str:
    return next(cell.source for cell in build.build_notebook().cells if cell.id == "bootstrap-code")


def test_bootstrap_cell_does_nothing_outside_colab():
    namespace: dict = {"__name__": "__main__"}
    exec(compile(bootstrap_cell(), "<bootstrap>", "exec"), namespace)
    assert namespace["running_in_colab"]() is False
    assert namespace["SETUP_ACTIONS"] == []


def test_bootstrap_installs_the_requirements_pyproject_declares():
    from notebook_builder.cells.bootstrap import COLAB_MISSING_PACKAGES

    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    source = bootstrap_cell()
    for import_name, requirement in COLAB_MISSING_PACKAGES:
        assert f'"{requirement}"' in pyproject, requirement
        assert import_name in source
    assert "sys.executable" in source and "authenticate_user" in source


# ------------------------------------------------------ docs/knobs.md's knob table


def test_the_knob_table_in_docs_matches_KNOBS():
    from notebook_builder.cells.c00_config import KNOBS

    table = build.marked_knob_table(build.KNOBS_DOC_PATH.read_text(encoding="utf-8"))
    assert table is not None, "docs/knobs.md lost its knob table markers"
    assert table == build.knob_table(), "docs/knobs.md's knob table is stale: run python notebook_builder/build.py --update-knobs"
    for knob in KNOBS:
        assert f"| `{knob.name}` |" in table


@pytest.mark.parametrize("flag", ["--knob-table", "--readme-table"])
def test_the_knob_table_command_prints_the_table_by_either_name(flag):
    result = run_builder(flag)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == build.knob_table()


@pytest.mark.parametrize("flag", ["--update-knobs", "--update-readme"])
def test_updating_the_knob_page_rewrites_its_table_and_nothing_else(tmp_path, monkeypatch, capsys, flag):
    page = tmp_path / "knobs.md"
    before, after = "# Knobs\n\nintro\n\n", "\n\nwhat follows the table\n"
    page.write_text(f"{before}{build.KNOB_TABLE_BEGIN}\n| stale |\n{build.KNOB_TABLE_END}{after}", encoding="utf-8")
    monkeypatch.setattr(build, "KNOBS_DOC_PATH", page)

    assert build.main([flag]) == 0
    assert "knob table updated" in capsys.readouterr().out
    text = page.read_text(encoding="utf-8")
    assert text == f"{before}{build.KNOB_TABLE_BEGIN}\n{build.knob_table()}\n{build.KNOB_TABLE_END}{after}"
    assert build.main([flag]) == 0
    assert "already current" in capsys.readouterr().out
    assert page.read_text(encoding="utf-8") == text


def test_a_knob_page_without_markers_is_refused_and_left_as_it_was(tmp_path):
    page = tmp_path / "knobs.md"
    page.write_text("# Knobs\n", encoding="utf-8")
    with pytest.raises(build.BuildError, match="no knob table markers"):
        build.update_knob_doc(page)
    assert page.read_text(encoding="utf-8") == "# Knobs\n"


def test_display_defaults_name_real_knobs():
    from notebook_builder.cells.c00_config import KNOB_BY_NAME

    assert set(build.DISPLAY_DEFAULTS) <= set(KNOB_BY_NAME)
