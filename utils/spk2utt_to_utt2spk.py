#!/usr/bin/env python3
"""spk2utt -> utt2spk (see --help)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from rnnt.datadir.speakers import main_spk2utt_to_utt2spk as main  # noqa: E402

sys.exit(main())
