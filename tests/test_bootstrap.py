"""The setup cell (cells/bootstrap.py): in Colab it installs what is missing and signs in; the I/O is
passed in, so what it would do is seen without Colab."""
from __future__ import annotations

import sys

from notebook_builder.cells import bootstrap


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return 0


def test_missing_requirements_are_those_whose_module_is_not_found():
    present = {"pypdf", "pydrive2"}
    missing = bootstrap.missing_requirements(lambda name: object() if name in present else None)
    assert missing == ["pypdfium2>=4.0", "pytesseract>=0.3", "eyecite>=2.6", "tantivy>=0.26.2"]
    assert bootstrap.missing_requirements(lambda name: object()) == []


def test_setup_installs_the_missing_in_one_pip_call_then_tesseract_then_signs_in():
    check_call, call, sign_in = Recorder(), Recorder(), Recorder()
    actions = bootstrap.colab_setup(find_spec=lambda name: None if name == "eyecite" else object(),
                                    which=lambda program: None, check_call=check_call, call=call,
                                    languages=lambda: [], sign_in=sign_in)
    assert check_call.calls == [(([sys.executable, "-m", "pip", "install", "--quiet", "eyecite>=2.6"],), {})]
    assert call.calls == [((bootstrap.TESSERACT_INSTALL,), {"shell": True})]
    assert "tesseract-ocr-osd" in bootstrap.TESSERACT_INSTALL and "tesseract-ocr-eng" in bootstrap.TESSERACT_INSTALL
    assert len(sign_in.calls) == 1
    assert actions == ["pip install eyecite>=2.6", "apt-get install tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd",
                       "signed in to Google"]


def test_a_tesseract_without_its_orientation_data_gets_it():
    call = Recorder()
    actions = bootstrap.colab_setup(find_spec=lambda name: object(), which=lambda program: "/usr/bin/" + program,
                                    check_call=Recorder(), call=call, languages=lambda: ["eng"], sign_in=Recorder())
    assert call.calls == [((bootstrap.TESSERACT_INSTALL,), {"shell": True})]
    assert actions[0].startswith("apt-get install") and actions[-1] == "signed in to Google"


def test_tesseract_languages_are_read_from_list_langs():
    class Listed:
        stdout = 'List of available languages in "/usr/share/tesseract-ocr/5/tessdata/" (2):\neng\nosd\n'
    assert bootstrap.tesseract_languages(lambda *args, **kwargs: Listed()) == ["eng", "osd"]

    def absent(*args, **kwargs):
        raise FileNotFoundError("tesseract")
    assert bootstrap.tesseract_languages(absent) == []


def test_setup_with_everything_present_only_signs_in():
    check_call, call, sign_in = Recorder(), Recorder(), Recorder()
    actions = bootstrap.colab_setup(find_spec=lambda name: object(), which=lambda program: "/usr/bin/" + program,
                                    check_call=check_call, call=call, languages=lambda: ["eng", "osd"],
                                    sign_in=sign_in)
    assert check_call.calls == [] and call.calls == [] and len(sign_in.calls) == 1
    assert actions == ["signed in to Google"]


def test_outside_colab_it_is_not_colab():
    assert bootstrap.running_in_colab() is False
