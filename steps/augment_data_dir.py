#!/usr/bin/env python3
"""Write a noisy and/or reverberated copy of a Kaldi data dir: a test set in noise, or training data to combine
with the clean (utils/combine_data.sh), as Kaldi's steps/data/augment_data_dir.py and reverberate_data_dir.py.

Each utterance (a segment, where the dir has segments: the copy has none) is read, reverberated with a room
impulse response of --reverb-scp (aligned on its direct path, at its own power) and given noise of --noise-scp
at an SNR drawn in --snr from --count recordings summed (rnnt.data.noise, what data.noise and data.reverb do in
training), and written as <dest>/audio/<utterance>.flac (16-bit, at the utterance's own rate; one the noise took
past full scale is scaled down, counted). text, utt2spk and the speaker tables are copied, the utterance and
speaker ids with --utt-prefix (to combine with the clean copy: 'noise-'). Each utterance draws from its own
generator (--seed and its new id): run again, the copy is the same. An utterance whose audio cannot be read is
named by its wav.scp line and left out; a line of a noise list that cannot be read is named, and the utterances
that draw it are copied without noise.
"""

import os
import sys
import zlib

import soundfile
import torch

from rnnt.cli import error_line, glued_values, id_affix, run_tool, tool_parser, ToolError
from rnnt.counting import counted
from rnnt.data.audio import AudioError, load_audio, to_mono
from rnnt.data.noise import Augmenter
from rnnt.data.noise_config import NoiseConfig, ReverbConfig, check_noise_configs
from rnnt.datadir.copy_dir import copy_data_dir
from rnnt.datadir.fix import fix_data_dir, reasons
from rnnt.datadir.table import write_table
from rnnt.datadir.utterances import read_utterances
from rnnt.datadir.validate import validate_data_dir
from rnnt.prep.shard_writer import BadAudio, read_source
from rnnt.progress_bar import progress

NOT_COPIED = ("segments", "reco2file_and_channel", "reco2dur", "feats.scp", "cmvn.scp", "utt2num_frames", "utt2dur")


def numbers(kind, count: int):
    """An argparse type: COUNT comma-separated numbers of kind ('5' alone is 5,5 for a range)."""
    def parse(text: str) -> tuple:
        values = tuple(kind(x) for x in text.split(","))
        return values * 2 if len(values) == 1 and count == 2 else values
    parse.__name__ = f"{kind.__name__} range"
    return parse


def parse_args():
    parser = tool_parser(__doc__, "steps/augment_data_dir.py --noise-scp data/musan.scp --snr 0,10 data/test "
                                  "data/test_noise")
    parser.add_argument("--noise-scp", help="the noise recordings: a Kaldi wav.scp of files")
    parser.add_argument("--snr", type=numbers(float, 2), default=(10.0, 20.0),
                        help="dB, LOW,HIGH (or one value): each utterance's drawn uniformly (default 10,20)")
    parser.add_argument("--count", type=numbers(int, 2), default=(1, 1),
                        help="noise recordings summed, FEWEST,MOST (babble from speech: 3,7; default 1)")
    parser.add_argument("--noise-prob", type=float, default=1.0, help="the share of utterances given noise (default 1)")
    parser.add_argument("--reverb-scp", help="room impulse responses: a Kaldi wav.scp of files")
    parser.add_argument("--reverb-prob", type=float, default=1.0, help="the share reverberated (default 1)")
    parser.add_argument("--utt-prefix", type=id_affix, default="",
                        help="put before every utterance and speaker id ('noise-')")
    parser.add_argument("--seed", type=int, default=0, help="seeds every utterance's draws, with its (new) id")
    parser.add_argument("src")
    parser.add_argument("dest")
    args = parser.parse_args(glued_values(sys.argv[1:], ("--snr", "--count")))  # (-5,5 read as an option)
    if not (args.noise_scp or args.reverb_scp):
        parser.error("give --noise-scp, --reverb-scp or both: what to add")
    args.noise = NoiseConfig(args.noise_scp, args.noise_prob, args.snr, args.count) if args.noise_scp else None
    args.reverb = ReverbConfig(args.reverb_scp, args.reverb_prob) if args.reverb_scp else None
    try:
        check_noise_configs(args.noise, args.reverb)
    except ValueError as error:  # its data.noise keys as this tool's options
        parser.error(str(error).replace("data.noise.prob", "--noise-prob").replace("data.reverb.prob", "--reverb-prob")
                     .replace("data.noise.", "--").replace("data.reverb.", "--reverb-"))
    return args


