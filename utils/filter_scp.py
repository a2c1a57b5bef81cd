#!/usr/bin/env python3
"""Keep or drop table lines by a key list (see --help)."""
from rnnt.cli import exit_with
from rnnt.datadir.filter_scp import main

exit_with(main)
