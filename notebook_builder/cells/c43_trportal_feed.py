"""The opinion feed of a TR Portal court system: every opinion it shows, found before anything else.

Guarantees:
- One feed a court system's opinion mode (FEEDS): Nevada's document search by opinion type, per
  court (c26 `opinion_types`: published opinions and unpublished orders), newest first and, where
  it holds more than the results window, oldest first for the rest; Alabama's and Florida's
  publications, per court, newest first, then each one's detail; Oregon's, North Dakota's and
  Wyoming's none (their dispositional docket entries are the walk's, c49).
- `step()` is one unit (a page, or a publication's detail): its documents are written through
  the `write` the discovery gives (c49: committed, watched in an update) before it returns;
  None on a stop, True once the feed has no unit left. A page that fails is counted (`errors`)
  and its task given up for this run; `complete` says every opinion the feed shows was listed.
- `since` (FIRST_YEAR's first day, or an update's later one): newest first, the feed stops at the
  first row filed, or released, before it; `until` (LAST_YEAR's last day): rows after it, and
  rows before `since` read oldest first, are not written.
- The cursor (the task, its order and page, the publications waiting) is kv `opinion_feed`,
  written after each unit: a killed feed resumes at its page.

Knobs read: PAGE_SIZE (through the client), and the clock's stop.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
from typing import Any, Callable

from .c00_config import StopRequested, TransientFetchError
from .c10_database import Database
from .c25_court import ShapeProblem
from .c26_trportal import PATHS, CourtDirectory, feed_document, instant_of, publication_documents
from .c30_client import SearchRefused
from .c31_court_client import PastWindow, TRPortalClient

log_tr_feed = logging.getLogger("kycourt.discover")

KV_OPINION_FEED = "opinion_feed"
FEED_PUBLICATION_PAGE = 100      # publications a page of their list (a few a week a court)


class OpinionFeed:
    """A court system's opinion feed (see the module docstring); this one shows none."""

    def __init__(self, db: Database, client: TRPortalClient, directory: CourtDirectory,
                 write: Callable[[list[dict]], int], since: _dt.date | None, clock, until: _dt.date | None = None):
        self.db, self.client, self.court, self.directory = db, client, client.court, directory
        self.write, self.since, self.until, self.clock = write, since, until, clock
        self.errors = 0
        self.rows = 0
        try:
            self.cursor: dict[str, Any] = json.loads(db.kv_get(KV_OPINION_FEED) or "{}")
        except ValueError:
            self.cursor = {}
        self.cursor.setdefault("task", 0)

    @property
    def tasks(self) -> list:
        return []

    @property
    def complete(self) -> bool:
        """Every opinion the feed shows is listed: each task done, none failed, none out of reach."""
        return self.cursor["task"] >= len(self.tasks) and not self.errors and not self.cursor.get("unreached")

    def left(self) -> int:
        return max(0, len(self.tasks) - self.cursor["task"])

    def step(self) -> bool | None:
        if self.cursor["task"] >= len(self.tasks):
            return True
        if self.clock.should_stop():
            return None
        try:
            done = self._unit(self.tasks[self.cursor["task"]])
        except StopRequested:
            return None
        except (TransientFetchError, SearchRefused, ShapeProblem) as exc:
            log_tr_feed.warning("opinion feed %s: %s; the walk lists those opinions too", self.tasks[self.cursor["task"]], exc)
            self.errors += 1
            done = True
        if done:
            self.cursor = {"task": self.cursor["task"] + 1, "unreached": self.cursor.get("unreached", 0)}
        self._save()
        return self.cursor["task"] >= len(self.tasks)

    def _unit(self, task) -> bool:
        raise NotImplementedError

    def _save(self) -> None:
        self.db.kv_set(KV_OPINION_FEED, json.dumps(self.cursor, sort_keys=True))

    def _before_since(self, stamp: Any) -> bool:
        moment = instant_of(stamp)
        return self.since is not None and moment is not None and moment.date() < self.since

    def _within(self, stamp: Any) -> bool:
        """Whether a row filed (or released) then is written: between `since` and `until`."""
        moment = instant_of(stamp)
        return moment is None or not (self._before_since(stamp) or (self.until is not None
                                                                     and moment.date() > self.until))

    def restart(self) -> None:
        """The feed from its first task (a new pass: an update, the window's closing)."""
        self.cursor = {"task": 0}
        self.errors = 0
        self._save()


