"""What a decoding run leaves in its decode dir, scored against every reference (steps/decode.py with
our searches, steps/decode_sherpa_onnx.py with an exported model): hyp and ref (Kaldi text), recogs (ref
and hyp per utterance), errs (the %WER line and details), wer (the %WER line), per_spk (Kaldi's per-speaker
table, rnnt.speaker_scoring, where the references' data dir has utt2spk), per (a phone model's phone error
rate); and the words' times, ctm (rnnt.ctm), confidence (their confidences' NCE and AUC, where they have
them), and decode.py's nbest.json.

Every utterance of the references is scored: one that was not decoded counts as all deletions and is
named, and the WER line is marked [PARTIAL] (compute-wer's "Scored N sentences, M not present in hyp.").
"""

from __future__ import annotations

import json
import logging
import os
import sys

from rnnt.cli import ToolError
from rnnt.confidence import confidence_line
from rnnt.ctm import write_ctm
from rnnt.data.sources import records
from rnnt.datadir.table import KEEP_BYTES, Line, has_undecodable_bytes, read_table, write_table
from rnnt.scoring import score, words
from rnnt.speaker_scoring import per_speaker_text, speakers_of, unlisted_utterances


def reference_texts(data_list: str, text: str | None) -> tuple[dict[str, str], str]:
    """utt -> reference transcript (those of `text`, by default the Kaldi text beside the list, else the
    transcripts in the list), and where they came from."""
    if text and not os.path.isfile(text):
        raise FileNotFoundError(f"{text}: no such file (--text names the references)")
    text = text or os.path.join(os.path.dirname(os.path.abspath(data_list)), "text")
    if os.path.isfile(text):
        return {key: scorable(line) for key, line in read_table(text, errors=KEEP_BYTES).items()}, text
    lines_named = logging.getLogger("rnnt.data.sources")  # by the decode's own pass over the list (shards too), once
    was, lines_named.disabled = lines_named.disabled, True
    try:
        refs: dict[str, str] = {}
        for record in records(data_list, quiet=True):  # a key's first, as decoding takes it (stages.first_of_each_key)
            refs.setdefault(record["key"], record["txt"])
        return refs, data_list
    finally:
        lines_named.disabled = was


def scorable(line: Line) -> str:
    """A reference line's transcript; bytes that are not UTF-8 each U+FFFD (named: the utterance is scored, its
    words with them errors, where leaving it out would have scored the rest as if they were all)."""
    if not has_undecodable_bytes(line.value):
        return line.value
    print(f"{line.where}: the reference of {line.key} is not UTF-8; its undecodable bytes are scored as U+FFFD",
          file=sys.stderr)
    return line.value.encode("utf-8", KEEP_BYTES).decode("utf-8", "replace")


OPTIONAL_OUTPUTS = ("ctm", "confidence", "nbest.json", "per", "per_spk")  # written by some runs, not by others


def write_results(out: str, refs: dict[str, str], hyps: dict[str, str], refs_from: str, tool: str):
    """Writes the decode dir out; returns the score report. Utterances decoded without a reference and
    references not decoded are named on stderr. Nothing decoded, or nothing of refs (another set's text), is a
    ToolError (it scored %WER 100 [PARTIAL] and the stage ended well); a run's optional outputs
    (OPTIONAL_OUTPUTS) of a run before are removed, so that none sits beside hypotheses of another model
    (combine_nbest.py pooled an old nbest.json)."""
    if not hyps and not refs:  # "(the reasons are above)": there were none
        raise ToolError(f"{refs_from} holds no utterance to decode; {out} left as it was")
    if not hyps:
        raise ToolError(f"no utterance of {refs_from} could be decoded (the reasons are above); {out} left as it was")
    scored = {key: hyp for key, hyp in hyps.items() if key in refs}
    if not scored:  # the references of another set: every word would have scored as deleted
        raise ToolError(f"none of the {len(hyps)} utterances decoded (the first {min(hyps)}) has a reference in "
                        f"{refs_from} ({len(refs)} references{f', the first {min(refs)}' if refs else ''}); "
                        f"{out} left as it was")
    os.makedirs(out, exist_ok=True)
    for name in OPTIONAL_OUTPUTS:
        if os.path.exists(os.path.join(out, name)):
            os.remove(os.path.join(out, name))
    for key in sorted(set(hyps) - set(refs)):
        print(f"{tool}: {key} has no reference in {refs_from}; not scored", file=sys.stderr)
    hyps = scored
    for key in sorted(set(refs) - set(hyps)):
        print(f"{tool}: {key} of {refs_from} was not decoded (audio unreadable, see above, or shorter than "
              "a frame); scored as deleted words", file=sys.stderr)
    write_table(os.path.join(out, "hyp"), hyps.items())
    write_table(os.path.join(out, "ref"), refs.items())
    with open(os.path.join(out, "recogs"), "w", encoding="utf-8", errors=KEEP_BYTES) as f:  # a key not UTF-8
        for key in sorted(refs):
            f.write(f"{key}:\tref={words(refs[key])}\n{key}:\thyp={words(hyps.get(key, ''))}\n")
    report = score(refs, hyps)
    with open(os.path.join(out, "errs"), "w", encoding="utf-8", errors=KEEP_BYTES) as f:
        f.write(report.text())
    with open(os.path.join(out, "wer"), "w", encoding="utf-8") as f:
        f.write(report.wer_line + "\n")
    utt2spk = os.path.join(os.path.dirname(refs_from), "utt2spk")
    if os.path.basename(refs_from) == "text" and os.path.isfile(utt2spk):
        speakers = speakers_of(utt2spk, tool)
        if unlisted := unlisted_utterances(report, speakers, utt2spk):
            print(f"{tool}: {unlisted}", file=sys.stderr)
        with open(os.path.join(out, "per_spk"), "w", encoding="utf-8", errors=KEEP_BYTES) as f:
            f.write(per_speaker_text(report, speakers))
    return report


def nbest_line(key: str, entries: list[dict]) -> tuple[str, str]:
    """An utterance's line of nbest.json, made as it is decoded (its rows kept as dicts to the end took a few times
    the memory: 170 kB an utterance at beam 8), with its key for the order."""
    return key, json.dumps({"key": key, "hyps": entries}, ensure_ascii=False)


def write_word_outputs(out: str, words: dict[str, list[dict]], nbest: list[tuple[str, str]] | None, data_dir: str,
                       tool: str, refs: dict[str, str], confidences: str = "uncalibrated posteriors") -> None:
    """The decode dir's ctm (in data_dir's recordings' times where it has segments), confidence (where the words
    have them, not rounded: how well they tell right words from wrong ones, rnnt.confidence.confidence_line, and
    `confidences`, what calibrated them) and nbest.json (given: each utterance's nbest_line), sorted by key.
    Utterances without a usable segments line are named on stderr."""
    for key in write_ctm(os.path.join(out, "ctm"), words, data_dir):
        print(f"{tool}: {key} has no usable line in {data_dir}/segments; its words are left out of the ctm",
              file=sys.stderr)
    if line := confidence_line(refs, words):
        with open(os.path.join(out, "confidence"), "w", encoding="utf-8") as f:
            f.write(f"{line}; {confidences}\n")
    if nbest is not None:
        with open(os.path.join(out, "nbest.json"), "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for _, line in sorted(nbest, key=lambda keyed: keyed[0]))
