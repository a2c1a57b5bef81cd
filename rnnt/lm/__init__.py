"""N-gram language models over a model's units or over words: estimated here (Kneser-Ney), kept as ARPA
files, and fused into the CTC prefix beam search and the transducer searches (shallow fusion, LODR; a word
LM through a lexicon)."""
