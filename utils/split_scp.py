#!/usr/bin/env python3
"""Split a table into N parts, optionally keeping speakers whole (see --help)."""
import sys

from rnnt.datadir.split_scp import main

sys.exit(main())
