"""utt2dur of a data dir, as Kaldi's utils/data/get_utt2dur.sh writes it: each utterance's duration in seconds.

With segments, a segment's end minus its start, read from the table (as Kaldi's), and checked against its
recording's length where wav.scp names a file (a command's whole output is not run for it, but where the caller
asks: steps/import_data_dir.py, whose copy is trained on, runs each once): one that starts past
the recording or ends more than half a second after it is named and left out, as extract-segments refuses it;
one ending at -1 (the recording's end) is measured against its recording.
Without, each recording's own: a file's header (decoded where the header cannot count its samples), the whole
output of a command ending in '|'. A recording that cannot be read is named by its wav.scp line and its
utterances are left out of utt2dur (utils/fix_data_dir.sh then drops them, naming why); the rest is written,
and fewer than half is a failure, as Kaldi's. An existing utt2dur of every utterance is kept, as Kaldi's keeps
one of utt2spk's length; an empty or partial one is made again.

Run as `utils/get_utt2dur.sh [--nj N] <data-dir>`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from types import SimpleNamespace
import sys
from multiprocessing import Pool

from rnnt.cli import at_least, tool_parser
from rnnt.counting import counted
from rnnt.datadir.table import KEEP_BYTES, kaldi_fields, lines_named_from, read_lines, read_table, write_table
from rnnt.datadir.values import is_positive_number, segment_problem
from rnnt.progress_bar import progress


def recording_length(source: str) -> tuple[int, int]:
    """(samples, sample rate) of a wav.scp value (a path, or a command ending in '|'); AudioError or BadAudio
    saying why it cannot be read."""
    from rnnt.data.audio import measured_length  # torch: only where audio is read
    from rnnt.prep.shard_writer import read_source

    data, path = read_source(source)
    samples, rate, _ = measured_length(data if data is not None else path)
    return samples, rate


def _measured(item: tuple[str, str]) -> tuple[str, tuple[int, int] | None, str]:
    """(recording, (samples, rate) or None, why not) of a (recording, wav.scp value) pair, in a worker."""
    from rnnt.data.audio_header import AudioError
    from rnnt.prep.shard_writer import BadAudio

    recording, source = item
    try:
        return recording, recording_length(source), ""
    except (AudioError, BadAudio, OSError) as error:
        return recording, None, str(error) or type(error).__name__


def utterance_durations(data_dir: str, nj: int = 1, named_from: str | None = None,
                        original: dict[str, str] | None = None,
                        run_commands: bool = False) -> tuple[dict[str, float], list[str]]:
    """utt -> seconds for every utterance whose duration is known, and a message for each left out (naming its
    line in named_from's tables where given, original naming the utterances a copy renamed: lines_named_from).
    run_commands: a segment of a command's recording is checked against its output too, as one of a file's."""
    segments_path, wav_path = os.path.join(data_dir, "segments"), os.path.join(data_dir, "wav.scp")
    problems: list[str] = []  # (a line of a file name that is not UTF-8 read as it is: a copy keeps it, as its file)
    segments = read_table(segments_path, problems, KEEP_BYTES) if os.path.isfile(segments_path) else None
    # segments alone give their utterances' lengths but those that end at the recording's end (-1), as Kaldi's
    wav_given = segments is None or os.path.isfile(wav_path)
    wav = read_table(wav_path, problems, KEEP_BYTES) if wav_given else {}
    wav_where = lines_named_from(named_from, wav, "wav.scp", original if segments is None else None)
    segment_where = lines_named_from(named_from, segments, "segments", original) if segments is not None else {}
    spans = ({utt: kaldi_fields(line.value) for utt, line in segments.items()} if segments is not None
             else {recording: [recording, "0", "-1"] for recording in wav})
    durations, waiting = {}, {}  # waiting: utt -> (recording, start, end) of those its recording decides or checks
    for utt, fields in spans.items():
        why = "not '<recording> <start> <end>'" if len(fields) != 3 else segment_problem(*fields[1:])
        timed = not why and segments is not None and float(fields[2]) > float(fields[1])
        if why or fields[0] not in wav and (wav_given or not timed):
            problems.append(f"{segment_where[utt]}: {utt}: {why or f'recording {fields[0]} not in wav.scp'}")
        elif timed and (fields[0] not in wav or wav[fields[0]].value.endswith("|") and not run_commands):  # as Kaldi's
            durations[utt] = float(fields[2]) - float(fields[1])
        else:
            waiting[utt] = fields[0], float(fields[1]), float(fields[2])
    recordings = sorted({recording for recording, *_ in waiting.values()})
    lengths = _read_recordings({r: wav[r].value for r in recordings}, nj, wav_where, problems)
    for utt, (recording, start, end) in waiting.items():
        if recording in lengths:
            seconds, why = _within(lengths[recording], start, end)
            if why:
                problems.append(f"{segment_where[utt]}: {utt}: {why}")
            else:
                durations[utt] = seconds
    return durations, problems


def _within(length: tuple[int, int], start: float, end: float) -> tuple[float, str]:
    """(the duration, '') of the segment [start, end) of a recording of length (samples, rate) under
    extract-segments' rules (rnnt.data.audio.segment_samples: end -1 to its end, one ending a little past it cut
    there), or (0, why not)."""
    from rnnt.data.audio import AudioError, segment_samples

    samples, rate = length
    try:
        first, stop = segment_samples(SimpleNamespace(frames=samples, samplerate=rate), start, end)
    except AudioError as error:
        return 0.0, str(error)
    return ((samples if stop is None else stop) - first) / rate, ""


def _read_recordings(sources: dict[str, str], nj: int, where: dict, problems: list[str]) -> dict[str, tuple[int, int]]:
    """recording -> (samples, rate) of those that could be read; a message in problems for each other. Reading
    audio takes the project's environment (soundfile), unlike the rest of the data-dir tools: SystemExit saying so
    where it is not there (a traceback from each worker)."""
    if importlib.util.find_spec("soundfile") is None:
        raise SystemExit(f"{os.path.basename(sys.argv[0])}: measuring the recordings' durations reads audio with "
                         "soundfile, which the project's environment has: source a recipe's path.sh (after "
                         "tools/install.sh)")
    lengths = {}
    with Pool(nj) if nj > 1 and len(sources) > 1 else contextlib.nullcontext() as pool:
        results = pool.imap(_measured, sources.items(), chunksize=8) if pool else map(_measured, sources.items())
        for recording, length, why in progress(results, total=len(sources), desc="durations", unit=" recordings"):
            if length is None:
                problems.append(f"{where[recording]}: {recording}: {why}")
            else:
                lengths[recording] = length
    return lengths


def write_utt2dur(data_dir: str, nj: int = 1, named_from: str | None = None, original: dict[str, str] | None = None,
                  run_commands: bool = False) -> tuple[int, float, list[str]]:
    """Writes <data_dir>/utt2dur where it knows a duration; returns (utterances written, seconds in all, a message
    per one left out, naming lines as utterance_durations)."""
    durations, problems = utterance_durations(data_dir, nj, named_from, original, run_commands)
    kept = {utt: seconds for utt, seconds in durations.items() if seconds_text(seconds) != "0"}
    problems += [f"{utt}: no length (under a microsecond)" for utt in durations if utt not in kept]
    if kept:
        write_table(os.path.join(data_dir, "utt2dur"), ((utt, seconds_text(kept[utt])) for utt in sorted(kept)))
    return len(kept), sum(kept.values()), problems


def utterances_of(data_dir: str) -> set[str]:
    """The dir's utterances, whose durations utt2dur gives: the first field of every line of its utt2spk (a
    malformed line's too); without one, of its segments, else its wav.scp."""
    for name in ("utt2spk", "segments", "wav.scp"):
        if os.path.isfile(path := os.path.join(data_dir, name)):
            return {line.key for line in read_lines(path, KEEP_BYTES) if line.key}
    return set()


