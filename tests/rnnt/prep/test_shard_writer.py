"""rnnt.prep.shard_writer on real yesno and LibriSpeech audio, read back with Python's tarfile: <key>.txt
then <key>.<ext> for each utterance, kept audio byte for byte, converted or cut or resampled audio
sample for sample, the same shard for the same input, and each unusable source skipped with its reason."""

import io
import math
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import soundfile

from conftest import librispeech_utterances, write_flac_of_no_length
from rnnt.prep.shard_writer import AudioOptions, ShardItem, write_shard


@pytest.fixture
def yesno_waves(test_data):
    return sorted((test_data / "waves_yesno").glob("*.wav"))[:3]


def members(path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path) as tar:
        return [(info, tar.extractfile(info).read()) for info in tar]


def samples(audio: bytes | str) -> tuple[np.ndarray, int]:
    return soundfile.read(io.BytesIO(audio) if isinstance(audio, bytes) else audio, dtype="int16")


def test_kept_audio_round_trips_byte_for_byte_after_its_transcript(tmp_path, yesno_waves, test_data):
    utt, flac, text = librispeech_utterances(test_data)[0]
    items = [ShardItem(f"yesno-{w.stem}", w.stem.replace("_", " "), str(w)) for w in yesno_waves]
    items.append(ShardItem(utt, text, flac))
    shard = tmp_path / "shard-000000.tar"
    written, seconds, skipped = write_shard(str(shard), items, AudioOptions())

    sources = [str(w) for w in yesno_waves] + [flac]
    assert (written, skipped) == (4, [])
    assert seconds == pytest.approx(sum(soundfile.info(s).frames / soundfile.info(s).samplerate for s in sources))
    got = members(shard)
    assert [info.name for info, _ in got] == [name for item, source in zip(items, sources)
                                             for name in (f"{item.key}.txt", item.key + Path(source).suffix)]
    for k, (item, source) in enumerate(zip(items, sources)):
        assert got[2 * k][1] == item.text.encode("utf-8")
        assert got[2 * k + 1][1] == open(source, "rb").read()
    assert all((info.mtime, info.mode, info.isfile()) == (0, 0o644, True) for info, _ in got)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard-000000.tar"]  # no .tmp left behind


def test_the_same_input_gives_the_same_shard_bytes(tmp_path, yesno_waves):
    items = [ShardItem(f"k{i}", "ja nee ja", str(w)) for i, w in enumerate(yesno_waves)]
    write_shard(str(tmp_path / "a.tar"), items, AudioOptions())
    write_shard(str(tmp_path / "b.tar"), items, AudioOptions(audio_format="flac"))
    write_shard(str(tmp_path / "c.tar"), items, AudioOptions())
    write_shard(str(tmp_path / "d.tar"), items, AudioOptions(audio_format="flac"))
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "c.tar").read_bytes()
    assert (tmp_path / "b.tar").read_bytes() == (tmp_path / "d.tar").read_bytes()


def test_a_utf8_transcript_is_stored_as_utf8(tmp_path, yesno_waves):
    write_shard(str(tmp_path / "s.tar"), [ShardItem("k", "ja nee — ñandú 你好", str(yesno_waves[0]))],
                AudioOptions())
    assert members(tmp_path / "s.tar")[0][1] == "ja nee — ñandú 你好".encode("utf-8")


@pytest.mark.parametrize("audio_format", ["flac", "wav"])
def test_converted_audio_keeps_every_sample(tmp_path, yesno_waves, test_data, audio_format):
    """16-bit sources through a 16-bit encoding: the decoded samples are the source's exactly."""
    utt, flac, text = librispeech_utterances(test_data)[0]
    items = [ShardItem("yesno", "ja", str(yesno_waves[0])), ShardItem(utt, text, flac)]
    written, seconds, _ = write_shard(str(tmp_path / "s.tar"), items, AudioOptions(audio_format=audio_format))
    got = members(tmp_path / "s.tar")
    assert [info.name for info, _ in got] == ["yesno.txt", f"yesno.{audio_format}", f"{utt}.txt",
                                             f"{utt}.{audio_format}"]
    total = 0.0
    for (_, audio), source in zip(got[1::2], [str(yesno_waves[0]), flac]):
        expected, rate = samples(source)
        decoded, decoded_rate = samples(audio)
        assert soundfile.info(io.BytesIO(audio)).format == audio_format.upper()
        assert decoded_rate == rate and np.array_equal(decoded, expected)
        total += len(expected) / rate
    assert written == 2 and seconds == pytest.approx(total)


