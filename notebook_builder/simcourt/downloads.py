"""The simulated court's downloads: the PDF, or the misbehaviour the corpus planned for it.

Guarantees:
- `_download` answers a document's GET or HEAD by either path: 404 for an unknown, hidden (late) or
  withdrawn document, and for a withheld file unless it was released or restored; otherwise the
  document's planned fault (corpus FAULTS) for its first attempts, one misbehaviour per GET or
  HEAD, then the PDF: 401/403/404 for good; 5xx, 429 (Retry-After, early requests counted), an
  HTML page, a reset, a stalled or truncated body (headers, half the bytes, then silence for
  `stall_seconds`, or a clean close) for the first one or two attempts; oversized and lying
  (no Content-Length, chunked or close-delimited) bodies generated while the client reads, never
  held, sent through a small send buffer.
- Every byte of a body sent is counted (`SimCourt.body_bytes_sent`).
- `_send` writes any answer whole, with its Content-Length (to a HEAD, the headers alone): the
  simulated courts' handlers (SimCourt's, SimTRPortal's) answer through it.
"""
from __future__ import annotations

import socket
import struct
import time

from .corpus import PERMANENT_STATUS, TRANSIENT_FAULTS, hex_id

MIB = 1024 * 1024
DEFAULT_OVERSIZE = 201 * MIB
_FILLER = bytes(range(32, 127)) * (65536 // 95 + 1)
_FILLER = _FILLER[:65536]
_OVERSIZE_SNDBUF = 64 * 1024


class DownloadAnswers:
    """The handler's download answers (a mixin of server.py's request handler)."""

    def _download(self, court, document_id: str, head: bool) -> None:
        doc = court.corpus.find_document(document_id)
        if doc is None:
            entry = court.corpus.find_withheld(document_id)
            if entry is not None and (entry in court.corpus.restored_withheld or (
                    court._released(entry) and court._entry_asks[hex_id(court.seed, "entry", entry)] >= 2)):
                return self._send(200, court.withheld_pdf(entry), "application/pdf", head)
        if doc is None or not court._visible(doc):
            return self._json(404, {"message": "Document not found"}, head)
        with court._lock:
            court.download_requests += 1
        if doc in court.corpus.withdrawn:
            return self._json(404, {"message": "Document not found"}, head)
        if court._too_early(doc):
            court._fault("rate_limited (early)")
            return self._json(429, {"message": "Too many requests"}, head, court._retry_after(doc))
        with court._lock:
            attempt = court._requests[doc] = court._requests.get(doc, 0) + 1
        fault = court.corpus.fault(doc)
        failing = attempt <= court.corpus.doc_transient[doc]
        if fault != "ok" and (failing or fault not in TRANSIENT_FAULTS):
            court._fault(fault)
        if fault in PERMANENT_STATUS:
            return self._json(PERMANENT_STATUS[fault], {"message": {
                401: "Authorization has been denied for this request.",
                403: "This document is restricted.", 404: "Document not found"}[
                    PERMANENT_STATUS[fault]]}, head)
        if fault == "always_503" or (failing and fault == "http_503"):
            return self._send(503, b"<html><body><h1>503 Service Unavailable</h1></body></html>",
                              "text/html", head)
        if failing and fault == "http_500":
            return self._json(500, {"message": "An error has occurred."}, head)
        if failing and fault == "rate_limited":
            return self._json(429, {"message": "Too many requests"}, head, court._retry_after(doc))
        if failing and fault == "html":
            page = (b"<!DOCTYPE html><html><head><title>Error</title></head><body>"
                    b"<h2>Sorry, something went wrong.</h2><p>Please try again later.</p>"
                    b"</body></html>")
            return self._send(200, page, "text/html; charset=utf-8", head)
        if failing and fault == "reset":
            return self._reset()
        if fault == "oversized":
            return self._stream_oversized(court, doc, head)
        if fault == "lying_length":
            return self._stream_lying(court, doc, head)
        data = court._pdf(doc)
        name = court.corpus.document_name(doc)
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
        if failing and fault in ("stalled", "truncated") and not head:
            return self._half_body(court, doc, data, headers,
                                   stall=court.stall_seconds if fault == "stalled" else 0.0)
        self._send(200, data, "application/pdf", head, headers)
        if not head:
            self._count(court, doc, len(data))

    def _send(self, status: int, body: bytes, content_type: str, head: bool,
              headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    # ------------------------------------------------------ misbehaviours

    def _half_body(self, court, doc: int, data: bytes, headers: dict, stall: float) -> None:
        """The full Content-Length, half the body, nothing more for `stall` seconds (a stalled body),
        then a clean close (FIN, not RST): the client sees a read timeout or a torn body."""
        self.send_response(200)
        self.send_header("Content-Type", "application/pdf")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.close_connection = True
        if self._write_body(court, doc, data[:len(data) // 2]) and stall > 0:
            time.sleep(stall)

    def _reset(self) -> None:
        """Close the connection with a TCP RST and no (further) answer."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    @staticmethod
    def _count(court, doc: int, sent: int) -> None:
        with court._lock:
            court._body_bytes[doc] = court._body_bytes.get(doc, 0) + sent

    def _write_body(self, court, doc: int, data: bytes) -> bool:
        try:
            self.wfile.write(data)
        except OSError:
            self.close_connection = True
            return False
        self._count(court, doc, len(data))
        return True

    def _stream(self, court, doc: int, total: int, chunked: bool) -> None:
        # A small send buffer, so a client that hangs up after the headers
        # costs the court (and proves it read) almost nothing.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _OVERSIZE_SNDBUF)
        sent, first = 0, b"%PDF-1.4\n%" + _FILLER[:65536 - 10]
        while sent < total:
            block = (first if sent == 0 else _FILLER)[:total - sent]
            payload = b"%x\r\n%s\r\n" % (len(block), block) if chunked else block
            if not self._write_body(court, doc, payload):
                return
            sent += len(block)
        if chunked:
            self._write_body(court, doc, b"0\r\n\r\n")

    def _stream_oversized(self, court, doc: int, head: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/pdf")
        self.send_header("Content-Length", str(court.oversize_bytes))
        self.end_headers()
        if not head:
            self._stream(court, doc, court.oversize_bytes, chunked=False)

    def _stream_lying(self, court, doc: int, head: bool) -> None:
        """No Content-Length, a body larger than oversize_bytes: chunked or close-delimited."""
        chunked = doc % 2 == 0
        self.send_response(200)
        self.send_header("Content-Type", "application/pdf")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if not head:
            self._stream(court, doc, court.oversize_bytes + MIB, chunked=chunked)