def seconds_text(seconds: float) -> str:
    """A duration to the microsecond, without trailing zeros (a segment's 1.2345 was written 1.234, and one of
    0.4 ms left out, where Kaldi's keeps them)."""
    return f"{seconds:.6f}".rstrip("0").rstrip(".")


def complete_utt2dur(data_dir: str) -> bool:
    """Whether data_dir's utt2dur has a line for each utterance of utt2spk and no other, each a positive number of
    seconds (then it is kept, as Kaldi's keeps one of utt2spk's length; an empty or partial one, a run's that left
    recordings out, or one with a value that is no duration, is made again)."""
    try:
        utt2dur = read_table(os.path.join(data_dir, "utt2dur"), [])
        return set(utt2dur) == set(read_table(os.path.join(data_dir, "utt2spk"), [])) and all(
            len(fields := kaldi_fields(line.value)) == 1 and is_positive_number(fields[0])
            for line in utt2dur.values())
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, "utils/get_utt2dur.sh --nj 4 data/train", prog="get_utt2dur.sh")
    parser.add_argument("--nj", type=at_least(1), default=4, help="recordings read at once (default 4)")
    parser.add_argument("--cmd", help="taken as Kaldi's recipes pass it (run.pl, queue.pl); the recordings are read "
                                      "here, --nj at once")
    parser.add_argument("--read-entire-file", choices=("true", "false"), default="false",
                        help="taken as Kaldi's recipes pass it: a header that cannot count its samples is decoded "
                             "here in any case")
    parser.add_argument("--frame-shift", type=float, help="taken as Kaldi's recipes pass it (Kaldi's counts the "
                        "frames of feats.scp where there is no wav.scp; here a dir needs wav.scp or segments)")
    parser.add_argument("data_dir")
    args = parser.parse_args(argv)
    if complete_utt2dur(args.data_dir):
        print(f"get_utt2dur.sh: {args.data_dir}/utt2dur already exists, an utterance a line; kept")
        return 0
    if not any(os.path.isfile(os.path.join(args.data_dir, name)) for name in ("wav.scp", "segments")):
        print(f"get_utt2dur.sh: {args.data_dir}/wav.scp: no such file (nor segments)", file=sys.stderr)
        return 1
    utterances = len(utterances_of(args.data_dir))
    written, seconds, problems = write_utt2dur(args.data_dir, args.nj)
    for problem in problems:  # (a recording that cannot be read: once, for all its segments)
        print(f"get_utt2dur.sh: left out {problem}", file=sys.stderr)
    print(f"get_utt2dur.sh: wrote {args.data_dir}/utt2dur: {counted(written, 'utterance')}, {seconds / 3600:.2f} h; "
          f"{max(utterances - written, 0)} of {utterances} left out" +
          (f" ({counted(len(problems), 'entry', 'entries')} named above)" if problems else ""))
    if written * 2 < utterances:  # as Kaldi's: fewer than half of utt2spk's is a failure (its next run makes it again)
        print(f"get_utt2dur.sh: fewer than half the utterances ({written} of {utterances}) have a duration",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
