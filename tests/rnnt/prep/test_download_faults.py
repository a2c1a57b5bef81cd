"""Downloads and extractions that meet what real servers, disks and archives do: two runs at once, a resume
answered from the wrong byte or with a page, a bad status line, a stall, a full disk, archives of no
end-of-archive blocks or of a hard link to nothing, and --quiet."""

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from conftest import PYTHON, ROOT
from rnnt import progress_bar
from rnnt.prep.corpus_fetch import main as fetch_main
from rnnt.prep.download import TransferCut, download
from rnnt.prep.extract import UnsafeArchiveError, safe_extract
from test_download import serve_yesno, yesno_archive

FETCH = """import json, sys
from rnnt.prep.corpus_fetch import main
parts = {name: tuple(part) for name, part in json.loads(sys.argv[1]).items()}
sys.exit(main("test", parts, sys.argv[2], sys.argv[3:]))
"""


def test_two_runs_fetching_one_part_at_once_take_turns(server, test_data, tmp_path):
    """Both wrote one .part: one run renamed a file the other was still appending to (or had cut) as done."""
    parts = serve_yesno(server, test_data)
    server.seconds_per_block = 0.01  # about a second for the archive: the second run starts in the middle
    script = tmp_path / "fetch.py"
    script.write_text(FETCH)
    dest = tmp_path / "corpus"
    command = [PYTHON, str(script), json.dumps(parts), server.url, str(dest), "--quiet"]
    first = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    part = dest / "downloads" / "waves_yesno.tar.gz.part"
    deadline = time.monotonic() + 30
    while not part.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    second = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert first.wait(timeout=60) == 0, first.stderr.read()
    assert second.returncode == 0, second.stderr
    assert "another run is fetching it" in second.stderr
    assert "waves_yesno present" in second.stdout  # it found the other's work done: nothing fetched twice
    assert [path for path, _ in server.requests] == ["/waves_yesno.tar.gz"]
    assert (dest / "downloads" / "waves_yesno.tar.gz").read_bytes() == server.files["/waves_yesno.tar.gz"]
    assert len(list((dest / "waves_yesno").iterdir())) == 5