class DocumentSearchFeed(OpinionFeed):
    """Nevada: the document search by opinion type, each court, newest first, then oldest first."""

    @property
    def tasks(self) -> list:
        return [(court.code, type_id) for court in self.directory.courts for type_id in self.court.opinion_types]

    def _unit(self, task) -> bool:
        code, type_id = task
        cursor = self.cursor
        order = cursor.get("order", "desc")
        params = {"docketEntryHeader.docketEntryTypeID": type_id, "caseHeader.courtID": self.directory.by_code(code).guid,
                  "sort": f"docketEntryHeader.filedDate,{order}"}
        number, size = cursor.get("page", 0), cursor.get("size") or self.client.cfg.PAGE_SIZE
        try:
            page = self.client.page(PATHS["document_search"], params, number, size, f"opinions {code} {type_id} {order}")
        except PastWindow:
            return self._past_window(cursor)
        documents = [feed_document(self.court, self.directory, row) for row in page.results
                     if self._within(row.get("docketEntryHeader", {}).get("filedDate"))]
        self.rows += len(documents)
        self.write(documents)
        read = cursor.get("read", 0) + len(documents)
        reached = page.offset + len(page.results)
        older = any(self._before_since(row.get("docketEntryHeader", {}).get("filedDate")) for row in page.results)
        cursor.update(order=order, page=page.number + 1, size=page.size, read=read, total=page.total)
        if not page.results or reached >= page.total or (order == "desc" and older):
            return True
        if order == "asc" and read >= page.total:
            return True
        if len(page.results) < page.size:                     # cut at the window's edge
            self.client._learn_window(reached)
            return self._past_window(cursor)
        return False

    def _past_window(self, cursor: dict) -> bool:
        """Newest first reached the window: the rest oldest first (while it is not read from the other end)."""
        if cursor.get("order", "desc") == "desc":
            rest = cursor.get("total", 0) - cursor.get("read", 0)
            cursor.update(order="asc", page=0, size=cursor.get("size"), read=cursor.get("read", 0), rest=rest)
            return rest <= 0
        cursor["unreached"] = cursor.get("unreached", 0) + max(0, cursor.get("total", 0) - cursor.get("read", 0))
        log_tr_feed.warning("opinion feed: %d opinions beyond the results window from both ends; the walk lists them",
                         cursor["unreached"])
        return True


class PublicationsFeed(OpinionFeed):
    """Alabama, Florida: each court's publications (release lists), newest first, then their details."""

    @property
    def tasks(self) -> list:
        return [court.code for court in self.directory.courts]

    def _unit(self, task) -> bool:
        cursor = self.cursor
        court = self.directory.by_code(task)
        waiting = cursor.setdefault("waiting", [])
        if waiting:
            publication = waiting.pop(0)
            detail = self.client.get_object(PATHS["publication"].format(court=court.guid, publication=publication),
                                            f"publication {publication[:8]}")
            documents = publication_documents(self.court, court, detail) if self._within(
                detail.get("publicationDate") if isinstance(detail, dict) else None) else []
            self.rows += len(documents)
            self.write(documents)
            return not waiting and cursor.get("listed", False)
        params = {"courtID": court.guid, "sort": "publicationDate,desc"}
        number = cursor.get("page", 0)
        try:
            page = self.client.page(PATHS["publications"], params, number, cursor.get("size") or FEED_PUBLICATION_PAGE,
                                    f"publications {task}")
        except PastWindow:
            cursor["listed"] = True
            return not waiting
        for row in page.results:
            stamp = row.get("publicationDate") or row.get("scheduledDate")
            if self._before_since(stamp):
                cursor["listed"] = True
                break
            if isinstance(row.get("publicationUUID"), str):
                waiting.append(row["publicationUUID"])
        cursor.update(page=page.number + 1, size=page.size)
        if not page.results or page.offset + len(page.results) >= page.total:
            cursor["listed"] = True
        return cursor.get("listed", False) and not waiting


FEEDS: dict[str, type] = {"document_search": DocumentSearchFeed, "publications": PublicationsFeed,
                          "docket_entries": OpinionFeed}
