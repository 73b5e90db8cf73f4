"""Configuration: every knob of the pipeline, its default, its env override.

Guarantees:
- `load_config()` is the one place the environment is read. Every value is
  parsed and validated there; a bad one raises `ConfigError` naming the
  variable and the accepted form, before anything is written anywhere.
- A `Config` is immutable; stages receive it through the run context.
- The named errors of the whole pipeline live here, so every cell can raise
  and catch the same classes.

Precedence: explicit overrides (CLI flags, notebook form fields) > the
environment > the defaults below. `KNOBS` lists them all; the README's
table is generated from it.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import threading
import time
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


class ResultsLimitExceeded(PipelineError):
    """A search shard holds more results than the server lets anyone page through."""


class IntegrityError(PipelineError):
    """Stored bytes, a database or an archive is not what its name promises."""


class StoreError(PipelineError):
    """The durable store refused an operation."""


class StoreQuotaExceeded(StoreError):
    """The store is full (Drive 403 storageQuotaExceeded); callers degrade to local state."""


class DiskFullError(PipelineError):
    """The workspace disk is full (ENOSPC); the run stops cleanly."""


class StopRequested(PipelineError):
    """SIGINT/SIGTERM or the budget asked the run to stop; state is saved."""


# ------------------------------------------------------------------ knobs


@dataclass(frozen=True)
class Knob:
    name: str            # attribute of Config
    env: str | None      # environment variable, None if not overridable
    default: Any
    parse: Callable[[str], Any]
    accepted: str        # the accepted form, for errors and the README
    help: str


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(text)


def _parse_nonneg_float(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError(text)
    return value


def _parse_pos_float(text: str) -> float:
    value = _parse_nonneg_float(text)
    if value == 0:
        raise ValueError(text)
    return value


def _parse_nonneg_int(text: str) -> int:
    value = int(text.strip())
    if value < 0:
        raise ValueError(text)
    return value


def _parse_pos_int(text: str) -> int:
    value = _parse_nonneg_int(text)
    if value == 0:
        raise ValueError(text)
    return value


def _parse_range(text: str) -> tuple[float, float]:
    low, high = (float(part) for part in text.split(","))
    if not (0 <= low <= high < float("inf")):
        raise ValueError(text)
    return (low, high)


PHASE_NAMES = ("discover", "backfill", "download", "extract", "index")
EXTRACT_ENGINES = ("pypdf", "pypdfium2")


def _parse_phases(text: str) -> tuple[str, ...]:
    phases = tuple(part.strip().lower() for part in text.split(",") if part.strip())
    if any(phase not in PHASE_NAMES for phase in phases):
        raise ValueError(text)
    # Stages always run in pipeline order, whatever order the user typed.
    return tuple(phase for phase in PHASE_NAMES if phase in phases)


def _parse_engine(text: str) -> str:
    engine = text.strip().lower()
    if engine not in EXTRACT_ENGINES:
        raise ValueError(text)
    return engine


def _parse_text(text: str) -> str:
    if not text.strip():
        raise ValueError(text)
    return text.strip()


def _parse_year(text: str) -> int:
    year = int(text)
    if not 1900 <= year <= 2100:
        raise ValueError(text)
    return year


def _parse_optional_year(text: str) -> int | None:
    return None if not text.strip() else _parse_year(text)


def in_colab() -> bool:
    try:
        import google.colab  # noqa: F401  (only importable inside Colab)
    except ImportError:
        return False
    return True


MIB = 1024 * 1024
REAL_API_BASE = "https://appellatepublic.kycourts.net/api/api/v1"

KNOBS: tuple[Knob, ...] = (
    Knob("WORKSPACE", "KY_WORKSPACE", "ky_court_workspace", _parse_text, "a directory path",
         "local, throwaway working directory (database, PDFs, text)"),
    Knob("STORE", "KY_STORE", "ky_court_store", _parse_text, "a directory path or 'drive'",
         "durable mirror; 'drive' uses Google Drive through pydrive2 (the default in Colab)"),
    Knob("DRIVE_FOLDER", "KY_DRIVE_FOLDER", "ky_court", _parse_text, "a Drive folder path like ky_court",
         "the Drive folder the store lives in when STORE=drive"),
    Knob("API_BASE", "KY_API_BASE", REAL_API_BASE, _parse_text, "an http(s) URL",
         "root of the C-Track Public Access API"),
    Knob("PHASES", "KY_PHASES", PHASE_NAMES, _parse_phases,
         "a comma list of discover,backfill,download,extract,index", "stages this run performs"),
    Knob("BUDGET_SECONDS", "KY_BUDGET", 36000.0, _parse_pos_float, "a positive number of seconds",
         "wall-clock budget of one run (Colab allows ~12 h)"),
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
    Knob("RETRY_HARD", "KY_RETRY_HARD", False, _parse_bool, "0 or 1",
         "retry permanent failures and exhausted documents too"),
    Knob("DRY_RUN", "KY_DRY", False, _parse_bool, "0 or 1",
         "no network at all: report the queues and verify"),
    Knob("PROGRESS", "KY_PROGRESS", True, _parse_bool, "0 or 1",
         "progress bars (tqdm) for backfill, discover, download and extract"),
    Knob("LIVE", "KY_LIVE", False, _parse_bool, "0 or 1",
         "enables the live smoke tests against the real court (10 requests at most)"),
    Knob("FIRST_YEAR", "KY_FIRST_YEAR", 1990, _parse_year, "a year like 1990",
         "first year of case numbers to discover"),
    Knob("LAST_YEAR", "KY_LAST_YEAR", None, _parse_optional_year, "a year, or empty for the current year",
         "last year of case numbers to discover"),
    Knob("PAGE_SIZE", "KY_PAGE_SIZE", 500, _parse_pos_int, "a positive integer",
         "x-ctrack-paging-maxresults asked for (the server may cap it)"),
    Knob("CONVERGENCE_DELTA", "KY_CONVERGENCE_DELTA", 10, _parse_pos_int, "a positive integer",
         "discovery has converged when a sweep adds fewer documents than this"),
    Knob("MAX_SWEEPS", "KY_MAX_SWEEPS", 8, _parse_pos_int, "a positive integer",
         "discovery sweeps at most per run"),
    Knob("DOWNLOAD_BATCH", "KY_DOWNLOAD_BATCH", 50, _parse_pos_int, "a positive integer",
         "documents taken from the download queue at a time"),
    Knob("DOWNLOAD_LIMIT", "KY_DOWNLOAD_LIMIT", 0, _parse_nonneg_int, "an integer >= 0 (0: no limit)",
         "documents one run downloads at most (a trial run, or a sample at full scale)"),
    Knob("EXTRACT_BATCH", "KY_EXTRACT_BATCH", 500, _parse_pos_int, "a positive integer",
         "documents taken from the extract queue at a time"),
    Knob("WORKERS", "KY_WORKERS", max(1, os.cpu_count() or 1), _parse_pos_int, "a positive integer",
         "text extraction worker processes"),
    Knob("EXTRACT_ENGINE", "KY_EXTRACT_ENGINE", "pypdf", _parse_engine, "pypdf or pypdfium2",
         "PDF text engine"),
    Knob("EXTRACT_TIMEOUT", "KY_EXTRACT_TIMEOUT", 120.0, _parse_pos_float, "a positive number of seconds",
         "time limit of one PDF's extraction; a hang counts as a failed attempt"),
    Knob("SCANNED_CHARS_PER_PAGE", "KY_SCANNED_CHARS_PER_PAGE", 20, _parse_nonneg_int, "an integer >= 0",
         "fewer characters per page than this marks a PDF likely_scanned"),
    Knob("CHECKPOINT_SECONDS", "KY_CHECKPOINT_SECONDS", 600.0, _parse_pos_float, "a positive number of seconds",
         "database snapshot to the store this often while work commits"),
    Knob("JOURNAL_SECONDS", "KY_JOURNAL_SECONDS", 60.0, _parse_pos_float, "a positive number of seconds",
         "between snapshots, the store's download journal is rewritten this often: a fresh runtime "
         "does not fetch again what the store already holds"),
    Knob("HEARTBEAT_EVERY", "KY_HEARTBEAT_EVERY", 100, _parse_pos_int, "a positive integer",
         "status.json is rewritten every this many download attempts"),
    Knob("HTTP_TIMEOUT", "KY_HTTP_TIMEOUT", 60.0, _parse_pos_float, "a positive number of seconds",
         "connect and read timeout of one request"),
    Knob("VERIFY_HASHES", "KY_VERIFY_HASHES", False, _parse_bool, "0 or 1",
         "verify re-hashes every stored PDF and text against its name"),
    Knob("QUOTA_WARN_FRACTION", "KY_QUOTA_WARN", 0.9, _parse_pos_float, "a fraction like 0.9",
         "warn when the Drive quota is this full"),
)

KNOB_BY_NAME = {knob.name: knob for knob in KNOBS}


@dataclass(frozen=True)
class Config:
    """Every knob, validated. Build with `load_config`, change with `.replace()`."""

    WORKSPACE: str
    STORE: str
    DRIVE_FOLDER: str
    API_BASE: str
    PHASES: tuple[str, ...]
    BUDGET_SECONDS: float
    SHUTDOWN_SECONDS: float
    PACING: float
    PACING_SEARCH: tuple[float, float]
    PACING_DL: tuple[float, float]
    BACKOFF_BASE: float
    BACKOFF_CAP: float
    MAX_ATTEMPTS: int
    SEARCH_ATTEMPTS: int
    MAX_PDF_BYTES: int
    MAX_EXTRACT_ATTEMPTS: int
    RETRY_HARD: bool
    DRY_RUN: bool
    PROGRESS: bool
    LIVE: bool
    FIRST_YEAR: int
    LAST_YEAR: int | None
    PAGE_SIZE: int
    CONVERGENCE_DELTA: int
    MAX_SWEEPS: int
    DOWNLOAD_BATCH: int
    DOWNLOAD_LIMIT: int
    EXTRACT_BATCH: int
    WORKERS: int
    EXTRACT_ENGINE: str
    EXTRACT_TIMEOUT: float
    SCANNED_CHARS_PER_PAGE: int
    CHECKPOINT_SECONDS: float
    JOURNAL_SECONDS: float
    HEARTBEAT_EVERY: int
    HTTP_TIMEOUT: float
    VERIFY_HASHES: bool
    QUOTA_WARN_FRACTION: float
    extra: Mapping[str, Any] = field(default_factory=dict)

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)

    @property
    def last_year(self) -> int:
        return self.LAST_YEAR or _dt.date.today().year

    @property
    def store_is_drive(self) -> bool:
        return self.STORE.strip().lower() == "drive"


def _validate(values: dict[str, Any]) -> None:
    """Checks that span knobs; each names the variable at fault."""
    base = str(values["API_BASE"])
    if not base.startswith(("http://", "https://")):
        raise ConfigError("KY_API_BASE", base, "an http(s) URL")
    if values["LAST_YEAR"] is not None and values["LAST_YEAR"] < values["FIRST_YEAR"]:
        raise ConfigError("KY_LAST_YEAR", values["LAST_YEAR"], f"a year >= KY_FIRST_YEAR ({values['FIRST_YEAR']})")
    if values["BACKOFF_CAP"] < values["BACKOFF_BASE"]:
        raise ConfigError("KY_BACKOFF_CAP", values["BACKOFF_CAP"], f"seconds >= KY_BACKOFF_BASE ({values['BACKOFF_BASE']})")
    if not 0 < values["QUOTA_WARN_FRACTION"] <= 1:
        raise ConfigError("KY_QUOTA_WARN", values["QUOTA_WARN_FRACTION"], "a fraction in (0, 1]")


def load_config(env: Mapping[str, str] | None = None, **overrides: Any) -> Config:
    """Reads the environment (or `env`), applies `overrides`, validates everything.

    Overrides are knob names (`BUDGET_SECONDS=60`) with either typed values or
    strings in the env form; `None` means "not given". In Colab the store
    defaults to Drive.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for knob in KNOBS:
        value = knob.default
        if knob.name == "STORE" and in_colab():
            value = "drive"
        if knob.name == "WORKSPACE" and in_colab():
            value = "/content/ky_court_workspace"
        raw = env.get(knob.env) if knob.env else None
        if raw is not None:
            value = _parse_knob(knob, raw, knob.env)
        values[knob.name] = value
    for name, value in overrides.items():
        if value is None:
            continue
        if name not in KNOB_BY_NAME:
            raise ConfigError(name, value, "a known knob: " + ", ".join(KNOB_BY_NAME))
        knob = KNOB_BY_NAME[name]
        if isinstance(value, str):  # flags and form fields arrive as text: validate like env
            value = _parse_knob(knob, value, knob.env or name)
        values[name] = value
    _validate(values)
    return Config(**values)


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


if __name__ == "__main__":  # the notebook: the one CFG, from the environment
    CFG = load_config()
