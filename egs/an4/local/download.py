#!/usr/bin/env python3
"""Download and extract CMU AN4 (an4_sphere.tar.gz, NIST SPHERE audio, 64 MB) into <dest>/an4.

CMU publishes no checksum for the archive; the gzip stream's own CRC-32 is checked as it is
extracted, so a truncated or corrupt download fails there. --archives-dir takes a folder that
already holds an4_sphere.tar.gz; without internet access give run.sh --corpus-dir instead.
"""

import sys

from rnnt.prep.corpus_fetch import main

MIRROR = "http://www.speech.cs.cmu.edu/databases/an4"
PARTS = {"an4": ("an4_sphere.tar.gz", None, "an4")}

if __name__ == "__main__":
    sys.exit(main(__doc__, PARTS, MIRROR))
