"""Utterances a held-out data dir shares with the training dir: the same utterance id, or the same audio (a
wav.scp value, and with segments the same span of it). Kaldi's tools do not look; a dev set that holds training
utterances chooses the epoch, the seed and the LM weights by what the model has learnt by heart, and a test set
scores it so. Speakers shared are not counted: a dev set of training speakers is a usual choice.

    python3 -m rnnt.datadir.overlap TRAIN_DIR HELD_OUT_DIR...   a warning line for each dir that shares some
"""

from __future__ import annotations

import os
import sys

from rnnt.cli import module_usage
from rnnt.datadir.table import kaldi_fields, read_table


def audio_of_utterances(data_dir: str) -> dict[str, tuple[str, ...]]:
    """utterance -> what it sounds from: its wav.scp value, and its segment's start and end where there are
    segments."""
    wav = {key: line.value for key, line in read_table(os.path.join(data_dir, "wav.scp"), []).items()}
    segments_path = os.path.join(data_dir, "segments")
    if not os.path.isfile(segments_path):
        return {key: (value,) for key, value in wav.items()}
    audio = {}
    for utt, line in read_table(segments_path, []).items():
        recording, *span = kaldi_fields(line.value) or [""]
        audio[utt] = (wav.get(recording, recording), *span)
    return audio


def shared(train: str, held_out: str) -> tuple[int, int]:
    """(utterances of held_out that train has too, by id or by audio; utterances of held_out)."""
    trained = audio_of_utterances(train)
    heard = set(trained.values())
    audio = audio_of_utterances(held_out)
    return sum(utt in trained or sound in heard for utt, sound in audio.items()), len(audio)


def main(argv: list[str]) -> int:
    if (status := module_usage(argv, __doc__, len(argv) >= 2 and not argv[0].startswith("-"))) is not None:
        return status
    train, *held_out = argv
    for data_dir in held_out:
        common, total = shared(train, data_dir)
        if common:
            print(f"warning: {data_dir} shares {common} of its {total} utterances with {train} (the same id or the "
                  "same audio): what is chosen or scored on it is partly on training data", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
