"""Builds ky_court_pipeline.ipynb from the modules in notebook_builder/cells/.

Guarantees:
- The notebook is the modules: for each cell module, in notebook order, a
  markdown cell made from its docstring, then a code cell holding its source
  with only the module docstring and the intra-package import lines removed
  (`from .x import ...`, `from notebook_builder.cells.x import ...`, found
  with `ast`, multi-line forms included). In a notebook every cell shares one
  namespace, so those imports have nothing left to do.
- Module order is `form.py` (the settings form), then the sorted `c*.py`
  modules, with `drive_store.py` right after the store module (the last one
  numbered c20 or lower). New cells are picked up by name; the builder needs
  no change.
- What a Colab user sees, top to bottom: a short introduction; the settings
  form (the `form` module: fields only); the setup cell (installs what Colab
  lacks and signs in to Drive; the only code the builder writes); the
  library, one collapsed cell per module (Colab's `#@title ... {display-mode:
  "form"}` hides the code; the module's docstring is kept in it for whoever
  opens it); then the action cells: each module's `if __name__ == "__main__":`
  block, lifted out of its library cell into a short visible cell of its own
  (settings -> CFG, run the session, status and chart).
- The output is deterministic: ids derived from module names, no outputs, no
  execution counts, fixed metadata, nbformat 4.5. Two builds are
  byte-identical, and `--check` exits 1 when the committed notebook is stale.
- A source the notebook could not run (an aliased module import such as
  `from . import c10_database`, an import of a module that is not a cell, a
  top-level import of a later cell) stops the build with `BuildError`.

Usage:
    python notebook_builder/build.py                 # writes ky_court_pipeline.ipynb
    python notebook_builder/build.py --check         # exit 1 if it is stale
    python notebook_builder/build.py --readme-table  # prints the README's knob table
    python -m notebook_builder.build --output PATH
"""
from __future__ import annotations

import argparse
import ast
import inspect
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
README_PATH = REPO_ROOT / "README.md"
DRIVE_STORE_MODULE = "drive_store"
FORM_MODULE = "form"
STORE_CELL_NUMBER = 20

# What Colab's image lacks, as (import name, pip requirement). The
# requirements match pyproject.toml's (tests/test_build.py keeps them level).
COLAB_MISSING_PACKAGES = (
    ("pypdf", "pypdf>=4.0"),
    ("pypdfium2", "pypdfium2>=4.0"),
    ("pytesseract", "pytesseract>=0.3"),
    ("pydrive2", "pydrive2>=1.15"),
    ("eyecite", "eyecite>=2.6"),
)

NOTEBOOK_METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}

TITLE_MARKDOWN = """\
# Kentucky appellate courts: an archive of the public record

This notebook builds a complete, verified copy of the public documents of the
**Kentucky Supreme Court** and the **Kentucky Court of Appeals** (about 99,000
PDFs from the courts' C-Track Public Access site): it finds every document,
downloads each one once, politely, keeps each distinct PDF once under its
SHA-256, turns it into text, and checks the whole archive.

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

The settings become the configuration, one session runs (restore, discover,
backfill, download, extract, verify) and prints what each stage did and what
remains; then the status and the coverage chart. A session that does not end
in PASS (verify FAIL, the court unreachable, an interrupt) stops **Run all**
here with a message saying why; its state is saved either way."""

BOOTSTRAP_SOURCE = f"""\
#@title Setup: install what Colab lacks, sign in to Google Drive {{ display-mode: "form" }}
# Colab only: install what its image lacks, then sign in to Google Drive.
# Outside Colab this cell does nothing; install the project with pip instead.
import importlib.util
import subprocess
import sys


def _running_in_colab() -> bool:
    if "google.colab" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("google.colab") is not None
    except ModuleNotFoundError:
        return False


if _running_in_colab():
    _missing_requirements = [
        requirement
        for import_name, requirement in {COLAB_MISSING_PACKAGES!r}
        if importlib.util.find_spec(import_name) is None
    ]
    if _missing_requirements:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *_missing_requirements])
        importlib.invalidate_caches()
    import shutil
    if shutil.which("tesseract") is None:   # the ocr stage's engine (Colab runs as root); skipped if this fails
        subprocess.call("apt-get update -qq && apt-get install -y -qq tesseract-ocr", shell=True)
    from google.colab import auth as _colab_auth

    _colab_auth.authenticate_user()"""

REMOVED = None  # marks a removed line in transform_source

STALE_MESSAGE = "{path} is stale: run python notebook_builder/build.py"


class BuildError(Exception):
    """A cell module cannot become a notebook cell as written."""


