#!/usr/bin/env python3
"""Decode a data list with a trained experiment and score it.

Every utterance of the references is scored: those of --text, by default the Kaldi `text` of the data
dir the list is in (data/test/text for data/test/data.list), else the transcripts the list itself
holds. An utterance that could not be decoded (unreadable audio, shorter than a frame) counts as all
deletions, is named, and the WER line is marked [PARTIAL] (compute-wer's "Scored N sentences, M not present
in hyp.").

Writes <exp-dir>/decode-<set>-<method>[-<tag>]/ (the method named +beam8, +max3 with --beam 8 or
--max-symbols-per-frame 3, +hotwords with --hotwords, and +chunk16, +whole, ... with --attention-chunk or
--left-chunks, rnnt.attention_chunks; rnnt.decode_results): hyp,
ref, recogs, errs, wer, per_spk (per speaker, where the data dir has utt2spk), ctm
(the best hypothesis's words with their times, as Kaldi's steps/get_ctm.sh writes them: rnnt.ctm; in the
recordings' times where the list's data dir has segments), confidence (the words' confidences' NCE and AUC
against the references, where they have them), and with --nbest nbest.json, a JSON object a
line: {"key", "hyps": [{"text", "score", "tokens": [{"unit", "id", "time"}]}]}, best first. A model over
phones also gets per: its phone error rate against the reference words' pronunciations in its lexicon and
the CMU Pronouncing Dictionary (rnnt.phone_scoring): the sounds it got right, before any spelling or LM.
Prints the real-time factor: decoding seconds per second of audio (with --threads, per core).
"""

import argparse
import os
import sys
import time

import torch
from rnnt.devices import auto_device
from rnnt.progress_bar import progress

from rnnt.attention_chunks import add_attention_options, attend_as_asked, from_args
from rnnt.cli import at_least, error_line, run_tool, show_data_reports, tool_parser, ToolError
from rnnt.confidence import usable_calibration
from rnnt.training import checkpoint as checkpoint_file
from rnnt.decode_results import nbest_line, reference_texts, write_results, write_word_outputs
from rnnt.lm.fusion import fusion_config_path
from rnnt.lm.hotwords import hotword_graph
from rnnt.phone_scoring import hypothesis_phones, write_phone_error_rate
from rnnt.search_methods import (METHODS, SearchOptions, add_lm_fusion_option, check_search_options, check_method,
                                 lm_options, with_hotwords)
from rnnt.transcriber import (
    decode_batch_nbest,
    decoding_pipeline,
    load_model,
    nbest_entries,
    seconds_per_encoder_frame,
    words_with_times,
)


def parse_args() -> argparse.Namespace:
    parser = tool_parser(__doc__, "steps/decode.py --method modified_beam exp/tiny data/test/data.list test")
    parser.add_argument("--method", choices=METHODS, default="greedy")
    parser.add_argument("--beam", type=at_least(1),
                        help="default 4; an LM-fused method (*_lm, *_lodr): the beam its LM weights were chosen with")
    parser.add_argument("--max-symbols-per-frame", type=at_least(1),
                        help="greedy and beam: labels a frame (default 1 for a model trained one symbol per frame, "
                             "else 3; more than 1 searches such a model as a standard transducer)")
    parser.add_argument("--checkpoint", help="default: the experiment's model.pt, the model its result lines "
                        "name (unless training went past it), else the newest avg-N.pt or checkpoint")
    parser.add_argument("--no-ema", action="store_true", help="use raw weights even where EMA weights are kept")
    parser.add_argument("--batch-size", type=at_least(1), default=16, help="utterances encoded together")
    parser.add_argument("--device", type=auto_device, default="cpu",
                        help="cpu (default), cuda, cuda:N, or auto (cuda where at hand)")
    parser.add_argument("--tag", default="", help="appended to the output dir's name: which model was decoded "
                        "(recipes: avg<N>-epoch-<K> or epoch-<K>), so decodes of other models do not overwrite it")
    parser.add_argument("--threads", type=at_least(0), default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--nbest", action="store_true",
                        help="also write nbest.json: per utterance every hypothesis the search kept (up to --beam; "
                             "pooled_beam_lm up to 2 x --beam, its two searches' pooled), "
                             "with scores and unit times")
    parser.add_argument("--raw-confidences", action="store_true", help="words' confidences as the model's "
                        "posteriors give them, not through <exp-dir>/confidence_calibration.json where it has one "
                        "(steps/calibrate_confidence.py)")
    add_lm_fusion_option(parser)
    add_attention_options(parser)
    parser.add_argument("--text", help="the reference Kaldi text (default: <the list's dir>/text if there, else the "
                        "transcripts in the list)")
    parser.add_argument("exp_dir")
    parser.add_argument("data_list")
    parser.add_argument("set_name", help="names the output dir decode-<set>-<method>[+beamN][+maxN]...[-<tag>]")
    args = parser.parse_args()
    if "/" in args.set_name + (args.tag or ""):  # decoded, then written into a dir in another
        parser.error(f"the set name and --tag name a dir in {args.exp_dir} (decode-<set>-<method>-<tag>): no '/' in "
                     f"'{args.set_name}' or '{args.tag or ''}' (data/test_clean: set name test_clean)")
    check_search_options(parser, args)
    args.attention = from_args(parser, args)
    return args


