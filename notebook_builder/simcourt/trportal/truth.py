"""The simulated TR Portal's own truth, for judging an archive of it: every document, and the fewest requests.

Guarantees:
- `truth(portal)`: one `TruthDocument` a document the court holds now, in document order (the
  request log's item of a download is its index here): its ids as
  the court serves them, court, case number, filed instant, name, access state (and whether it is
  VIEWABLE: what an archive can hold), whether it is an opinion (the system's opinion kinds:
  Nevada's 1000014 and 1000018 documents, a release list's Opinion or Decision, a dispositional
  Opinion), its release list (publications mode), whether its entry is secured, and (`hashes`) the
  sha256 and size of its bytes (what the court serves once it is public).
- `floor(portal, page_size)`: the requests a full archive needs at least, each list read once at
  `page_size` rows (cut to the court's `max_size`, or its `page_size` switch): "courts" 1; "case
  search pages"; "docket entry lists" and "access lists", one a case at least; "downloads", one a
  VIEWABLE document; "opinion feed pages" (Nevada: the document search for 1000014 and 1000018 in
  each court; Alabama, Florida: the publications list of each court) and "publication details" (one
  a release list); and "total".
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .systems import PUBLISHED_NEVADA, STATE_NAMES, UNPUBLISHED_NEVADA, VIEWABLE


@dataclass(frozen=True)
class TruthDocument:
    document_id: str
    docket_entry_id: str
    case_id: str
    case_number: str
    court_id: str             # the court GUID, as the court writes it
    court: str                # its displayName
    filed_date: str
    document_name: str
    state: str                # VIEWABLE, PURCHASABLE, IN_CART, UNAVAILABLE
    viewable: bool
    opinion: bool
    publication_id: str | None
    secured: bool
    sha256: str | None
    size: int | None


def truth(portal, hashes: bool = True) -> list[TruthDocument]:
    corpus, shapes = portal.corpus, portal.shapes
    found = []
    for doc in range(corpus.doc_count):
        entry = corpus.doc_entry[doc]
        case = corpus.entry_case[entry]
        published = corpus.publication_of(entry)
        data = portal.pdf(doc) if hashes else None
        found.append(TruthDocument(
            document_id=corpus.uuid("document", doc), docket_entry_id=corpus.uuid("entry", entry),
            case_id=corpus.uuid("case", case), case_number=corpus.case_numbers[case],
            court_id=corpus.court_guid(corpus.case_court[case]), court=corpus.court_of_case(case).display_name,
            filed_date=shapes.entry_filed(entry), document_name=shapes.document_name(doc),
            state=STATE_NAMES[corpus.doc_state[doc]], viewable=corpus.doc_state[doc] == VIEWABLE,
            opinion=corpus.kind(entry).opinion,
            publication_id=None if published is None else corpus.publication_uuid(*published),
            secured=bool(corpus.entry_secured[entry]),
            sha256=None if data is None else hashlib.sha256(data).hexdigest(),
            size=None if data is None else len(data)))
    return found


def floor(portal, page_size: int = 500) -> dict[str, int]:
    corpus = portal.corpus
    size = portal.page_size or min(page_size, portal.max_size)

    def pages(count: int) -> int:
        return max(1, -(-count // size))

    courts = range(len(portal.system.courts))
    if portal.system.opinion_mode == "document-search":
        feed = sum(pages(len(corpus.docs_by_filing(type_id, court)))
                   for court in courts for type_id in (PUBLISHED_NEVADA, UNPUBLISHED_NEVADA))
    elif portal.system.opinion_mode == "publications":
        feed = sum(pages(sum(1 for pub in corpus.publications() if pub[0] == court)) for court in courts)
    else:
        feed = 0
    figures = {"courts": 1, "case search pages": pages(corpus.case_count),
               "docket entry lists": sum(pages(len(corpus.case_entries(case))) for case in range(corpus.case_count)),
               "access lists": sum(pages(len(corpus.case_docs(case))) for case in range(corpus.case_count)),
               "downloads": sum(1 for state in corpus.doc_state if state == VIEWABLE),
               "opinion feed pages": feed, "publication details": len(corpus.publications())}
    figures["total"] = sum(figures.values())
    return figures
