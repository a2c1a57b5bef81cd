"""Fetch and extract a corpus's archives: from a mirror URL, or from a directory of archives already
downloaded; a part whose extraction finished (its marker says so) is skipped. A folder that a killed
extraction left without its marker is extracted again: a non-empty folder proves nothing."""

from __future__ import annotations

import os
import sys
import tarfile
import urllib.error

from rnnt.cli import tool_parser
from rnnt.file_lock import held
from rnnt.prep.download import ChecksumError, TransferCut, download, verify
from rnnt.prep.extract import UnsafeArchiveError, marker_path, safe_extract


def fetch_part(archive: str, checksum: str, mirror: str, dest: str, archives_dir: str | None,
               extracted_path: str, quiet: bool = False) -> str:
    """Makes dest/<extracted_path> complete; returns what was done ('present', 'extracted', 'downloaded+extracted').
    Runs at once for the same part take turns (its lock in dest): one fetches it, the others find it present."""
    with held(os.path.join(dest, f".{archive}.lock"), f"{archive}: another run is fetching it into {dest}; waiting"):
        marker = marker_path(archive, dest)
        if os.path.exists(marker) and os.path.isdir(os.path.join(dest, extracted_path)):
            return "present"
        if os.path.exists(marker):  # the folder it marked is gone (deleted): extracted again
            os.remove(marker)
        local = os.path.join(archives_dir, archive) if archives_dir else None
        if local and os.path.isfile(local):
            verify(local, checksum, quiet)
            status, path = "present", local
        elif local:  # given, it was silently passed over for the network (whose error then advised giving it)
            raise FileNotFoundError(f"{local}: no such archive in --archives-dir (its name as the mirror has it)")
        else:
            path = os.path.join(dest, "downloads", archive)
            status = download(f"{mirror.rstrip('/')}/{archive}", path, checksum, quiet)
        _extract(path, dest, local, checksum, quiet)
    return "extracted" if status == "present" else f"{status}+extracted"


def _extract(path: str, dest: str, local: str | None, checksum: str | None, quiet: bool) -> None:
    """safe_extract; an archive that cannot be read, if it is a download of no checksum (a cut, an error page), is
    deleted to be fetched again; one of --archives-dir or one that matched its checksum is the user's or the
    publisher's, and fetching it again would bring the same bytes."""
    try:
        safe_extract(path, dest, verified=checksum is not None, quiet=quiet)
    except (tarfile.TarError, EOFError) as error:
        if path == local:
            advice = "replace it in --archives-dir with a good copy"
        elif checksum is not None:
            advice = "it matches its published checksum, so a new download would be the same; please report it"
        else:
            os.remove(path)
            advice = "deleted; run again to download it again"
        raise ChecksumError(f"not a readable archive: {error}; {advice}") from error


def main(description: str, parts: dict[str, tuple[str, str, str]], default_mirror: str, argv=None) -> int:
    """The command line of local/<corpus>/download.py. parts: name -> (archive, checksum, extracted path)."""
    parser = tool_parser(description)
    parser.add_argument("dest", help="directory to download and extract into")
    parser.add_argument("parts", nargs="*", default=list(parts), help=f"parts to fetch (default: all of {list(parts)})")
    parser.add_argument("--mirror", default=default_mirror, help=f"base URL of the archives (default {default_mirror})")
    parser.add_argument("--archives-dir", help="a directory holding archives already downloaded")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    unknown = [p for p in args.parts if p not in parts]
    if unknown:
        parser.error(f"unknown parts {unknown}; choose from {list(parts)}")
    done = []
    for name in args.parts:
        archive, checksum, extracted = parts[name]
        try:
            status = fetch_part(archive, checksum, args.mirror, args.dest, args.archives_dir, extracted, args.quiet)
        except TransferCut as error:
            print(f"download.py: {name}: {error}", file=sys.stderr)
            return 1
        except (ConnectionError, urllib.error.URLError, TimeoutError) as error:
            print(f"download.py: {name}: cannot download {archive} from {args.mirror} ({error}). Without access to "
                  "it: give the recipe --corpus-dir with the corpus already extracted, this tool --archives-dir "
                  "with the archive downloaded elsewhere, or --mirror with another server", file=sys.stderr)
            return 1
        except (ChecksumError, UnsafeArchiveError, OSError) as error:
            print(f"download.py: {name}: {error}", file=sys.stderr)
            return 1
        done.append(f"{name} {status}")
    print(f"download.py: {args.dest}: " + ", ".join(done))
    return 0
