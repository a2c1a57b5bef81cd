#!/usr/bin/env python3
"""utt2spk -> spk2utt (see --help)."""
from rnnt.cli import exit_with
from rnnt.datadir.speakers import main_utt2spk_to_spk2utt as main

exit_with(main)
