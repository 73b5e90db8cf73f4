"""The feeds of what changed: the store's feed.atom, serve's /changes and /feed.atom, and a saved search's feed.

Guarantees:
- `atom_feed(records, ...)` is an Atom 1.0 document (RFC 4287), one entry a change (c19 records
  with the document's description and title), newest first: its id is stable (the run, the document
  and the kind of change), `updated` is when the change was seen, and it links to the document's
  page (`document/<id>`) and, when the archive holds its PDF, to the PDF (`pdf_by_hash/<sha256>.pdf`,
  an enclosure). Links are relative: the store's feed sits beside the store's pdf_by_hash/, serve's
  feed is read from serve's root.
- `publish_changes(ctx, run)` ends a session's update: every run's `changes/<run>.jsonl` the store
  lacks (c48 `export_changes`, this run's too), then `feed.atom` (the FEED_ENTRIES newest changes),
  written to the workspace and mirrored to the store (replaced each run: it is a view of the log).
- `changes_page(folder, query_string)` is serve's /changes: the newest changes first
  (CHANGES_PAGE_ROWS, `?run=` one run's), each with its document's link and the court's day it
  was seen; `feed_answer(folder, query_string)` is serve's /feed.atom: the newest changes, or with
  `q` (and `court`, `type`) the new documents ("added") whose text matches that search (read as
  the search box reads it: any query is a query), so a feed reader follows a topic; a missing
  index is a 503. Both take `since=YYYY-MM-DD`, a day of the court read as the CLI's `changes
  --since` reads it (c00 `parse_day`, c19): the page notes a day it cannot read and leaves it out,
  the feed answers 400.
- The feeds and /changes are titled with the archive's court system (c28 `title`: "Kentucky
  appellate courts: what changed"); a saved search reads its case numbers and `court` in that
  system's forms and codes.
- `withdrawn_note(row)`: the line a withdrawn document's page shows ("withdrawn by the court on or
  before DAY").

Knobs read: COURT_SYSTEM (publish_changes; serve's feeds take the archive's).
"""
from __future__ import annotations

import html
import logging
import sqlite3
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterable

from .c00_config import court_day, parse_day, utc_now
from .c05_durable import atomic_write
from .c06_layout import DB_FILENAME, FEED_FILENAME, pdf_store_name
from .c10_database import Database, rows_in
from .c18_query_syntax import parse_query
from .c18_search_index import IndexMissingError, SearchFilters, open_search_index
from .c19_changes import ChangeLog
from .c28_court_words import SystemWords, words_of_config
from .c35_context import Context, archive_words
from .c48_update import export_changes

log_feed = logging.getLogger("kycourt.feed")

FEED_ENTRIES = 200             # changes in a feed (the newest)
FEED_SEARCHED = 10_000         # the newest added documents a saved search's feed looks among
CHANGES_PAGE_ROWS = 500        # changes on serve's /changes page
ATOM = "http://www.w3.org/2005/Atom"
FEED_ID = "urn:kycourt:changes"
_CHANGE_WORDS = {"added": "New", "withdrawn": "Withdrawn", "restored": "Restored", "changed": "Changed"}