@dataclass(frozen=True)
class CellModule:
    name: str          # module name, e.g. "c20_store"
    path: Path
    docstring: str     # cleaned module docstring ("" if none)
    code: str          # source without docstring and intra-package imports

    def split_main(self) -> tuple[str, str, str]:
        """(library code, the `__main__` block's body dedented, its title) of this module's code."""
        return split_main_block(self.code)


# ------------------------------------------------------------ order


def _cell_number(name: str) -> int | None:
    match = re.match(r"c(\d+)", name)
    return int(match.group(1)) if match else None


def cell_module_paths(cells_dir: Path = CELLS_DIR) -> list[Path]:
    """The cell modules in notebook order: form, sorted c*.py, drive_store after the store."""
    numbered = sorted(
        (path for path in cells_dir.glob("c*.py") if _cell_number(path.stem) is not None),
        key=lambda path: path.stem,
    )
    form = cells_dir / f"{FORM_MODULE}.py"
    first = [form] if form.exists() else []
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
    """The cell module an import statement reaches into, or None if it is not intra-package.

    Raises BuildError for intra-package forms that leave nothing usable once
    removed (importing a module object) or that reach outside cells/.
    """
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == CELLS_PACKAGE or alias.name.startswith(CELLS_PACKAGE + "."):
                raise BuildError(f"line {node.lineno}: 'import {alias.name}' binds a module, "
                                 f"which the notebook does not have; use 'from .module import name'")
        return None
    if not isinstance(node, ast.ImportFrom):
        return None
    module = node.module or ""
    if node.level == 0:
        if module == CELLS_PACKAGE:
            raise BuildError(f"line {node.lineno}: 'from {CELLS_PACKAGE} import ...' binds modules, "
                             f"which the notebook does not have; use 'from .module import name'")
        if module.startswith(CELLS_PACKAGE + "."):
            return module[len(CELLS_PACKAGE) + 1:]
        return None
    if node.level > 1:
        raise BuildError(f"line {node.lineno}: relative import from outside cells/ "
                         f"({'.' * node.level}{module}) cannot run in the notebook")
    if not module:
        raise BuildError(f"line {node.lineno}: 'from . import ...' binds modules, which the "
                         f"notebook does not have; use 'from .module import name'")
    if "." in module:
        raise BuildError(f"line {node.lineno}: 'from .{module} import ...' names a sub-package; "
                         f"cells are flat modules")
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
    # line index (0-based) -> replacement lines; a span's later lines map to []
    replacements: dict[int, list[str]] = {}

    docstring = ""
    first = tree.body[0] if tree.body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        docstring = inspect.cleandoc(first.value.value)
        for index in range(first.lineno - 1, first.end_lineno):
            replacements[index] = []

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
            if known_modules is not None:
                if target in other_modules:
                    raise BuildError(f"{module_name}.py line {node.lineno}: imports from {target!r}, "
                                     f"which is not a notebook cell (cells are c*.py and drive_store.py)")
                if (id(node) in top_level and position is not None
                        and known_modules.get(target, -1) >= position):
                    raise BuildError(f"{module_name}.py line {node.lineno}: imports from {target!r} at "
                                     f"module level, but that cell comes later in the notebook")
            _check_own_lines(lines, node, module_name)
            removable.append(node)
        for node in removable:
            indent = lines[node.lineno - 1][:len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())]
            # `from .x import a as b` still has to bind b in the shared namespace.
            kept = [f"{indent}{alias.asname} = {alias.name}"
                    for alias in node.names if alias.asname and alias.asname != alias.name]
            if not kept and len(removable) == len(statements) and node is removable[0]:
                kept = [f"{indent}pass"]  # a block must keep one statement
            replacements[node.lineno - 1] = kept
            for index in range(node.lineno, node.end_lineno):
                replacements[index] = []

    # Lines become text or REMOVED; then each run of blank and REMOVED lines
    # around a removal keeps as many blank lines as its longest blank stretch.
    # Such a run lies between statements, so it is never inside a literal.
    marked: list[str | None] = []
    for index, line in enumerate(lines):
        if index in replacements:
            marked.extend(replacements[index] or [REMOVED])
        else:
            marked.append(line)
    output: list[str] = []
    run: list[str | None] = []
    for item in marked + ["end"]:
        if item is REMOVED or (item is not None and not item.strip()):
            run.append(item)
            continue
        if REMOVED in run:
            stretches = "".join("b" if blank is not REMOVED else " " for blank in run).split()
            output.extend([""] * max(map(len, stretches), default=0))
        else:
            output.extend(run)
        run = []
        output.append(item)
    output.pop()  # the "end" sentinel
    code = "\n".join(output).strip("\n")
    return docstring, code


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


