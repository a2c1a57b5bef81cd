"""Download with resume and checksum, and safe extraction, against an HTTP server on 127.0.0.1."""

import contextlib
import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT, run_tool
from rnnt.prep.corpus_fetch import main as fetch_main
from rnnt.prep.download import ChecksumError, download
from rnnt.prep.extract import UnsafeArchiveError, safe_extract


def yesno_archive(test_data: Path, n_files: int = 5) -> bytes:
    """A waves_yesno.tar.gz-like archive of real yesno recordings."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for wav in sorted((test_data / "waves_yesno").glob("*.wav"))[:n_files]:
            tar.add(wav, arcname=f"waves_yesno/{wav.name}")
    return buffer.getvalue()


def test_interrupted_download_resumes_with_range(server, test_data, tmp_path):
    body = yesno_archive(test_data)
    sha = hashlib.sha256(body).hexdigest()
    server.files["/waves_yesno.tar.gz"] = body
    server.cut_first_after = len(body) // 3
    dest = tmp_path / "waves_yesno.tar.gz"
    with pytest.raises(ConnectionError, match="run again to resume"):
        download(f"{server.url}/waves_yesno.tar.gz", str(dest), sha, quiet=True)
    part = Path(str(dest) + ".part")
    assert part.stat().st_size == len(body) // 3 and not dest.exists()
    assert download(f"{server.url}/waves_yesno.tar.gz", str(dest), sha, quiet=True) == "downloaded"
    assert dest.read_bytes() == body and not part.exists()
    assert server.requests[-1] == ("/waves_yesno.tar.gz", f"bytes={len(body) // 3}-")
    # A complete, verified file is not fetched again.
    n = len(server.requests)
    assert download(f"{server.url}/waves_yesno.tar.gz", str(dest), sha, quiet=True) == "present"
    assert len(server.requests) == n
    # One damaged under its final name (cut short since, or copied there by hand): fetched again, not refused
    # on every run
    dest.write_bytes(body[:1000])
    assert download(f"{server.url}/waves_yesno.tar.gz", str(dest), sha, quiet=True) == "downloaded"
    assert dest.read_bytes() == body and len(server.requests) == n + 1


@pytest.mark.parametrize("checksum", [False, True])
def test_a_chunked_transfer_cut_short_is_kept_to_resume_not_taken_as_whole(server, test_data, tmp_path, checksum):
    """Of no Content-Length, its cut was taken as the file: renamed to its final name without a checksum, deleted
    as a checksum mismatch with one (and fetched from the start again)."""
    body = yesno_archive(test_data)
    server.files["/waves_yesno.tar.gz"], server.chunked = body, True
    server.cut_first_after = len(body) // 3
    dest = tmp_path / "waves_yesno.tar.gz"
    sha = hashlib.sha256(body).hexdigest() if checksum else None
    with pytest.raises(ConnectionError, match=f"transfer ended at {len(body) // 3} bytes; run again to resume"):
        download(f"{server.url}/waves_yesno.tar.gz", str(dest), sha, quiet=True)
    assert not dest.exists() and Path(f"{dest}.part").stat().st_size == len(body) // 3
    assert download(f"{server.url}/waves_yesno.tar.gz", str(dest), sha, quiet=True) == "downloaded"
    assert dest.read_bytes() == body and server.requests[-1][1] == f"bytes={len(body) // 3}-"


def test_a_file_url_of_a_path_with_a_space_is_read(test_data, tmp_path):
    """file:///a%20b was read as the path 'a%20b'."""
    (tmp_path / "a b").mkdir()
    (tmp_path / "a b" / "c.tar.gz").write_bytes(yesno_archive(test_data))
    dest = tmp_path / "c.tar.gz"
    assert download((tmp_path / "a b" / "c.tar.gz").as_uri(), str(dest), quiet=True) == "downloaded"
    assert dest.read_bytes() == (tmp_path / "a b" / "c.tar.gz").read_bytes()


