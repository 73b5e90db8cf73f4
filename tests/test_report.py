"""The coverage report: counts per year and court, the status.png chart, `kycourt-pipeline report`."""
from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

matplotlib_image = pytest.importorskip("matplotlib.image")

from support import mark_extracted

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c06_layout import DB_FILENAME
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c13_records import DownloadRecords, TextRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c97_report import (REPORT_SEGMENTS, coverage_figure, coverage_rows, draw_coverage_chart,
                                               report_table, show_report, write_report)

COURT_NAMES = {"SC": "Kentucky Supreme Court", "CA": "Kentucky Court of Appeals"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def build_workspace(workspace: Path, seed: int = 3) -> list[tuple[str, str, str]]:
    """A database of documents over several years, both courts and every status.

    Returns (year, court code, status) of each document, the truth the test
    computes its expected counts from.
    """
    rng = random.Random(seed)
    truth, rows = [], []
    for number in range(260):
        year = rng.choice(["2016", "2017", "2019", "2020", "2023"])
        court = rng.choice(["SC", "CA", "CA"])
        status = rng.choice(["discovered", "downloaded", "unparseable", "extracted", "extracted", "failed"])
        document_id = f"doc{number:04d}"
        rows.append({"document_id": document_id, "case_number": f"{year}-{court}-{number:04d}",
                     "court": COURT_NAMES[court], "shard": f"{year}-{court}"})
        truth.append((document_id, year, court, status))
    db = Database.open(workspace / DB_FILENAME)
    DiscoveryState(db).upsert_discovered(rows)
    for document_id, _year, _court, status in truth:
        if status in ("downloaded", "unparseable", "extracted"):
            sha = f"{int(document_id[3:]):064x}"
            DownloadRecords(db).mark_downloaded(document_id, sha256=sha, size_bytes=100, local_pdf=f"pdf_by_hash/{sha}.pdf")
        if status == "extracted":
            mark_extracted(db, document_id, pages=2, extracted_chars=900, likely_scanned=False)
        if status == "unparseable":    # downloaded for good: no run extracts it
            TextRecords(db).mark_extract_failed(document_id, "no parser opens it", reason="unparseable", spend_all=3)
        if status == "failed":
            DownloadRecords(db).mark_download_failed(document_id, http_status=404, error="not found")
    db.close()
    return [(year, court, status) for _, year, court, status in truth]


def expected_coverage(truth: list[tuple[str, str, str]]) -> list[dict]:
    statuses = Counter(truth)
    expected = []
    for year, court in sorted({(year, court) for year, court, _ in truth},
                              key=lambda key: (key[0], ["SC", "CA"].index(key[1]))):
        count = {status: statuses[(year, court, status)]
                 for status in ("discovered", "downloaded", "unparseable", "extracted", "failed")}
        expected.append({"year": year, "court": court,
                         "discovered": sum(count.values()),
                         "downloaded": count["downloaded"] + count["unparseable"] + count["extracted"],
                         "extracted": count["extracted"], "failed": count["failed"],
                         "not_extractable": count["unparseable"]})
    return expected


def assert_png_has_a_chart(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_MAGIC
    pixels = matplotlib_image.imread(str(path))
    assert pixels.shape[0] > 300 and pixels.shape[1] > 600
    assert pixels.std() > 0.05                                   # not a blank canvas
    colours = {tuple(pixel) for pixel in (pixels[::3, ::3, :3] * 255).astype(int).reshape(-1, 3)}
    assert len(colours) > 50                                     # bars, text, anti-aliasing


@pytest.fixture
def workspace(tmp_path):
    """The workspace, and its store beside it (tmp_path / "store", empty)."""
    workspace = tmp_path / "workspace"
    truth = build_workspace(workspace)
    (tmp_path / "store").mkdir()
    return workspace, truth


def test_coverage_rows_count_every_year_court_and_status(workspace):
    path, truth = workspace
    db = Database.open(path / DB_FILENAME)
    try:
        assert coverage_rows(db, load_config({})) == expected_coverage(truth)
    finally:
        db.close()


def test_coverage_rows_merge_court_names_into_codes(tmp_path):
    db = Database.open(tmp_path / DB_FILENAME)
    DiscoveryState(db).upsert_discovered([
        {"document_id": "a", "case_number": "2020-SC-0001", "court": "Kentucky Supreme Court"},
        {"document_id": "b", "case_number": "2020-SC-0002", "court": "SC"},
        {"document_id": "c", "case_number": "2020-CA-0003", "court": "Court of Appeals"},
        {"document_id": "d", "case_number": None, "court": None},
    ])
    try:
        assert [(row["year"], row["court"], row["discovered"]) for row in coverage_rows(db, load_config({}))] == [
            ("2020", "SC", 2), ("2020", "CA", 1), ("unknown", "unknown", 1)]
    finally:
        db.close()


def test_chart_is_a_png_with_bars_for_each_court(workspace, tmp_path):
    path, truth = workspace
    db = Database.open(path / DB_FILENAME)
    try:
        rows = coverage_rows(db, load_config({}))
    finally:
        db.close()
    png = draw_coverage_chart(rows, tmp_path / "chart" / "status.png")
    assert png == tmp_path / "chart" / "status.png"
    assert_png_has_a_chart(png)
    assert not list(png.parent.glob(".*.tmp"))


@pytest.mark.parametrize("years", [1, 5, 40])
def test_the_charts_legend_shows_every_label_whole_inside_the_figure(years):
    rows = [{"year": str(2000 + number), "court": court, "discovered": 5, "downloaded": 4, "extracted": 2,
             "failed": 1, "not_extractable": 1} for number in range(years) for court in ("SC", "CA")]
    figure = coverage_figure(rows)
    figure.draw_without_rendering()
    (legend,) = figure.legends
    extent, frame = legend.get_window_extent(), figure.bbox
    assert frame.x0 <= extent.x0 and extent.x1 <= frame.x1 and frame.y0 <= extent.y0, (extent, frame)
    assert [text.get_text() for text in legend.get_texts()] == [label for _, label, _ in REPORT_SEGMENTS]


def test_empty_workspace_still_draws_a_chart_that_says_so(tmp_path):
    png = draw_coverage_chart([], tmp_path / "empty.png")
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert matplotlib_image.imread(str(png)).std() > 0.01       # the message is drawn


def test_table_totals_statuses_queues_and_backlog(workspace):
    path, truth = workspace
    db = Database.open(path / DB_FILENAME)
    try:
        table = report_table(db, load_config({}, WORKSPACE=str(path)))
    finally:
        db.close()
    statuses = Counter(status for _, _, status in truth)
    all_line = next(line for line in table.splitlines() if line.startswith("all"))
    assert all_line.split()[1:] == [f"{n:,}" for n in (
        len(truth), statuses["extracted"], statuses["unparseable"], statuses["downloaded"], statuses["failed"],
        statuses["discovered"])]
    sc_line = next(line for line in table.splitlines() if line.startswith("SC "))
    assert int(sc_line.split()[1]) == sum(1 for _, court, _ in truth if court == "SC")
    queue_line = next(line for line in table.splitlines() if line.startswith("queues:"))
    assert f"download {statuses['discovered']:,}" in queue_line          # failures here are 404s: permanent
    assert f"extract {statuses['downloaded']:,}" in queue_line
    assert f"permanent failures {statuses['failed']:,}" in queue_line
    final_line = next(line for line in table.splitlines() if line.startswith("for good:"))
    assert final_line == (f"for good: {statuses['unparseable']} PDFs not extractable (unparseable "
                          f"{statuses['unparseable']}), {statuses['failed']} failed for good, 0 withheld, "
                          f"0 out of attempts, 0 still retrying")


def test_write_report_writes_workspace_png_and_mirrors_it_to_the_store(workspace, tmp_path):
    path, truth = workspace
    cfg = load_config({}, WORKSPACE=str(path), STORE=str(tmp_path / "store"))
    text = write_report(cfg)
    png = path / "status.png"
    assert f"chart: {png}" in text
    assert_png_has_a_chart(png)
    assert (tmp_path / "store" / "status.png").read_bytes() == png.read_bytes()
    assert "store: status.png written" in text
    assert text.splitlines()[0].startswith("court")


def test_write_report_on_a_missing_workspace_says_so_and_still_draws(tmp_path):
    cfg = load_config({}, WORKSPACE=str(tmp_path / "nothing"), STORE=str(tmp_path / "store"))
    text = write_report(cfg, tmp_path / "out.png")
    assert "no database" in text
    assert (tmp_path / "out.png").read_bytes()[:8] == PNG_MAGIC


def test_show_report_uses_the_context_and_its_mirror(workspace, tmp_path, capsys):
    path, truth = workspace
    ctx = open_context(load_config({}, WORKSPACE=str(path), STORE=str(tmp_path / "store")))
    ctx.open_database()
    try:
        text = show_report(ctx)
    finally:
        ctx.close()
    assert text in capsys.readouterr().out
    assert_png_has_a_chart(path / "status.png")
    assert (tmp_path / "store" / "status.png").is_file()


def test_cli_report_exits_0_and_writes_the_file(workspace, tmp_path):
    path, truth = workspace
    store = tmp_path / "store"
    result = subprocess.run([sys.executable, "-m", "notebook_builder", "report", "--workspace", str(path),
                             "--store", str(store)], capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    assert_png_has_a_chart(path / "status.png")
    assert (store / "status.png").is_file()
    assert "all" in result.stdout and "queues: download" in result.stdout


def test_cli_report_output_flag_chooses_the_png_path(workspace, tmp_path):
    path, truth = workspace
    (tmp_path / "elsewhere").mkdir()
    output = tmp_path / "elsewhere" / "coverage.png"
    result = subprocess.run([sys.executable, "-m", "notebook_builder", "report", "--workspace", str(path),
                             "--store", str(tmp_path / "store"), "--output", str(output)],
                            capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    assert_png_has_a_chart(output)
    assert not (path / "status.png").exists()


def test_the_status_cell_reuses_the_run_cells_store_when_it_is_the_same_one(tmp_path):
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c20_store import LocalStore
    from notebook_builder.cells.c95_run import RunReport
    from notebook_builder.cells.c97_report import status_cell_context
    cfg = load_config({"KY_WORKSPACE": str(tmp_path / "w"), "KY_STORE": str(tmp_path / "s")})
    run_store = LocalStore(tmp_path / "s")
    assert status_cell_context(cfg, RunReport(cfg=cfg, store=run_store)).store is run_store
    other = cfg.replace(STORE=str(tmp_path / "elsewhere"))
    fresh = status_cell_context(other, RunReport(cfg=cfg, store=run_store)).store
    assert fresh is not run_store and fresh.root == tmp_path / "elsewhere"
    assert status_cell_context(cfg, None).store is not run_store       # no run cell before it


def test_cli_report_output_into_a_missing_folder_is_one_line_and_creates_nothing(workspace, tmp_path, capsys):
    from notebook_builder.cli import main
    path, truth = workspace
    store = tmp_path / "store"
    output = tmp_path / "nonexistent" / "dir" / "x.png"
    assert main(["report", "--workspace", str(path), "--store", str(store), "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the folder {output.parent} does not exist" in err
    assert not (tmp_path / "nonexistent").exists() and list(store.iterdir()) == []
    assert not (path / "status.png").exists()
