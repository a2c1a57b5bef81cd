#!/usr/bin/env python3
"""utt2spk -> spk2utt (see --help)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # the repo: no path.sh needed

from rnnt.cli import exit_with
from rnnt.datadir.speakers import main_utt2spk_to_spk2utt as main

exit_with(main)