def _title_line(text: str) -> str:
    """A Colab form title: the text (no braces, which end it), code hidden."""
    return f'#@title {re.sub(r"[{}]", "", text).strip()} {{ display-mode: "form" }}'


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
    modules = load_cell_modules(cells_dir)
    cells = [("title-md", "markdown", TITLE_MARKDOWN)]
    library, actions = [], []
    for module in modules:
        if module.name == FORM_MODULE:   # fields only: shown as the form it is, first
            cells.append((cell_id(module.name, "code"), "code", module.code))
            continue
        code, main, title = module.split_main()
        library.append((cell_id(module.name, "code"), "code", library_source(module, code)))
        if main:
            # Visible code, a short cell whose lines say what runs; a title that names its own Colab
            # options (a form: `{ display-mode: "form" }`) keeps them.
            shown = title if "{" in title else re.sub(r"[{}]", "", title or module.name).strip()
            actions.append((cell_id(module.name, "run"), "code", f"#@title {shown}\n{main}"))
    cells.append(("bootstrap-code", "code", BOOTSTRAP_SOURCE))
    cells.append(("library-md", "markdown", LIBRARY_MARKDOWN))
    cells += library
    if actions:
        cells.append(("run-md", "markdown", RUN_MARKDOWN))
        cells += actions
    return cells


def build_notebook(cells_dir: Path = CELLS_DIR) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook(metadata=NOTEBOOK_METADATA)
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    for identifier, cell_type, source in cell_sources(cells_dir):
        if cell_type == "code":
            cell = nbformat.v4.new_code_cell(source, id=identifier)
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


# ------------------------------------------------------ README knob table

# Defaults that differ by machine or runtime, shown in words so the README
# table is the same everywhere it is generated.
DISPLAY_DEFAULTS = {
    "WORKSPACE": "`ky_court_workspace` (Colab: `/content/ky_court_workspace`)",
    "STORE": "`ky_court_store` (Colab: `drive`)",
    "WORKERS": "the CPU count",
}
README_TABLE_BEGIN = "<!-- knob table: generated by python notebook_builder/build.py --readme-table -->"
README_TABLE_END = "<!-- end of knob table -->"


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
    """The README's table of every knob in c00_config.KNOBS, as markdown."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from notebook_builder.cells.c00_config import KNOBS

    rows = ["| knob | env variable | default | accepted | meaning |",
            "| --- | --- | --- | --- | --- |"]
    for knob in KNOBS:
        default = DISPLAY_DEFAULTS.get(knob.name, f"`{_env_form(knob.default)}`")
        if knob.name == "MAX_PDF_BYTES":
            default += f" ({knob.default // (1024 * 1024)} MiB)"
        rows.append("| " + " | ".join(_table_cell(text) for text in (
            f"`{knob.name}`", f"`{knob.env}`" if knob.env else "—", default, knob.accepted, knob.help,
        )) + " |")
    return "\n".join(rows)


def readme_knob_table(readme_text: str) -> str | None:
    """The table between the README's markers, or None if they are missing."""
    begin, end = readme_text.find(README_TABLE_BEGIN), readme_text.find(README_TABLE_END)
    if begin < 0 or end < begin:
        return None
    return readme_text[begin + len(README_TABLE_BEGIN):end].strip("\n")


def update_readme(path: Path = README_PATH) -> bool:
    """Rewrites the README's knob table from KNOBS; True if it changed."""
    text = Path(path).read_text(encoding="utf-8")
    if readme_knob_table(text) is None:
        raise BuildError(f"{path} has no knob table markers ({README_TABLE_BEGIN!r} ... {README_TABLE_END!r})")
    begin = text.find(README_TABLE_BEGIN) + len(README_TABLE_BEGIN)
    end = text.find(README_TABLE_END)
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
    action.add_argument("--readme-table", action="store_true",
                        help="print the README's knob table (generated from c00_config.KNOBS)")
    action.add_argument("--update-readme", action="store_true",
                        help="rewrite the knob table in README.md from c00_config.KNOBS")
    args = parser.parse_args(argv)

    try:
        if args.readme_table:
            print(knob_table())
            return 0
        if args.update_readme:
            changed = update_readme()
            print(f"{README_PATH.name}: knob table {'updated' if changed else 'already current'}")
            return 0
        if args.check:
            if is_stale(args.output):
                print(STALE_MESSAGE.format(path=args.output.name), file=sys.stderr)
                return 1
            print(f"{args.output.name} is up to date")
            return 0
        write_notebook(args.output)
    except BuildError as error:
        print(f"build.py: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
