#!/usr/bin/env python3
"""utt2spk -> spk2utt (see --help)."""
import sys

from rnnt.datadir.speakers import main_utt2spk_to_spk2utt as main

sys.exit(main())
