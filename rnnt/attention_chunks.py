"""A streaming Conformer run at other attention chunks than its config's (WeNet's decoding chunk size and
decoding left chunks): --attention-chunk N (output frames a chunk, or `whole`: every frame attends to the whole
utterance) and --left-chunks L (the chunks before its own a frame attends to) on steps/decode.py, transcribe.py and
export_onnx.py. A model trained with dynamic chunks (model.encoder.dynamic_chunks) learnt chunks of every size up
to that with all the left context, and whole utterances: it runs at any of them, larger chunks more accurate and
later, more chunks before each more accurate at no latency (egs/an4/RESULTS.md: its left context mattered more than
its chunk). One trained at its chunk alone runs at others too, outside what it learnt (said on
stderr). The convolutions stay causal as trained, so `whole` decodes offline what a stream would decode in chunks;
it cannot stream.

Results decoded so are named apart from the config's (decode-<set>-<method>+chunk16-<tag>): they are not the
model's results at its own chunk.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

WHOLE = "whole"


@dataclass(frozen=True)
class AttentionChunks:
    frames: int | None = None  # output frames a chunk; 0: the whole utterance; None: the config's
    left: int | None = None  # chunks before its own a frame attends to; None: the config's

    @property
    def name(self) -> str:
        """What a result decoded so is named by (chunk16, chunk16-left2, whole, left2); empty: the config's."""
        chunk = "" if self.frames is None else (WHOLE if self.frames == 0 else f"chunk{self.frames}")
        return "-".join(part for part in (chunk, "" if self.left is None else f"left{self.left}") if part)


def chunk_frames(text: str) -> int:
    """An argparse type: `whole` (0) or a whole number of frames of at least 1."""
    if text == WHOLE:
        return 0
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is neither a whole number of frames of at least 1 nor {WHOLE}")
    return value


def add_attention_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attention-chunk", type=chunk_frames, metavar="FRAMES|whole",
                        help="a streaming Conformer: attention in chunks of this many encoder frames, or over the "
                             "whole utterance (no streaming), instead of its model.encoder.chunk_frames; best with a "
                             "model trained with dynamic_chunks (rnnt.attention_chunks)")
    parser.add_argument("--left-chunks", type=int, metavar="L",
                        help="a streaming Conformer: the chunks before its own that a frame attends to, instead of "
                             "its model.encoder.left_chunks (at least 1)")


def from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> AttentionChunks:
    if args.left_chunks is not None and args.left_chunks < 1:
        parser.error(f"--left-chunks {args.left_chunks}: at least 1 chunk")
    if args.left_chunks is not None and args.attention_chunk == 0:
        parser.error("--left-chunks with --attention-chunk whole: the whole utterance has no chunks before")
    return AttentionChunks(args.attention_chunk, args.left_chunks)


def attend_as_asked(model, chunks: AttentionChunks, tool: str) -> str:
    """attend_in, its note printed on stderr as the tool's; returns the name results decoded so are given."""
    name, note = attend_in(model, chunks)
    if note:
        print(f"{tool}: {note}", file=sys.stderr)
    return name


def attend_in(model, chunks: AttentionChunks) -> tuple[str, str]:
    """Sets the model's encoder to attend in `chunks` (model.encoder.attend_in). Returns what results decoded so are
    named by (AttentionChunks.name; empty where they are the config's own) and a note for stderr where they are
    outside what the model learnt (else empty). ValueError: an encoder without attention chunks."""
    if chunks == AttentionChunks():
        return "", ""
    trained = model.config.encoder
    if trained.kind != "conformer":
        raise ValueError(f"--attention-chunk and --left-chunks run a streaming Conformer at other chunks; this is "
                         f"an encoder of kind {trained.kind}, which has none")
    frames = trained.chunk_frames if chunks.frames is None else chunks.frames
    left = trained.left_chunks if chunks.left is None or frames == 0 else chunks.left
    model.encoder.attend_in(frames, left)  # refuses an offline Conformer
    name = AttentionChunks(None if frames == trained.chunk_frames else frames,
                           None if left == trained.left_chunks else left).name
    if not name:
        return name, ""
    if not trained.dynamic_chunks:
        return name, (f"attention in {name} while the model learnt chunks of {trained.chunk_frames} frames with "
                      f"{trained.left_chunks} before each alone (no model.encoder.dynamic_chunks): outside what it "
                      "learnt")
    if 0 < frames <= trained.dynamic_chunks or (frames == 0 and trained.dynamic_whole):
        return name, ""  # (with all the frames before a chunk: fewer are a part of what it saw)
    return name, (f"attention in {name} while the model learnt chunks of 1 to {trained.dynamic_chunks} frames"
                  + (" and the whole utterance" if trained.dynamic_whole else " (no model.encoder.dynamic_whole)")
                  + ": outside what it learnt")


def main(argv: list[str] | None = None) -> int:
    """python3 -m rnnt.attention_chunks CONFIG [--attention-chunk FRAMES|whole] [--left-chunks L]: prints the name
    that results of a model of CONFIG decoded at those chunks are given (empty: its config's own); exit 1 saying why
    where such a model has none. run.sh asks it before any stage, and names its decodes and exports so."""
    parser = argparse.ArgumentParser(prog="python3 -m rnnt.attention_chunks", description=main.__doc__)
    parser.add_argument("config", help="a model's config (conf/*.yaml or an experiment's config.yaml)")
    add_attention_options(parser)
    args = parser.parse_args(argv)
    chunks = from_args(parser, args)
    from rnnt.model.transducer import Transducer
    from rnnt.training.experiment import load_experiment

    try:
        # a vocabulary of any size: the chunks do not depend on it
        name = attend_as_asked(Transducer(load_experiment(args.config).model, 16), chunks, "attention_chunks")
    except (OSError, ValueError) as error:
        print(f"attention_chunks: {args.config}: {error}", file=sys.stderr)
        return 1
    print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
