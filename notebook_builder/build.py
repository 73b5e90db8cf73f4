"""Builds ky_court_pipeline.ipynb from the modules in notebook_builder/cells/.

Guarantees:
- The notebook is the modules: each cell module, in notebook order, is its source less the module
  docstring and the intra-package import lines (`from .x import ...`, found with `ast`): in a
  notebook every cell shares one namespace, so those imports have nothing left to do.
- Order: `form.py` (the settings form), `bootstrap.py` (setup), then the sorted `c*.py`, with
  `drive_store.py` after the last store module (c20 or lower). New cells are picked up by name.
- What a Colab user sees: a short introduction; the settings form; the setup cell; the library,
  one collapsed cell per module (`#@title ... {display-mode: "form"}` and, as Colab saves such a
  cell, `cellView: form` metadata; the docstring kept for whoever opens it); then the Run section,
  its text naming every phase a session runs by default (KNOBS' PHASES), and the action cells:
  each module's `if __name__ == "__main__":` block lifted into a short cell of its own, collapsed
  too, titled by the comment on its `if` line. The form and the setup cell are their code as written.
- `form.py` is generated from the `form=` fields of c00_config.KNOBS before the notebook, and the
  knob table of docs/knobs.md (between its markers) from KNOBS with `--update-knobs`.
- Deterministic: ids from module names, no outputs or execution counts, fixed metadata, nbformat
  4.5; two builds are byte-identical and `--check` exits 1 when the notebook or form.py is stale.
- A source the notebook could not run (`from . import x`, an import of a module that is not a
  cell, a top-level import of a later cell) stops the build with `BuildError`.

Usage:
    python notebook_builder/build.py                 # writes form.py and ky_court_pipeline.ipynb
    python notebook_builder/build.py --check         # exit 1 if either is stale
    python notebook_builder/build.py --knob-table    # prints the knob table of docs/knobs.md
    python notebook_builder/build.py --update-knobs  # rewrites that table in docs/knobs.md
    (--readme-table and --update-readme: the same two, by their older names)
    python -m notebook_builder.build --output PATH
"""
from __future__ import annotations

import argparse
import ast
import importlib
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
CELLS_DIR = PACKAGE_DIR / "cells"
CELLS_PACKAGE = "notebook_builder.cells"
NOTEBOOK_PATH = REPO_ROOT / "ky_court_pipeline.ipynb"
KNOBS_DOC_PATH = REPO_ROOT / "docs" / "knobs.md"
DRIVE_STORE_MODULE = "drive_store"
# Shown first, each its own code as written: the settings form, then the setup cell.
FIRST_MODULES = ("form", "bootstrap")
FORM_PATH = CELLS_DIR / "form.py"
STORE_CELL_NUMBER = 20

NOTEBOOK_METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}

TITLE_MARKDOWN = """\
# Kentucky appellate courts, or another court system: an archive of the public record

This notebook builds a complete, verified copy of the public documents of the
**Kentucky Supreme Court** and the **Kentucky Court of Appeals** (about 99,000
PDFs from the courts' C-Track Public Access site), or of the court system the
setting **Which court system** names (Delaware County, Pennsylvania; the
appellate courts of Nevada, Alabama, Oregon, North Dakota, Wyoming, Florida:
`docs/courts.md` says what each holds and what is public there): it finds
every document, downloads each one once, politely, keeps each distinct PDF
once under its SHA-256, turns it into text, and checks the whole archive.

**How to use it**

1. Fill in the settings below (the defaults archive everything into the Google
   Drive folder `ky_court`; a trial run can limit downloads and years).
2. **Runtime > Run all**, and sign in to Google Drive when asked.
3. A session runs for the budget (10 h by default; Colab stops runtimes after
   about 12 h) and saves its state to Drive as it goes. When it ends or
   disconnects, open the notebook again and **Run all**: it resumes where the
   last session stopped. The archive is complete when the status says
   `done: yes` and verify says `PASS`.

What is in the Drive folder: `pdf_by_hash/` (the PDFs), `text/` (their text),
`document_inventory.csv` (every document), `failed_inventory.csv` (what could
not be had, and why), `status.json` and `status.png` (progress)."""

LIBRARY_MARKDOWN = """\
## The pipeline's code

One collapsed cell per module of `notebook_builder/cells/` (double-click a
title to see its code). Nothing here needs changing: this notebook is
generated from those modules by `notebook_builder/build.py`, and every change
is made there and tested."""

