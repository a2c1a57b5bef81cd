#!/usr/bin/env python3
"""Transcribe audio files (wav, flac, ogg, ...; any sample rate; stereo is averaged) with a trained experiment.

Prints '<file> <text>' a line, or with --json one JSON object a line ({"file", "text", "words"?,
"nbest"?}); --word-times adds each word's start and end in seconds and its confidence (the product of its units'
posteriors, rnnt.confidence; --json only), --nbest every hypothesis the search
kept ({"text", "score", "tokens": [{"unit", "id", "time"}]}, best first). A file that cannot be transcribed
is named and the others are still transcribed; the exit status is then 1. A pipe's path (<(...)) is read whole
(with --stream, as it comes: as '-'). --scp data/x/wav.scp transcribes a Kaldi table's files and commands, each
line printed under its key: a hyp file, as steps/score.py reads one; with --segments data/x/segments, each
segment cut from its recording (a recording's command run once for the segments after one another) under its
utterance's key. Recordings are decoded --batch-size at a
time, of alike lengths among those read ahead, and printed in their order.

--stream decodes as the audio arrives (greedy search, a unidirectional model) in memory that does not
grow with the audio: the file is read and fed in chunks of --chunk-seconds (block by block, resampled so where
its rate is not the model's, so an hour-long recording is fine; word times count from its start), or '-' reads \
raw 16-bit little-endian mono PCM at the model's sample rate from stdin as it comes, or a WAV stream of 8 to
32-bit or float samples at any rate and channels (mixed down and resampled as it comes: arecord -f dat,
ffmpeg -f wav -) (a microphone: arecord -t raw -f S16_LE -r 16000 -c 1 | steps/transcribe.py --stream exp -;
or a pipe's path, <(arecord ...)); Ctrl-C ends the audio there, and the transcript so far is printed as the
final line (exit status 130).
The transcript is shown as a live caption shows it, in lines a pause of --endpoint-seconds ends (or, speech
going on, a line's --line-seconds): each time
the current line's text changes, '<file> [partial <seconds>s] <text of the line>' is printed ({"final": false,
"seconds"} with --json), and when a pause ends it, '<file> [line <start>-<end>s] <its text>' ({"final": false,
"line": true, "start", "end"}); then the final line, the whole transcript, as without --stream ({"final": true}).

--segment-seconds S decodes a long recording with any model (a bidirectional one too) in segments of
at most S seconds cut at its quietest moments, reading the file block by block; word times count from
the file's start.
"""

import os
import signal
import sys

from rnnt.attention_chunks import add_attention_options, attend_as_asked, from_args
from rnnt.audio_chunks import is_pipe
from rnnt.cli import (OutputError, above_up_to, at_least, error_line, exit_with, json_line, parse_intermixed,
                      tool_parser)
from rnnt.data.audio import AudioError, load_audio
from rnnt.data.audio_header import readable_once
from rnnt.data.features import num_frames
from rnnt.data.stacking import stacked_length
from rnnt.data.stages import too_short
from rnnt.counting import counted
from rnnt.datadir.table import keep_bytes_on_standard_streams
from rnnt.datadir.wav_scp_inputs import Input, wav_scp_inputs
from rnnt.devices import auto_device
from rnnt.live_captions import show_lines
from rnnt.prep.shard_writer import BadAudio, read_source
from rnnt.search_methods import METHODS, add_lm_fusion_option, check_search_options, check_method
from rnnt.segmenting import transcribe_in_segments
from rnnt.streaming import StreamLines
from rnnt.transcriber import Transcriber, seconds_per_encoder_frame


