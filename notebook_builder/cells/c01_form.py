"""Run settings: the form a Colab user fills in before **Runtime > Run all**.

Guarantees:
- Each `FORM_*` line below is a Colab form field (`#@param`); Colab rewrites
  the value on that line when the field changes, and this cell turns the
  fields into CFG through `load_config`, so they are parsed and validated
  like every other knob (a bad value stops here, naming the field).
- Precedence. In Colab the form wins: every field is applied, whatever the
  environment says. Outside Colab (Jupyter, nbclient, a script) a field left
  at its shipped value defers to the KY_* environment and the defaults, and
  only a field someone changed overrides them, so the same notebook runs
  from `KY_*` settings unchanged.
- Store: `drive` is the Drive folder `FORM_DRIVE_FOLDER` (default `ky_court`)
  through DriveStore; anything else is a directory. Outside Colab an
  unchanged `drive` means "KY_STORE, or the default directory".
- An empty text field means "not given".

Knobs set: PHASES, BUDGET_SECONDS, STORE, DRIVE_FOLDER, RETRY_HARD, DRY_RUN.
"""
#@title Run settings { display-mode: "form" }
from __future__ import annotations

from typing import Any

from .c00_config import KNOB_BY_NAME, PHASE_NAMES, ConfigError, in_colab, load_config

FORM_PHASES = "discover,backfill,download,extract,index"  #@param {type:"string"}
FORM_BUDGET_HOURS = 10  #@param {type:"number"}
FORM_STORE = "drive"  #@param ["drive", "/content/ky_court_store"] {allow-input: true}
FORM_DRIVE_FOLDER = "ky_court"  #@param {type:"string"}
FORM_RETRY_HARD = False  #@param {type:"boolean"}
FORM_DRY_RUN = False  #@param {type:"boolean"}

# The shipped value of each field (what the lines above hold in the built
# notebook), and the knob it sets.
FORM_DEFAULTS: dict[str, Any] = {
    "phases": ",".join(PHASE_NAMES),
    "budget_hours": KNOB_BY_NAME["BUDGET_SECONDS"].default / 3600,
    "store": "drive",
    "drive_folder": KNOB_BY_NAME["DRIVE_FOLDER"].default,
    "retry_hard": KNOB_BY_NAME["RETRY_HARD"].default,
    "dry_run": KNOB_BY_NAME["DRY_RUN"].default,
}
_FORM_KNOBS = {
    "phases": "PHASES", "budget_hours": "BUDGET_SECONDS", "store": "STORE",
    "drive_folder": "DRIVE_FOLDER", "retry_hard": "RETRY_HARD", "dry_run": "DRY_RUN",
}


def _form_value(field: str, value: Any) -> Any:
    """The knob value of one form field, validated; None for an empty text field."""
    label = f"FORM_{field.upper()}"
    knob = KNOB_BY_NAME[_FORM_KNOBS[field]]
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
    try:
        if field == "budget_hours":
            if isinstance(value, bool):
                raise ValueError(value)
            return knob.parse(repr(float(value) * 3600))
        if field in ("retry_hard", "dry_run"):
            return value if isinstance(value, bool) else knob.parse(str(value))
        return knob.parse(str(value))
    except (ValueError, TypeError):
        accepted = "a positive number of hours" if field == "budget_hours" else knob.accepted
        raise ConfigError(label, value, accepted) from None


def _form_changed(field: str, value: Any) -> bool:
    default = FORM_DEFAULTS[field]
    if field == "budget_hours":
        try:
            return float(value) != float(default)
        except (TypeError, ValueError):
            return True
    if isinstance(default, str) and isinstance(value, str):
        return value.strip() != default
    return value != default


def form_overrides(*, colab: bool, **values: Any) -> dict[str, Any]:
    """`load_config` overrides (knob name -> value) from the form's fields.

    `values` are the fields by name (phases, budget_hours, store,
    drive_folder, retry_hard, dry_run); `colab` says whether the notebook runs
    in Colab, where every field applies. Elsewhere only fields changed from
    FORM_DEFAULTS apply. Raises ConfigError naming the field at fault.
    """
    unknown = set(values) - set(_FORM_KNOBS)
    if unknown:
        raise ConfigError(f"FORM_{sorted(unknown)[0].upper()}", values[sorted(unknown)[0]],
                          "a field of the form: " + ", ".join(_FORM_KNOBS))
    overrides: dict[str, Any] = {}
    for field, value in values.items():
        if not colab and not _form_changed(field, value):
            continue
        knob_value = _form_value(field, value)
        if knob_value is not None:
            overrides[_FORM_KNOBS[field]] = knob_value
    return overrides


if __name__ == "__main__":  # the notebook: CFG from the form (Colab) or from KY_* plus changed fields
    CFG = load_config(**form_overrides(
        colab=in_colab(), phases=FORM_PHASES, budget_hours=FORM_BUDGET_HOURS, store=FORM_STORE,
        drive_folder=FORM_DRIVE_FOLDER, retry_hard=FORM_RETRY_HARD, dry_run=FORM_DRY_RUN))
    print(f"CFG: phases {','.join(CFG.PHASES)}, budget {CFG.BUDGET_SECONDS / 3600:g} h, "
          f"store {CFG.STORE if not CFG.store_is_drive else 'Drive folder ' + CFG.DRIVE_FOLDER}, "
          f"workspace {CFG.WORKSPACE}, retry-hard {CFG.RETRY_HARD}, dry run {CFG.DRY_RUN}")
