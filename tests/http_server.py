"""A small HTTP server on 127.0.0.1 for tests: files from memory, Range requests, a transfer cut short, chunked
transfers."""

import http.server
import threading

import pytest


class ArchiveServer(http.server.ThreadingHTTPServer):
    """Serves files from memory, honours Range, and can cut the first transfer short."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), RangeHandler)
        self.files: dict[str, bytes] = {}
        self.cut_first_after: int | None = None
        self.chunked = False  # a transfer of no Content-Length, in chunked encoding
        self.requests: list[tuple[str, str | None]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class RangeHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        server: ArchiveServer = self.server
        range_header = self.headers.get("Range")
        server.requests.append((self.path, range_header))
        body = server.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        start = int(range_header.split("=")[1].split("-")[0]) if range_header else 0
        if start >= len(body):
            self.send_response(416)
            self.end_headers()
            return
        self.send_response(206 if range_header else 200)
        payload = body[start:]
        if server.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if server.chunked:
            self.wfile.write(f"{len(payload):x}\r\n".encode())
        if server.cut_first_after is not None:
            payload, server.cut_first_after = payload[: server.cut_first_after], None
            self.wfile.write(payload)
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload + (b"\r\n0\r\n\r\n" if server.chunked else b""))


@pytest.fixture
def server():
    """An ArchiveServer running in a thread for the test's duration."""
    srv = ArchiveServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


