"""Audit: fixity of the store, re-hashing a sample of its PDFs and texts (verify calls it).

Guarantees:
- `audit_store(ctx, share)` takes a random sample (`share` of the distinct
  PDFs the database holds, at least one; 1.0 is every one; the sample differs
  from one checkpoint to the next, so repeated audits cover the store) and,
  for each, streams from the store:
  * `pdf_by_hash/<sha256>.pdf`: its sha256 must be its name, its size the
    database's size_bytes, its md5 the store's own (Drive's md5Checksum) when
    the store records one; the workspace's copy, when there is one, must hash
    to its name too;
  * the text of an extracted PDF that derive read (`text/<sha256>.txt`, or
    `text/<sha256>.ocr.txt` where OCR's merge was the best text): its sha256
    must be the one derive recorded (`derived.text_sha256`); before any
    derive, `text/<sha256>.txt`'s UTF-8 length must be the database's
    extracted_chars; its md5 the store's own when recorded.
- Each disagreement is one line of `mismatches` naming the file and what
  differs; a name the store cannot give is one of `errors`; a name missing
  from the store is counted in `missing` (verify reports missing names
  itself). Nothing is repaired or deleted: an audit only reads.
- `bagit_manifest(DerivedRecords.manifest_rows())` is the BagIt-style manifest
  (`sha256  path` lines) of the PDFs and of the texts whose hash derive
  recorded, for an export to carry.

Knobs read: AUDIT (through verify).
"""
from __future__ import annotations

import hashlib
import logging
import math
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .c00_config import IntegrityError, StoreError
from .c06_layout import TEXT_LAYER, pdf_store_name, text_name
from .c10_database import KV_CHECKPOINT_SEQ
from .c14_derived import DerivedRecords
from .c35_context import Context

log_audit = logging.getLogger("kycourt.audit")

_AUDIT_CHUNK = 1024 * 1024


@dataclass
class AuditResult:
    share: float = 0.0
    candidates: int = 0          # distinct PDFs the database holds
    sampled: int = 0
    pdfs_hashed: int = 0
    texts_hashed: int = 0
    workspace_hashed: int = 0
    md5_checked: int = 0         # files whose store-recorded md5 was compared
    bytes: int = 0
    missing: int = 0
    mismatches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def audit_sample(candidates: Sequence[Any], share: float, seed: int) -> list[Any]:
    """The candidates to audit: all when share >= 1, else ceil(share * n) of them (at least one)
    drawn with `seed`, in their given order."""
    if share <= 0 or not candidates:
        return []
    if share >= 1:
        return list(candidates)
    size = min(len(candidates), max(1, math.ceil(share * len(candidates))))
    chosen = set(random.Random(seed).sample(range(len(candidates)), size))
    return [candidate for index, candidate in enumerate(candidates) if index in chosen]


def bagit_manifest(rows: Sequence[tuple[str, str]]) -> str:
    """BagIt's `manifest-sha256.txt`: one `<sha256>  <path>` line per file (two spaces), for an
    export to carry the hashes of what it holds (`DerivedRecords.manifest_rows()` gives the rows)."""
    return "".join(f"{sha256}  {name}\n" for sha256, name in rows)


def file_digests(path: Path) -> tuple[str, str, int]:
    """(sha256, md5, size) of a file, in one pass."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(), 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_AUDIT_CHUNK), b""):
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return sha.hexdigest(), md5.hexdigest(), size


def audit_store(ctx: Context, share: float) -> AuditResult:
    """Re-hashes a sample of the store; see the module docstring."""
    started = time.monotonic()
    db = ctx.open_database()
    result = AuditResult(share=share)
    candidates = DerivedRecords(db).audit_candidates()
    result.candidates = len(candidates)
    seed = int(db.kv_get(KV_CHECKPOINT_SEQ, "0") or 0)
    sample = audit_sample(candidates, share, seed)
    result.sampled = len(sample)
    with tempfile.TemporaryDirectory(prefix=".audit-", dir=ctx.workspace) as temp:
        copy = Path(temp) / "copy"
        for row in sample:
            sha = row["sha256"]
            name = pdf_store_name(sha)
            digests = _audit_fetch(ctx, name, copy, result)
            if digests is not None:
                result.pdfs_hashed += 1
                actual_sha, _, size = digests
                if actual_sha != sha:
                    result.mismatches.append(f"{name}: hashes to {actual_sha}")
                if row["size_bytes"] is not None and size != row["size_bytes"]:
                    result.mismatches.append(f"{name}: {size} bytes, the database says {row['size_bytes']}")
            local = ctx.path(name)
            if local.is_file():
                result.workspace_hashed += 1
                local_sha = file_digests(local)[0]
                if local_sha != sha:
                    result.mismatches.append(f"workspace {name}: hashes to {local_sha}")
            if row["extracted"]:
                _audit_text(ctx, row, copy, result)
    result.seconds = round(time.monotonic() - started, 3)
    log_audit.info("audit: %d of %d PDFs sampled, %d PDFs and %d texts hashed (%d bytes), %d mismatches, "
                   "%d missing, %d errors", result.sampled, result.candidates, result.pdfs_hashed,
                   result.texts_hashed, result.bytes, len(result.mismatches), result.missing, len(result.errors))
    for line in result.mismatches:
        log_audit.warning("audit mismatch: %s", line)
    return result


def _audit_text(ctx: Context, row, copy: Path, result: AuditResult) -> None:
    # The text derive read and hashed (the text layer, or the OCR merge); without one, the layer.
    name = text_name(row["text_source"] if row["text_sha256"] else TEXT_LAYER, row["sha256"])
    digests = _audit_fetch(ctx, name, copy, result, keep=True)
    if digests is None:
        return
    result.texts_hashed += 1
    try:
        actual_sha = digests[0]
        if row["text_sha256"]:
            if actual_sha != row["text_sha256"]:
                result.mismatches.append(f"{name}: hashes to {actual_sha}, derive read {row['text_sha256']}")
        elif row["extracted_chars"] is not None:
            try:
                chars = len(copy.read_bytes().decode("utf-8"))
            except UnicodeDecodeError as exc:
                result.mismatches.append(f"{name}: not UTF-8 ({exc.reason} at byte {exc.start})")
                return
            if chars != row["extracted_chars"]:
                result.mismatches.append(f"{name}: {chars} characters, extraction recorded {row['extracted_chars']}")
    finally:
        copy.unlink(missing_ok=True)


def _audit_fetch(ctx: Context, name: str, copy: Path, result: AuditResult, *,
                 keep: bool = False) -> tuple[str, str, int] | None:
    """Streams `name` from the store to `copy` and digests it; None when the store cannot give it.
    The store's own md5, when it records one, is compared here."""
    try:
        if not ctx.store.exists(name):
            result.missing += 1
            return None
        ctx.store.download_file(name, copy)
        digests = file_digests(copy)
        recorded_md5 = ctx.store.md5(name)
    except IntegrityError as exc:   # Drive's download already found its md5 wrong
        result.mismatches.append(f"{name}: {exc}")
        copy.unlink(missing_ok=True)
        return None
    except (StoreError, OSError) as exc:
        result.errors.append(f"{name}: {exc}")
        copy.unlink(missing_ok=True)
        return None
    result.bytes += digests[2]
    if recorded_md5 is not None:
        result.md5_checked += 1
        if recorded_md5 != digests[1]:
            result.mismatches.append(f"{name}: md5 {digests[1]}, the store records {recorded_md5}")
    if not keep:
        copy.unlink(missing_ok=True)
    return digests
