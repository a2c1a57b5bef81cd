"""rnnt.datadir.overlap: held-out utterances that are training ones, by id or by audio (a file, a command, a
segment of a recording), and none counted for shared speakers."""

from rnnt.datadir.overlap import main, shared


def data_dir(path, wav: dict, segments: dict | None = None):
    path.mkdir()
    (path / "wav.scp").write_text("".join(f"{key} {value}\n" for key, value in wav.items()))
    if segments:
        (path / "segments").write_text("".join(f"{key} {value}\n" for key, value in segments.items()))
    return str(path)


def test_shared_by_id_or_by_audio_and_not_by_speaker(tmp_path, capsys):
    train = data_dir(tmp_path / "train", {"a-1": "/x/1.wav", "a-2": "cat /x/2.wav |", "r": "/x/long.wav"},
                     {"a-1": "a-1 0 -1", "a-2": "a-2 0 -1", "s1": "r 0.0 1.5", "s2": "r 1.5 3.0"})
    dev = data_dir(tmp_path / "dev", {"a-3": "/x/3.wav", "b-2": "cat /x/2.wav |", "long": "/x/long.wav"},
                   {"a-3": "a-3 0 -1", "b-2": "b-2 0 -1", "t1": "long 1.5 3.0", "t2": "long 3.0 4.0"})
    assert shared(train, dev) == (2, 4)  # b-2 (its command), t1 (a segment of the same span); not a-3 nor t2
    test = data_dir(tmp_path / "test", {"s1": "/y/other.wav", "c-1": "/y/c1.wav"})
    assert shared(train, test) == (1, 2)  # s1 (its id)
    fresh = data_dir(tmp_path / "fresh", {"a-9": "/x/9.wav"})
    assert main([train, dev, fresh]) == 0
    assert capsys.readouterr().err == (f"warning: {dev} shares 2 of its 4 utterances with {train} (the same id or "
                                       "the same audio): what is chosen or scored on it is partly on training data\n")
    assert main([train]) == 2  # (no held-out dir: its usage, as a wrong argument to any tool)
