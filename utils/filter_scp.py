#!/usr/bin/env python3
"""Keep or drop table lines by a key list (see --help)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from rnnt.datadir.filter_scp import main as main  # noqa: E402

sys.exit(main())