def test_a_segment_is_cut_at_its_sample_positions(tmp_path, yesno_waves):
    source = str(yesno_waves[0])
    whole, rate = samples(source)
    items = [ShardItem("mid", "nee", source, start=1.25, end=2.5), ShardItem("tail", "ja", source, start=5.0)]
    written, seconds, _ = write_shard(str(tmp_path / "s.tar"), items, AudioOptions())
    got = members(tmp_path / "s.tar")
    assert [info.name for info, _ in got] == ["mid.txt", "mid.wav", "tail.txt", "tail.wav"]  # kept: WAV
    mid, tail = samples(got[1][1])[0], samples(got[3][1])[0]
    assert np.array_equal(mid, whole[int(1.25 * rate):int(2.5 * rate)])
    assert np.array_equal(tail, whole[int(5.0 * rate):])  # no end: to the end of the recording
    assert written == 2 and seconds == pytest.approx(1.25 + len(whole) / rate - 5.0)


def test_the_segments_of_a_piped_recording_run_its_command_once(tmp_path, yesno_waves):
    """As Kaldi's extract-segments: the command ran again for every segment of its recording, a long recording's
    decoding repeated as many times as it has segments."""
    source, runs = str(yesno_waves[0]), tmp_path / "runs"
    command = f"echo ran >> {runs}; cat {source} |"
    items = [ShardItem(f"seg{i}", "ja", command, start=i * 1.0, end=i * 1.0 + 0.5) for i in range(4)]
    written, _, skipped = write_shard(str(tmp_path / "s.tar"), items, AudioOptions())
    assert written == 4 and not skipped
    assert runs.read_text() == "ran\n"
    whole, rate = samples(source)
    assert np.array_equal(samples(members(tmp_path / "s.tar")[7][1])[0], whole[3 * rate:int(3.5 * rate)])


def test_resampling_writes_the_new_rate_and_length(tmp_path, yesno_waves):
    source = str(yesno_waves[0])
    whole, rate = samples(source)
    assert rate == 8000
    written, seconds, _ = write_shard(str(tmp_path / "s.tar"), [ShardItem("k", "ja", source)],
                                      AudioOptions(sample_rate=16000))
    audio = members(tmp_path / "s.tar")[1][1]
    info = soundfile.info(io.BytesIO(audio))
    assert (info.samplerate, info.frames, info.format) == (16000, 2 * len(whole), "WAV")
    assert seconds == pytest.approx(len(whole) / rate)
    # a band-limited copy at twice the rate: its even samples are close to the source's
    resampled = samples(audio)[0].astype(np.float64)
    assert np.corrcoef(resampled[::2], whole)[0, 1] > 0.99


def test_a_piped_command_is_decoded_and_written_as_wav(tmp_path, test_data):
    utt, flac, text = librispeech_utterances(test_data)[0]
    expected, rate = samples(flac)
    written, seconds, skipped = write_shard(str(tmp_path / "s.tar"), [ShardItem(utt, text, f"cat {flac} |")],
                                            AudioOptions())
    got = members(tmp_path / "s.tar")
    assert (written, skipped) == (1, []) and [info.name for info, _ in got] == [f"{utt}.txt", f"{utt}.wav"]
    decoded, decoded_rate = samples(got[1][1])
    assert decoded_rate == rate and np.array_equal(decoded, expected)
    assert seconds == pytest.approx(len(expected) / rate)


def test_audio_under_a_name_without_an_audio_extension_is_converted_to_wav(tmp_path, test_data):
    utt, flac, text = librispeech_utterances(test_data)[0]
    shutil.copy(flac, tmp_path / "audio.bin")
    write_shard(str(tmp_path / "s.tar"), [ShardItem(utt, text, str(tmp_path / "audio.bin"))], AudioOptions())
    got = members(tmp_path / "s.tar")
    assert [info.name for info, _ in got] == [f"{utt}.txt", f"{utt}.wav"]
    assert np.array_equal(samples(got[1][1])[0], samples(flac)[0])


