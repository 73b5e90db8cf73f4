"""Configuration: every knob of the pipeline, its default, its env override.

Guarantees:
- `load_config()` is the one place the environment is read. Every value is
  parsed and validated there; a bad one raises `ConfigError` naming the
  variable and the accepted form, before anything is written anywhere.
- A `Config` is immutable; stages receive it through the run context.
- The named errors of the whole pipeline live here, so every cell can raise
  and catch the same classes.
- A day is Kentucky's (America/New_York): `parse_day` reads every day a user
  names, `kentucky_day_start` is the UTC instant it begins, `kentucky_date`
  the day of a court timestamp, `Config.today()` today.

Precedence: explicit overrides (CLI flags, notebook form fields) > the
environment > the defaults below.

`KNOBS` declares each knob once: its name, default, parser (which validates
and, by its return annotation, types it), accepted form, help, environment
variable, CLI flag and form field. `Config`'s fields, cli.py's flags, the
notebook's form (build.py writes cells/form.py) and docs/knobs.md's table are
all made from it; adding a knob is one `Knob(...)` entry.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import os
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# ----------------------------------------------------------------- errors


class PipelineError(Exception):
    """Base of every error the pipeline raises on purpose."""


class ConfigError(PipelineError):
    """A knob has a value the pipeline cannot use (exit status 2)."""

    def __init__(self, variable: str, value: Any, accepted: str):
        self.variable, self.value, self.accepted = variable, value, accepted
        super().__init__(f"{variable}={value!r} is not valid: expected {accepted}")


class PermanentFetchError(PipelineError):
    """The court answered in a way that retrying cannot change (400/401/403/404/413)."""

    def __init__(self, message: str, http_status: int | None = None):
        super().__init__(message)
        self.http_status = http_status


class TransientFetchError(PipelineError):
    """A failure worth retrying later: 5xx, 408, 429, a reset, a torn body, an HTML page."""

    def __init__(self, message: str, http_status: int | None = None,
                 retry_after: float | None = None):
        super().__init__(message)
        self.http_status = http_status
        self.retry_after = retry_after


class CourtUnreachable(PipelineError):
    """The court has given no usable answer for COURT_DOWN_SECONDS and COURT_DOWN_FAILURES requests
    in a row: the run stops asking it, saves state, verifies and exits 3."""


class ResultsLimitExceeded(PipelineError):
    """A search shard holds more results than the server lets anyone page through."""


class IntegrityError(PipelineError):
    """Stored bytes, a database or an archive is not what its name promises."""


class StoreError(PipelineError):
    """The durable store refused an operation."""


class StoreQuotaExceeded(StoreError):
    """The store is full (Drive 403 storageQuotaExceeded); callers degrade to local state."""


class StoreMissing(StoreError):
    """No store where one was named, and none is to be made there (a typo, a moved store): the
    command says so and writes nothing (exit status 2)."""


class DiskFullError(PipelineError):
    """The workspace disk is full (ENOSPC); the run stops cleanly."""


class StopRequested(PipelineError):
    """SIGINT/SIGTERM or the budget asked the run to stop; state is saved."""


# ------------------------------------------------------------------ knobs


@dataclass(frozen=True)
class Flag:
    """The command-line flag of a knob; cli.py gives it to the commands that take the knob."""
    name: str                    # e.g. "--budget"
    metavar: str | None          # None: a switch (store_true) that sets the knob to True
    help: str                    # "(KY_X)" or "(KY_X=1)" is added unless the text names the variable
    nargs: str | None = None     # "?": the value may be left out, giving `const`
    const: Any = None


@dataclass(frozen=True)
class FormField:
    """A field of the notebook's settings form. build.py writes the `form` cell from these (the
    fields in KNOBS order); c01_form turns the fields into overrides of their knobs."""
    name: str                    # FORM_<NAME> in the form cell
    intro: str = ""              # #@markdown text shown above the field
    param: str | None = None     # Colab's #@param spec; None: {type:...} of the shipped value
    shipped: Any = None          # value the built form holds; None: the knob's default (env form)
    scale: float = 1.0           # the knob's value is the field's times this (hours -> seconds)
    accepted: str | None = None  # the accepted form in the field's own unit (default: the knob's)


@dataclass(frozen=True)
class Knob:
    """One knob, declared once: `Config`'s field (typed by what `parse` returns), the environment
    variable, the CLI flag and the form field, if any, and docs/knobs.md's row are made from it."""
    name: str            # attribute of Config
    env: str | None      # environment variable, None if not overridable
    default: Any
    parse: Callable[[str], Any]
    accepted: str        # the accepted form, for errors and docs/knobs.md
    help: str
    flag: Flag | None = None
    form: FormField | None = None
    colab_default: Any = None   # the default inside Colab, when it differs

    @property
    def type(self) -> str:
        """The type of the knob's value: the return annotation of its parser."""
        return self.parse.__annotations__["return"]


