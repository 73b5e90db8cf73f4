"""The house keeps its shape: every room on the map, no room or class too big to live in, stages that
meet only in the database and the store."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from notebook_builder import build

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "notebook_builder"
MAX_MODULE_LINES = 1200
MAX_CLASS_LINES = 450
MAX_DOCSTRING_LINES = 40     # a module's contract, said as it is now
# The stages a run calls in turn (the feeds too, the end of an update). c75_schedule (the crawl) and c95_run
# call stages; nothing else does.
STAGES = {"c40_restore", "c50_discover", "c55_probe", "c60_backfill", "c70_download", "c80_extract", "c85_ocr",
          "c86_derive", "c87_index", "c89_feed", "c90_verify"}


def package_modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if path.name != "__init__.py" and "__pycache__" not in path.parts)


def cell_imports(path: Path) -> list[tuple[str, bool]]:
    """(cell module imported, whether inside a function) of every intra-package import of a cell."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside = {id(node) for function in ast.walk(tree) if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
              for node in ast.walk(function)}
    return [(node.module, id(node) in inside) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module]


def test_every_module_is_on_the_map():
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = []
    for path in package_modules():
        if path.parent.name == "cells":
            if path.stem not in ("form", "bootstrap") and not re.search(rf"`{re.escape(path.stem)}`", text):
                missing.append(path.stem)
        elif path.parent == PACKAGE:
            if path.stem != "__main__" and f"notebook_builder/{path.name}" not in text:
                missing.append(str(path.relative_to(REPO)))
        elif f"notebook_builder/{path.parent.relative_to(PACKAGE).as_posix()}/" not in text:
            missing.append(str(path.relative_to(REPO)))
    assert missing == [], f"ARCHITECTURE.md does not name {missing}"


def test_no_room_and_no_class_is_too_big_to_live_in():
    too_big = []
    for path in package_modules():
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            too_big.append(f"{path.relative_to(REPO)}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                too_big.append(f"{path.relative_to(REPO)}:{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert too_big == []


def test_every_module_says_its_contract_in_forty_lines_at_most():
    long = []
    for path in package_modules():
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False) or ""
        if len(docstring.splitlines()) > MAX_DOCSTRING_LINES:
            long.append(f"{path.relative_to(REPO)}: {len(docstring.splitlines())} lines")
    assert long == []


def test_stages_meet_only_in_the_database_and_the_store():
    positions = {path.stem: index for index, path in enumerate(build.cell_module_paths())}
    crossings, later = [], []
    for path in build.cell_module_paths():
        for module, in_function in cell_imports(path):
            if path.stem in STAGES and module in STAGES:
                crossings.append(f"{path.stem} imports {module}")
            if in_function and positions.get(module, -1) > positions[path.stem]:
                later.append(f"{path.stem} imports the later {module} inside a function")
    assert crossings == [] and later == []


def test_the_stage_list_names_modules_that_exist():
    cells = {path.stem for path in build.cell_module_paths()}
    assert STAGES <= cells
