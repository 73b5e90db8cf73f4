"""Setup: in Colab, installs what its image lacks and signs in to Google Drive.

The notebook's second code cell (after the settings form, before the library,
whose imports need what it installs); shown collapsed as one cell.

Guarantees:
- Outside Colab it does nothing (install the project with pip instead):
  `SETUP_ACTIONS` is then empty.
- In Colab: one `pip install` of every requirement in
  `COLAB_MISSING_PACKAGES` whose module cannot be found (the requirements
  match pyproject.toml's); Tesseract (the ocr stage's engine) with its
  English and `osd` (orientation detection) data from apt-get when it is not
  on PATH or lists no `osd` data (Debian's and Ubuntu's tesseract-ocr depend
  on tesseract-ocr-osd, but an image may hold a Tesseract installed without
  it); a failure there only skips the stage, or its orientation detection,
  later; then Google's sign-in, which the Drive store needs. `SETUP_ACTIONS`
  lists what was done, in order.
- Standard library only, and no import of another cell: it runs first.

Knobs: none (it runs before the configuration exists).
"""
#@title Setup: install what Colab lacks, sign in to Google Drive { display-mode: "form" }
import importlib.util
import shutil
import subprocess
import sys
from typing import Callable

# What Colab's image lacks, as (import name, pip requirement).
COLAB_MISSING_PACKAGES = (
    ("pypdf", "pypdf>=4.0"),
    ("pypdfium2", "pypdfium2>=4.0"),
    ("pytesseract", "pytesseract>=0.3"),
    ("pydrive2", "pydrive2>=1.15"),
    ("eyecite", "eyecite>=2.6"),
    ("tantivy", "tantivy>=0.26.2"),
)
TESSERACT_PACKAGES = "tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd"
TESSERACT_INSTALL = f"apt-get update -qq && apt-get install -y -qq {TESSERACT_PACKAGES}"


def running_in_colab() -> bool:
    if "google.colab" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("google.colab") is not None
    except ModuleNotFoundError:
        return False


def missing_requirements(find_spec: Callable = importlib.util.find_spec) -> list[str]:
    """The pip requirements of COLAB_MISSING_PACKAGES whose module cannot be found."""
    return [requirement for import_name, requirement in COLAB_MISSING_PACKAGES
            if find_spec(import_name) is None]


def tesseract_languages(run: Callable = subprocess.run) -> list[str]:
    """What `tesseract --list-langs` lists ([] when it cannot say)."""
    try:
        listed = run(["tesseract", "--list-langs"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in (listed.stdout or "").splitlines()[1:] if line.strip()]


def colab_setup(*, find_spec: Callable = importlib.util.find_spec, which: Callable = shutil.which,
                check_call: Callable = subprocess.check_call, call: Callable = subprocess.call,
                languages: Callable = tesseract_languages, sign_in: Callable | None = None) -> list[str]:
    """Installs what is missing and signs in; returns what it did. The I/O is passed in for tests."""
    actions = []
    missing = missing_requirements(find_spec)
    if missing:
        check_call([sys.executable, "-m", "pip", "install", "--quiet", *missing])
        importlib.invalidate_caches()
        actions.append("pip install " + " ".join(missing))
    # Colab runs as root; the ocr stage is skipped (or reads pages as they lie) if this fails.
    if which("tesseract") is None or not {"eng", "osd"} <= set(languages()):
        call(TESSERACT_INSTALL, shell=True)
        actions.append(f"apt-get install {TESSERACT_PACKAGES}")
    if sign_in is None:
        from google.colab import auth   # exists only inside Colab
        sign_in = auth.authenticate_user
    sign_in()
    actions.append("signed in to Google")
    return actions


if __name__ == "__main__":  # Setup (Colab only)
    SETUP_ACTIONS = colab_setup() if running_in_colab() else []