RUN_MARKDOWN = """\
## Run

The settings become the configuration (and, when **probe first** is ticked, the probe asks the
court at most 10 requests); one session runs: restore, then the phases ({phases}), then sync and
verify. It prints what each stage did and what remains; then the status and the coverage chart.
A session that does not end in PASS (verify FAIL, the court unreachable, an interrupt) stops
**Run all** here with a message saying why; its state is saved either way."""


def run_markdown() -> str:
    """The Run section's text, naming every phase a session runs by default (KNOBS' PHASES)."""
    phases = _knob_module("c00_config").KNOB_BY_NAME["PHASES"].default
    return RUN_MARKDOWN.format(phases=", ".join(phases))


STALE_MESSAGE = "{path} is stale: run python notebook_builder/build.py"


class BuildError(Exception):
    """A cell module cannot become a notebook cell as written."""


@dataclass(frozen=True)
class CellModule:
    name: str          # module name, e.g. "c20_store"
    path: Path
    docstring: str     # cleaned module docstring ("" if none)
    code: str          # source without docstring and intra-package imports


# ------------------------------------------------------------ order


def _cell_number(name: str) -> int | None:
    match = re.match(r"c(\d+)", name)
    return int(match.group(1)) if match else None


def cell_module_paths(cells_dir: Path = CELLS_DIR) -> list[Path]:
    """The cell modules in notebook order: form, bootstrap, sorted c*.py, drive_store after the store."""
    numbered = sorted(
        (path for path in cells_dir.glob("c*.py") if _cell_number(path.stem) is not None),
        key=lambda path: path.stem,
    )
    first = [cells_dir / f"{name}.py" for name in FIRST_MODULES if (cells_dir / f"{name}.py").exists()]
    drive_store = cells_dir / f"{DRIVE_STORE_MODULE}.py"
    if not drive_store.exists():
        return first + numbered
    position = 0
    for index, path in enumerate(numbered):
        if _cell_number(path.stem) <= STORE_CELL_NUMBER:
            position = index + 1
    return first + numbered[:position] + [drive_store] + numbered[position:]


# ------------------------------------------------------ source surgery


def _intra_package_target(node: ast.stmt) -> str | None:
    """The cell module an import statement takes names from, or None if it is not intra-package.

    Raises BuildError for the forms the notebook could not run: a module
    object (`from . import x`, `import notebook_builder.cells.x`) or a
    relative import from outside cells/.
    """
    if isinstance(node, ast.Import):
        if any(alias.name.startswith(CELLS_PACKAGE) for alias in node.names):
            raise BuildError(f"line {node.lineno}: 'import {node.names[0].name}' binds a module, "
                             f"which the notebook does not have; use 'from .module import name'")
        return None
    if not isinstance(node, ast.ImportFrom):
        return None
    module = node.module or ""
    if node.level == 0:
        return module[len(CELLS_PACKAGE) + 1:] if module.startswith(CELLS_PACKAGE + ".") else None
    if node.level > 1:
        raise BuildError(f"line {node.lineno}: relative import from outside cells/ "
                         f"({'.' * node.level}{module}) cannot run in the notebook")
    if not module:
        raise BuildError(f"line {node.lineno}: 'from . import ...' binds modules, which the "
                         f"notebook does not have; use 'from .module import name'")
    return module


def _statement_lists(tree: ast.AST):
    """Every list of statements in the tree (module, function, class, if/try/with bodies)."""
    for node in ast.walk(tree):
        for field_name in ("body", "orelse", "finalbody"):
            statements = getattr(node, field_name, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                yield statements
        for handler in getattr(node, "handlers", None) or []:
            yield handler.body


def _check_own_lines(lines: list[str], node: ast.stmt, module_name: str) -> None:
    # ast's column offsets count UTF-8 bytes, not characters.
    before = lines[node.lineno - 1].encode("utf-8")[:node.col_offset].decode("utf-8", "replace")
    after = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:].decode("utf-8", "replace")
    if before.strip() or (after.strip() and not after.strip().startswith("#")):
        raise BuildError(f"{module_name}.py line {node.lineno}: an intra-package import must stand "
                         f"on its own lines (no ';' and nothing else on them)")


