"""Delaware County, Pennsylvania as the pipeline meets it, made of the simulated C-Track court (tests only).

`DelawareFront(court)` serves, under /api/v1 on a loopback port of its own, what the simulated court
(served with api_path /api/v1 and Delaware County's court name) answers, in Delaware County's forms as
c27 configures them: case numbers CV-YYYY-NNNNNN (the court's YYYY-CA-NNNN is CV-YYYY-00NNNN, its
YYYY-SC-NNNN CV-YYYY-01NNNN; a search's prefix is turned back), a case's parties as party objects and
lists of them (av-tools flattens both), and a search answered without x-ctrack-excludeselflinks (the
scripts that read Delco send none). Bodies other than JSON (the PDFs) pass as they are.
"""
from __future__ import annotations

import http.client
import json
import re
import urllib.parse
from http.server import BaseHTTPRequestHandler

from notebook_builder.loopback import LoopbackService

API_PATH = "/api/v1"
COURT_NAME = "Delaware County Court of Common Pleas"
_KENTUCKY_NUMBER = re.compile(r"(?<![\w-])(\d{4})-(CA|SC)-(\d{4})(?!\d)")
_PASSED_HEADERS = ("content-type", "retry-after")


def delaware_number(year: str, court: str, sequence: str) -> str:
    return f"CV-{year}-{'00' if court == 'CA' else '01'}{sequence}"


def kentucky_prefix(prefix: str) -> str:
    """The simulated court's prefix of a Delaware County one (CV-2024-001 -> 2024-SC-; none: 2024-XX)."""
    match = re.fullmatch(r"CV-(\d{4})(?:-(\d{0,6}))?", prefix.strip(), re.IGNORECASE)
    if match is None:
        return prefix
    year, digits = match.group(1), match.group(2) or ""
    if len(digits) < 2:
        return f"{year}-" if digits in ("", "0") else f"{year}-XX"
    court = {"0": "CA", "1": "SC"}.get(digits[1]) if digits[0] == "0" else None
    return f"{year}-{court}-{digits[2:]}" if court else f"{year}-XX"


def nested(parties: list) -> list:
    """A party list as Delaware County may answer it: its first two parties in a list of their own."""
    return [parties[:2], *parties[2:]] if len(parties) >= 2 else parties


class DelawareFront(LoopbackService):
    """See the module docstring; `requests` counts what it relayed, `nested_lists` the lists it nested."""

    server_attribute = "front"
    thread_name = "delaware-front"

    def __init__(self, court):
        self.court = court
        self.requests = 0
        self.nested_lists = 0
        self.base_url: str | None = None

    def url_for(self, host: str, port: int) -> str:
        return f"http://{host}:{port}{API_PATH}"

    def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        self.base_url = super().start(port, host)
        return self.base_url

    def handler(self):
        return _FrontHandler


class _FrontHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        front: DelawareFront = self.server.front
        front.requests += 1
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        query = [(name, kentucky_prefix(value) if name.endswith(".values[0]") else value) for name, value in query]
        headers = {name: value for name, value in self.headers.items()
                   if name.lower() == "accept" or name.lower().startswith("x-ctrack-")}
        headers.setdefault("x-ctrack-excludeselflinks", "true")     # Delco answers without it
        upstream = urllib.parse.urlsplit(front.court.base_url)
        connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
        try:
            target = url.path + ("?" + urllib.parse.urlencode(query, safe="[]=") if query else "")
            connection.request("GET", target, headers=headers)
            answer = connection.getresponse()
            body = answer.read()
            status, answer_headers = answer.status, answer.getheaders()
        finally:
            connection.close()
        kind = dict((name.lower(), value) for name, value in answer_headers).get("content-type", "")
        if "application/json" in kind:
            text = _KENTUCKY_NUMBER.sub(lambda match: delaware_number(*match.groups()), body.decode("utf-8"))
            if url.path.endswith("/parties") and status == 200:
                parties = json.loads(text)
                if isinstance(parties, list) and len(parties) >= 2:
                    front.nested_lists += 1
                    text = json.dumps(nested(parties))
            body = text.encode("utf-8")
        self.send_response(status)
        for name, value in answer_headers:
            if name.lower() in _PASSED_HEADERS or name.lower().startswith("x-ctrack-"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
