#!/usr/bin/env python3
"""Keep or drop table lines by a key list (see --help)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # the repo: no path.sh needed

from rnnt.cli import exit_with
from rnnt.datadir.filter_scp import main

exit_with(main)
