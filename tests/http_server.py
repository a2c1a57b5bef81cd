"""A small HTTP server on 127.0.0.1 for tests: files from memory, Range requests, a transfer cut short, chunked
transfers, and the faults of servers met in the wild (a resume answered from byte 0 or with a page, a bad status
line, a stall, a slow transfer)."""

import http.server
import threading
import time

import pytest


class ArchiveServer(http.server.ThreadingHTTPServer):
    """Serves files from memory, honours Range, and can cut the first transfer short."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), RangeHandler)
        self.files: dict[str, bytes] = {}
        self.cut_first_after: int | None = None
        self.chunked = False  # a transfer of no Content-Length, in chunked encoding
        self.requests: list[tuple[str, str | None]] = []
        self.resume_from_zero = False  # a 206 for a Range request that sends the whole file (Content-Range says so)
        self.resume_page: bytes | None = None  # a 200 text/html page in answer to a Range request
        self.ignore_range = False  # a 200 of the whole file in answer to a Range request
        self.bad_status = False  # answers with a line that is no HTTP status line
        self.stall_after: int | None = None  # sends that many bytes, then nothing for 5 s
        self.seconds_per_block = 0.0  # a slow server: a pause after every 4 KiB

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
        if server.bad_status:
            self.wfile.write(b"GARBAGE\r\n\r\n")
            self.close_connection = True
            return
        if range_header and server.resume_page is not None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(server.resume_page)))
            self.end_headers()
            self.wfile.write(server.resume_page)
            return
        range_header = None if server.ignore_range else range_header
        start = int(range_header.split("=")[1].split("-")[0]) if range_header else 0
        if start >= len(body):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(body)}")
            self.end_headers()
            return
        start = 0 if server.resume_from_zero else start
        self.send_response(206 if range_header else 200)
        if range_header:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
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
        if server.stall_after is not None:
            self.wfile.write(payload[: server.stall_after])
            self.wfile.flush()
            time.sleep(5)
            return
        step = 4096 if server.seconds_per_block else max(len(payload), 1)
        for first in range(0, len(payload), step):
            self.wfile.write(payload[first: first + step])
            self.wfile.flush()
            time.sleep(server.seconds_per_block)
        self.wfile.write(b"\r\n0\r\n\r\n" if server.chunked else b"")


@pytest.fixture
def server():
    """An ArchiveServer running in a thread for the test's duration."""
    srv = ArchiveServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


