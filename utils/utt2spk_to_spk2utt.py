#!/usr/bin/env python3
"""utt2spk -> spk2utt (see --help)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from rnnt.datadir.speakers import main_utt2spk_to_spk2utt as main  # noqa: E402

sys.exit(main())
