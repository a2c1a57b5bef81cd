#!/usr/bin/env python3
"""Download and extract speechocean762 (OpenSLR resource 101, speechocean762.tar.gz, 520 MB, both
its train/ and test/ halves) into <dest>/speechocean762.

No checksum is given in this script (none was available offline when it was written); the gzip
stream's own CRC-32 is checked as it is extracted, so a truncated or corrupt download fails there.
--archives-dir takes a folder that already holds the archive; without internet access give run.sh
--corpus-dir instead.
"""

import sys

from rnnt.prep.corpus_fetch import main

MIRROR = "https://www.openslr.org/resources/101"
PARTS = {"speechocean762": ("speechocean762.tar.gz", None, "speechocean762")}

if __name__ == "__main__":
    sys.exit(main(__doc__, PARTS, MIRROR))