def _valid(text: str, value: Any, ok: bool) -> Any:
    """`value` when `ok`, else ValueError naming the text it was read from (every parser's end)."""
    if not ok:
        raise ValueError(text)
    return value


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    return _valid(text, value in ("1", "true", "yes", "on"),
                  value in ("1", "true", "yes", "on", "0", "false", "no", "off", ""))


def _parse_number(text: str, convert: Callable[[str], Any], *, positive: bool) -> Any:
    """`text` as a finite number >= 0 (> 0 when `positive`), else ValueError."""
    value = convert(text.strip())
    return _valid(text, value, value >= 0 and value != float("inf") and not (positive and value == 0))


def _parse_nonneg_float(text: str) -> float:
    return _parse_number(text, float, positive=False)


def _parse_pos_float(text: str) -> float:
    return _parse_number(text, float, positive=True)


def _parse_nonneg_int(text: str) -> int:
    return _parse_number(text, int, positive=False)


def _parse_pos_int(text: str) -> int:
    return _parse_number(text, int, positive=True)


def _parse_range(text: str) -> tuple[float, float]:
    low, high = (float(part) for part in text.split(","))
    return _valid(text, (low, high), 0 <= low <= high < float("inf"))


PHASE_NAMES = ("discover", "backfill", "download", "extract", "ocr", "derive", "index")
EXTRACT_ENGINES = ("pypdf", "pypdfium2")
OCR_ENGINE_NAMES = ("tesseract", "rapidocr")
DISCOVERY_STRATEGIES = ("auto", "documents", "cases")


def _names(text: str) -> tuple[str, ...]:
    """A comma list's names, lower case, blanks dropped."""
    return tuple(part.strip().lower() for part in text.split(",") if part.strip())


def _parse_phases(text: str) -> tuple[str, ...]:
    phases = _names(text)
    # No phase at all would run nothing and still print PASS: `verify` is the command for that.
    _valid(text, phases, bool(phases) and all(phase in PHASE_NAMES for phase in phases))
    # Stages always run in pipeline order, whatever order the user typed.
    return tuple(phase for phase in PHASE_NAMES if phase in phases)


def _parse_audit(text: str) -> float:
    """The share of stored files each audit run proves at least: 0 (the rolling tenth) to 1; 'all' is 1."""
    if text.strip().lower() == "all":
        return 1.0
    return _parse_fraction(text)


def _parse_engines(text: str) -> tuple[str, ...]:
    """A non-empty comma list of distinct text engines, in the order they are tried."""
    engines = _names(text)
    return _valid(text, engines, bool(engines) and len(set(engines)) == len(engines)
                  and all(engine in EXTRACT_ENGINES for engine in engines))


def _parse_ocr_engine(text: str) -> str:
    return _valid(text, text.strip().lower(), text.strip().lower() in OCR_ENGINE_NAMES)


def _parse_discovery(text: str) -> str:
    return _valid(text, text.strip().lower(), text.strip().lower() in DISCOVERY_STRATEGIES)


def _parse_fraction(text: str) -> float:
    value = float(text)
    return _valid(text, value, 0 <= value <= 1)


def _parse_text(text: str) -> str:
    return _valid(text, text.strip(), bool(text.strip()))


def _parse_optional_url(text: str) -> str | None:
    url = text.strip()
    return _valid(text, url, url.startswith(("http://", "https://"))) if url else None


def _parse_year(text: str) -> int:
    year = int(text)
    return _valid(text, year, 1900 <= year <= 2100)


