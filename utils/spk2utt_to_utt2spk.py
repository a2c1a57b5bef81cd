#!/usr/bin/env python3
"""spk2utt -> utt2spk (see --help)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # the repo: no path.sh needed

from rnnt.cli import exit_with
from rnnt.datadir.speakers import main_spk2utt_to_utt2spk as main

exit_with(main)
