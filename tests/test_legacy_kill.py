"""SIGKILL in the middle of adopting v1.2's state: the original stays intact and the next run
finishes the adoption to the state an uninterrupted one reaches."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from notebook_builder.cells.c38_legacy import KV_LEGACY_ADOPTION, adopt, legacy_original_name
from notebook_builder.cells.c60_backfill import backfill
from legacy_fixture import FOREIGN_WORKSPACE, discovered_row, downloaded_row, sha256, table_rows, write_legacy_database
from support import REPO_ROOT, open_test_context

NO_COURT = {"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"}
BACKUPS = 70      # more than one group of backfill's durable writes

# Runs one adoption in a child process that kills itself (SIGKILL: no cleanup of any kind) at `point`.
CHILD = r"""
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from notebook_builder.cells import c38_legacy, c60_backfill
from support import open_test_context

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

point = sys.argv[2]
if point == "kept, not copied":
    c38_legacy._backup = die
elif point == "inside the transaction":
    adopt_documents = c38_legacy._adopt_documents
    def documents_then_die(*args, **kwargs):
        adopt_documents(*args, **kwargs)
        die()
    c38_legacy._adopt_documents = documents_then_die
elif point == "copy not in place":
    c38_legacy.durable_rename = die
elif point == "backups half folded":
    store_group, calls = c60_backfill._backfill_store_group, []
    def second_group_dies(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            die()
        store_group(*args, **kwargs)
    c60_backfill._backfill_store_group = second_group_dies
elif point == "settling":
    c38_legacy.settle_adopted_rows = die
ctx = open_test_context(Path(sys.argv[1]), database=False, env={"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"})
c38_legacy.adopt(ctx, lambda ctx: c60_backfill.backfill(ctx, force=True))
"""
POINTS = ["kept, not copied", "inside the transaction", "copy not in place", "backups half folded", "settling"]


def build_legacy_workspace(root: Path, planned_court) -> bytes:
    ctx = open_test_context(root, database=False, env=NO_COURT)
    ok = planned_court.documents_with("ok")[:BACKUPS]
    rows = [downloaded_row(d, planned_court.pdf_bytes(d.document_id), f"{FOREIGN_WORKSPACE}/pdf_backup/{n}.pdf")
            for n, d in enumerate(ok)] + [discovered_row(d) for d in planned_court.documents_with("http_500")]
    write_legacy_database(ctx.db_path, rows)
    for number, document in enumerate(ok):
        (ctx.path("pdf_backup") / f"{number}.pdf").write_bytes(planned_court.pdf_bytes(document.document_id))
    ctx.close()
    return ctx.db_path.read_bytes()


def adopted_state(root: Path) -> dict:
    workspace = root / "workspace"
    database = workspace / "ky_court.sqlite"
    return {
        "documents": [row[:7] for row in table_rows(database, "documents", "document_id")],
        "legacy": [row[:4] for row in table_rows(database, "legacy_documents", "document_id")],
        "pdfs": sorted(p.name for p in (workspace / "pdf_by_hash").iterdir()),
        "store": sorted(str(p.relative_to(root / "store")) for p in (root / "store").rglob("*")
                        if p.is_file() and p.name != "status.json"),
    }


@pytest.fixture(scope="module")
def reference(planned_court, tmp_path_factory):
    root = tmp_path_factory.mktemp("reference")
    original = build_legacy_workspace(root, planned_court)
    ctx = open_test_context(root, database=False, env=NO_COURT)
    adopt(ctx, lambda ctx: backfill(ctx, force=True))
    ctx.close()
    return original, adopted_state(root)


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_mid_adoption_keeps_the_original_and_the_next_run_finishes_it(planned_court, tmp_path, reference,
                                                                              point):
    original, expected = reference
    assert build_legacy_workspace(tmp_path, planned_court) == original
    child = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), point, str(REPO_ROOT / "tests")],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert child.returncode == -9, child.stderr[-2000:]
    workspace = tmp_path / "workspace"
    kept = workspace / legacy_original_name(sha256(original))
    assert kept.read_bytes() == original                    # step 1 comes before anything else
    database = (workspace / "ky_court.sqlite").read_bytes()
    assert database == original or point in ("backups half folded", "settling")
    ctx = open_test_context(tmp_path, database=False, env=NO_COURT)
    result = adopt(ctx, lambda ctx: backfill(ctx, force=True))
    assert result.acted and json.loads(ctx.db.kv_get(KV_LEGACY_ADOPTION))["state"] == "done"
    ctx.close()
    assert adopted_state(tmp_path) == expected
    assert kept.read_bytes() == original
    assert not list((workspace / "tmp").iterdir())