def _parse_optional_year(text: str) -> int | None:
    return None if not text.strip() else _parse_year(text)


def _parse_optional_day(text: str) -> str | None:
    """A day YYYY-MM-DD (kept as that text), or None for an empty one."""
    return parse_day(text) if text.strip() else None


def in_colab() -> bool:
    try:
        import google.colab  # noqa: F401  (only importable inside Colab)
    except ImportError:
        return False
    return True


log_config = logging.getLogger("kycourt.config")

MIB = 1024 * 1024
# A shutdown margin over half the budget is scaled to this share of it (with a warning).
SHORT_BUDGET_MARGIN_SHARE = 0.1
REAL_API_BASE = "https://appellatepublic.kycourts.net/api/api/v1"

KNOBS: tuple[Knob, ...] = (
    Knob("WORKSPACE", "KY_WORKSPACE", "ky_court_workspace", _parse_text, "a directory path",
         "local, throwaway working directory (database, PDFs, text)",
         flag=Flag("--workspace", "DIR", "local working directory"),
         colab_default="/content/ky_court_workspace"),
    Knob("STORE", "KY_STORE", "ky_court_store", _parse_text, "a directory path or 'drive'",
         "durable mirror; 'drive' uses Google Drive through pydrive2 (the default in Colab)",
         flag=Flag("--store", "DIR|drive", "durable mirror: a directory or 'drive'"), colab_default="drive",
         form=FormField("store", param='["drive", "/content/ky_court_store"] {allow-input: true}',
                        shipped="drive",
                        intro="**Where the archive goes.** `drive` keeps everything in your Google Drive "
                              "folder below, so a new session resumes where the last one stopped. A "
                              "`/content/...` folder is this runtime's own disk: Colab deletes it when the "
                              "runtime ends.")),
    Knob("DRIVE_FOLDER", "KY_DRIVE_FOLDER", "ky_court", _parse_text, "a Drive folder path like ky_court",
         "the Drive folder the store lives in when STORE=drive",
         form=FormField("drive_folder")),
    Knob("DRIVE_API", "KY_DRIVE_API", None, _parse_optional_url, "an http(s) URL, or empty for Google's",
         "for testing: the root of a Drive-compatible API (the simulated Drive) that STORE=drive uses "
         "instead of Google's, with dummy credentials; no Colab needed"),
    Knob("DRIVE_WRITES_PER_SECOND", "KY_DRIVE_WRITES", 2.0, _parse_pos_float, "a positive number",
         "Drive writes a second at most (Drive allows about 2); halved on each rate-limit answer, "
         "then raised again"),
    Knob("API_BASE", "KY_API_BASE", REAL_API_BASE, _parse_text, "an http(s) URL",
         "root of the C-Track Public Access API",
         flag=Flag("--api-base", "URL", "C-Track API root")),
    Knob("PHASES", "KY_PHASES", PHASE_NAMES, _parse_phases,
         f"a comma list of {','.join(PHASE_NAMES)}", "stages this run performs",
         flag=Flag("--phases", "a,b", f"stages this run performs, of {','.join(PHASE_NAMES)}"),
         form=FormField("phases", intro="**What to do this session.** The budget is wall-clock hours (Colab "
                                        "allows about 12).")),
    Knob("BUDGET_SECONDS", "KY_BUDGET", 36000.0, _parse_pos_float, "a positive number of seconds",
         "wall-clock budget of one run (Colab allows ~12 h)",
         flag=Flag("--budget", "SECONDS", "wall-clock budget of the run"),
         form=FormField("budget_hours", param='{type:"number"}', scale=3600.0,
                        accepted="a positive number of hours")),
    Knob("SHUTDOWN_SECONDS", "KY_SHUTDOWN", 900.0, _parse_nonneg_float, "a number of seconds >= 0",
         "stop starting new work this long before the budget ends, to sync"),
    Knob("PACING", "KY_PACING", 1.0, _parse_nonneg_float, "a number >= 0 (0 turns pacing off)",
         "multiplier on every pacing sleep"),
    Knob("PACING_SEARCH", "KY_PACING_SEARCH", (0.3, 0.7), _parse_range, "two seconds 'low,high'",
         "random pause between search requests"),
    Knob("PACING_DL", "KY_PACING_DL", (0.3, 0.5), _parse_range, "two seconds 'low,high'",
         "random pause between downloads"),
    Knob("BACKOFF_BASE", "KY_BACKOFF_BASE", 5.0, _parse_nonneg_float, "a number of seconds >= 0",
         "transient-error backoff min(cap, base*2^attempts)"),
    Knob("BACKOFF_CAP", "KY_BACKOFF_CAP", 60.0, _parse_nonneg_float, "a number of seconds >= 0",
         "upper bound of one backoff sleep"),
    Knob("MAX_ATTEMPTS", "KY_MAX_ATTEMPTS", 4, _parse_pos_int, "a positive integer",
         "download attempts per document before it leaves the queue"),
    Knob("SEARCH_ATTEMPTS", "KY_SEARCH_ATTEMPTS", 6, _parse_pos_int, "a positive integer",
         "tries of one search page before the shard is logged as an error"),
    Knob("MAX_PDF_BYTES", "KY_MAX_PDF_BYTES", 200 * MIB, _parse_pos_int, "a positive number of bytes",
         "size cap; a larger file is a permanent failure (413)"),
    Knob("MAX_EXTRACT_ATTEMPTS", "KY_MAX_EXTRACT_ATTEMPTS", 3, _parse_pos_int, "a positive integer",
         "text extraction attempts per document"),
    Knob("PROGRESS", "KY_PROGRESS", True, _parse_bool, "0 or 1",
         "progress bars (tqdm) for backfill, discover, download and extract"),
    Knob("LIVE", "KY_LIVE", False, _parse_bool, "0 or 1",
         "enables the live smoke tests against the real court (10 requests at most)"),
    Knob("DOWNLOAD_LIMIT", "KY_DOWNLOAD_LIMIT", 0, _parse_nonneg_int, "an integer >= 0 (0: no limit)",
         "documents one run downloads at most (a trial run, or a sample at full scale)",
         form=FormField("download_limit", intro="**A trial run.** Download at most this many documents "
                                                "(0: no limit), of case years in this range (an empty last "
                                                "year means the current year).")),
    Knob("FIRST_YEAR", "KY_FIRST_YEAR", 1990, _parse_year, "a year like 1990",
         "first year of case numbers to discover",
         form=FormField("first_year")),
    Knob("LAST_YEAR", "KY_LAST_YEAR", None, _parse_optional_year, "a year, or empty for the current year",
         "last year of case numbers to discover",
         form=FormField("last_year")),
    Knob("RETRY_HARD", "KY_RETRY_HARD", False, _parse_bool, "0 or 1",
         "retry permanent failures and exhausted documents too",
         flag=Flag("--retry-hard", None, "retry permanent failures and exhausted documents"),
         form=FormField("retry_hard", intro="**Repairs.** Retry documents that failed for good; or ask nothing "
                                            "of the court (a dry run).")),
    Knob("DRY_RUN", "KY_DRY", False, _parse_bool, "0 or 1",
         "no network at all: report the queues and verify",
         flag=Flag("--dry-run", None, "no network at all"), form=FormField("dry_run")),
    Knob("PAGE_SIZE", "KY_PAGE_SIZE", 500, _parse_pos_int, "a positive integer",
         "x-ctrack-paging-maxresults asked for (the server may cap it)"),
    Knob("CONVERGENCE_DELTA", "KY_CONVERGENCE_DELTA", 10, _parse_pos_int, "a positive integer",
         "discovery has converged when a sweep adds fewer documents than this"),
    Knob("MAX_SWEEPS", "KY_MAX_SWEEPS", 8, _parse_pos_int, "a positive integer",
         "discovery sweeps at most per run"),
    Knob("DOWNLOAD_BATCH", "KY_DOWNLOAD_BATCH", 50, _parse_pos_int, "a positive integer",
         "documents taken from the download queue at a time"),
    Knob("EXTRACT_BATCH", "KY_EXTRACT_BATCH", 500, _parse_pos_int, "a positive integer",
         "documents taken from the extract queue at a time"),
    Knob("WORKERS", "KY_WORKERS", max(1, os.cpu_count() or 1), _parse_pos_int, "a positive integer",
         "text extraction worker processes"),
    Knob("EXTRACT_ENGINES", "KY_EXTRACT_ENGINES", ("pypdfium2", "pypdf"), _parse_engines,
         "a comma list of pypdfium2,pypdf", "PDF text engines, tried in this order: the next one when "
         "one fails, times out, crashes or gives text of low quality"),
    Knob("EXTRACT_TIMEOUT", "KY_EXTRACT_TIMEOUT", 120.0, _parse_pos_float, "a positive number of seconds",
         "time limit of one engine on one PDF; then the next engine is tried"),
    Knob("EXTRACT_MEMORY_MB", "KY_EXTRACT_MEMORY_MB", 2048, _parse_pos_int, "a positive number of MiB",
         "address space an extract worker may add to what it was forked with (RLIMIT_AS); a PDF "
         "that needs more fails as `too large`"),
    Knob("MIN_TEXT_QUALITY", "KY_MIN_TEXT_QUALITY", 0.5, _parse_fraction, "a fraction like 0.5",
         "text scoring lower (share of word-like tokens, less replacement and control characters) "
         "goes to the next engine"),
    Knob("SCANNED_CHARS_PER_PAGE", "KY_SCANNED_CHARS_PER_PAGE", 20, _parse_nonneg_int, "an integer >= 0",
         "a page that shows an image and has fewer non-blank characters than this has no text layer: "
         "it needs OCR and marks its PDF likely_scanned"),
    Knob("OCR_ENGINE", "KY_OCR_ENGINE", "tesseract", _parse_ocr_engine, "tesseract or rapidocr",
         "OCR engine of the ocr stage (the stage is skipped, saying why, when it is not installed)"),
    Knob("OCR_DPI", "KY_OCR_DPI", 300, _parse_pos_int, "a positive integer",
         "resolution pages are rendered at for OCR"),
    Knob("CHECKPOINT_SECONDS", "KY_CHECKPOINT_SECONDS", 600.0, _parse_pos_float, "a positive number of seconds",
         "database snapshot to the store this often while work commits"),
    Knob("JOURNAL_SECONDS", "KY_JOURNAL_SECONDS", 60.0, _parse_pos_float, "a positive number of seconds",
         "between snapshots, the store's download journal is rewritten this often: a fresh runtime "
         "does not fetch again what the store already holds"),
    Knob("DERIVE_BATCH", "KY_DERIVE_BATCH", 200, _parse_pos_int, "a positive integer",
         "documents derived (fields, citations) per transaction"),
    Knob("AUDIT", "KY_AUDIT", 0.0, _parse_audit, "0 (a tenth), a share in (0, 1] like 0.25, or all",
         "each verify proves at least this share of the stored PDFs and texts against their names: a "
         "rolling slice, every file once in 1/SHARE runs (at most 10; 0: 10); all: every file read "
         "every run. On Drive a file proven once is checked by Drive's md5 in the listing, unread",
         flag=Flag("--audit", "SHARE", "prove at least this share (like 0.25, or all) of the stored PDFs "
                                  "and texts (KY_AUDIT; without SHARE: KY_AUDIT if set, else 0.01)",
                   nargs="?", const="")),
    Knob("HEARTBEAT_EVERY", "KY_HEARTBEAT_EVERY", 100, _parse_pos_int, "a positive integer",
         "status.json is rewritten every this many download attempts"),
    Knob("COURT_DOWN_SECONDS", "KY_COURT_DOWN_SECONDS", 300.0, _parse_pos_float,
         "a positive number of seconds",
         "circuit breaker: the court is unreachable once it has given no usable answer for this long "
         "(and KY_COURT_DOWN_FAILURES requests in a row failed); the run then stops asking it and exits 3"),
    Knob("COURT_DOWN_FAILURES", "KY_COURT_DOWN_FAILURES", 6, _parse_pos_int, "a positive integer",
         "circuit breaker: failed requests in a row (refused, reset, timed out, 5xx, 429, a page that is not "
         "the API's) needed, with KY_COURT_DOWN_SECONDS, before the court counts as unreachable"),
    Knob("HTTP_TIMEOUT", "KY_HTTP_TIMEOUT", 60.0, _parse_pos_float, "a positive number of seconds",
         "connect and read timeout of one request"),
    Knob("VERIFY_HASHES", "KY_VERIFY_HASHES", False, _parse_bool, "0 or 1",
         "verify reads every stored PDF and text and proves it against its name (the full check; "
         "without it, a rolling tenth a run)"),
    Knob("QUOTA_WARN_FRACTION", "KY_QUOTA_WARN", 0.9, _parse_pos_float, "a fraction like 0.9",
         "warn when the Drive quota is this full"),
    Knob("DISCOVERY", "KY_DISCOVERY", "auto", _parse_discovery, "auto, documents or cases",
         "how documents are enumerated: the document search, the case walk (case search, docket "
         "entries, each entry's files), or auto: one probe picks the document search if its rows "
         "carry documentID, else the case walk (the choice is kept in the database)",
         flag=Flag("--discovery", "auto|documents|cases", "strategy to probe for")),
    Knob("CASE_DETAILS", "KY_CASE_DETAILS", True, _parse_bool, "0 or 1",
         "the case walk also fetches each case's parties (with attorneys) and lower courts, one "
         "request each, in a pass after the documents: it waits while any discovered PDF can still "
         "be downloaded"),
    Knob("COURT_TEXT", "KY_COURT_TEXT", True, _parse_bool, "0 or 1",
         "keep the court's own per-page text of each document (court_text/<sha256>.txt in the store)"),
    Knob("FULL_SWEEP", "KY_FULL_SWEEP", False, _parse_bool, "0 or 1",
         "once discovery has converged, sweep as the first crawl does instead of an update (which "
         "lists only the files of an open case's new entries): walk every open case again with every "
         "entry's file list"),
    Knob("TODAY", "KY_TODAY", None, _parse_optional_day, "a day YYYY-MM-DD, or empty for today in Kentucky",
         "for tests and the demo: the Kentucky day the pipeline takes as today (a simulated court's day); "
         "an update is complete through the day it began"),
    Knob("PROBE_FIRST", "KY_PROBE_FIRST", False, _parse_bool, "0 or 1",
         "probe the court (at most 10 requests) before the stages; a failed probe stops the run",
         form=FormField("probe_first", intro="**Probe first.** Ask the court at most 10 requests, print what "
                                          "each endpoint answered, and stop before any stage when the pipeline "
                                          "cannot run against it.")),
)

