"""Small test doubles shared by several test modules."""
from __future__ import annotations

import tempfile
from pathlib import Path

from notebook_builder.cells.c00_config import RunClock


class RecordingClock(RunClock):
    """A run clock whose sleeps are recorded, not slept: backoff is fast and visible."""

    def __init__(self, budget_seconds: float = 3600.0):
        super().__init__(budget_seconds, 0.0)
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        return not self.stop_event.is_set()


def mark_extracted(db, document_id: str, *, pages: int, extracted_chars: int, likely_scanned: bool = False) -> None:
    """A downloaded document `extracted` as the extract stage records it (its `ok` log row included)."""
    sha = db.conn.execute("SELECT sha256 FROM documents WHERE document_id = ?", (document_id,)).fetchone()[0]
    db.record_extracted([{"document_id": document_id, "sha256": sha, "attempt": 1, "engine": "pypdf",
                          "pages": pages, "chars": extracted_chars, "seconds": 0.0,
                          "likely_scanned": likely_scanned}])


def put_bytes(store, name: str, data: bytes) -> None:
    """`data` into the store under `name` through its upload_file, as the pipeline writes a file."""
    with tempfile.TemporaryDirectory(prefix="kycourt-test-") as folder:
        path = Path(folder) / "data"
        path.write_bytes(data)
        store.upload_file(name, path)
