#!/usr/bin/env python3
"""spk2utt -> utt2spk (see --help)."""
import sys

from rnnt.datadir.speakers import main_spk2utt_to_utt2spk as main

sys.exit(main())