KNOB_BY_NAME = {knob.name: knob for knob in KNOBS}


def _config_replace(self, **changes: Any) -> "Config":
    return dataclasses.replace(self, **changes)


def _config_last_year(self) -> int:
    return self.LAST_YEAR or self.today().year


def _config_today(self) -> _dt.date:
    """The Kentucky day the pipeline takes as today: TODAY when set, else today in Frankfort."""
    return _dt.date.fromisoformat(self.TODAY) if self.TODAY else kentucky_today()


def _config_store_is_drive(self) -> bool:
    return self.STORE.strip().lower() == "drive"


# Every knob, validated: one field per knob of KNOBS, in its order, typed by the knob's parser.
# Build with `load_config`, change with `.replace()`.
Config = dataclasses.make_dataclass(
    "Config",
    [(knob.name, knob.type) for knob in KNOBS] + [
        ("extra", "Mapping[str, Any]", field(default_factory=dict)),
        # adjustments load_config made and said (a scaled shutdown margin)
        ("warnings", "tuple[str, ...]", field(default=())),
    ],
    frozen=True,
    namespace={"__module__": __name__,
               "__doc__": "Every knob, validated. Build with `load_config`, change with `.replace()`.",
               "replace": _config_replace, "last_year": property(_config_last_year), "today": _config_today,
               "store_is_drive": property(_config_store_is_drive)},
)