def search_options(args, tokenizer, checkpoint: str) -> SearchOptions:
    """The method's options: its beam, its LM's (an LM-fused method) and the hotwords'."""
    options = SearchOptions(args.beam or 4, args.max_symbols_per_frame)
    if METHODS[args.method].lm:
        options = lm_options(args.method, tokenizer, args.lm_fusion or fusion_config_path(args.exp_dir, args.method),
                             args.beam, args.max_symbols_per_frame, checkpoint)
    return with_hotwords(options, hotword_graph(tokenizer, args.hotwords, args.hotwords_score)
                         if args.hotwords else None)


def confidence_calibration(args, checkpoint: str):
    """What maps the words' confidences (None: raw posteriors) and what it is, as the results name it."""
    if args.raw_confidences:
        return None, "uncalibrated posteriors (--raw-confidences)"
    calibration, confidences = usable_calibration(args.exp_dir, checkpoint, METHODS[args.method].head,
                                                  args.no_ema and checkpoint_file.holds_ema(checkpoint))
    if confidences.startswith("uncalibrated posteriors: "):  # a calibration that is not this model's
        print(f"decode.py: {confidences.removeprefix('uncalibrated posteriors: ')}; words' confidences left "
              "uncalibrated", file=sys.stderr)
    return calibration, confidences


def main() -> str:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        experiment, model, tokenizer, path = load_model(args.exp_dir, args.checkpoint, not args.no_ema, args.device)
        chunks = attend_as_asked(model, args.attention, "decode.py")
        calibration, confidences = confidence_calibration(args, path)
        options = search_options(args, tokenizer, path)
        check_method(model, args.method, options)
        refs, refs_from = reference_texts(args.data_list, args.text)
        show_data_reports()
        pipeline = decoding_pipeline(experiment, tokenizer, args.data_list, args.batch_size)
    except (OSError, ValueError, KeyError) as error:
        raise ToolError(error_line(error)) from error
    encoder_frame_seconds = seconds_per_encoder_frame(experiment)
    hyps, words, phones, nbest = {}, {}, {}, []
    audio_seconds = decode_seconds = 0.0
    for batch in progress(pipeline.batches(), desc=f"decode {args.set_name}", unit="batch"):
        start = time.perf_counter()
        results = decode_batch_nbest(model, batch["feats"].to(args.device), batch["feat_lens"].to(args.device),
                                     args.method, options)
        decode_seconds += time.perf_counter() - start
        for key, hyp_list, duration in zip(batch["keys"], results, batch["seconds"]):  # the silence decoding
            hyps[key] = tokenizer.text(hyp_list[0])  # appends not counted: words end inside the recording
            audio_seconds += duration
            words[key] = words_with_times(tokenizer, hyp_list[0], encoder_frame_seconds, duration, calibration,
                                          rounded=False)  # scored whole (rounded, a map's ties moved AUC)
            if tokenizer.kind == "phone":
                phones[key] = hypothesis_phones(tokenizer, hyp_list[0].tokens)
            if args.nbest:
                nbest.append(nbest_line(key, nbest_entries(tokenizer, hyp_list, encoder_frame_seconds, duration)))
    # a dir of its own beside the method's (one of --beam 8 was written into the recipe's of the default beam)
    method = (args.method + (f"+beam{args.beam}" if args.beam is not None else "")
              + (f"+max{args.max_symbols_per_frame}" if args.max_symbols_per_frame is not None else "")
              + ("+hotwords" if args.hotwords else "") + (f"+{chunks}" if chunks else ""))
    out = os.path.join(args.exp_dir, f"decode-{args.set_name}-{method}{f'-{args.tag}' if args.tag else ''}")
    report = write_results(out, refs, hyps, refs_from, "decode.py")
    try:
        write_word_outputs(out, words, nbest if args.nbest else None,
                           os.path.dirname(os.path.abspath(args.data_list)), "decode.py", refs, confidences)
    except OSError as error:
        raise ToolError(f"ctm: {error_line(error)}") from error
    per = f"; {write_phone_error_rate(out, refs, phones, tokenizer)}" if tokenizer.kind == "phone" else ""
    threads = torch.get_num_threads()
    rtf = decode_seconds / max(audio_seconds, 1e-9)
    return (f"{out}: {report.wer_line}{per}; decoded {len(set(hyps) & set(refs))} of {len(refs)} utterances, "
            f"{audio_seconds:.1f} s of audio; "
            f"RTF {rtf:.4f} ({rtf * threads:.4f} per core, {threads} threads); checkpoint {os.path.basename(path)}")


if __name__ == "__main__":
    run_tool(main)