def test_wrong_checksum_is_a_clear_error_and_the_file_is_not_kept(server, test_data, tmp_path):
    server.files["/waves_yesno.tar.gz"] = yesno_archive(test_data)
    dest = tmp_path / "waves_yesno.tar.gz"
    with pytest.raises(ChecksumError, match="checksum mismatch: expected 0{64}"):
        download(f"{server.url}/waves_yesno.tar.gz", str(dest), "0" * 64, quiet=True)
    assert not dest.exists() and not Path(str(dest) + ".part").exists()


def serve_yesno(server, test_data) -> dict:
    """A small yesno archive on the test server; the parts argument of fetch_main for it."""
    body = yesno_archive(test_data)
    server.files["/waves_yesno.tar.gz"] = body
    return {"waves_yesno": ("waves_yesno.tar.gz", hashlib.md5(body).hexdigest(), "waves_yesno")}


def test_fetch_download_extract_and_skip_on_rerun(server, test_data, tmp_path):
    parts = serve_yesno(server, test_data)
    dest = tmp_path / "corpus"
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 0
    names = sorted(p.name for p in (dest / "waves_yesno").iterdir())
    assert names == sorted(p.name for p in sorted((test_data / "waves_yesno").glob("*.wav"))[:5])
    n = len(server.requests)
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 0
    assert len(server.requests) == n  # extracted part skipped


def test_an_extraction_killed_midway_is_done_again(server, test_data, tmp_path):
    """A folder with some of the files but no marker is not 'present': the part is extracted again."""
    parts = serve_yesno(server, test_data)
    dest = tmp_path / "corpus"
    (dest / "waves_yesno").mkdir(parents=True)
    first = sorted((test_data / "waves_yesno").glob("*.wav"))[0]
    (dest / "waves_yesno" / first.name).write_bytes(first.read_bytes()[:100])  # killed after a part of one file
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 0
    assert len(list((dest / "waves_yesno").iterdir())) == 5
    assert (dest / "waves_yesno" / first.name).read_bytes() == first.read_bytes()


def test_a_deleted_corpus_folder_is_extracted_again(server, test_data, tmp_path):
    """The marker of an extraction whose folder was deleted since does not make the part 'present'."""
    parts = serve_yesno(server, test_data)
    dest = tmp_path / "corpus"
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 0
    shutil.rmtree(dest / "waves_yesno")
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 0
    assert len(list((dest / "waves_yesno").iterdir())) == 5


@pytest.mark.parametrize("damage", ["crc", "cut", "html", "inside"])
def test_a_damaged_archive_without_a_checksum_is_refused_deleted_and_fetched_again(server, test_data, tmp_path,
                                                                                    capsys, damage):
    """AN4 and speechocean762 publish no checksum: gzip's own CRC and length (at the archive's end, which
    tarfile's stream never checks) catch a damaged file, a cut one, or an error page; the download is
    deleted, so that the next run fetches it again, and nothing is marked extracted. A byte damaged in the
    compressed data ("inside") fails while tarfile reads the members (it reads ahead): the same."""
    body = yesno_archive(test_data)
    bad = {"crc": body[:-8] + bytes([body[-8] ^ 1]) + body[-7:], "cut": body[:-5],
           "html": b"<html>503 Service Unavailable</html>",
           "inside": body[:-16] + bytes([body[-16] ^ 0xFF]) + body[-15:]}[damage]
    server.files["/waves_yesno.tar.gz"] = bad
    parts = {"waves_yesno": ("waves_yesno.tar.gz", None, "waves_yesno")}
    dest = tmp_path / "corpus"
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 1
    error = capsys.readouterr().err
    assert "not a readable archive" in error and error.count(str(dest)) == 1 and "deleted; run again" in error
    assert not (dest / "downloads" / "waves_yesno.tar.gz").exists() and not list(dest.glob(".*.extracted"))
    server.files["/waves_yesno.tar.gz"] = body  # the server fixed: the next run works
    assert fetch_main("test", parts, server.url, [str(dest), "--quiet"]) == 0
    assert len(list((dest / "waves_yesno").iterdir())) == 5