def api_base_problem(base: str) -> str | None:
    """Why `base` cannot be the API root (None when it can): a scheme other than http(s), no host,
    or a port that is not a number; requests would only say so at the first request."""
    try:
        parts = urllib.parse.urlsplit(base)
        port = parts.port
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "the scheme is not http or https"
    if not parts.hostname:
        return "no host"
    if port == 0:
        return "port 0"
    return None


def _validate(values: dict[str, Any]) -> list[str]:
    """Checks that span knobs; each names the variable at fault. Returns the warnings of
    adjustments made instead of errors (a shutdown margin scaled to a short budget)."""
    warnings: list[str] = []
    base = str(values["API_BASE"])
    problem = api_base_problem(base)
    if problem:
        raise ConfigError("KY_API_BASE", base, f"an http(s) URL with a host ({problem})")
    budget, margin = values["BUDGET_SECONDS"], values["SHUTDOWN_SECONDS"]
    if margin * 2 > budget:
        # The margin is for syncing at the end; one as long as the budget leaves no time for work.
        scaled = round(budget * SHORT_BUDGET_MARGIN_SHARE, 3)
        warnings.append(f"KY_SHUTDOWN={margin:g} s is over half of the {budget:g} s budget: "
                        f"using a shutdown margin of {scaled:g} s (a tenth of the budget) instead")
        values["SHUTDOWN_SECONDS"] = scaled
    if values["LAST_YEAR"] is not None and values["LAST_YEAR"] < values["FIRST_YEAR"]:
        raise ConfigError("KY_LAST_YEAR", values["LAST_YEAR"], f"a year >= KY_FIRST_YEAR ({values['FIRST_YEAR']})")
    if values["BACKOFF_CAP"] < values["BACKOFF_BASE"]:
        raise ConfigError("KY_BACKOFF_CAP", values["BACKOFF_CAP"], f"seconds >= KY_BACKOFF_BASE ({values['BACKOFF_BASE']})")
    if not 0 < values["QUOTA_WARN_FRACTION"] <= 1:
        raise ConfigError("KY_QUOTA_WARN", values["QUOTA_WARN_FRACTION"], "a fraction in (0, 1]")
    return warnings