def parse_args():
    parser = tool_parser(__doc__, "steps/transcribe.py --json --word-times exp/tiny a.flac b.wav")
    parser.add_argument("--method", choices=METHODS, default="greedy")
    parser.add_argument("--beam", type=at_least(1),
                        help="default 4; an LM-fused method (*_lm, *_lodr): the beam its LM weights were chosen with")
    add_lm_fusion_option(parser)
    add_attention_options(parser)
    parser.add_argument("--checkpoint", help="default: the experiment's model.pt, the model its result lines "
                        "name (unless training went past it), else the newest avg-N.pt or checkpoint")
    parser.add_argument("--device", type=auto_device, default="cpu", help="cpu (default), cuda, cuda:N or auto")
    parser.add_argument("--json", action="store_true", help="one JSON object a line")
    parser.add_argument("--word-times", action="store_true", help="add word start and end times")
    parser.add_argument("--nbest", action="store_true", help="--json: add \"nbest\", every hypothesis the search "
                        "kept (up to --beam; pooled_beam_lm 2 x --beam) with its score and unit times")
    parser.add_argument("--stream", action="store_true", help="decode chunk by chunk, printing partial results")
    parser.add_argument("--chunk-seconds", type=above_up_to(0, 60), default=0.1,
                        help="--stream: audio per chunk, read whole (default 0.1; at most 60)")
    parser.add_argument("--endpoint-seconds", type=at_least(0.0), default=1.2,
                        help="--stream: a pause this long without a unit ends the line shown (default 1.2; 0: no "
                             "pause ends a line)")
    parser.add_argument("--line-seconds", type=at_least(0.0), default=20.0,
                        help="--stream: speech going on without such a pause, a line ends before the first word "
                             "that starts this long after the line's (default 20, sherpa-onnx's; 0: no bound)")
    parser.add_argument("--segment-seconds", type=at_least(0.0), default=0,
                        help="decode long recordings in segments of at most this long (at least 2; 30 is usual), "
                             "cut at the quietest moments (any model; memory bounded by --batch-size segments); 0: "
                             "the whole file at once")
    parser.add_argument("--batch-size", type=at_least(1),
                        help="recordings (with --segment-seconds, a recording's segments) encoded and searched "
                             "together, of alike lengths (default 16; not with --stream); their lines are printed "
                             "in the files' order")
    parser.add_argument("--scp", help="a Kaldi wav.scp ('<key> <path>' or '<key> <command> |' a line; '-': standard "
                        "input) for the audio files: each transcribed under its key, as a data dir's hyp "
                        "(steps/score.py)")
    parser.add_argument("--segments", help="with --scp: a Kaldi segments file ('<utt> <recording> <start> <end>', "
                        "end -1: the recording's end); each segment transcribed under its utterance's key")
    parser.add_argument("exp_dir")
    parser.add_argument("audio", nargs="*")
    args = parse_intermixed(parser)  # exp --stream a.wav: options between the exp dir and the files
    check_search_options(parser, args)
    check_combinations(parser, args)
    args.attention = from_args(parser, args)
    keep_bytes_on_standard_streams()  # --scp's keys and the files' names printed as they came, a name not UTF-8 too
    # (a strict UTF-8 output stopped at one in a traceback), as a hyp file keeps it
    return args


def check_combinations(parser, args) -> None:
    """parser.error for options that do not go together, or a value one of them refuses."""
    if bool(args.audio) == bool(args.scp):
        parser.error("give the audio files, or --scp naming them, one of the two")
    if args.scp and args.stream or args.segments and (not args.scp or args.segment_seconds):
        parser.error("--stream reads one stream as it comes (not --scp's files); --segments cuts --scp's recordings "
                     "(give both), not with --segment-seconds")
    if args.stream and args.method != "greedy":
        parser.error("--stream decodes with greedy search; leave --method out")
    if "-" in args.audio and not args.stream:
        parser.error("'-' (standard input) is read with --stream only; give a file's path otherwise")
    if args.stream and args.segment_seconds:
        parser.error("--stream and --segment-seconds are two ways to decode a long recording: give one")
    if args.stream and args.batch_size:  # ignored, silently
        parser.error("--batch-size batches whole recordings; --stream decodes one stream as it comes: leave it out")
    args.batch_size = args.batch_size or DEFAULT_BATCH_SIZE
    if 0 < args.segment_seconds < SHORTEST_SEGMENT_SECONDS:  # 0.01 decoded 10 ms pieces alone, words cut apart
        parser.error(f"--segment-seconds {args.segment_seconds:g} cuts inside words: give at least "
                     f"{SHORTEST_SEGMENT_SECONDS:g} (30 is usual), or 0 for the whole recording")
    if args.nbest and (args.stream or args.segment_seconds or not args.json):
        parser.error("--nbest needs --json, and a search that keeps several hypotheses (not --stream or "
                     "--segment-seconds)")


