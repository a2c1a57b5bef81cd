#!/usr/bin/env python3
"""Keep or drop table lines by a key list (see --help)."""
import sys

from rnnt.datadir.filter_scp import main

sys.exit(main())
