"""scripts/smoke_local.py: the local smoke run over a real v1.2 database, offline, never writing it."""
from __future__ import annotations

import os
import subprocess
import sys

from legacy_fixture import discovered_row, downloaded_row, extracted_row, write_legacy_database
from support import REPO_ROOT


def smoke(*args):
    env = {**os.environ, "KY_PROGRESS": "0"}
    return subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "smoke_local.py"), *map(str, args)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_smoke_run_reports_what_a_user_can_act_on_and_never_writes_the_original(planned_court, tmp_path):
    ok = planned_court.documents_with("ok")
    backups = tmp_path / "backups"
    backups.mkdir()
    rows = []
    for number, document in enumerate(ok[:3]):
        (backups / f"{number}.pdf").write_bytes(planned_court.pdf_bytes(document.document_id))
        rows.append(downloaded_row(document, planned_court.pdf_bytes(document.document_id),
                                   f"/content/ky_court_workspace/pdf_backup/{number}.pdf"))
    (backups / "error.pdf").write_bytes(b"<html>503</html>")
    rows.append(extracted_row(ok[3], planned_court.pdf_bytes(ok[3].document_id), "/gone.pdf"))
    rows += [discovered_row(document) for document in ok[4:9]]
    database = write_legacy_database(tmp_path / "v12" / "ky_court.sqlite", rows)
    before = {path.name: path.read_bytes() for path in database.parent.iterdir()}
    backups_before = sorted(path.name for path in backups.iterdir())
    done = smoke("--database", database, "--backups", backups, "--keep", tmp_path / "scratch")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "rows as v1.2 left them: 9 (discovered 5, downloaded 3, extracted 1, failed 0)" in out
    assert "rows after adoption and the local stages: 9 (discovered 6, downloaded 0, extracted 3, failed 0)" in out
    assert "1 rows claim a PDF that neither the backups nor this scratch store hold" in out and ok[3].document_id in out
    assert "1 backups are not PDFs (skipped, left where they are): error.pdf" in out
    assert "6 PDFs (0 in the download queue, 6 once discovery has confirmed their ids)" in out
    assert "h at the default pacing" in out and "discovery sweeps once" in out
    assert "the original is unchanged" in out
    assert {path.name: path.read_bytes() for path in database.parent.iterdir()} == before
    assert sorted(path.name for path in backups.iterdir()) == backups_before


def test_a_database_that_cannot_be_adopted_is_one_line_and_exit_2(tmp_path):
    database = tmp_path / "ky_court.sqlite"
    write_legacy_database(database, [{"document_id": "a" * 64}, {"document_id": "a" * 64}], primary_key=False)
    done = smoke("--database", database)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "cannot be adopted" in done.stderr and "more than once" in done.stderr
    assert smoke("--database", tmp_path / "missing.sqlite").returncode == 2
