"""The Colab form cell: its #@param fields reach CFG, in Colab and outside it.

The notebook's own cells are executed: the built code of c00_config and
c01_form in one namespace named __main__, as Jupyter runs them, with the
form's lines edited the way Colab rewrites a field's value.
"""
from __future__ import annotations

import ast
import os
import re

import pytest

from notebook_builder import build
from notebook_builder.cells.c00_config import ConfigError
from notebook_builder.cells.c01_form import FORM_DEFAULTS, form_overrides

FIELDS = ("court_system", "phases", "budget_hours", "store", "drive_folder", "download_limit", "first_year", "last_year",
          "retry_hard", "dry_run", "probe_first")


def notebook_cells() -> dict[str, str]:
    return {module.name: module.code for module in build.load_cell_modules()}


def set_field(source: str, variable: str, value: object) -> str:
    """What Colab does when a form field changes: rewrites the literal on its #@param line."""
    pattern = re.compile(rf"^({variable} = ).*?(\s+#@param.*)$", re.MULTILINE)
    edited, count = pattern.subn(lambda match: f"{match.group(1)}{value!r}{match.group(2)}", source)
    assert count == 1, f"{variable} is not a form field"
    return edited


def run_form(colab: bool, **fields: object):
    """Runs the (edited) form cell, the config cell, then the settings cell; returns the CFG made."""
    cells = notebook_cells()
    form = cells["form"]
    for name, value in fields.items():
        form = set_field(form, f"FORM_{name.upper()}", value)
    namespace = {"__name__": "__main__"}
    exec(compile(form, "form", "exec"), namespace)
    exec(compile(cells["c00_config"], "c00_config", "exec"), namespace)
    namespace["in_colab"] = lambda: colab          # load_config and the settings cell both ask it
    exec(compile(cells["c01_form"], "c01_form", "exec"), namespace)
    return namespace["CFG"]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in list(os.environ):
        if name.startswith("KY_"):
            monkeypatch.delenv(name)


# ------------------------------------------------------------ the cell


def test_the_form_is_the_first_code_cell_and_holds_only_fields():
    notebook = build.build_notebook()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code[0].id == "form-code"
    lines = code[0].source.splitlines()
    assert lines[0] == '#@title Settings { display-mode: "form" }'
    tree = ast.parse(code[0].source)
    assert all(isinstance(node, ast.Assign) and node.targets[0].id.startswith("FORM_") for node in tree.body)
    assert all(line.startswith(("#@markdown", "#@title")) or "#@param" in line for line in lines)


def test_shipped_field_values_are_the_form_defaults():
    tree = ast.parse(notebook_cells()["form"])
    shipped = {node.targets[0].id[len("FORM_"):].lower(): ast.literal_eval(node.value)
               for node in tree.body
               if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
               and node.targets[0].id.startswith("FORM_") and node.targets[0].id != "FORM_DEFAULTS"}
    assert shipped == FORM_DEFAULTS
    assert set(shipped) == set(FIELDS)


def test_changed_fields_reach_cfg_in_colab(monkeypatch):
    monkeypatch.setenv("KY_PHASES", "discover")
    monkeypatch.setenv("KY_BUDGET", "60")
    cfg = run_form(True, phases="extract, download", budget_hours=2.5, drive_folder="archive/ky_court",
                   retry_hard=True, dry_run=True)
    assert cfg.PHASES == ("download", "extract")
    assert cfg.BUDGET_SECONDS == 9000.0
    assert cfg.STORE == "drive" and cfg.store_is_drive
    assert cfg.DRIVE_FOLDER == "archive/ky_court"
    assert cfg.RETRY_HARD is True and cfg.DRY_RUN is True


def test_in_colab_the_unchanged_form_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("KY_BUDGET", "60")
    monkeypatch.setenv("KY_STORE", "/somewhere/else")
    monkeypatch.setenv("KY_RETRY_HARD", "1")
    cfg = run_form(True)
    assert cfg.BUDGET_SECONDS == 36000.0
    assert cfg.STORE == "drive" and cfg.DRIVE_FOLDER == "ky_court"
    assert cfg.RETRY_HARD is False
    assert cfg.PHASES == ("discover", "backfill", "download", "extract", "ocr", "derive", "index")


