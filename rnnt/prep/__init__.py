"""Corpus preparation: download, safe extraction, and writing Kaldi data dirs."""