def transform_source(source: str, module_name: str = "<cell>",
                     known_modules: dict[str, int] | None = None,
                     position: int | None = None,
                     other_modules: frozenset[str] = frozenset()) -> tuple[str, str]:
    """Splits a cell module into (docstring, code for the notebook).

    `known_modules` maps every cell module name to its notebook position; if
    given, an import at module level must name one that comes earlier than
    `position`, and no import may name one of `other_modules` (modules in
    cells/ that are not notebook cells). A module that does not exist yet is
    the package's own ImportError, not the builder's concern.
    """
    tree = ast.parse(source, filename=f"{module_name}.py")
    lines = re.split(r"\r\n|\r|\n", source)  # the line breaks ast counts, no others
    # line index (0-based) -> its replacement lines ([] removes it)
    replacements: dict[int, list[str]] = {}

    docstring = ast.get_docstring(tree) or ""
    if docstring:
        replacements.update((index, []) for index in range(tree.body[0].lineno - 1, tree.body[0].end_lineno))

    top_level = set(map(id, tree.body))
    for statements in _statement_lists(tree):
        removable = []
        for node in statements:
            try:
                target = _intra_package_target(node)
            except BuildError as error:
                raise BuildError(f"{module_name}.py {error}") from None
            if target is None:
                continue
            if target in other_modules:
                raise BuildError(f"{module_name}.py line {node.lineno}: imports from {target!r}, "
                                 f"which is not a notebook cell (cells are c*.py and drive_store.py)")
            if (known_modules is not None and id(node) in top_level and position is not None
                    and known_modules.get(target, -1) >= position):
                raise BuildError(f"{module_name}.py line {node.lineno}: imports from {target!r} at "
                                 f"module level, but that cell comes later in the notebook")
            _check_own_lines(lines, node, module_name)
            removable.append(node)
        for node in removable:
            indent = " " * node.col_offset
            # `from .x import a as b` still has to bind b in the shared namespace.
            kept = [f"{indent}{alias.asname} = {alias.name}" for alias in node.names if alias.asname]
            if not kept and len(removable) == len(statements) and node is removable[0]:
                kept = [f"{indent}pass"]  # a block must keep one statement
            replacements.update((index, []) for index in range(node.lineno - 1, node.end_lineno))
            replacements[node.lineno - 1] = kept

    output = [new for index, line in enumerate(lines) for new in replacements.get(index, [line])]
    return docstring, "\n".join(output).strip("\n")


def load_cell_modules(cells_dir: Path = CELLS_DIR) -> list[CellModule]:
    paths = cell_module_paths(cells_dir)
    positions = {path.stem: index for index, path in enumerate(paths)}
    others = frozenset(path.stem for path in cells_dir.glob("*.py")) - positions.keys() - {"__init__"}
    modules = []
    for index, path in enumerate(paths):
        docstring, code = transform_source(path.read_text(encoding="utf-8"), path.stem,
                                           positions, index, others)
        modules.append(CellModule(path.stem, path, docstring, code))
    return modules


# ------------------------------------------------------------ notebook


def cell_id(module_name: str, kind: str) -> str:
    """A stable nbformat cell id: 'c20_store', 'code' -> 'c20-store-code'."""
    stem = re.sub(r"[^a-zA-Z0-9-]+", "-", module_name).strip("-") or "cell"
    return f"{stem[:64 - len(kind) - 1]}-{kind}"


def split_main_block(code: str) -> tuple[str, str, str]:
    """(code without its top-level `if __name__ == "__main__":` block, the block's body dedented,
    the block's title: the comment on its `if` line). No block: (code, "", "")."""
    tree = ast.parse(code)
    lines = code.split("\n")
    for node in tree.body:
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
                and not node.orelse):
            header = lines[node.lineno - 1]
            title = header.split("#", 1)[1].strip() if "#" in header else ""
            body = textwrap.dedent("\n".join(lines[node.body[0].lineno - 1:node.end_lineno]))
            rest = lines[:node.lineno - 1] + lines[node.end_lineno:]
            return "\n".join(rest).strip("\n"), body.strip("\n"), title
    return code, "", ""


_FORM_TITLE = '{ display-mode: "form" }'


def _title_line(text: str) -> str:
    """A Colab form title: the text (no braces, which end it), code hidden."""
    return f'#@title {re.sub(r"[{}]", "", text).strip()} {_FORM_TITLE}'


def _summary(module: CellModule) -> str:
    first = module.docstring.split("\n\n", 1)[0].replace("\n", " ").strip()
    return f"{module.name}: {first}" if first else module.name