def test_colab_form_can_point_the_store_at_a_directory(tmp_path):
    cfg = run_form(True, store=str(tmp_path / "store"))
    assert cfg.STORE == str(tmp_path / "store") and not cfg.store_is_drive


def test_outside_colab_unchanged_fields_defer_to_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KY_PHASES", "extract")
    monkeypatch.setenv("KY_BUDGET", "60")
    monkeypatch.setenv("KY_STORE", str(tmp_path / "store"))
    cfg = run_form(False)
    assert cfg.PHASES == ("extract",)
    assert cfg.BUDGET_SECONDS == 60.0
    assert cfg.STORE == str(tmp_path / "store")


def test_outside_colab_a_changed_field_overrides_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KY_PHASES", "extract")
    monkeypatch.setenv("KY_DRY", "0")
    cfg = run_form(False, dry_run=True, budget_hours=0.5)
    assert cfg.DRY_RUN is True and cfg.BUDGET_SECONDS == 1800.0
    assert cfg.PHASES == ("extract",)              # unchanged field: the environment's value


def test_outside_colab_with_nothing_set_the_store_is_the_default_directory():
    cfg = run_form(False)
    assert cfg.STORE == os.path.abspath("ky_court_store")


@pytest.mark.parametrize("field, value", [
    ("budget_hours", 0), ("budget_hours", -1), ("phases", "download,typo"), ("dry_run", "maybe"),
    ("download_limit", -5), ("download_limit", 2.5), ("first_year", 1200), ("last_year", "soon"),
])
def test_a_bad_field_stops_the_cell_naming_the_field(field, value):
    with pytest.raises(Exception, match=f"FORM_{field.upper()}") as raised:
        run_form(True, **{field: value})
    assert type(raised.value).__name__ == "ConfigError"     # the notebook's own class, from its c00 cell


# ------------------------------------------------------- form_overrides


def test_form_overrides_in_colab_applies_every_field():
    assert form_overrides(colab=True, **FORM_DEFAULTS) == {
        "PHASES": ("discover", "backfill", "download", "extract", "ocr", "derive", "index"), "BUDGET_SECONDS": 36000.0,
        "STORE": "drive", "DRIVE_FOLDER": "ky_court", "DOWNLOAD_LIMIT": 0, "FIRST_YEAR": 1990,
        "RETRY_HARD": False, "DRY_RUN": False, "PROBE_FIRST": False, "COURT_SYSTEM": "kentucky"}


def test_form_overrides_outside_colab_keeps_only_changed_fields():
    assert form_overrides(colab=False, **FORM_DEFAULTS) == {}
    changed = dict(FORM_DEFAULTS, phases="download", budget_hours=10.0, retry_hard=True)
    assert form_overrides(colab=False, **changed) == {"PHASES": ("download",), "RETRY_HARD": True}


def test_form_overrides_treats_an_integer_budget_like_its_float():
    assert form_overrides(colab=False, budget_hours=10) == {}
    assert form_overrides(colab=False, budget_hours=1) == {"BUDGET_SECONDS": 3600.0}


def test_form_overrides_empty_text_means_not_given():
    assert form_overrides(colab=True, store="  ", drive_folder="", phases="") == {}


def test_form_overrides_strips_text_fields():
    assert form_overrides(colab=False, store=" /data/store ", drive_folder=" ky_court ") == {
        "STORE": "/data/store"}


def test_form_overrides_rejects_an_unknown_field():
    with pytest.raises(ConfigError, match="FORM_WORKERS"):
        form_overrides(colab=True, workers=3)


def test_a_trial_run_limits_downloads_and_years():
    cfg = run_form(True, download_limit=25, first_year=2020, last_year="2021")
    assert (cfg.DOWNLOAD_LIMIT, cfg.FIRST_YEAR, cfg.LAST_YEAR) == (25, 2020, 2021)
    assert run_form(True).LAST_YEAR is None          # empty: the current year


def test_in_colab_a_store_on_the_runtime_disk_is_warned_about(capsys, tmp_path):
    run_form(True, store=str(tmp_path / "store"))
    assert "on this runtime's own disk" in capsys.readouterr().out
    run_form(True)
    assert "runtime's own disk" not in capsys.readouterr().out
    run_form(False, store=str(tmp_path / "store"))     # outside Colab a local store is the normal case
    assert "runtime's own disk" not in capsys.readouterr().out
