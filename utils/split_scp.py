#!/usr/bin/env python3
"""Split a table into N parts, optionally keeping speakers whole (see --help)."""
from rnnt.cli import exit_with
from rnnt.datadir.split_scp import main

exit_with(main)