def _with_documents(conn: sqlite3.Connection, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records with their document's description, title and withdrawn day (what a feed shows)."""
    found = {row["document_id"]: row for row in rows_in(
        conn, "SELECT document_id, description, case_title, withdrawn_on, status FROM documents "
              "WHERE document_id IN ({ids})", (record["document_id"] for record in records))}
    shown = []
    for record in records:
        row = found.get(record["document_id"])
        shown.append({**record, "description": row["description"] if row else None,
                      "case_title": row["case_title"] if row else None,
                      "withdrawn_on": row["withdrawn_on"] if row else None,
                      "held": bool(row) and row["status"] in ("downloaded", "extracted")})
    return shown


def entry_title(record: dict[str, Any]) -> str:
    """'New: 2019-CA-0012 · OPINION AFFIRMING' (a change's title in a feed and on the page)."""
    what = " · ".join(part for part in (record.get("case_number"), record.get("description")) if part)
    title = f"{_CHANGE_WORDS.get(record['change'], record['change'])}: {what or record['document_id']}"
    if record["change"] == "changed" and record.get("fields"):
        title += f" ({', '.join(record['fields'])})"
    return title


def atom_feed(records: Iterable[dict[str, Any]], *, title: str, feed_id: str = FEED_ID, self_link: str = "",
              root: str = "") -> bytes:
    """An Atom 1.0 feed of `records` (newest first, with `_with_documents`' fields); links are
    `root` + 'document/<id>' and `root` + 'pdf_by_hash/<sha256>.pdf'."""
    records = list(records)
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed")
    ET.SubElement(feed, f"{{{ATOM}}}id").text = feed_id
    ET.SubElement(feed, f"{{{ATOM}}}title").text = title
    ET.SubElement(feed, f"{{{ATOM}}}updated").text = records[0]["seen_at"] if records else utc_now()
    author = ET.SubElement(feed, f"{{{ATOM}}}author")
    ET.SubElement(author, f"{{{ATOM}}}name").text = "kycourt-colab"
    if self_link:
        ET.SubElement(feed, f"{{{ATOM}}}link", rel="self", href=self_link)
    for record in records:
        entry = ET.SubElement(feed, f"{{{ATOM}}}entry")
        ET.SubElement(entry, f"{{{ATOM}}}id").text = \
            f"{FEED_ID}:{record['run']}:{record['document_id']}:{record['change']}"
        ET.SubElement(entry, f"{{{ATOM}}}title").text = entry_title(record)
        ET.SubElement(entry, f"{{{ATOM}}}updated").text = record["seen_at"]
        ET.SubElement(entry, f"{{{ATOM}}}link", rel="alternate", type="text/html",
                      href=f"{root}document/{urllib.parse.quote(record['document_id'])}")
        if record.get("sha256") and record.get("held"):
            ET.SubElement(entry, f"{{{ATOM}}}link", rel="enclosure", type="application/pdf",
                          href=root + pdf_store_name(record["sha256"]))
        summary = [record.get("case_title"), record.get("court_code"), (record.get("filed_date") or "")[:10],
                   record.get("kind"), withdrawn_note(record)]
        ET.SubElement(entry, f"{{{ATOM}}}summary").text = " · ".join(str(part) for part in summary if part)
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="utf-8") + b"\n"


def withdrawn_note(row: Any) -> str:
    """"withdrawn by the court on or before DAY" for a document the court withdrew ('' otherwise)."""
    day = row.get("withdrawn_on") if isinstance(row, dict) else None
    return f"withdrawn by the court on or before {day}" if day else ""


def changes_title(words: SystemWords) -> str:
    """A changes feed's title: "Kentucky appellate courts: what changed"."""
    return f"{words.title}: what changed"


def publish_changes(ctx: Context, run: str | None) -> dict[str, Any]:
    """Every run's changes/<run>.jsonl the store lacks (`run`: this session's update, even with no
    change), then feed.atom when it changed (an empty feed once); returns what was written."""
    db = ctx.open_database()
    written = export_changes(ctx, db, current=run)
    records = _with_documents(db.conn, ChangeLog(db).newest(FEED_ENTRIES))
    path = ctx.path(FEED_FILENAME)
    data = atom_feed(records, title=changes_title(words_of_config(ctx.cfg)))
    # The workspace's feed.atom is the one the store holds (removed when its upload failed, so the
    # next session tries again); an empty feed's `updated` is the moment it was written: one is enough.
    feed = False
    if not (path.is_file() and (not records or path.read_bytes() == data)):
        atomic_write(path, data)
        feed = ctx.mirror.put(FEED_FILENAME, path, mutable=True)
        if not feed:
            path.unlink(missing_ok=True)
    if written:
        log_feed.info("changes: %s in the store; %s", ", ".join(written), FEED_FILENAME)
    return {"changes_files": written, "feed": feed, "entries": len(records)}


# ------------------------------------------------------------------ serve


def _query(query_string: str) -> dict[str, str]:
    return {key: items[-1].strip() for key, items in urllib.parse.parse_qs(query_string).items()}


def _since(values: dict[str, str]) -> str | None:
    """The `since` day of a query (None when there is none); ValueError for one that is no day."""
    return parse_day(values["since"]) if values.get("since") else None


