"""Run settings: the form's fields (the `form` cell) become CFG.

Guarantees:
- Each `FORM_*` line of the `form` cell is a Colab form field (`#@param`);
  Colab rewrites the value on that line when the field changes, and this
  cell turns the fields into CFG through `load_config`, so they are parsed
  and validated like every other knob (a bad value stops here, naming the
  field).
- Precedence. In Colab the form wins: every field is applied, whatever the
  environment says. Outside Colab (Jupyter, nbclient, a script) a field left
  at its shipped value defers to the KY_* environment and the defaults, and
  only a field someone changed overrides them, so the same notebook runs
  from `KY_*` settings unchanged.
- Store: `drive` is the Drive folder `FORM_DRIVE_FOLDER` (default `ky_court`)
  through DriveStore; anything else is a directory. Outside Colab an
  unchanged `drive` means "KY_STORE, or the default directory".
- An empty text field means "not given"; the last-year field's empty
  value is the current year.
- In Colab, a store that is not Drive lives on the runtime's own disk,
  which Colab deletes with the runtime: the cell says so, loudly.
- "Probe first" (`FORM_PROBE_FIRST`, knob PROBE_FIRST): the probe cell asks
  the court at most 10 requests and prints its table, and the run stops
  before any stage when the pipeline cannot run against the court.

Knobs set: every knob with a `form=` field in c00_config.KNOBS (today COURT_SYSTEM,
PHASES, BUDGET_SECONDS, STORE, DRIVE_FOLDER, DOWNLOAD_LIMIT, FIRST_YEAR, LAST_YEAR,
RETRY_HARD, DRY_RUN, PROBE_FIRST); build.py writes the `form` cell from the
same fields, so a field is declared once, with its knob.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from .c00_config import KNOBS, Config, ConfigError, FormField, Knob, in_colab, load_config

# Each form field and the knob it sets, in the form's order.
FORM_KNOBS: dict[str, Knob] = {knob.form.name: knob for knob in KNOBS if knob.form is not None}


def form_shipped_value(knob: Knob) -> Any:
    """The value a field holds in the built notebook: its own, else its knob's default in the field's
    unit and env form (a comma list, empty for None, a whole number of hours as an int)."""
    spec = knob.form
    if spec.shipped is not None:
        return spec.shipped
    value = knob.default
    if value is None:
        return ""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if spec.scale != 1:
        value = value / spec.scale
        return int(value) if float(value).is_integer() else value
    return value


def form_param(spec: FormField, shipped: Any) -> str:
    """Colab's #@param spec of a field: its own, else the type of its shipped value."""
    if spec.param is not None:
        return spec.param
    kind = {bool: "boolean", int: "integer", float: "number"}.get(type(shipped), "string")
    return f'{{type:"{kind}"}}'


def _field_kind(field: str) -> str:
    knob = FORM_KNOBS[field]
    match = re.search(r'type:"(\w+)"', form_param(knob.form, FORM_DEFAULTS[field]))
    return match.group(1) if match else "string"


# The shipped value of each field (what the form cell holds in the built notebook).
FORM_DEFAULTS: dict[str, Any] = {field: form_shipped_value(knob) for field, knob in FORM_KNOBS.items()}


def form_fields(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The form's fields by name from the namespace the form cell ran in (its FORM_* variables)."""
    return {field: namespace[f"FORM_{field.upper()}"] for field in FORM_KNOBS
            if f"FORM_{field.upper()}" in namespace}


def _form_value(field: str, value: Any) -> Any:
    """The knob value of one form field, validated; None for an empty text field."""
    label = f"FORM_{field.upper()}"
    knob = FORM_KNOBS[field]
    kind = _field_kind(field)
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
    try:
        if kind == "boolean" and isinstance(value, bool):
            return value
        if kind in ("integer", "number") and isinstance(value, bool):
            raise ValueError(value)   # True is no number
        if kind == "integer" and isinstance(value, float):
            raise ValueError(value)   # an integer field: 2.5 documents is no value
        if knob.form.scale != 1:
            return knob.parse(repr(float(value) * knob.form.scale))
        return knob.parse(str(value))
    except (ValueError, TypeError):
        raise ConfigError(label, value, knob.form.accepted or knob.accepted) from None


def _form_changed(field: str, value: Any) -> bool:
    default = FORM_DEFAULTS[field]
    if _field_kind(field) == "number":
        try:
            return float(value) != float(default)
        except (TypeError, ValueError):
            return True
    if isinstance(default, str) and isinstance(value, str):
        return value.strip() != default
    return value != default


def form_overrides(*, colab: bool, **values: Any) -> dict[str, Any]:
    """`load_config` overrides (knob name -> value) from the form's fields.

    `values` are the fields by name (FORM_KNOBS: phases, budget_hours,
    store, ...); `colab` says whether the notebook runs
    in Colab, where every field applies. Elsewhere only fields changed from
    FORM_DEFAULTS apply. Raises ConfigError naming the field at fault.
    """
    unknown = set(values) - set(FORM_KNOBS)
    if unknown:
        raise ConfigError(f"FORM_{sorted(unknown)[0].upper()}", values[sorted(unknown)[0]],
                          "a field of the form: " + ", ".join(FORM_KNOBS))
    overrides: dict[str, Any] = {}
    for field, value in values.items():
        if not colab and not _form_changed(field, value):
            continue
        knob_value = _form_value(field, value)
        if knob_value is not None:
            overrides[FORM_KNOBS[field].name] = knob_value
    return overrides


def store_warning(cfg: Config, *, colab: bool) -> str | None:
    """In Colab, a store that is not Drive is on the runtime's own disk: say that it will not last."""
    if not colab or cfg.store_is_drive:
        return None
    return (f"WARNING: the store {cfg.STORE} is on this runtime's own disk. Colab deletes it when the "
            "runtime ends or disconnects: nothing of this session will survive. Choose 'drive' to keep "
            "the archive in Google Drive.")


def describe_config(cfg: Config) -> str:
    years = f"{cfg.FIRST_YEAR}-{cfg.LAST_YEAR or 'now'}"
    limit = f", at most {cfg.DOWNLOAD_LIMIT} downloads" if cfg.DOWNLOAD_LIMIT else ""
    store = f"Drive folder {cfg.DRIVE_FOLDER}" if cfg.store_is_drive else cfg.STORE
    return (f"CFG: phases {','.join(cfg.PHASES)}, case years {years}{limit}, budget "
            f"{cfg.BUDGET_SECONDS / 3600:g} h, store {store}, workspace {cfg.WORKSPACE}"
            + (", retry-hard" if cfg.RETRY_HARD else "") + (", dry run" if cfg.DRY_RUN else "")
            + (", probe first" if cfg.PROBE_FIRST else ""))


if __name__ == "__main__":  # The settings become the configuration (CFG)
    CFG = load_config(**form_overrides(colab=in_colab(), **form_fields(globals())))
    print(describe_config(CFG))
    if store_warning(CFG, colab=in_colab()):
        print(store_warning(CFG, colab=in_colab()))