def library_source(module: CellModule, code: str) -> str:
    """A collapsed library cell: its title, the module's docstring (for whoever opens it), the code."""
    parts = [_title_line(_summary(module))]
    if module.docstring and '"""' not in module.docstring and "\\" not in module.docstring:
        parts.append(f'"""{module.docstring}\n"""')
    parts.append(code)
    return "\n".join(part for part in parts if part)


def cell_sources(cells_dir: Path = CELLS_DIR) -> list[tuple[str, str, str]]:
    """(id, cell_type, source) of every notebook cell, in order (see the module docstring)."""
    cells = [("title-md", "markdown", TITLE_MARKDOWN)]
    library, actions = [], []
    for module in load_cell_modules(cells_dir):
        if module.name in FIRST_MODULES:   # the form and the setup cell: as written, first
            cells.append((cell_id(module.name, "code"), "code", module.code))
            continue
        code, main, title = split_main_block(module.code)
        library.append((cell_id(module.name, "code"), "code", library_source(module, code)))
        if main:
            # A short cell collapsed like the others, its title saying what runs; a title that
            # names its own Colab options (a form with fields: `{ display-mode: "form" }`) keeps them.
            heading = f"#@title {title}" if "{" in title else _title_line(title or module.name)
            actions.append((cell_id(module.name, "run"), "code", f"{heading}\n{main}"))
    cells.append(("library-md", "markdown", LIBRARY_MARKDOWN))
    cells += library
    if actions:
        cells.append(("run-md", "markdown", run_markdown()))
        cells += actions
    return cells


def build_notebook(cells_dir: Path = CELLS_DIR) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook(metadata=NOTEBOOK_METADATA)
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    for identifier, cell_type, source in cell_sources(cells_dir):
        if cell_type == "code":
            cell = nbformat.v4.new_code_cell(source, id=identifier)
            if any(line.startswith("#@title") and _FORM_TITLE in line for line in source.splitlines()):
                # As Colab saves a cell whose code it hides: opened collapsed, whatever Colab
                # makes of the title line.
                cell.metadata["cellView"] = "form"
        else:
            cell = nbformat.v4.new_markdown_cell(source, id=identifier)
        notebook.cells.append(cell)
    nbformat.validate(notebook)
    return notebook


def notebook_text(cells_dir: Path = CELLS_DIR) -> str:
    """The notebook exactly as written to disk."""
    text = nbformat.writes(build_notebook(cells_dir))
    return text if text.endswith("\n") else text + "\n"


def write_notebook(path: Path = NOTEBOOK_PATH, cells_dir: Path = CELLS_DIR) -> Path:
    Path(path).write_bytes(notebook_text(cells_dir).encode("utf-8"))
    return Path(path)


def is_stale(path: Path = NOTEBOOK_PATH, cells_dir: Path = CELLS_DIR) -> bool:
    path = Path(path)
    return not path.exists() or path.read_bytes() != notebook_text(cells_dir).encode("utf-8")


# ---------------------------------------------------------- the form

FORM_HEADER = '''"""Settings: the form a Colab user fills in before **Runtime > Run all** (GENERATED by
`python notebook_builder/build.py` from the `form=` fields of c00_config.KNOBS: edit them there).
Colab shows the `#@param` lines as a form; c01_form makes CFG of them. Outside Colab a field left at
its shipped value defers to the KY_* environment.
"""
#@title Settings { display-mode: "form" }'''
FORM_LINE_WIDTH = 104


def _knob_module(name: str):
    """A cell module of the package (the knob table and the form are made from c00_config.KNOBS)."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module(f"{CELLS_PACKAGE}.{name}")


def form_source() -> str:
    """form.py as it must be: each form field of KNOBS, in order, under its #@markdown intro."""
    form = _knob_module("c01_form")
    lines = [FORM_HEADER]
    for field, knob in form.FORM_KNOBS.items():
        if knob.form.intro:
            lines += textwrap.wrap(knob.form.intro, FORM_LINE_WIDTH, initial_indent="#@markdown ",
                                   subsequent_indent="#@markdown ")
        shipped = form.FORM_DEFAULTS[field]
        literal = json.dumps(shipped) if isinstance(shipped, str) else repr(shipped)
        lines.append(f"FORM_{field.upper()} = {literal}  #@param {form.form_param(knob.form, shipped)}")
    return "\n".join(lines) + "\n"


