"""Report: the corpus' coverage per year and court as a chart (status.png) and a table.

Guarantees:
- `coverage_rows(db, cfg)` is read from `WorkQueues.coverage_by_year_court()`
  (one query, the database's own definition) and merged by court code: per
  case-number year and court (the court system's codes, c28_court_words:
  Kentucky's SC, CA; a court name the code cannot be told from keeps its
  name; where the number's form has no year, the filed day's), `discovered`
  (every document found), `downloaded` (downloaded or extracted), `extracted`, `failed` and `not_extractable`
  (downloaded, out of extract attempts: no run extracts them).
- `draw_coverage_chart(rows, path)` draws one panel per court, one stacked
  bar per year: extracted, not extractable, downloaded and waiting for
  extraction, failed, and discovered only; the title names the court system's
  archive and carries the totals,
  each named by the state it is in; the legend, in as many columns as the
  figure's width holds, shows every label whole. It uses matplotlib's
  object API (`Figure`), never pyplot, so it needs no backend switch and
  leaves Colab's inline display alone. The PNG is written to a temp name and
  renamed, so a reader (or the store mirror) never sees half a file.
- `write_report(cfg)` (`kycourt-pipeline report`) reads the workspace
  database read-only, writes workspace/status.png (or `output`, whose
  folder must exist: `ReportError` says so and nothing is created), mirrors
  it to the store as `status.png` (a mutable name), and returns the table
  text and the PNG's path. A store it cannot reach is said in the text, not
  raised; a workspace it cannot write (a read-only copy) gets nothing.
- `show_report(ctx)` is the notebook's status cell: the same chart and
  table, displayed inline when IPython is there.
- The table says when every opinion, document and detail will be archived
  at the current pacing (c35 `crawl_status`, in `crawl_words`' words), and
  ends with the documents the court lists but withholds (`withheld_lines`:
  their count and the first REPORT_WITHHELD_SHOWN) and those it does not serve
  to the public (`not_public_lines`: their count, why, the first shown).

Knobs read: COURT_SYSTEM (its words), WORKSPACE, STORE (write_report), MAX_ATTEMPTS and
MAX_EXTRACT_ATTEMPTS (through the queue sizes), PACING, PACING_SEARCH, PACING_DL
and CASE_DETAILS (through the projection).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Iterable

from .c00_config import DEFAULT_COURT_SYSTEM, Config, PipelineError, StoreError, count_noun, load_config, utc_now
from .c05_durable import atomic_write
from .c06_layout import DB_FILENAME, REPORT_PNG_NAME
from .c10_database import KV_ARCHIVE_UPDATED_AT, KV_CHECKPOINT_SEQ, KV_DISCOVERY_CONVERGED_AT, Database, is_sqlite_file
from .c12_queues import WorkQueues, not_public_reason
from .c15_discovery_state import DiscoveryState, coverage_gaps
from .c28_court_words import SystemWords, system_words, words_of_config
from .c17_snapshots import StoreState
from .c34_mirror import StoreMirror
from .c35_context import (Context, crawl_status, crawl_words, final_states_line, not_public_words, open_context,
                          open_store, read_only_workspace)
from .c48_update import last_update_lines
from .c87_index import year_of

log_report = logging.getLogger("kycourt.report")

REPORT_COUNT_FIELDS = ("discovered", "downloaded", "extracted", "failed", "not_extractable")
# The chart's stack, bottom to top: (segment, legend label, colour).
REPORT_SEGMENTS = (
    ("extracted", "extracted", "#2e7d32"),
    ("not_extractable", "downloaded, not extractable (for good)", "#8d6e63"),
    ("downloaded_only", "downloaded, waiting for extraction", "#42a5f5"),
    ("failed", "failed", "#d32f2f"),
    ("discovered_only", "discovered, not yet downloaded", "#bdbdbd"),
)
_REPORT_UNKNOWN = "unknown"


class ReportError(PipelineError):
    """The report cannot be written where it was asked to be (exit status 2)."""


# ------------------------------------------------------------- the counts


def _report_court_code(court: str | None, words: SystemWords) -> str:
    """The court's code from its name as the court's API gives it ("Kentucky Court of Appeals")."""
    if not court:
        return _REPORT_UNKNOWN
    text = court.strip()
    if text.upper() in words.courts:
        return text.upper()
    return words.code_of_court(text) or text


def _report_court_rank(court: str, words: SystemWords) -> tuple[int, str]:
    order = list(words.courts)
    return (order.index(court) if court in order else len(order), court)


def coverage_rows(db: Database, cfg: Config) -> list[dict[str, Any]]:
    """Per year and court: discovered, downloaded (incl. extracted), extracted, failed and not
    extractable; sorted."""
    words = words_of_config(cfg)
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    # Another system's year: its case number's where the form has one, else the filed day's (c87 year_of).
    case_year = None if words.kentucky else (lambda number, filed: year_of(number, filed, words))
    for row in WorkQueues(db).coverage_by_year_court(cfg, case_year):
        year = str(row["year"]) if row["year"] and str(row["year"]).isdigit() else _REPORT_UNKNOWN
        court = _report_court_code(row["court"], words)
        entry = merged.setdefault((year, court), {"year": year, "court": court,
                                                  **dict.fromkeys(REPORT_COUNT_FIELDS, 0)})
        for name in REPORT_COUNT_FIELDS:
            entry[name] += int(row[name] or 0)
    return sorted(merged.values(), key=lambda entry: (entry["year"] == _REPORT_UNKNOWN, entry["year"],
                                                      _report_court_rank(entry["court"], words)))


def _report_segments(row: dict[str, Any]) -> dict[str, int]:
    """A row's documents split by status, as stacked in the chart (they add up to `discovered`)."""
    return {
        "extracted": row["extracted"],
        "not_extractable": row["not_extractable"],
        "downloaded_only": row["downloaded"] - row["extracted"] - row["not_extractable"],
        "failed": row["failed"],
        "discovered_only": row["discovered"] - row["downloaded"] - row["failed"],
    }


