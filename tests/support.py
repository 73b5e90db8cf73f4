"""Test doubles and helpers shared by several test modules (the fixtures are in conftest.py).

Test modules import from here, never from each other: a test module is collected once, and a
helper that moves with it would otherwise drag its tests' imports along.
"""
from __future__ import annotations

import collections
import hashlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

from notebook_builder.cells.c00_config import PipelineError, RunClock, load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c13_records import DownloadRecords, TextRecords
from notebook_builder.cells.c15_discovery_state import DOCUMENT_METADATA_COLUMNS, DiscoveryState
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.simcourt import TRANSIENT_FAULTS, SimCourt

REPO_ROOT = Path(__file__).resolve().parent.parent

# scripts/torture.py: the kill harness, its court and its pipeline environment (one module object for
# every test module that uses it).
_spec = importlib.util.spec_from_file_location("torture", REPO_ROOT / "scripts" / "torture.py")
if "torture" not in sys.modules:
    sys.modules["torture"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["torture"])
torture = sys.modules["torture"]

# Pacing off, fast backoff, no progress bars: what a test's context runs with unless it says otherwise.
FAST_ENV = {"KY_PACING": "0", "KY_PROGRESS": "0", "KY_BACKOFF_BASE": "0.01", "KY_BACKOFF_CAP": "0.05"}

E2E_CAP = 2 * 1024 * 1024   # KY_MAX_PDF_BYTES of the whole-pipeline runs
# Every behaviour of the real court (issue 24) the simulated one has, switched on for the end-to-end
# runs: withheld files (some released), paged lists, entries listing no file, null texts, a late
# opinion in a closed case, neighbouring case numbers, instants near midnight UTC; the download paths
# are chosen per test (download_paths).
REAL_COURT_BEHAVIOURS = dict(unavailable_files=True, release_withheld=True, paged_lists=3, empty_file_lists=True,
                             null_texts=True, late_opinions=1, neighbours=True, midnight_instants=True)


class RecordingClock(RunClock):
    """A run clock whose sleeps are recorded, not slept: backoff is fast and visible."""

    def __init__(self, budget_seconds: float = 3600.0):
        super().__init__(budget_seconds, 0.0)
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        return not self.stop_event.is_set()


class CountingStore(LocalStore):
    """A real LocalStore that remembers every upload's bytes."""

    def __init__(self, root):
        super().__init__(root)
        self.uploads: collections.Counter = collections.Counter()
        self.uploaded_bytes: dict[str, list[bytes]] = collections.defaultdict(list)

    def upload_file(self, name, local_path):
        self.uploads[name] += 1
        self.uploaded_bytes[name].append(Path(local_path).read_bytes())
        super().upload_file(name, local_path)


def context_config(root: Path, court: SimCourt | None = None, *, name: str = "workspace",
                   store_name: str | None = "store", env: dict[str, str] | None = None,
                   replace: dict | None = None, **knobs):
    """A test's config: workspace root/name, store root/store_name, FAST_ENV, the court's API base,
    then `env` (KY_* variables) and `knobs` (load_config's validated overrides) on top; `replace`
    sets Config fields after validation (Config.replace)."""
    values = {"KY_WORKSPACE": str(root / name), **FAST_ENV}
    if store_name is not None:
        values["KY_STORE"] = str(root / store_name)
    if court is not None:
        values["KY_API_BASE"] = court.base_url
    values.update(env or {})
    cfg = load_config(env=values, **knobs)
    return cfg.replace(**replace) if replace else cfg


def open_test_context(root: Path, court: SimCourt | None = None, *, clock: RunClock | None = None,
                      store=None, client=None, database: bool = True, **config):
    """A context over context_config(root, court, **config), its database open unless `database` is
    False (restore opens it); `client`, when given, is called as client(cfg, clock) and becomes
    ctx.client. The caller closes it."""
    cfg = context_config(root, court, **config)
    ctx = open_context(cfg, clock=clock, store=store)
    if database:
        ctx.open_database()
    if client is not None:
        ctx.client = client(cfg, ctx.clock)
    return ctx


