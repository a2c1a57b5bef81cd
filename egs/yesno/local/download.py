#!/usr/bin/env python3
"""Download and extract Kaldi's yesno corpus (OpenSLR resource 1) into <dest>/waves_yesno.

The archive is verified against its published SHA-256 before use. --archives-dir takes a folder
that already holds waves_yesno.tar.gz.
"""

import sys

from rnnt.prep.corpus_fetch import main

MIRROR = "https://www.openslr.org/resources/1"
SHA256 = "c3f49e0cca421f96b75b41640749167b52118f232498667ca7a5f9416aef8e73"
PARTS = {"waves_yesno": ("waves_yesno.tar.gz", SHA256, "waves_yesno")}

if __name__ == "__main__":
    sys.exit(main(__doc__, PARTS, MIRROR))