def copy_tables(args) -> str:
    """dest's tables of the source's but those of its audio (written anew for the copy's own files), ids given
    --utt-prefix; returns the folder for its audio files."""
    copy_data_dir(args.src, args.dest, lambda u: args.utt_prefix + u, lambda s: args.utt_prefix + s)
    for name in NOT_COPIED + ("wav.scp",):
        if os.path.exists(os.path.join(args.dest, name)):
            os.remove(os.path.join(args.dest, name))
    audio_dir = os.path.abspath(os.path.join(args.dest, "audio"))
    os.makedirs(audio_dir, exist_ok=True)
    return audio_dir


def augmented_copy(args) -> str:
    """Writes dest; returns the summary line's account of it."""
    utterances, skipped = read_utterances(args.src)  # what cannot be paired or Kaldi's rules refuse: fix_data_dir
    # drops it from the copy
    for message in skipped:
        print(f"augment_data_dir.py: left out {message}", file=sys.stderr)
    if not utterances:
        raise ToolError(f"{args.src}: no utterance with both audio and a transcript")
    augmenter = Augmenter(args.noise, args.reverb, 0, ("--noise-scp", "--reverb-scp"))  # before anything is written
    for warning in augmenter.warnings:
        print(f"augment_data_dir.py: {warning}", file=sys.stderr)
    audio_dir = copy_tables(args)
    wav, durations, done, scaled, left_out = {}, {}, {"noise": 0, "reverb": 0}, 0, 0
    for utterance in progress(utterances, desc="augment", unit="utt"):
        key = args.utt_prefix + utterance.key
        try:
            data, path = read_source(utterance.source)
            waveform, rate = load_audio(data if data is not None else path, utterance.start, utterance.end)
        except (AudioError, BadAudio, OSError) as error:
            print(f"augment_data_dir.py: left out {utterance.audio_where}: {utterance.key}: {error}", file=sys.stderr)
            left_out += 1
            continue
        # by the id it is written under: copies under two prefixes differ (the same noise twice, combined)
        generator = torch.Generator().manual_seed(zlib.crc32(f"{args.seed}:{key}".encode()))
        noisy, what = augmenter.at_rate(rate).augment(to_mono(waveform), generator)
        for kind in what:
            done[kind] = done.get(kind, 0) + 1
        peak = float(noisy.abs().max())
        if peak > 1:
            noisy, scaled = noisy * (0.999 / peak), scaled + 1
        wav[key] = os.path.join(audio_dir, f"{key}.flac")
        soundfile.write(wav[key], noisy.numpy(), rate, subtype="PCM_16")
        durations[key] = f"{noisy.shape[0] / rate:.3f}"
    if not wav:
        raise ToolError(f"{args.src}: none of its recordings could be read (named above)")
    write_table(os.path.join(args.dest, "wav.scp"), wav.items())
    write_table(os.path.join(args.dest, "utt2dur"), durations.items())
    _, after, dropped = fix_data_dir(args.dest)
    del dropped["not in utt2dur"]  # the utterances given no audio: each named above, unreadable or left out
    problems = validate_data_dir(args.dest, no_feats=True)
    if problems:
        raise ToolError(f"{args.dest}: the copy is not valid by Kaldi's rules:\n" + "\n".join(problems))
    unreadable = sum(n for kind, n in done.items() if kind.startswith("unreadable"))
    return (f"{after} of {counted(len(utterances) + len(skipped), 'utterance')}, {done['noise']} with noise"
            + (f" at {args.snr[0]:g}-{args.snr[1]:g} dB" if args.noise else "") + f", {done['reverb']} reverberated; "
            f"{scaled} scaled down not to clip; {left_out} unreadable left out"
            + (f"; {len(skipped)} left out of the source's tables (named above)" if skipped else "")
            + (f"; {unreadable} without a noise or room recording that could not be read" if unreadable else "")
            + (f"; {reasons(dropped)}" if reasons(dropped) else ""))


def main() -> str:
    args = parse_args()
    try:
        account = augmented_copy(args)
    except (OSError, ValueError) as error:
        raise ToolError(error_line(error)) from None
    return f"wrote {args.dest} from {args.src}: {account}"


if __name__ == "__main__":
    run_tool(main)