def test_unusable_sources_are_skipped_with_their_reason_and_the_rest_written(tmp_path, yesno_waves):
    (tmp_path / "notes.wav").write_text("not audio at all\n")
    soundfile.write(tmp_path / "empty.wav", np.zeros(0, dtype=np.int16), 8000, subtype="PCM_16")
    write_flac_of_no_length(tmp_path / "piped.flac", np.zeros(800), 8000)
    good = str(yesno_waves[0])
    (tmp_path / "cut.wav").write_bytes(open(good, "rb").read()[:30000])
    items = [
        ShardItem("missing", "ja", str(tmp_path / "missing.wav")),
        ShardItem("good", "ja nee", good),
        ShardItem("failing", "nee", "echo device busy >&2; exit 3 |"),
        ShardItem("long_story", "nee", "printf '%0300d\\nthe cause\\n' 0 >&2; exit 1 |"),
        ShardItem("silent", "nee", "true|"),
        ShardItem("text", "ja", str(tmp_path / "notes.wav")),
        ShardItem("empty", "ja", str(tmp_path / "empty.wav")),
        ShardItem("past_the_end", "ja", good, start=1000.0, end=1001.0),
        ShardItem("piped", "ja", str(tmp_path / "piped.flac")),
        ShardItem("piped_cut", "ja", str(tmp_path / "piped.flac"), start=0.0, end=0.05),
        ShardItem("cut_short", "ja", str(tmp_path / "cut.wav")),
        ShardItem("cut_short_resampled", "ja", str(tmp_path / "cut.wav"), start=0.0, end=0.5),
    ]
    written, seconds, skipped = write_shard(str(tmp_path / "s.tar"), items, AudioOptions())
    assert written == 1 and seconds == pytest.approx(soundfile.info(good).duration)
    assert [info.name for info, _ in members(tmp_path / "s.tar")] == ["good.txt", "good.wav"]
    assert len(skipped) == 11
    assert skipped[0] == f"missing: no such file {tmp_path / 'missing.wav'}"
    assert skipped[1].startswith("failing: command 'echo device busy >&2; exit 3")
    assert skipped[1].endswith(" failed (exit 3): device busy")  # with its status and what it said
    # the end of what it said, on one line: its first 200 characters were given, not its last line (a traceback's)
    assert skipped.pop(2).endswith(" failed (exit 1): ..." + "0" * 290 + " the cause")
    assert skipped[2] == "silent: command 'true' wrote no audio"  # exit status 0 but no bytes ('failed (exit 0): ')
    assert skipped[3].startswith("text: unreadable audio: ")
    assert skipped[4] == "empty: no audio samples"
    assert skipped[5].startswith("past_the_end: unreadable audio: ")
    length = "its FLAC header gives no length (written to a pipe?); encode it again to a file"
    assert skipped[6:8] == [f"piped: {length}", f"piped_cut: unreadable audio: {length}"]  # copied, decoded
    cut = f"cut short: its header gives {soundfile.info(good).duration:.2f} s of audio, the file holds 1.87 s"
    assert skipped[8:] == [f"cut_short: {cut}", f"cut_short_resampled: unreadable audio: {cut}"]


def test_a_wav_whose_data_size_was_left_0_is_kept_with_its_size_filled_in(tmp_path, yesno_waves):
    """Kept as it was, its header said no samples to any reader of the shard but ours (WeNet's, libsndfile)."""
    data = open(yesno_waves[0], "rb").read()
    left = bytearray(data)
    left[data.index(b"data") + 4:data.index(b"data") + 8] = bytes(4)
    (tmp_path / "left.wav").write_bytes(left)
    written, seconds, _ = write_shard(str(tmp_path / "s.tar"), [ShardItem("left", "ja", str(tmp_path / "left.wav"))],
                                      AudioOptions())
    assert written == 1 and seconds == pytest.approx(soundfile.info(yesno_waves[0]).duration)
    assert members(tmp_path / "s.tar")[1][1] == data


def test_a_shard_with_nothing_usable_is_an_empty_tar(tmp_path):
    written, seconds, skipped = write_shard(str(tmp_path / "s.tar"), [ShardItem("k", "ja", "/nonexistent.wav")],
                                            AudioOptions())
    assert (written, seconds, skipped) == (0, 0.0, ["k: no such file /nonexistent.wav"])
    assert members(tmp_path / "s.tar") == []
    assert write_shard(str(tmp_path / "t.tar"), [], AudioOptions()) == (0, 0.0, [])


def test_the_duration_of_a_kept_file_is_its_frames_over_its_rate(tmp_path, test_data):
    rows = librispeech_utterances(test_data)[:3]
    _, seconds, _ = write_shard(str(tmp_path / "s.tar"), [ShardItem(u, t, w) for u, w, t in rows], AudioOptions())
    expected = 0.0
    for _, flac, _ in rows:
        decoded, rate = samples(flac)
        expected += len(decoded) / rate
    assert math.isclose(seconds, expected, rel_tol=1e-12)
