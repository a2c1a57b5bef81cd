#!/usr/bin/env python3
"""spk2utt -> utt2spk (see --help)."""
from rnnt.cli import exit_with
from rnnt.datadir.speakers import main_spk2utt_to_utt2spk as main

exit_with(main)