def _report_totals(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    totals = dict.fromkeys(REPORT_COUNT_FIELDS, 0)
    for row in rows:
        for name in REPORT_COUNT_FIELDS:
            totals[name] += row[name]
    return totals


# -------------------------------------------------------------- the chart


def _report_year_axis(years: Iterable[str]) -> list[str]:
    """Every year from the first to the last (a year with no documents shows as a gap), then 'unknown'."""
    seen = set(years)
    numbered = sorted(int(year) for year in seen if year != _REPORT_UNKNOWN)
    axis = [str(year) for year in range(numbered[0], numbered[-1] + 1)] if numbered else []
    return axis + ([_REPORT_UNKNOWN] if _REPORT_UNKNOWN in seen else [])


def draw_coverage_chart(rows: list[dict[str, Any]], path: str | os.PathLike, words: SystemWords | None = None) -> Path:
    """Stacked bars per year, one panel per court, written as a PNG at `path`."""
    figure = coverage_figure(rows, words)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda handle: figure.savefig(handle, format="png"))
    return path


def coverage_figure(rows: list[dict[str, Any]], words: SystemWords | None = None):
    """The coverage chart as a matplotlib Figure (object API: no pyplot, no backend switch), titled with
    the words of the court system (None: Kentucky's)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    words = words or system_words(DEFAULT_COURT_SYSTEM)
    courts = sorted({row["court"] for row in rows}, key=lambda court: _report_court_rank(court, words))
    years = _report_year_axis(row["year"] for row in rows)
    totals = _report_totals(rows)
    segments_total = _report_segments(totals) if rows else dict.fromkeys(
        (name for name, _, _ in REPORT_SEGMENTS), 0)

    width = max(8.0, 2.5 + 0.3 * len(years))
    figure = Figure(figsize=(width, 1.4 + 2.6 * max(1, len(courts))), dpi=110, layout="constrained")
    figure.suptitle(
        f"{_report_documents_title(words)}: {totals['discovered']:,} discovered (as of {utc_now()})\n"
        f"{segments_total['extracted']:,} extracted · {segments_total['not_extractable']:,} not extractable · "
        f"{segments_total['downloaded_only']:,} waiting for extraction · {totals['failed']:,} failed · "
        f"{segments_total['discovered_only']:,} not yet downloaded",
        fontsize=11)
    if not rows:
        axes = figure.subplots()
        axes.text(0.5, 0.5, "no documents discovered yet", ha="center", va="center",
                  fontsize=14, color="#616161", transform=axes.transAxes)
        axes.set_axis_off()
    else:
        panels = figure.subplots(len(courts), 1, sharex=True, squeeze=False)[:, 0]
        by_key = {(row["year"], row["court"]): row for row in rows}
        for axes, court in zip(panels, courts):
            court_rows = [by_key.get((year, court)) for year in years]
            bottoms = [0] * len(years)
            for name, _label, colour in REPORT_SEGMENTS:
                heights = [_report_segments(row)[name] if row else 0 for row in court_rows]
                axes.bar(range(len(years)), heights, bottom=bottoms, color=colour, width=0.8,
                         edgecolor="white", linewidth=0.3)
                bottoms = [low + height for low, height in zip(bottoms, heights)]
            court_total = sum(row["discovered"] for row in court_rows if row)
            axes.set_title(f"{words.court_title(court)}: {court_total:,} documents",
                           fontsize=10, loc="left")
            axes.set_ylabel("documents")
            axes.yaxis.set_major_locator(MaxNLocator(integer=True))
            axes.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
            axes.grid(axis="y", color="#e0e0e0", linewidth=0.6)
            axes.set_axisbelow(True)
            axes.spines[["top", "right"]].set_visible(False)
            axes.set_xlim(-0.6, len(years) - 0.4)
            axes.set_ylim(0, max(1, max(bottoms)) * 1.08)   # headroom above the tallest bar
        bottom = panels[-1]
        bottom.set_xticks(range(len(years)), [str(year) for year in years],
                          rotation=90 if len(years) > 16 else 0, fontsize=8 if len(years) > 16 else 9)
        bottom.set_xlabel("year of the case number" if words.kentucky else "year of the case number, else of the filing")
        _report_legend(figure, [Patch(color=colour, label=label) for _, label, colour in REPORT_SEGMENTS])
    return figure


def _report_documents_title(words: SystemWords) -> str:
    """'Kentucky appellate court documents' (the chart's title names the archive)."""
    title = words.title
    return (title[:-1] if title.endswith("courts") else title) + " documents"


def _report_legend(figure, handles: list) -> None:
    """The legend under the panels, in as many columns as the figure's width holds whole."""
    for columns in range(len(handles), 0, -1):
        legend = figure.legend(handles=handles, loc="outside lower center", ncols=columns, frameon=False,
                               fontsize=9)
        figure.draw_without_rendering()
        extent, frame = legend.get_window_extent(), figure.bbox
        if columns == 1 or (extent.x0 >= frame.x0 and extent.x1 <= frame.x1):
            return
        legend.remove()


# -------------------------------------------------------------- the table


def report_table(db: Database, cfg: Config) -> str:
    """Documents per court by status, the queues, permanent failures and the store backlog."""
    rows = coverage_rows(db, cfg)
    words = words_of_config(cfg)
    columns = ("documents",) + tuple(name for name, _, _ in REPORT_SEGMENTS)
    headers = ("documents", "extracted", "unreadable", "downloaded", "failed", "discovered")
    by_court: dict[str, dict[str, int]] = {}
    for row in rows:
        entry = by_court.setdefault(row["court"], dict.fromkeys(columns, 0))
        entry["documents"] += row["discovered"]
        for name, value in _report_segments(row).items():
            entry[name] += value
    all_courts = dict.fromkeys(columns, 0)
    for entry in by_court.values():
        for name in columns:
            all_courts[name] += entry[name]
    label_width = max([5] + [len(court) for court in by_court])
    lines = [f"{'court':<{label_width}}  " + "  ".join(f"{header:>10}" for header in headers)]
    for court in sorted(by_court, key=lambda court: _report_court_rank(court, words)) + ["all"]:
        entry = all_courts if court == "all" else by_court[court]
        lines.append(f"{court:<{label_width}}  " + "  ".join(f"{entry[name]:>10,}" for name in columns))
    queues = WorkQueues(db).queue_sizes(cfg)
    lines.append("(columns after 'documents' are states: unreadable = downloaded, not extractable for good; "
                 "downloaded = waiting for extraction; discovered = not yet downloaded)")
    lines.append(f"queues: download {queues['download']:,}, extract {queues['extract']:,}; "
                 f"permanent failures {WorkQueues(db).permanent_failure_count():,}; "
                 f"store backlog {StoreState(db).store_pending_count():,}; "
                 f"checkpoint {db.kv_get(KV_CHECKPOINT_SEQ, '0')}; "
                 f"discovery converged: {'yes' if db.kv_get(KV_DISCOVERY_CONVERGED_AT) else 'not yet'}")
    lines.append(f"for good: {final_states_line(WorkQueues(db).final_states(cfg))}")
    crawl = crawl_status(db, cfg, queued=queues["download"])
    if crawl is not None:
        lines.append(f"archive: {crawl_words(crawl)}")
    lines += last_update_lines(db)          # what the last update found, in words (c48)
    lines += coverage_audit_lines(db)
    lines += withheld_lines(db)
    lines += not_public_lines(db)
    return "\n".join(lines)


REPORT_WITHHELD_SHOWN = 20


def withheld_lines(db: Database) -> list[str]:
    """The documents the court lists but withholds (documentAvailable false): records, never requested."""
    count = DiscoveryState(db).withheld_count()
    if not count:
        return []
    lines = [f"withheld by the court: {count:,} document{'' if count == 1 else 's'} listed with documentAvailable "
             "false (never requested; a later sweep that sees one available queues it)"]
    for row in DiscoveryState(db).withheld_documents(REPORT_WITHHELD_SHOWN):
        lines.append(f"  withheld: {row['case_number'] or '?'}  {row['document_id']}  "
                     f"{row['description'] or row['document_name'] or ''}".rstrip())
    if count > REPORT_WITHHELD_SHOWN:
        lines.append(f"  ... and {count - REPORT_WITHHELD_SHOWN:,} more")
    return lines


def not_public_lines(db: Database) -> list[str]:
    """The documents the court lists and does not serve to the public: their count, why, the first
    REPORT_WITHHELD_SHOWN (records, never requested)."""
    counts = WorkQueues(db).not_public_counts()
    if not counts["not_public"]:
        return []
    lines = [f"not public at the court: {not_public_words(counts)}: kept as records, never requested"]
    for row in WorkQueues(db).not_public_documents(limit=REPORT_WITHHELD_SHOWN):
        lines.append(f"  not public ({not_public_reason(row['access_state'])}): {row['case_number'] or '?'}  "
                     f"{row['document_id']}  {row['description'] or ''}".rstrip())
    if counts["not_public"] > REPORT_WITHHELD_SHOWN:
        lines.append(f"  ... and {counts['not_public'] - REPORT_WITHHELD_SHOWN:,} more")
    return lines


REPORT_GAPS_SHOWN = 20


def coverage_audit_lines(db: Database) -> list[str]:
    """Per shard, what the court announced next to what the archive holds; the gaps listed."""
    audit = DiscoveryState(db).coverage_audit()
    if not audit:
        return ["coverage audit: no shard paged yet"]
    gaps = coverage_gaps(audit)
    strategy = audit[0]["strategy"] or "documents"
    unit = "cases" if strategy == "cases" else "documents"
    announced = sum(row["announced"] or 0 for row in audit)
    held = sum(row[unit] for row in audit)
    lines = [f"coverage audit ({strategy}): {count_noun(len(audit), 'shard')}, the court announced "
             f"{announced:,} {unit}, the archive holds {held:,}; {count_noun(len(gaps), 'shard')} short"
             + (f", last brought up to date {db.kv_get(KV_ARCHIVE_UPDATED_AT)}" if db.kv_get(KV_ARCHIVE_UPDATED_AT) else "")]
    for gap in gaps[:REPORT_GAPS_SHOWN]:
        lines.append(f"  gap: {gap['shard']}: {gap['held']:,} of {gap['announced']:,} {gap['unit']}")
    if len(gaps) > REPORT_GAPS_SHOWN:
        lines.append(f"  ... and {len(gaps) - REPORT_GAPS_SHOWN} more")
    return lines


# ------------------------------------------------------------ entry points


def _report_open_readonly(db_path: Path) -> Database | None:
    if not (db_path.is_file() and is_sqlite_file(db_path)):
        return None
    return Database.open_readonly(db_path)


def _report_mirror(mirror: StoreMirror, png: Path) -> str:
    if mirror.put(REPORT_PNG_NAME, png, mutable=True):
        return f"store: {REPORT_PNG_NAME} written to {mirror.store.description}"
    return f"store: {REPORT_PNG_NAME} not written ({mirror.lagging})"


def _report_build(db: Database | None, cfg: Config, png: Path | None) -> str:
    """The table; the chart drawn to `png` (None: not drawn)."""
    if db is None:
        table = f"no database in {cfg.WORKSPACE}: nothing discovered yet"
        rows: list[dict[str, Any]] = []
    else:
        table = report_table(db, cfg)
        rows = coverage_rows(db, cfg)
    if png is not None:
        draw_coverage_chart(rows, png, words_of_config(cfg))
    return table


def write_report(cfg: Config, output: str | os.PathLike | None = None) -> str:
    """The chart and table of the workspace in `cfg`; returns the table, the PNG path, the store's
    answer. A workspace this process cannot write (a read-only copy) gets nothing written: the
    chart only to `output`, and nothing to the store."""
    db_path = Path(cfg.WORKSPACE) / DB_FILENAME
    png = Path(output) if output else Path(cfg.WORKSPACE) / REPORT_PNG_NAME
    if output and not png.parent.is_dir():
        raise ReportError(f"--output {output}: the folder {png.parent} does not exist")
    copy = read_only_workspace(cfg.WORKSPACE)
    db = _report_open_readonly(db_path)
    try:
        table = _report_build(db, cfg, None if copy and not output else png)
    finally:
        if db is not None:
            db.close()
    if copy:
        chart = f"chart: {png}" if output else (f"chart: not written (the workspace {cfg.WORKSPACE} is read-only; "
                                                "--output PNG writes it elsewhere)")
        return f"{table}\n{chart}\nstore: {REPORT_PNG_NAME} not written (a read-only copy writes nothing)"
    try:
        stored = _report_mirror(StoreMirror(open_store(cfg)), png)
    except StoreError as exc:
        stored = f"store: {REPORT_PNG_NAME} not written ({exc})"
    log_report.info("coverage chart written to %s", png)
    return f"{table}\nchart: {png}\n{stored}"


def show_report(ctx: Context) -> str:
    """The notebook's status cell: chart to workspace and store, table printed, chart displayed."""
    png = ctx.path(REPORT_PNG_NAME)
    db = ctx.db if ctx.db is not None else _report_open_readonly(ctx.db_path)
    try:
        table = _report_build(db, ctx.cfg, png)
    finally:
        if db is not None and db is not ctx.db:
            db.close()
    text = f"{table}\nchart: {png}\n{_report_mirror(ctx.mirror, png)}"
    print(text)
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return text
    if get_ipython() is not None:
        display(Image(filename=str(png)))
    return text


def status_cell_context(cfg: Config, run_report: Any = None) -> Context:
    """The status cell's context: the run cell's store again when it is the same one (no second
    Drive sign-in or folder lookup), else a store of its own."""
    run_cfg = getattr(run_report, "cfg", None)
    same = run_cfg is not None and (run_cfg.STORE, run_cfg.DRIVE_FOLDER) == (cfg.STORE, cfg.DRIVE_FOLDER)
    return open_context(cfg, store=getattr(run_report, "store", None) if same else None)


if __name__ == "__main__":  # Status and coverage chart of the archive, after the run
    REPORT_TEXT = show_report(status_cell_context(globals().get("CFG") or load_config(),
                                                  globals().get("RUN_REPORT")))