def _absolute_path(text: str) -> str:
    """A directory knob made absolute once, here: every later join and every path the database
    records (the store backlog) then means the same file whatever the current directory."""
    return os.path.abspath(os.path.expanduser(text))


def load_config(env: Mapping[str, str] | None = None, **overrides: Any) -> Config:
    """Reads the environment (or `env`), applies `overrides`, validates everything.

    Overrides are knob names (`BUDGET_SECONDS=60`) with either typed values or
    strings in the env form; `None` means "not given". In Colab the store
    defaults to Drive.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    colab = in_colab()
    for knob in KNOBS:
        value = knob.colab_default if colab and knob.colab_default is not None else knob.default
        raw = env.get(knob.env) if knob.env else None
        if raw is not None:
            value = _parse_knob(knob, raw, knob.env)
        values[knob.name] = value
    if env.get("KY_EXTRACT_ENGINE") is not None and env.get("KY_EXTRACT_ENGINES") is None:
        # The one engine became a chain: say so rather than ignore what the user set.
        raise ConfigError("KY_EXTRACT_ENGINE", env["KY_EXTRACT_ENGINE"],
                          "KY_EXTRACT_ENGINES instead (engines tried in order, e.g. pypdfium2,pypdf)")
    for name, value in overrides.items():
        if value is None:
            continue
        if name not in KNOB_BY_NAME:
            raise ConfigError(name, value, "a known knob: " + ", ".join(KNOB_BY_NAME))
        knob = KNOB_BY_NAME[name]
        if isinstance(value, str):  # flags and form fields arrive as text: validate like env
            value = _parse_knob(knob, value, knob.env or name)
        values[name] = value
    warnings = _validate(values)
    values["WORKSPACE"] = _absolute_path(values["WORKSPACE"])
    if values["STORE"].strip().lower() != "drive":
        values["STORE"] = _absolute_path(values["STORE"])
    for warning in warnings:
        log_config.warning("%s", warning)
    return Config(**values, warnings=tuple(warnings))


def _parse_knob(knob: Knob, raw: str, label: str) -> Any:
    try:
        return knob.parse(raw)
    except (ValueError, TypeError):
        raise ConfigError(label, raw, knob.accepted) from None


# ------------------------------------------------------------ run control


class RunClock:
    """The run's budget and its stop flag, shared by every stage.

    `should_stop()` is true once a signal arrived or the budget minus the
    shutdown margin is spent; stages check it between documents.
    """

    def __init__(self, budget_seconds: float, shutdown_seconds: float = 0.0,
                 now: Callable[[], float] = time.monotonic):
        self._now = now
        self.started = now()
        self.budget_seconds = budget_seconds
        self.shutdown_seconds = min(shutdown_seconds, budget_seconds)
        self.stop_event = threading.Event()
        self.stop_reason: str | None = None

    def elapsed(self) -> float:
        return self._now() - self.started

    def remaining(self) -> float:
        """Seconds of work left before the shutdown margin."""
        return self.budget_seconds - self.shutdown_seconds - self.elapsed()

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stop_event.set()

    @property
    def interrupted(self) -> bool:
        return self.stop_reason is not None and self.stop_reason != "budget"

    def should_stop(self) -> bool:
        if self.stop_event.is_set():
            return True
        if self.remaining() <= 0:
            self.request_stop("budget")
            return True
        return False

    def sleep(self, seconds: float) -> bool:
        """Sleeps unless a stop is requested first; returns False if interrupted."""
        if seconds <= 0:
            return not self.stop_event.is_set()
        return not self.stop_event.wait(min(seconds, max(0.0, self.remaining())))


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def count_noun(count: int, noun: str, plural: str | None = None) -> str:
    """'1 sweep', '3 sweeps', '0 sweeps' (`plural` where adding an s is wrong): every count the
    pipeline says in words."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


