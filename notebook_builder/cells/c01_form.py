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

Knobs set: PHASES, BUDGET_SECONDS, STORE, DRIVE_FOLDER, DOWNLOAD_LIMIT,
FIRST_YEAR, LAST_YEAR, RETRY_HARD, DRY_RUN.
"""
from __future__ import annotations

from typing import Any

from .c00_config import KNOB_BY_NAME, PHASE_NAMES, Config, ConfigError, in_colab, load_config
from .form import (FORM_BUDGET_HOURS, FORM_DOWNLOAD_LIMIT, FORM_DRIVE_FOLDER, FORM_DRY_RUN,
                   FORM_FIRST_YEAR, FORM_LAST_YEAR, FORM_PHASES, FORM_RETRY_HARD, FORM_STORE)

# The shipped value of each field (what the lines above hold in the built
# notebook), and the knob it sets.
FORM_DEFAULTS: dict[str, Any] = {
    "phases": ",".join(PHASE_NAMES),
    "budget_hours": KNOB_BY_NAME["BUDGET_SECONDS"].default / 3600,
    "store": "drive",
    "drive_folder": KNOB_BY_NAME["DRIVE_FOLDER"].default,
    "download_limit": KNOB_BY_NAME["DOWNLOAD_LIMIT"].default,
    "first_year": KNOB_BY_NAME["FIRST_YEAR"].default,
    "last_year": "",
    "retry_hard": KNOB_BY_NAME["RETRY_HARD"].default,
    "dry_run": KNOB_BY_NAME["DRY_RUN"].default,
}
_FORM_KNOBS = {
    "phases": "PHASES", "budget_hours": "BUDGET_SECONDS", "store": "STORE",
    "drive_folder": "DRIVE_FOLDER", "download_limit": "DOWNLOAD_LIMIT", "first_year": "FIRST_YEAR",
    "last_year": "LAST_YEAR", "retry_hard": "RETRY_HARD", "dry_run": "DRY_RUN",
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
        if field in ("download_limit", "first_year") and isinstance(value, (bool, float)):
            raise ValueError(value)   # an integer field: 2.5 documents or True is no value
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
    drive_folder, download_limit, first_year, last_year, retry_hard,
    dry_run); `colab` says whether the notebook runs
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
            + (", retry-hard" if cfg.RETRY_HARD else "") + (", dry run" if cfg.DRY_RUN else ""))


if __name__ == "__main__":  # The settings become the configuration (CFG)
    CFG = load_config(**form_overrides(
        colab=in_colab(), phases=FORM_PHASES, budget_hours=FORM_BUDGET_HOURS, store=FORM_STORE,
        drive_folder=FORM_DRIVE_FOLDER, download_limit=FORM_DOWNLOAD_LIMIT, first_year=FORM_FIRST_YEAR,
        last_year=FORM_LAST_YEAR, retry_hard=FORM_RETRY_HARD, dry_run=FORM_DRY_RUN))
    print(describe_config(CFG))
    if store_warning(CFG, colab=in_colab()):
        print(store_warning(CFG, colab=in_colab()))