def discovered_rows(documents) -> list[dict]:
    """The rows discover would write for these SimCourt documents."""
    return [{"document_id": d.document_id, **{c: getattr(d, c) for c in DOCUMENT_METADATA_COLUMNS}}
            for d in documents]


def pipeline_env(court, tmp_path, **extra):
    """test_end_to_end's whole-pipeline environment (a dict of KY_* variables)."""
    env = {
        "KY_WORKSPACE": str(tmp_path / "workspace"), "KY_STORE": str(tmp_path / "store"),
        "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_BACKOFF_BASE": "0.01",
        "KY_BACKOFF_CAP": "0.05", "KY_MAX_PDF_BYTES": str(E2E_CAP), "KY_FIRST_YEAR": "2020",
        "KY_LAST_YEAR": "2026", "KY_PAGE_SIZE": "25", "KY_CONVERGENCE_DELTA": "1",
        "KY_CHECKPOINT_SECONDS": "2", "KY_EXTRACT_TIMEOUT": "30", "KY_WORKERS": "2",
        "KY_PROGRESS": "0",
    }
    env.update(extra)
    return env


def torture_court(docs: int, seed: int, **overrides) -> SimCourt:
    """torture.make_court's court (the full fault catalogue, late documents, shard splitting), with
    SimCourt arguments overridden (a shorter stall, say)."""
    settings = dict(results_limit=40, max_page=25, late_docs=max(1, docs // 40), first_year=2020,
                    last_year=2026, search_fault_rate=0.03, oversize_bytes=torture.CAP + 1024 * 1024)
    return SimCourt(docs, seed=seed, **{**settings, **overrides})


def quick_court(docs: int, seed: int) -> SimCourt:
    """torture_court for runs on a RecordingClock: its stalled bodies stall 0.05 s, and it does not
    insist on Retry-After (the recording clock does not really wait it out). For tests about the
    store, the disk or bad input, whose subject is not the court's pacing."""
    return torture_court(docs, seed, stall_seconds=0.05, enforce_retry_after=False)


def run_until_done(cfg, store_factory, runs: int = 4, clock_factory=RecordingClock):
    """Runs the pipeline (each run on a fresh clock_factory() clock) until it exits 0 and status.json
    says done; returns the last report and status."""
    for _ in range(runs):
        report = run_pipeline(cfg, store=store_factory(), clock=clock_factory(), handle_signals=False)
        status = json.loads((Path(cfg.WORKSPACE) / "status.json").read_text())
        if report.exit_status == 0 and status["done"]:
            break
    return report, status


def stored_database(store: str | Path) -> Path | None:
    """The database the store's page packs make (assembled into a temp folder), or None when it
    holds none."""
    from notebook_builder.cells.c22_page_packs import PagePacks
    store = Path(store)
    if not (store / "db" / "ky_court").is_dir() or not any((store / "db" / "ky_court").iterdir()):
        return None
    folder = Path(tempfile.mkdtemp(prefix="stored-database-"))
    target = folder / "ky_court.sqlite"
    try:
        PagePacks(LocalStore(store, create=False), "ky_court.sqlite", folder / "checkpoint").restore(target)
    except PipelineError:            # a push under way removed a pack this read wanted: none this time
        return None
    return target


def store_is_level(cfg) -> list[str]:
    """Names the database refers to that the store lacks, or whose bytes are not the workspace's."""
    db = Database.open(Path(cfg.WORKSPACE) / "ky_court.sqlite")
    missing = []
    try:
        for row in DownloadRecords(db).documents_claiming_files():
            names = [f"pdf_by_hash/{row['sha256']}.pdf"]
            if row["status"] == "extracted":
                names.append(f"text/{row['sha256']}.txt")
            for name in names:
                stored = Path(cfg.STORE) / name
                if not stored.is_file():
                    missing.append(name)
                elif (Path(cfg.WORKSPACE) / name).is_file() and \
                        stored.read_bytes() != (Path(cfg.WORKSPACE) / name).read_bytes():
                    missing.append(f"{name} (other bytes)")
    finally:
        db.close()
    return missing


def expected_verdicts_hold(court, cfg) -> list:
    """Documents whose final (status, http_status) is not the court's plan (unparseable ones may
    still have extract attempts left, so `downloaded` is not compared)."""
    rows = torture.document_rows(Path(cfg.WORKSPACE).parent)
    return [(doc.document_id[:12], doc.fault, rows[doc.document_id]["status"]) for doc in court.documents
            if doc.expected_status != "downloaded"
            and (rows[doc.document_id]["status"], rows[doc.document_id]["http_status"])
            != (doc.expected_status, doc.expected_http_status)]


# ------------------------------------------------------------------ the download tests' court

MAX_PDF_BYTES = 1024 * 1024
OVERSIZE_BYTES = 16 * 1024 * 1024


def download_court() -> SimCourt:
    """SimCourt(docs=300, seed=1) as the download tests serve it: oversized bodies of 16 MiB, and no
    insisting on Retry-After (their clock records sleeps without sleeping); a stalled body stalls
    0.05 s (its length is not what they test: it fails once, however long)."""
    return SimCourt(docs=300, seed=1, oversize_bytes=OVERSIZE_BYTES, enforce_retry_after=False,
                    stall_seconds=0.05)


def court_env(court: SimCourt, root: Path, **extra: str) -> dict[str, str]:
    return {"KY_WORKSPACE": str(root / "workspace"), "KY_STORE": str(root / "store"),
            "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_BACKOFF_BASE": "0.01",
            "KY_BACKOFF_CAP": "0.05", "KY_MAX_PDF_BYTES": str(MAX_PDF_BYTES), **extra}


def download_context(court: SimCourt, root: Path, *, clock: RunClock | None = None, store=None, **extra: str):
    """An open context for download tests: court_env, a RecordingClock and a CountingStore by default."""
    return open_test_context(root, court, clock=clock or RecordingClock(),
                             store=store or CountingStore(root / "store"), env=court_env(court, root, **extra))


def expected_download_row(court: SimCourt, document, max_attempts: int) -> tuple:
    """(status, http_status, attempts) once download alone has run."""
    status = "failed" if document.expected_status == "failed" else "downloaded"
    if document.fault == "always_503":
        attempts = max_attempts
    elif document.fault in TRANSIENT_FAULTS:
        attempts = document.transient_failures + 1
    else:
        attempts = 1
    return status, document.expected_http_status, attempts


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def mark_extracted(db, document_id: str, *, pages: int, extracted_chars: int, likely_scanned: bool = False) -> None:
    """A downloaded document `extracted` as the extract stage records it (its `ok` log row included)."""
    sha = db.conn.execute("SELECT sha256 FROM documents WHERE document_id = ?", (document_id,)).fetchone()[0]
    TextRecords(db).record_extracted([{"document_id": document_id, "sha256": sha, "attempt": 1, "engine": "pypdf",
                          "pages": pages, "chars": extracted_chars, "seconds": 0.0,
                          "likely_scanned": likely_scanned}])


def add_extracted_document(ctx, document_id: str, pdf: bytes, text: str, *, case_number: str = "2020-CA-0001") -> str:
    """A document downloaded and extracted as the stages record it, its PDF and text written to the
    workspace and mirrored to the store; returns the PDF's sha256."""
    db = ctx.db
    sha = hashlib.sha256(pdf).hexdigest()
    DiscoveryState(db).upsert_discovered([{"document_id": document_id, "case_number": case_number}])
    for name, data in ((f"pdf_by_hash/{sha}.pdf", pdf), (f"text/{sha}.txt", text.encode())):
        ctx.path(name).write_bytes(data)
        ctx.mirror.put(name, ctx.path(name))
    DownloadRecords(db).record_download_attempt(document_id)
    DownloadRecords(db).mark_downloaded(document_id, sha256=sha, size_bytes=len(pdf), local_pdf=f"pdf_by_hash/{sha}.pdf")
    mark_extracted(db, document_id, pages=1, extracted_chars=len(text))
    return sha


def put_bytes(store, name: str, data: bytes) -> None:
    """`data` into the store under `name` through its upload_file, as the pipeline writes a file."""
    with tempfile.TemporaryDirectory(prefix="kycourt-test-") as folder:
        path = Path(folder) / "data"
        path.write_bytes(data)
        store.upload_file(name, path)
