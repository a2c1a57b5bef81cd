"""Safe extraction of tar archives: nothing may land outside the target directory.

Refused: absolute member names, names with a '..' component, links whose target resolves outside
the target directory, any member whose path, or link whose target, passes through a link already
there (so that no later member can redirect an earlier, checked one), a link that would replace
something already extracted, a hard link to no file extracted before it, and device or fifo members.
Extraction is complete only when its marker file says so: a folder left by a killed extraction is extracted
again (the links it made taken for its own).
"""

from __future__ import annotations

import gzip
import os
import stat
import tarfile
import zlib

from rnnt.atomic_write import write_atomically
from rnnt.progress_bar import progress


class UnsafeArchiveError(RuntimeError):
    pass


def _inside(root: str, path: str) -> bool:
    root = os.path.realpath(root)
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def _link_on_the_way(dest: str, relative: str) -> str | None:
    """The first existing link among dest/<each prefix of relative>, the whole path included."""
    path = dest
    for part in relative.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        path = os.path.join(path, part)
        if os.path.islink(path):
            return path
    return None


def check_name(member: tarfile.TarInfo, dest: str, archive: str) -> None:
    """Refuses a member whose name is absolute, climbs out with '..' or lands outside dest."""
    name = member.name
    if os.path.isabs(name) or name.startswith(("/", "\\")):
        raise UnsafeArchiveError(f"{archive}: member '{name}' has an absolute path; refusing to extract")
    if ".." in name.replace("\\", "/").split("/"):
        raise UnsafeArchiveError(f"{archive}: member '{name}' climbs out with '..'; refusing to extract")
    if not _inside(dest, os.path.join(dest, name)):
        raise UnsafeArchiveError(f"{archive}: member '{name}' would land outside {dest}; refusing to extract")


def check_member(member: tarfile.TarInfo, dest: str, archive: str) -> None:
    check_name(member, dest, archive)
    name, target = member.name, os.path.join(dest, member.name)
    link = _link_on_the_way(dest, name)
    if link is not None:
        raise UnsafeArchiveError(f"{archive}: member '{name}' passes through the link {link} extracted before; "
                                 "refusing to extract")
    if member.issym() or member.islnk():
        base = os.path.dirname(target) if member.issym() else dest
        link_target = os.path.normpath(os.path.join(base, member.linkname))
        if os.path.isabs(member.linkname) or not _inside(dest, link_target):
            raise UnsafeArchiveError(f"{archive}: link '{name}' -> '{member.linkname}' points outside {dest}; "
                                     "refusing to extract")
        through = _link_on_the_way(dest, os.path.join(os.path.relpath(base, dest), member.linkname))
        if through is not None:
            raise UnsafeArchiveError(f"{archive}: link '{name}' -> '{member.linkname}' passes through the link "
                                     f"{through}; refusing to extract")
        if os.path.lexists(target):
            raise UnsafeArchiveError(f"{archive}: link '{name}' would replace {target}, extracted before; "
                                     "refusing to extract")
        if member.islnk() and not os.path.isfile(link_target):  # tarfile's KeyError, a traceback, files left
            raise UnsafeArchiveError(f"{archive}: hard link '{name}' -> '{member.linkname}' names no file extracted "
                                     "before it; refusing to extract")
    elif not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(f"{archive}: member '{name}' is a device or fifo; refusing to extract")


def remove_own_leftover(member: tarfile.TarInfo, dest: str) -> None:
    """For a member check_name passed: removes the link an extraction of this archive stopped before its marker
    left at member's path, a symbolic link to member's own target or a hard link to the other file member names
    (the checks would take it for someone else's and refuse the archive for good). Anything else is left."""
    target = os.path.join(dest, member.name)  # inside dest: check_name has passed
    if member.issym():
        ours = os.path.islink(target) and os.readlink(target) == member.linkname
    else:
        source = os.path.normpath(os.path.join(dest, member.linkname))
        ours = (source != os.path.normpath(target) and _inside(dest, source) and not os.path.islink(target)
                and not os.path.islink(source) and os.path.isfile(target) and os.path.isfile(source)
                and os.path.samefile(target, source))
    if ours and _link_on_the_way(dest, os.path.dirname(member.name)) is None:
        os.remove(target)


def marker_path(archive: str, dest: str) -> str:
    return os.path.join(dest, f".{os.path.basename(archive)}.extracted")


def _remove_written(written: list[str]) -> None:
    for path in reversed(written):
        if os.path.islink(path) or os.path.isfile(path):
            os.remove(path)
        elif os.path.isdir(path) and not os.listdir(path):
            os.rmdir(path)


# What reading a damaged or cut archive raises (gzip's CRC or length check, a stream that ends early, a
# corrupt deflate block, a tar header that cannot be read); an error writing the files is none of these.
DAMAGED = (gzip.BadGzipFile, EOFError, zlib.error, tarfile.ReadError)