# The courts sit in Frankfort: a day the court or a user means is a day in this zone (tzdata
# supplies it where the system has no zone database).
KENTUCKY_TIME_ZONE = "America/New_York"


def _kentucky_zone():
    import zoneinfo
    return zoneinfo.ZoneInfo(KENTUCKY_TIME_ZONE)


def kentucky_date(value: Any) -> str | None:
    """The America/New_York day (`YYYY-MM-DD`) of a court timestamp; None when there is none.

    The court writes instants in UTC (`2024-04-19T00:49:35.000+0000` is April 18 in Frankfort)
    and date-only values as local midnight in UTC (`T04:00`/`T05:00`): both are converted, never
    cut at ten characters. A value with no offset is taken as local already; a bare day, or text
    that is no timestamp, keeps its first ten characters when they are a day, else None."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    if len(text) > 5 and text[-5] in "+-" and text[-4:].isdigit() and text[-3] != ":":
        text = text[:-2] + ":" + text[-2:]          # +0000 -> +00:00 (Python 3.10 reads only this form)
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        try:
            return _dt.date.fromisoformat(text[:10]).isoformat()
        except ValueError:
            return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(_kentucky_zone())
    return moment.date().isoformat()


def kentucky_today() -> _dt.date:
    """Today in Frankfort (a machine in UTC, like Colab's, is a day ahead every evening)."""
    return _dt.datetime.now(_kentucky_zone()).date()


def parse_day(text: str) -> str:
    """A day as every reader of one takes it (the CLI's flags, KY_TODAY, serve's and the form's
    fields): YYYY-MM-DD, returned in that form; ValueError saying so for anything else. A day the
    user names is Kentucky's (`kentucky_day_start` where it is compared with instants)."""
    try:
        return _dt.date.fromisoformat(str(text).strip()).isoformat()
    except ValueError:
        raise ValueError(f"{str(text).strip()!r} is not a day like 2019-03-31") from None


def kentucky_day_start(day: str) -> str:
    """The instant a Kentucky day (YYYY-MM-DD) begins, in UTC as `utc_now()` writes instants
    ('2026-06-06' -> '2026-06-06T04:00:00Z'): what "on or after that day" compares with."""
    start = _dt.datetime.combine(_dt.date.fromisoformat(parse_day(day)), _dt.time(), tzinfo=_kentucky_zone())
    return start.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def retry_delay(failures: int, *, base: float, cap: float, retry_after: float | None = None,
                jitter: float = 0.0) -> float:
    """Seconds to wait before the next try after `failures` failed tries (the court's searches and
    downloads, Drive's requests all count so): base after the first, doubling up to cap;
    `jitter` (0..1, a draw the caller made) adds up to that share of the delay; a longer
    Retry-After from the server wins (it is the server's word). A decision: nothing sleeps here."""
    delay = min(cap, base * 2 ** max(0, failures - 1)) * (1.0 + max(0.0, jitter))
    if retry_after is not None and retry_after > delay:
        return float(retry_after)
    return float(delay)
