"""The simulated services' loopback HTTP server (the simulated court and the simulated Drive).

- `LoopbackServer`: a ThreadingHTTPServer for 127.0.0.1 that sets TCP_NODELAY on every accepted
  socket (MEASURED.md: the stdlib server's Nagle trap costs 40 ms a keep-alive request without
  it), keeps track of its connections and closes them on stop, and stays quiet about clients
  hanging up mid-body (part of the simulations, not an error).
- `LoopbackService`: start()/stop()/`with` for a service served by one in a daemon thread; the
  service names its handler, the server attribute its handler reads it from, and its URL.
  `serve_in_foreground` serves until Ctrl-C and prints the service's `stats()` on the way out (`sim`).
"""
from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, *args, **kwargs):
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def get_request(self):
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._connections_lock:
            self._connections.add(connection)
        return connection, address

    def shutdown_request(self, request):
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections, self._connections = list(self._connections), set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address) -> None:
        pass   # clients hanging up mid-body is part of the simulation, not an error


class LoopbackService:
    """A simulated service served on the loopback interface by a LoopbackServer in a daemon thread."""

    server_attribute = "service"      # the handler finds the service as self.server.<this>
    thread_name = "loopback"
    _server: LoopbackServer | None = None
    _thread: threading.Thread | None = None
    _url: str | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def url_for(self, host: str, port: int) -> str:
        raise NotImplementedError

    def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        """Serves the service; returns its URL (the same one when it is already served)."""
        if self._server is not None:
            return self._url
        self._server = LoopbackServer((host, port), self.handler())
        setattr(self._server, self.server_attribute, self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        self._url = self.url_for(host, self._server.server_address[1])
        return self._url

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        self._thread.join(timeout=5)

    def serve_in_foreground(self, port: int, lines: Callable[[str], list[str]]) -> None:
        """Serves on `port` until Ctrl-C: prints `lines(url)` once serving, and `totals: <stats() as JSON>`
        as it stops (a Ctrl-C right after the lines still prints the totals)."""
        url = self.start(port=port)
        try:
            for line in lines(url):
                print(line, flush=True)
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()
            print("totals: " + json.dumps(self.stats(), sort_keys=True), flush=True)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