def test_archives_dir_is_accepted_and_verified(test_data, tmp_path):
    archives = tmp_path / "archives"
    archives.mkdir()
    (archives / "waves_yesno.tar.gz").write_bytes(yesno_archive(test_data))
    # The real yesno script with its published checksum: our small archive must be refused.
    out = run_tool(sys.executable, ROOT / "egs" / "yesno" / "local" / "download.py", tmp_path / "c",
                   "--archives-dir", archives)
    assert out.returncode == 1
    assert "checksum mismatch: expected c3f49e0cca421f96b75b41640749167b52118f232498667ca7a5f9416aef8e73" in out.stderr
    assert not (tmp_path / "c" / "waves_yesno").exists()
    # a dir without the archive: named, where it fell back to the network (whose error advised --archives-dir)
    out = run_tool(sys.executable, ROOT / "egs" / "yesno" / "local" / "download.py", tmp_path / "c",
                   "--archives-dir", tmp_path / "empty", "--mirror", "http://127.0.0.1:9/none")
    assert out.returncode == 1 and (f"{tmp_path / 'empty' / 'waves_yesno.tar.gz'}: no such archive in --archives-dir"
                                    in out.stderr), out.stderr


def unsafe_archive(path: Path, kind: str) -> None:
    with tarfile.open(path, "w") as tar:
        good = tarfile.TarInfo("corpus/good.txt")
        good.size = 2
        tar.addfile(good, io.BytesIO(b"ok"))
        if kind == "symlink":
            member = tarfile.TarInfo("corpus/evil")
            member.type, member.linkname = tarfile.SYMTYPE, "../../outside"
            tar.addfile(member)
            return
        if kind == "link-turned-out":  # inside when made; the link after it makes b/.. the parent of dest
            for name, target in (("corpus/a", "b/../../x"), ("corpus/b", ".")):
                member = tarfile.TarInfo(name)
                member.type, member.linkname = tarfile.SYMTYPE, target
                tar.addfile(member)
            return
        if kind in ("through-link", "replace-dir", "link-through-link"):
            tar.addfile(dir_member("corpus/sub"))
            link = tarfile.TarInfo("corpus/sub" if kind == "replace-dir" else "corpus/l")
            link.type, link.linkname = tarfile.SYMTYPE, "good.txt" if kind == "replace-dir" else "sub"
            tar.addfile(link)
            if kind == "through-link":  # written through the link: wherever it points then
                member = tarfile.TarInfo("corpus/l/x")
                member.size = 4
                tar.addfile(member, io.BytesIO(b"evil"))
            elif kind == "link-through-link":
                chained = tarfile.TarInfo("corpus/m")
                chained.type, chained.linkname = tarfile.SYMTYPE, "l/y"
                tar.addfile(chained)
            return
        member = tarfile.TarInfo({"dotdot": "corpus/../../x", "absolute": "/tmp/rnnt-absolute-x"}[kind])
        member.size = 4
        tar.addfile(member, io.BytesIO(b"evil"))