def write_form(path: Path = FORM_PATH) -> bool:
    """Rewrites form.py from KNOBS; True if it changed."""
    text = form_source()
    if Path(path).exists() and Path(path).read_text(encoding="utf-8") == text:
        return False
    Path(path).write_text(text, encoding="utf-8")
    return True


# ------------------------------------------------------ docs/knobs.md's knob table

# Defaults that differ by machine or runtime, shown in words so the table is
# the same everywhere it is generated.
DISPLAY_DEFAULTS = {"WORKERS": "the CPU count"}
KNOB_TABLE_BEGIN = "<!-- knob table: generated by python notebook_builder/build.py --knob-table -->"
KNOB_TABLE_END = "<!-- end of knob table -->"


def _env_form(value: object) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (tuple, list)):
        return ",".join(_env_form(item) for item in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _table_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def knob_table() -> str:
    """The table of every knob in c00_config.KNOBS, as markdown (docs/knobs.md holds it)."""
    KNOBS = _knob_module("c00_config").KNOBS
    rows = ["| knob | env variable | default | accepted | meaning |",
            "| --- | --- | --- | --- | --- |"]
    for knob in KNOBS:
        default = DISPLAY_DEFAULTS.get(knob.name, f"`{_env_form(knob.default)}`")
        if knob.colab_default is not None:
            default += f" (Colab: `{_env_form(knob.colab_default)}`)"
        if knob.name == "MAX_PDF_BYTES":
            default += f" ({knob.default // (1024 * 1024)} MiB)"
        rows.append("| " + " | ".join(_table_cell(text) for text in (
            f"`{knob.name}`", f"`{knob.env}`" if knob.env else "—", default, knob.accepted, knob.help,
        )) + " |")
    return "\n".join(rows)


def marked_knob_table(text: str) -> str | None:
    """The table between a page's knob table markers, or None if they are missing."""
    begin, end = text.find(KNOB_TABLE_BEGIN), text.find(KNOB_TABLE_END)
    if begin < 0 or end < begin:
        return None
    return text[begin + len(KNOB_TABLE_BEGIN):end].strip("\n")


def update_knob_doc(path: Path | None = None) -> bool:
    """Rewrites the knob table between the markers of `path` (docs/knobs.md) from KNOBS, leaving
    the rest of the page as it is; True if it changed."""
    path = Path(path or KNOBS_DOC_PATH)
    text = path.read_text(encoding="utf-8")
    if marked_knob_table(text) is None:
        raise BuildError(f"{path} has no knob table markers ({KNOB_TABLE_BEGIN!r} ... {KNOB_TABLE_END!r})")
    begin = text.find(KNOB_TABLE_BEGIN) + len(KNOB_TABLE_BEGIN)
    end = text.find(KNOB_TABLE_END)
    new_text = text[:begin] + "\n" + knob_table() + "\n" + text[end:]
    if new_text != text:
        Path(path).write_text(new_text, encoding="utf-8")
    return new_text != text


# ----------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python notebook_builder/build.py",
        description="Build ky_court_pipeline.ipynb from notebook_builder/cells/ (deterministic).")
    parser.add_argument("--output", type=Path, default=NOTEBOOK_PATH,
                        help="notebook to write or check (default: ky_court_pipeline.ipynb at the repo root)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the notebook differs from a fresh build")
    action.add_argument("--knob-table", "--readme-table", dest="knob_table", action="store_true",
                        help="print the knob table of docs/knobs.md (generated from c00_config.KNOBS)")
    action.add_argument("--update-knobs", "--update-readme", dest="update_knobs", action="store_true",
                        help="rewrite the knob table in docs/knobs.md from c00_config.KNOBS")
    args = parser.parse_args(argv)

    try:
        if args.knob_table:
            print(knob_table())
            return 0
        if args.update_knobs:
            changed = update_knob_doc()
            print(f"{KNOBS_DOC_PATH}: knob table {'updated' if changed else 'already current'}")
            return 0
        if args.check:
            if FORM_PATH.read_text(encoding="utf-8") != form_source():
                print(STALE_MESSAGE.format(path=FORM_PATH.name), file=sys.stderr)
                return 1
            if is_stale(args.output):
                print(STALE_MESSAGE.format(path=args.output.name), file=sys.stderr)
                return 1
            print(f"{args.output.name} is up to date")
            return 0
        if write_form():
            print(f"wrote {FORM_PATH}")
        write_notebook(args.output)
    except BuildError as error:
        print(f"build.py: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