def load(args) -> Transcriber:
    """The experiment's model, with the LM, hotwords and attention chunks asked for."""
    transcriber = Transcriber.from_exp_dir(args.exp_dir, args.checkpoint, args.device)
    if args.lm_fusion:
        transcriber.use_lm_fusion(args.method, args.lm_fusion)
    if args.hotwords:
        transcriber.use_hotwords(args.hotwords, args.hotwords_score)
    attend_as_asked(transcriber.model, args.attention, "transcribe.py")
    if args.word_times and (problem := transcriber.calibration_problem_for(METHODS[args.method].head)):
        print(f"transcribe.py: {problem}; words' confidences left uncalibrated", file=sys.stderr)  # as decode.py
    return transcriber


def main() -> int:
    args = parse_args()
    try:
        transcriber = load(args)
        options = transcriber.search_options(args.method, args.beam)
        check_method(transcriber.model, args.method, options)
        if args.stream:
            transcriber.stream()  # refused here, before any audio, if the model cannot stream
        inputs, failed = ([Input(path, path) for path in args.audio], 0) if args.audio else \
            wav_scp_inputs("/dev/stdin" if args.scp == "-" else args.scp, args.segments)  # failed: lines left out
    except (OSError, ValueError, KeyError) as error:
        print(f"transcribe.py: {error_line(error)}", file=sys.stderr)
        return 1
    total = len(inputs) + failed
    interrupted = ctrl_c_taken(args.stream)
    pending: list[tuple[str, tuple]] = []  # read, each path with its features and seconds, for a batch
    for path, source, span, where in inputs:  # (a file's name and its path, or a wav.scp line's key and its value)
        if interrupted:
            return 130  # as the shell's for SIGINT, the files after the stream it stopped left
        if not source:  # a wav.scp line of its key alone, or a segment of no recording (named already)
            failed += 1
            continue
        try:
            audio = audio_of(source, args, span)
            if args.stream:
                stream(transcriber, path, audio, args, interrupted)
                continue
            if args.segment_seconds > 0:
                result = transcribe_in_segments(transcriber, audio, args.segment_seconds, args.method, args.beam,
                                                args.batch_size)
            else:
                pending.append((path, transcriber.prepared(audio)))
                warn_if_long(path, pending[-1][1][1], args.method, options.ctc_weight)
                if len(pending) == args.batch_size * BATCHES_SORTED or \
                        sum(seconds for _, (_, seconds) in pending) >= READ_AHEAD_SECONDS:
                    print_batched(transcriber, pending, args)
                continue
        except (BrokenPipeError, OutputError):  # the reader of --stream's lines stopped (| head), or the output
            raise  # could not be written (a full disk): exit_with ends the tool
        except (AudioError, BadAudio, OSError) as error:
            error = "no such file" if not source.endswith(("-", "|")) and not os.path.exists(source) else error
            named = f"{where}: {path}: {source}" if where else path  # a list's line: its key and what it names
            print(f"transcribe.py: {named}: cannot transcribe its audio ({error})", file=sys.stderr)
            failed += 1
            continue
        print_result(path, result, args)
    print_batched(transcriber, pending, args)
    if failed:
        say_failed(failed, total, args)
    return 130 if interrupted else 1 if failed else 0


def say_failed(failed: int, total: int, args) -> None:
    noun = "segment" if args.segments else "recording" if args.scp else "file"
    print(f"transcribe.py: {total - failed} of {counted(total, noun)} transcribed; {failed} could not be (named "
          "above)", file=sys.stderr)


def ctrl_c_taken(streaming: bool) -> list[int]:
    """--stream's Ctrl-C: each SIGINT appended to the list returned, which stops a stream between its chunks
    (stream), from here to the end: one after a stream's final line (its audio ended as the signal came, or
    between files) was a KeyboardInterrupt traceback."""
    interrupted: list[int] = []
    if streaming:
        signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    return interrupted


DEFAULT_BATCH_SIZE = 16
SHORTEST_SEGMENT_SECONDS = 2.0  # a segment holds a few words at least, cut in the quietest 100 ms near its end
BATCHES_SORTED = 8  # recordings read ahead, in batches' worth: sorted by length among them, the batches pad less
READ_AHEAD_SECONDS = 3600  # fewer where they hold this much audio (its features in memory: 115 MB an hour)
BATCH_SECONDS = 480  # a batch of several recordings padded to at most this much audio (16 of 30 s)


