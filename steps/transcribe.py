#!/usr/bin/env python3
"""Transcribe audio files (wav, flac, ogg, ...; any sample rate; stereo is averaged) with a trained experiment.

Prints '<file> <text>' a line, or with --json one JSON object a line ({"file", "text", "words"?});
--word-times adds each word's start and end in seconds.
"""

import argparse
import json
import sys

from rnnt.data.audio import AudioError
from rnnt.transcriber import METHODS, check_method, Transcriber


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: steps/transcribe.py --json --word-times exp/tiny a.flac b.wav")
    parser.add_argument("--method", choices=METHODS, default="greedy")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--checkpoint", help="default: the newest avg-N.pt, else the newest checkpoint")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", action="store_true", help="one JSON object a line")
    parser.add_argument("--word-times", action="store_true", help="add word start and end times")
    parser.add_argument("exp_dir")
    parser.add_argument("audio", nargs="+")
    args = parser.parse_args()
    try:
        transcriber = Transcriber.from_exp_dir(args.exp_dir, args.checkpoint, args.device)
        check_method(transcriber.model, args.method)
    except (OSError, ValueError, KeyError) as error:
        print(f"transcribe.py: {error}", file=sys.stderr)
        return 1
    failed = 0
    for path in args.audio:
        try:
            result = transcriber.transcribe(path, args.method, args.beam)
        except (AudioError, OSError) as error:
            print(f"transcribe.py: {path}: cannot read audio ({error})", file=sys.stderr)
            failed += 1
            continue
        if args.json:
            row = {"file": path, "text": result.text}
            if args.word_times:
                row["words"] = result.words
            print(json.dumps(row, ensure_ascii=False))
        elif args.word_times:
            words = " ".join(f"{w['word']}[{w['start']:.2f}-{w['end']:.2f}]" for w in result.words)
            print(f"{path} {words}")
        else:
            print(f"{path} {result.text}")
    return 1 if failed == len(args.audio) else 0


if __name__ == "__main__":
    sys.exit(main())