def dir_member(name: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.mode = tarfile.DIRTYPE, 0o755
    return member


@pytest.mark.parametrize("kind,message", [("dotdot", "climbs out with '..'"), ("absolute", "absolute path"),
                                          ("symlink", "points outside"), ("through-link", "passes through the link"),
                                          ("replace-dir", "would replace"),
                                          ("link-through-link", "passes through the link"),
                                          ("link-turned-out", "resolves outside .* through links extracted after")])
def test_unsafe_archives_are_refused_and_leave_nothing(tmp_path, kind, message):
    archive = tmp_path / f"{kind}.tar"
    unsafe_archive(archive, kind)
    dest = tmp_path / "out" / "inner"
    with pytest.raises(UnsafeArchiveError, match=message):
        safe_extract(str(archive), str(dest))
    assert not (tmp_path / "x").exists() and not Path("/tmp/rnnt-absolute-x").exists()
    assert not (dest / "corpus" / "good.txt").exists()  # what was written before the refusal is removed
    assert not (dest / "corpus" / "l").is_symlink() and not (dest / "corpus" / "sub").exists()
    assert not (dest / "corpus" / "a").is_symlink() and not (dest / "corpus" / "b").is_symlink()
    assert not any(p.name.endswith(".extracted") for p in dest.iterdir())


def test_an_unreachable_server_names_the_ways_out(tmp_path):
    """Port 1 on the loopback: the connection is refused at once, as with no network."""
    out = run_tool(sys.executable, ROOT / "egs" / "yesno" / "local" / "download.py", tmp_path / "c",
                   "--mirror", "http://127.0.0.1:1/resources/1", "--quiet")
    assert out.returncode == 1
    assert "cannot download waves_yesno.tar.gz from http://127.0.0.1:1/resources/1" in out.stderr
    assert "--corpus-dir" in out.stderr and "--archives-dir" in out.stderr and "--mirror" in out.stderr


def test_links_an_extraction_stopped_before_its_marker_made_are_taken_for_its_own(tmp_path):
    """An archive with a symbolic and a hard link, extracted by a run killed before its marker: the rerun
    extracts it again (it refused the whole archive before, the links being 'extracted before'); a link of
    another target in their place is still refused."""
    archive = tmp_path / "links.tar"
    with tarfile.open(archive, "w") as tar:
        for name, data in (("corpus/a.txt", b"a"), ("corpus/b.txt", b"b")):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
        for name, kind in (("corpus/latest.txt", tarfile.SYMTYPE), ("corpus/copy.txt", tarfile.LNKTYPE)):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = kind, "a.txt" if kind == tarfile.SYMTYPE else "corpus/a.txt"
            tar.addfile(link)
    dest = tmp_path / "out"
    assert safe_extract(str(archive), str(dest)) == "extracted"
    next(dest.glob(".*.extracted")).unlink()  # as a run killed after the last member leaves it
    assert safe_extract(str(archive), str(dest)) == "extracted"
    assert (dest / "corpus" / "latest.txt").read_text() == "a" and (dest / "corpus" / "copy.txt").read_text() == "a"
    next(dest.glob(".*.extracted")).unlink()
    (dest / "corpus" / "latest.txt").unlink()
    (dest / "corpus" / "latest.txt").symlink_to("b.txt")  # not this archive's link
    with pytest.raises(UnsafeArchiveError, match="passes through the link"):
        safe_extract(str(archive), str(dest))


@pytest.mark.parametrize("cut", ["at a header", "inside a member"])
def test_a_plain_tar_cut_short_is_refused_and_nothing_of_it_is_left(tmp_path, cut):
    """An uncompressed tar (no gzip CRC to fail) cut at a member's header was 'extracted', its first members
    alone; one cut inside a member left that member's part behind."""
    archive = tmp_path / "corpus.tar"
    with tarfile.open(archive, "w") as tar:
        for n in range(4):
            member = tarfile.TarInfo(f"corpus/f{n}.bin")
            member.size = 1024
            tar.addfile(member, io.BytesIO(bytes([n]) * 1024))
    whole = archive.read_bytes()
    archive.write_bytes(whole[:3 * 1536] if cut == "at a header" else whole[:3 * 1536 + 512 + 700])
    dest = tmp_path / "out"
    with pytest.raises(tarfile.ReadError, match=f"{archive}: damaged or cut short \\("):
        safe_extract(str(archive), str(dest))
    assert [p for p in dest.rglob("*")] == []
    archive.write_bytes(whole)
    assert safe_extract(str(archive), str(dest)) == "extracted" and len(list(dest.rglob("*.bin"))) == 4


@pytest.mark.parametrize("name", ["absolute", "../victim.txt", "corpus/self.txt"])
def test_a_link_member_never_removes_a_file_it_names_before_its_name_is_checked(tmp_path, name):
    """A hard link to itself, named absolutely, with '..' or inside: refused or left alone, and the file it names
    is never removed (taking it for an earlier run's link removed it before the name checks ran)."""
    dest = tmp_path / "out"
    (dest / "corpus").mkdir(parents=True)
    victim = tmp_path / "victim.txt" if name != "corpus/self.txt" else dest / "corpus" / "self.txt"
    victim.write_text("precious")
    name = str(victim) if name == "absolute" else name
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tar:
        link = tarfile.TarInfo(name)
        link.type, link.linkname = tarfile.LNKTYPE, name
        tar.addfile(link)
    with pytest.raises(UnsafeArchiveError):
        safe_extract(str(archive), str(dest))
    assert victim.read_text() == "precious"


def test_a_read_only_directory_gets_its_files_and_then_its_mode_and_time_as_a_user_not_root(tmp_path):
    """A directory member read-only (0555) before its files: its mode was set at its member, and a user not root
    could write nothing into it after; and each file written into a directory moved its time to now. Extracted
    here by user nobody (a child process under root)."""
    with tarfile.open(tmp_path / "ro.tar", "w") as tar:
        for name, mode in (("corpus", 0o755), ("corpus/ro", 0o555)):
            member = dir_member(name)
            member.mode, member.mtime = mode, 1_000_000_000
            tar.addfile(member)
        member = tarfile.TarInfo("corpus/ro/a.txt")
        member.size, member.mtime = 1, 1_000_000_000
        tar.addfile(member, io.BytesIO(b"a"))
    with where_nobody_writes(tmp_path / "ro.tar") as shared:
        assert extracted_as_nobody(shared / "ro.tar", shared / "out") == "extracted"
        ro = shared / "out" / "corpus" / "ro"
        assert (ro / "a.txt").read_text() == "a" and (ro.stat().st_mode & 0o777) == 0o555
        assert ro.stat().st_mtime == ro.parent.stat().st_mtime == (ro / "a.txt").stat().st_mtime == 1_000_000_000


def test_an_extraction_of_read_only_files_killed_before_its_marker_is_done_again_as_a_user_not_root(tmp_path):
    """A killed run left the archive's read-only (0444) files: the rerun opened each for writing, and a user not
    root met 'Permission denied' on every rerun. Extracted here by user nobody, its marker then removed as a kill
    before it leaves it."""
    from rnnt.prep.extract import marker_path

    with tarfile.open(tmp_path / "ro.tar", "w") as tar:
        member = tarfile.TarInfo("corpus/a.txt")
        member.size, member.mode = 1, 0o444
        tar.addfile(member, io.BytesIO(b"a"))
    with where_nobody_writes(tmp_path / "ro.tar") as shared:
        assert extracted_as_nobody(shared / "ro.tar", shared / "out") == "extracted"
        os.remove(marker_path(str(shared / "ro.tar"), str(shared / "out")))
        assert extracted_as_nobody(shared / "ro.tar", shared / "out") == "extracted"
        assert (shared / "out" / "corpus" / "a.txt").read_text() == "a"


@contextlib.contextmanager
def where_nobody_writes(archive: Path):
    """A folder user nobody may write in (pytest's tmp_path is root's alone) holding a copy of archive; removed
    after, its folders made writable first (a read-only one a user not root could not empty)."""
    shared = Path(tempfile.mkdtemp(prefix="rnnt-extract-"))
    try:
        shared.chmod(0o777)
        shutil.copy(archive, shared / archive.name)
        yield shared
    finally:
        for folder in (path for path in shared.rglob("*") if path.is_dir() and not path.is_symlink()):
            folder.chmod(0o755)
        shutil.rmtree(shared)


def extracted_as_nobody(archive: Path, dest: Path) -> str:
    """safe_extract's answer in a fork of this process running as user nobody where this one is root (the
    interpreter may sit where nobody cannot start it), else as this user."""
    answer = archive.parent / "answer"
    pid = os.fork()
    if pid == 0:
        try:
            if os.geteuid() == 0:
                os.setuid(65534)
            answer.write_text(safe_extract(str(archive), str(dest)))
            os._exit(0)
        except BaseException as error:
            answer.write_text(repr(error))
            os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0, answer.read_text()
    return answer.read_text()
