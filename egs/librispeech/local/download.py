#!/usr/bin/env python3
"""Download and extract LibriSpeech (OpenSLR resource 12) subsets into <dest>/LibriSpeech/<subset>.

Partial downloads resume; archives are verified against the published MD5 sums before use.
"""

import os
import sys

from rnnt.prep.corpus_fetch import main

MIRROR = "https://www.openslr.org/resources/12"
# Published in the corpus's md5sum.txt.
MD5 = {
    "dev-clean": "42e2234ba48799c1f50f24a7926300a1",
    "dev-other": "c8d0bcc9cca99d4f8b62fcc847357931",
    "test-clean": "32fa31d27d2e1cad72775fee3f4849a9",
    "test-other": "fb5a50374b501bb3bac4815ee91d3135",
    "train-clean-100": "2a93770f6d5c6c964bc36631d331a522",
    "train-clean-360": "c0e676e450a7ff2f54aeade5171606fa",
    "train-other-500": "d1a0fd59409feb2c614ce4d30c387708",
}
PARTS = {name: (f"{name}.tar.gz", md5, os.path.join("LibriSpeech", name)) for name, md5 in MD5.items()}

if __name__ == "__main__":
    sys.exit(main(__doc__, PARTS, MIRROR))