def print_batched(transcriber: Transcriber, pending: list[tuple[str, tuple]], args) -> None:
    """Transcribes the recordings read (pending: path, (features, seconds)) in batches, prints their lines in
    their order, and empties pending."""
    transcripts = transcriber.transcribe_prepared([prepared for _, prepared in pending], args.method, args.beam,
                                                  args.nbest, args.batch_size, BATCH_SECONDS)
    for (path, _), result in zip(pending, transcripts):
        print_result(path, result, args)
    pending.clear()


def audio_of(source: str, args, span: tuple[float, float | None] | None = None):
    """A wav.scp command's output (--scp only), '-' or a pipe's path as such with --stream (read as it comes: raw
    PCM or a WAV stream), another pipe's bytes read once, a regular file's path; a segment's (waveform, rate)."""
    if span is not None:  # (a recording's command runs once for its segments that follow one another: read_source)
        data, path = read_source(source)
        return load_audio(data if data is not None else path, *span)
    if args.scp and source.endswith("|"):
        return read_source(source)[0]
    return source if source == "-" or (args.stream and is_pipe(source)) else readable_once(source)


LONG_SECONDS = 300


def warn_if_long(path: str, seconds: float, method: str, ctc_weight: float) -> None:
    """A warning before a recording of more than LONG_SECONDS is decoded whole where the time grows with frames x
    labels: pooled_beam_lm's scoring of its hypotheses over their whole lattices, the CTC head's rescoring of the
    n-best (docs/decoding.md). seconds: as decoded (a header that cannot count them, Ogg Vorbis's or MP3's, gave
    none, and no warning)."""
    grows = [] if METHODS[method].linear else [method]
    grows += ["the CTC rescoring"] if ctc_weight else []
    if grows and seconds > LONG_SECONDS:
        print(f"transcribe.py: {path}: {seconds / 60:.0f} minutes decoded whole with "
              f"{' and '.join(grows)}, whose time grows with frames x labels: give --segment-seconds 30 for a long "
              "recording", file=sys.stderr)


def stream(transcriber, path: str, audio, args, interrupted: list[int]) -> None:
    """Prints the current line each time it changes, each line a pause ends, and the final transcript (none for
    Ctrl-C before any audio). interrupted: the SIGINTs main's handler took, which stop the audio. Ctrl-C is taken
    between chunks (raised inside one, it left the encoder a chunk ahead of the search, and the final transcript
    with a unit twice) and while the stream finishes: Ctrl-C on `arecord | transcribe.py` ends both at once, and
    where the end of the audio came first it was a traceback in finish(), the final transcript lost."""
    stream = transcriber.stream()
    lines = StreamLines(stream, args.endpoint_seconds, seconds_per_encoder_frame(transcriber.experiment),
                        args.line_seconds)
    show_lines(path, audio, stream, lines, args.chunk_seconds, args.json, stop=lambda: bool(interrupted))
    if interrupted and stream.samples == 0:
        return
    if stream.samples == 0:  # as a file of no samples is refused without --stream
        raise AudioError("no samples")
    data = transcriber.experiment.data  # as refused without --stream: no frame with the tail of silence after it
    frames = num_frames(stream.samples + round(data.tail_silence * stream.sample_rate), stream.sample_rate,
                        data.features.preset)
    if frames == 0:
        raise too_short(stream.samples, stream.sample_rate)
    if transcriber.experiment.model.encoder.output_frames(stacked_length(frames, data.subsample)) == 0:
        raise too_short(stream.samples, stream.sample_rate, window=False)
    print_result(path, stream.finish(), args)


def print_result(path: str, result, args) -> None:
    if args.json:
        row = {"file": path, "text": result.text, **({"final": True} if args.stream else {})}
        if args.word_times:
            row["words"] = result.words
        if args.nbest:
            row["nbest"] = result.nbest
        print(json_line(row))
    elif args.word_times:
        words = " ".join(f"{w['word']}[{w['start']:.2f}-{w['end']:.2f}]" for w in result.words)
        print(f"{path} {words}")
    else:
        print(f"{path} {result.text}")


if __name__ == "__main__":
    exit_with(main)
