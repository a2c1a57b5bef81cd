#!/usr/bin/env python3
"""Split a table into N parts, optionally keeping speakers whole (see --help)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from rnnt.datadir.split_scp import main as main  # noqa: E402

sys.exit(main())