def _extract_members(tar: tarfile.TarFile, archive: str, dest: str, written: list[str],
                     quiet: bool) -> tuple[int, list[tuple[tarfile.TarInfo, str]]]:
    """Checks and writes each member in turn, adding the paths it creates to written; returns their number and
    the directories (member, path), whose attributes are set once everything is in them (_set_directory_attributes)."""
    # Our checks replace tarfile's own filters, which only newer Pythons have.
    trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
    count, directories = 0, []
    for member in progress(tar, desc=f"extract {os.path.basename(archive)}", unit=" files", disable=quiet):
        if member.issym() or member.islnk():
            check_name(member, dest, archive)  # before anything is removed
            remove_own_leftover(member, dest)
        check_member(member, dest, archive)
        target = os.path.join(dest, member.name)
        missing = [target]  # named before it is written (a member cut short is removed too), and the folders
        while not os.path.lexists(os.path.dirname(missing[-1])):  # tarfile makes for it
            missing.append(os.path.dirname(missing[-1]))
        written.extend(path for path in reversed(missing) if not os.path.lexists(path))
        if member.isfile() and os.path.isfile(target) and not os.path.islink(target) and \
                not os.access(target, os.W_OK):  # a killed run's read-only file (0444): opened for writing, it
            os.chmod(target, os.stat(target).st_mode | stat.S_IWUSR)  # refused every rerun (its inode kept: a hard
            # link to it stays this archive's own); tarfile sets the member's mode after
        try:
            tar.extract(member, dest, set_attrs=member.isfile(), **trusted)
        except DAMAGED:
            raise
        except OSError as error:  # a full disk: named, as its own error does not
            raise OSError(error.errno, error.strerror, error.filename or target) from None
        if member.isdir():
            directories.append((member, target))
        count += 1
    for path in written:  # a link made later can send an earlier one outside (a -> b/../x, then b -> .)
        if os.path.islink(path) and not _inside(dest, path):
            raise UnsafeArchiveError(f"{archive}: link {path} -> '{os.readlink(path)}' resolves outside {dest} "
                                     "through links extracted after it; refusing to extract")
    return count, directories


def _set_directory_attributes(tar: tarfile.TarFile, directories: list[tuple[tarfile.TarInfo, str]]) -> None:
    """Each directory's owner (as root), mode and times as the archive gives them, the deepest first, once
    every member is written and the archive read to its end: a read-only directory set at its member refused
    the files after it to anyone but root (and the removal of a refused archive's), and each file written into
    a directory moved its time to now."""
    for member, path in sorted(directories, key=lambda item: item[1], reverse=True):
        tar.chown(member, path, numeric_owner=False)
        tar.utime(member, path)
        tar.chmod(member, path)


def _check_end(tar: tarfile.TarFile, vouched: bool) -> None:
    """Refuses an archive whose members ended at a header tarfile could not read (data follows: it ends its members
    there in silence), or, unless something else vouches that the archive is whole (a gzip stream's length and CRC,
    a checksum), one that ends with no end-of-archive blocks: a plain tar cut at a header. A whole archive made
    without them (GNU tar reads it) is taken."""
    rest = tar.fileobj.read(tarfile.RECORDSIZE)
    if rest.strip(b"\0"):
        raise tarfile.ReadError("a header that cannot be read after the last member read")
    if not rest and not vouched:
        raise tarfile.ReadError("no end-of-archive blocks after its last member")


def safe_extract(archive: str, dest: str, verified: bool = False, quiet: bool = False) -> str:
    """Extracts archive into dest unless already done; returns 'present' or 'extracted'. verified: archive passed
    a checksum (so it is whole as published); quiet: no progress bar.

    One streaming pass (a 30 GB archive is read once); each member is checked before it is written,
    and if one is refused, or writing fails, everything written so far is removed again.
    """
    marker = marker_path(archive, dest)
    if os.path.exists(marker):
        return "present"
    os.makedirs(dest, exist_ok=True)
    written: list[str] = []
    with open(archive, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    # tarfile's own gzip stream never checks the CRC and length at the end; gzip's does, once read to the end
    stream = gzip.open(archive) if gzipped else open(archive, "rb")
    try:
        with stream, tarfile.open(fileobj=stream, mode="r|" if gzipped else "r|*") as tar:
            count, directories = _extract_members(tar, archive, dest, written, quiet)
            _check_end(tar, vouched=gzipped or verified)
            while stream.read(1 << 20):  # to the end: a damaged or cut archive fails its CRC check here
                pass
            _set_directory_attributes(tar, directories)
    except DAMAGED as error:  # wherever the reading meets it: tarfile reads ahead, so often inside the members
        _remove_written(written)
        raise tarfile.ReadError(f"{archive}: damaged or cut short ({error})") from error
    except Exception:  # refused, or a full disk: nothing of it is left (space given back)
        _remove_written(written)
        raise
    write_atomically(marker, lambda f: f.write(f"{count} members\n"))
    return "extracted"