def changes_page(folder: Path, query_string: str = "") -> tuple[str, str]:
    """(title, the body's HTML) of serve's /changes: the newest changes first (`run=`: one run's;
    `since=`: those seen on or after a day of the court system)."""
    values = _query(query_string)
    run = values.get("run") or None
    notes = []
    try:
        since = _since(values)
    except ValueError as exc:
        since = None
        notes.append(f"since {exc}: left out")
    db = Database.open_readonly(Path(folder) / DB_FILENAME)
    try:
        log = ChangeLog(db)
        records = (log.rows(run=run, since=since)[::-1][:CHANGES_PAGE_ROWS] if run
                   else log.newest(CHANGES_PAGE_ROWS, since=since))
        records = _with_documents(db.conn, records)
        update = log.last_update()
    except sqlite3.OperationalError:          # an archive from before the change log
        records, update = [], None
    finally:
        db.close()
    words = archive_words(folder)
    example = "CA" if "CA" in words.courts else next(iter(words.courts))
    body = ["<h1>What changed</h1>",
            '<p><a href="/feed.atom">Atom feed</a> of these changes; '
            f'<code>/feed.atom?q=words&amp;court={html.escape(example)}&amp;type=opinion</code> follows a search\'s '
            'new documents.</p>']
    body += [f'<p class="read-as">{html.escape(note)}.</p>' for note in notes]
    if since:
        body.append(f"<p>Seen on or after {html.escape(since)} (the court's day).</p>")
    if update:
        body.append(f"<p>Last update ({html.escape(update.get('at') or '')}): {html.escape(update.get('words') or '')}</p>")
    if not records and since:
        body.append(f"<p>No change seen on or after {html.escape(since)}.</p>")
    elif not records:
        body.append("<p>No change recorded yet: changes are recorded from the first run after the archive's "
                    "first complete crawl.</p>")
    body.append("<ul>" + "".join(
        f'<li>{html.escape(court_day(record["seen_at"], words.time_zone) or "")} · '
        f'<a href="/document/{urllib.parse.quote(record["document_id"])}">'
        f'{html.escape(entry_title(record))}</a>'
        + (f' · {html.escape(withdrawn_note(record))}' if record["change"] == "withdrawn" else "") + "</li>"
        for record in records) + "</ul>")
    return "What changed", "".join(body)


def feed_answer(folder: Path, query_string: str = "") -> tuple[int, str, bytes]:
    """(status, content type, body) of serve's /feed.atom (see the module docstring)."""
    values = _query(query_string)
    query = values.get("q") or ""
    try:
        since = _since(values)
    except ValueError as exc:
        return 400, "text/plain; charset=utf-8", f"since {exc}\n".encode()
    words = archive_words(folder)
    db = Database.open_readonly(Path(folder) / DB_FILENAME)
    try:
        log = ChangeLog(db)
        if not query:
            records = _with_documents(db.conn, log.newest(FEED_ENTRIES, since=since))
            return 200, "application/atom+xml; charset=utf-8", atom_feed(
                records, title=changes_title(words),
                self_link="/feed.atom" + (f"?{query_string}" if query_string else ""), root="/")
        added = log.newest(FEED_SEARCHED, change="added", since=since)
    finally:
        db.close()
    try:
        search = open_search_index(folder)
    except IndexMissingError as exc:
        return 503, "text/plain; charset=utf-8", f"{exc}\n".encode()
    try:
        matching = search.matching(parse_query(query, words.typed_numbers),
                                   SearchFilters(**words.court_filter(values.get("court")), kind=values.get("type") or None),
                                   [record["document_id"] for record in added])
    finally:
        search.close()
    db = Database.open_readonly(Path(folder) / DB_FILENAME)
    try:
        records = _with_documents(db.conn, [record for record in added if record["document_id"] in matching][:FEED_ENTRIES])
    finally:
        db.close()
    said = ", ".join(f"{name} {values[name]}" for name in ("court", "type", "since") if values.get(name))
    return 200, "application/atom+xml; charset=utf-8", atom_feed(
        records, title=f"New documents matching {query}" + (f" ({said})" if said else ""),
        feed_id=f"{FEED_ID}:search:{urllib.parse.urlencode(sorted(values.items()))}",
        self_link="/feed.atom?" + query_string, root="/")
