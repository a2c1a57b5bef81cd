"""What the recordings of Kaldi data dirs are, as one value: each wav.scp entry, and the size and modification
time of the file it names (a command as it is written). A recording replaced at its path changes it though
wav.scp does not: a recipe that imports data dirs (egs/TEMPLATE's --data-dirs) gives it to its shards stage,
which shards the new audio (a corpus folder is itself an input of the stage that reads it).

    python3 -m rnnt.datadir.recordings_fingerprint WAV_SCP...   prints the fingerprint
"""

from __future__ import annotations

import hashlib
import os
import sys

from rnnt.cli import module_usage
from rnnt.datadir.table import KEEP_BYTES, read_table


def recordings_fingerprint(wav_scps: list[str]) -> str:
    digest = hashlib.sha256()
    for wav_scp in wav_scps:
        for key, line in read_table(wav_scp, [], KEEP_BYTES).items():
            path = line.value
            stat = os.stat(path) if not path.endswith("|") and os.path.isfile(path) else None
            digest.update(f"{key}\t{path}\t{stat.st_size if stat else ''}\t{stat.st_mtime_ns if stat else ''}\n"
                          .encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def main(argv: list[str]) -> int:
    if (status := module_usage(argv, __doc__, bool(argv) and not argv[0].startswith("-"))) is not None:
        return status
    try:
        print(recordings_fingerprint(argv))
    except OSError as error:
        print(f"recordings_fingerprint: {error.filename or ''}: {error.strerror or error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
