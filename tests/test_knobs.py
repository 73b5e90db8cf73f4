"""Each knob is declared once, in c00_config.KNOBS: Config, the CLI flags, the form and the knob
table of docs/knobs.md are made from that one declaration and cannot drift from it."""
from __future__ import annotations

import argparse
import ast
import dataclasses

import pytest

from notebook_builder import build, cli
from notebook_builder.cells import c01_form
from notebook_builder.cells.c00_config import KNOBS, Config, ConfigError, load_config


def test_config_has_one_field_per_knob_typed_by_its_parser():
    fields = {item.name: item.type for item in dataclasses.fields(Config)}
    assert list(fields)[:len(KNOBS)] == [knob.name for knob in KNOBS]
    assert set(fields) - {knob.name for knob in KNOBS} == {"extra", "warnings"}
    for knob in KNOBS:
        assert fields[knob.name] == knob.type, knob.name
    assert fields["LAST_YEAR"] == "int | None" and fields["PACING_DL"] == "tuple[float, float]"
    cfg = load_config({})
    assert cfg.replace(PACING=0.0).PACING == 0.0 and cfg.PACING == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.PACING = 2.0


def test_every_knob_default_has_the_type_its_parser_returns():
    names = {"str": str, "float": float, "int": int, "bool": bool}
    for knob in KNOBS:
        base = knob.type.split(" | ")[0].split("[")[0]
        if knob.default is None:
            assert knob.type.endswith("| None"), knob.name
        elif base == "tuple":
            assert isinstance(knob.default, tuple), knob.name
        else:
            assert type(knob.default) is names[base], knob.name


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_knob_flag_of_a_command_sets_its_knob():
    """A flag's value reaches its knob through config_from_args, for every command that takes it."""
    values = {"WORKSPACE": "/tmp/ws", "STORE": "/tmp/st", "API_BASE": "http://127.0.0.1:9/api",
              "PHASES": "download", "BUDGET_SECONDS": "120", "DISCOVERY": "cases", "AUDIT": "0.5",
              "COURT_SYSTEM": "nevada"}
    expected = {"PHASES": ("download",), "BUDGET_SECONDS": 120.0, "AUDIT": 0.5,
                "DRY_RUN": True, "RETRY_HARD": True}
    seen = set()
    for command, parser in subcommands().items():
        options = parser._option_string_actions
        flags = [knob for knob in KNOBS
                 if knob.flag and knob.flag.name in options and options[knob.flag.name].dest == knob.name]
        argv = [command]
        for knob in flags:
            argv += [knob.flag.name] if knob.flag.metavar is None else [knob.flag.name, values[knob.name]]
        if command in ("show", "search"):
            argv.append("x")
        if command == "export":
            argv += ["--out", "/tmp/out"]
        cfg = cli.config_from_args(cli.build_parser().parse_args(argv), env={})
        for knob in flags:
            assert getattr(cfg, knob.name) == expected.get(knob.name, values.get(knob.name)), (command, knob.name)
            seen.add(knob.name)
    assert seen == {knob.name for knob in KNOBS if knob.flag}


def test_flag_help_names_the_environment_variable():
    run = subcommands()["run"]
    assert "(KY_BUDGET)" in run._option_string_actions["--budget"].help
    assert "(KY_DRY=1)" in run._option_string_actions["--dry-run"].help
    assert run._option_string_actions["--budget"].dest == "BUDGET_SECONDS"


def test_the_committed_form_is_the_one_knobs_declare():
    assert build.FORM_PATH.read_text(encoding="utf-8") == build.form_source(), \
        "cells/form.py is stale: run python notebook_builder/build.py"


def test_the_form_holds_exactly_the_knobs_form_fields_in_order():
    tree = ast.parse(build.form_source())
    assigned = [node.targets[0].id for node in tree.body if isinstance(node, ast.Assign)]
    assert assigned == [f"FORM_{knob.form.name.upper()}" for knob in KNOBS if knob.form]
    assert list(c01_form.FORM_KNOBS) == [knob.form.name for knob in KNOBS if knob.form]
    lines = build.form_source().splitlines()
    assert 'FORM_BUDGET_HOURS = 10  #@param {type:"number"}' in lines
    assert 'FORM_LAST_YEAR = ""  #@param {type:"string"}' in lines
    assert 'FORM_DRY_RUN = False  #@param {type:"boolean"}' in lines


def test_a_new_form_field_reaches_cfg_without_another_declaration(monkeypatch):
    """Declaring `form=` on a knob is all it takes: the field is shipped, validated and applied."""
    from notebook_builder.cells.c00_config import KNOB_BY_NAME, FormField
    knob = dataclasses.replace(KNOB_BY_NAME["WORKERS"], form=FormField("workers"))
    monkeypatch.setitem(c01_form.FORM_KNOBS, "workers", knob)
    monkeypatch.setitem(c01_form.FORM_DEFAULTS, "workers", c01_form.form_shipped_value(knob))
    assert c01_form.form_overrides(colab=False, workers=3) == {"WORKERS": 3}
    with pytest.raises(ConfigError, match="FORM_WORKERS"):
        c01_form.form_overrides(colab=True, workers=2.5)


def test_check_reports_a_stale_form(tmp_path, monkeypatch, capsys):
    notebook = build.write_notebook(tmp_path / "nb.ipynb")
    form = tmp_path / "form.py"
    form.write_text(build.form_source().replace("FORM_FIRST_YEAR = 1990", "FORM_FIRST_YEAR = 1991"))
    monkeypatch.setattr(build, "FORM_PATH", form)
    assert build.main(["--check", "--output", str(notebook)]) == 1
    assert "form.py is stale" in capsys.readouterr().err
    assert build.write_form(form) is True and build.write_form(form) is False
    assert build.main(["--check", "--output", str(notebook)]) == 0


def test_in_colab_the_knobs_colab_defaults_apply(monkeypatch):
    from notebook_builder.cells import c00_config
    monkeypatch.setattr(c00_config, "in_colab", lambda: True)
    cfg = load_config({})
    assert (cfg.WORKSPACE, cfg.STORE) == ("/content/ky_court_workspace", "drive")
    assert load_config({"KY_STORE": "/data/store"}).STORE == "/data/store"   # the environment still wins
    monkeypatch.setattr(c00_config, "in_colab", lambda: False)
    assert load_config({}).STORE.endswith("ky_court_store")
