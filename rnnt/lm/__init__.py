"""N-gram language models over a model's units or over words: estimated here (Kneser-Ney), kept as ARPA
files, and scored during CTC prefix beam search (shallow fusion; a word LM through a lexicon)."""