def start_a_part(server, test_data, tmp_path, first_bytes: int | None = None) -> tuple[bytes, Path]:
    """The yesno archive on the server and a part of its first third (or first_bytes) beside dest; (body, dest)."""
    body = yesno_archive(test_data)
    server.files["/a.tar.gz"] = body
    dest = tmp_path / "a.tar.gz"
    Path(f"{dest}.part").write_bytes(body[: len(body) // 3 if first_bytes is None else first_bytes])
    return body, dest


def test_a_resume_answered_from_byte_0_is_not_appended_to_the_part(server, test_data, tmp_path):
    """A 206 whose Content-Range starts elsewhere was appended: the part grew into a wrong file, taken as whole
    where no checksum checked it."""
    body, dest = start_a_part(server, test_data, tmp_path)
    server.resume_from_zero = True
    assert download(f"{server.url}/a.tar.gz", str(dest), quiet=True) == "downloaded"
    assert dest.read_bytes() == body
    assert server.requests == [("/a.tar.gz", f"bytes={len(body) // 3}-"), ("/a.tar.gz", None)]


def test_a_416_is_taken_as_whole_only_for_a_part_of_the_files_size(server, test_data, tmp_path):
    """A 416 was taken as 'the part is whole' whatever its size: a part longer than the file became the file."""
    body, dest = start_a_part(server, test_data, tmp_path, first_bytes=0)
    Path(f"{dest}.part").write_bytes(body + b"left by something else")
    assert download(f"{server.url}/a.tar.gz", str(dest), quiet=True) == "downloaded"
    assert dest.read_bytes() == body and len(server.requests) == 2  # the 416, then the whole file
    dest.unlink()
    Path(f"{dest}.part").write_bytes(body)  # a whole part, killed while its checksum was taken: not fetched again
    assert download(f"{server.url}/a.tar.gz", str(dest), hashlib.sha256(body).hexdigest(), quiet=True) == "downloaded"
    assert dest.read_bytes() == body and len(server.requests) == 3


def test_a_part_longer_than_the_file_a_server_sends_whole_is_downloaded_again(server, test_data, tmp_path, capsys):
    """A server that ignores Range, its file shorter than the part (a file changed on the mirror): each run refused
    it as 'a page', keeping the part, for good."""
    body, dest = start_a_part(server, test_data, tmp_path, first_bytes=0)
    Path(f"{dest}.part").write_bytes(body + b"left by something else")
    server.ignore_range = True
    assert download(f"{server.url}/a.tar.gz", str(dest), hashlib.sha256(body).hexdigest(), quiet=True) == "downloaded"
    assert dest.read_bytes() == body and len(server.requests) == 1
    assert f"the server sent the whole file, {len(body)} bytes, shorter than the {len(body) + 22}-byte part" \
        in capsys.readouterr().err


def test_a_page_sent_for_a_resume_leaves_the_part_as_it_was(server, test_data, tmp_path):
    """A login or error page (200) sent for a Range request was written over the part, which was lost."""
    body, dest = start_a_part(server, test_data, tmp_path)
    server.resume_page = b"<html>please log in</html>"
    with pytest.raises(ConnectionError, match=r"sent a text/html page of 26 bytes instead; the part is kept"):
        download(f"{server.url}/a.tar.gz", str(dest), quiet=True)
    assert Path(f"{dest}.part").read_bytes() == body[: len(body) // 3] and not dest.exists()
    server.resume_page = None
    assert download(f"{server.url}/a.tar.gz", str(dest), quiet=True) == "downloaded"
    assert dest.read_bytes() == body


def test_a_stalled_transfer_keeps_what_came_and_says_to_run_again(server, test_data, tmp_path):
    """A stall raised the socket's timeout, which the tool answered with 'give --corpus-dir' as if the server
    could not be reached at all."""
    body, dest = start_a_part(server, test_data, tmp_path, first_bytes=0)
    server.stall_after = 1000
    with pytest.raises(TransferCut, match=f"transfer stopped .*timed out.* at 1000 of {len(body)} bytes; run again"):
        download(f"{server.url}/a.tar.gz", str(dest), quiet=True, timeout=0.5)
    assert Path(f"{dest}.part").read_bytes() == body[:1000]


def test_a_cut_transfer_tells_the_tool_to_run_again_not_to_go_elsewhere(server, test_data, tmp_path, capsys):
    parts = serve_yesno(server, test_data)
    server.cut_first_after = 1000
    assert fetch_main("test", parts, server.url, [str(tmp_path / "corpus"), "--quiet"]) == 1
    error = capsys.readouterr().err
    assert "transfer ended at 1000 of" in error and "run again to resume" in error and "--corpus-dir" not in error


def test_a_bad_status_line_is_a_cannot_download_message_not_a_traceback(server, test_data, tmp_path, capsys):
    parts = serve_yesno(server, test_data)
    server.bad_status = True
    assert fetch_main("test", parts, server.url, [str(tmp_path / "corpus"), "--quiet"]) == 1
    error = capsys.readouterr().err
    assert f"cannot download waves_yesno.tar.gz from {server.url}" in error and "BadStatusLine" in error


WRITE_WITH_A_SIZE_LIMIT = """import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
from rnnt.prep.download import download
from rnnt.prep.extract import safe_extract
try:
    download(sys.argv[1], sys.argv[2], quiet=True) if sys.argv[1] != "-" else safe_extract(sys.argv[2], sys.argv[3])
except OSError as error:
    print(error)
"""


@pytest.mark.parametrize("work", ["download", "extract"])
def test_a_write_that_fails_names_the_file_and_an_extraction_leaves_nothing(server, test_data, tmp_path, work):
    """A full disk's error ('[Errno 28] No space left on device') named no file."""
    body, dest = start_a_part(server, test_data, tmp_path, first_bytes=0)
    archive = tmp_path / "archive.tar.gz"
    archive.write_bytes(body)
    args = [f"{server.url}/a.tar.gz", str(dest)] if work == "download" else ["-", str(archive), str(tmp_path / "x")]
    out = subprocess.run([PYTHON, "-c", WRITE_WITH_A_SIZE_LIMIT, *args], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    first_wav = sorted((test_data / "waves_yesno").glob("*.wav"))[0].name
    named = f"{dest}.part" if work == "download" else str(tmp_path / "x" / "waves_yesno" / first_wav)
    assert out.stdout.strip() == f"[Errno 27] File too large: '{named}'"
    if work == "extract":
        assert list((tmp_path / "x").iterdir()) == []


def tar_without_end_blocks(test_data, n_files: int = 2) -> bytes:
    """A plain tar of yesno recordings that ends after its last member's data: no end-of-archive blocks."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for wav in sorted((test_data / "waves_yesno").glob("*.wav"))[:n_files]:
            tar.add(wav, arcname=f"waves_yesno/{wav.name}")
        end = tar.offset
    return buffer.getvalue()[:end]


def test_a_whole_gzip_tar_without_end_blocks_is_extracted_not_fetched_forever(server, test_data, tmp_path):
    """GNU tar reads it; it was refused as cut short, deleted, and downloaded again on every run."""
    server.files["/a.tar.gz"] = gzip.compress(tar_without_end_blocks(test_data))
    parts = {"a": ("a.tar.gz", None, "waves_yesno")}
    dest = tmp_path / "corpus"
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 0
    assert len(list((dest / "waves_yesno").iterdir())) == 2
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 0 and len(server.requests) == 1


def test_an_unreadable_archive_that_matches_its_checksum_is_kept_not_fetched_forever(server, test_data, tmp_path,
                                                                                     capsys):
    """Deleted to be downloaded again, it came back the same on every run: the publisher's own bytes."""
    body = gzip.compress(b"not a tar" * 100)
    server.files["/a.tar.gz"] = body
    parts = {"a": ("a.tar.gz", hashlib.md5(body).hexdigest(), "a")}
    dest = tmp_path / "corpus"
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 1
    assert "matches its published checksum, so a new download would be the same" in capsys.readouterr().err
    assert (dest / "downloads" / "a.tar.gz").read_bytes() == body


def test_a_plain_tar_without_end_blocks_is_taken_when_its_checksum_vouches_for_it(test_data, tmp_path):
    archive = tmp_path / "a.tar"
    archive.write_bytes(tar_without_end_blocks(test_data))
    with pytest.raises(tarfile.ReadError, match="no end-of-archive blocks"):
        safe_extract(str(archive), str(tmp_path / "x"), quiet=True)
    assert safe_extract(str(archive), str(tmp_path / "x"), verified=True, quiet=True) == "extracted"


def test_a_header_that_cannot_be_read_is_refused_even_in_a_whole_gzip_stream(test_data, tmp_path):
    """tarfile ends its members at a header it cannot read; what followed was taken for the archive's end."""
    plain = bytearray(tar_without_end_blocks(test_data, 3))
    second = tarfile.open(fileobj=io.BytesIO(plain)).getmembers()[1].offset
    plain[second + 148: second + 156] = b"0000000\0"  # the second member's header checksum, made wrong
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(gzip.compress(bytes(plain) + bytes(1024)))
    with pytest.raises(tarfile.ReadError, match="a header that cannot be read"):
        safe_extract(str(archive), str(tmp_path / "x"), verified=True, quiet=True)
    assert list((tmp_path / "x").iterdir()) == []


@pytest.mark.parametrize("target", ["missing.wav", "later.wav"])
def test_a_hard_link_to_no_file_extracted_before_it_is_refused_and_leaves_nothing(test_data, tmp_path, target):
    """tarfile raised KeyError (a traceback) and left the members before it."""
    wav = sorted((test_data / "waves_yesno").glob("*.wav"))[0]
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(wav, arcname="d/first.wav")
        link = tarfile.TarInfo("d/link.wav")
        link.type, link.linkname = tarfile.LNKTYPE, f"d/{target}"
        tar.addfile(link)
        tar.add(wav, arcname="d/later.wav")
    with pytest.raises(UnsafeArchiveError, match=f"hard link 'd/link.wav' -> 'd/{target}' names no file extracted "
                                                 "before it"):
        safe_extract(str(archive), str(tmp_path / "x"), quiet=True)
    assert list((tmp_path / "x").iterdir()) == []


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_draws_no_bar_at_all(server, test_data, tmp_path, monkeypatch, quiet):
    """--quiet still drew the checksum's and the extraction's bars."""
    terminal = tmp_path / "terminal"
    monkeypatch.setenv("RNNT_TERMINAL", str(terminal))
    progress_bar._opened.cache_clear()
    parts = serve_yesno(server, test_data)
    try:
        assert fetch_main("test", parts, server.url, [str(tmp_path / "corpus")] + ["--quiet"] * quiet) == 0
    finally:
        progress_bar._opened.cache_clear()
    drawn = terminal.read_text() if terminal.exists() else ""
    assert drawn == "" if quiet else all(bar in drawn for bar in ("check waves_yesno", "extract waves_yesno"))
