"""rnnt.data: every stage alone, then the whole chain over shards made from real speech."""

import dataclasses
import gzip
import io
import json
import logging
import math
import os
import sys
import tarfile

import numpy as np
import soundfile
import pytest
import torch

from conftest import ROOT, run_tool, write_flac_of_no_length
from rnnt.data import stages
from rnnt.data.audio import AudioError, audio_length, load_audio, to_mono
from rnnt.data.bucketing import bucket_batches, global_batches
from rnnt.data.config import data_config
from rnnt.data.features import fbank
from rnnt.data.loader import LoaderPosition, make_loader
from rnnt.data.pipeline import Pipeline
from rnnt.data.report import DataReport
from rnnt.data.resample import StreamingResampler, resample
from rnnt.data.shard_reading import shard_records
from rnnt.data.sources import records
from rnnt.data.specaugment import SpecAugmentConfig, spec_augment
from rnnt.data.splitting import Reader, part
from rnnt.data.stacking import stack_frames
from rnnt.data.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def fsdd(tmp_path_factory, test_data):
    """The first 900 utterances of FSDD's train split (george's, jackson's, some of lucas's) as 9 shards of 100, a
    raw list of the test split, and char units."""
    root = tmp_path_factory.mktemp("fsdd")
    steps = [
        (ROOT / "egs" / "fsdd" / "local" / "data_prep.py", test_data / "fsdd" / "recordings", root / "data"),
        (ROOT / "utils" / "subset_data_dir.sh", "--first", root / "data" / "train", "900", root / "train900"),
        (ROOT / "steps" / "make_shards.py", "--utts-per-shard", "100", root / "train900", root / "shards",
         root / "train.list"),
        (ROOT / "steps" / "make_raw_list.py", root / "data" / "test", root / "test.list"),
        (ROOT / "steps" / "build_units.py", "--unit-type", "char", root / "data" / "train", root / "lang"),
    ]
    for step in steps:
        out = run_tool(*step) if step[0].suffix == ".sh" else run_tool(sys.executable, *step)
        assert out.returncode == 0, out.stderr
    return root


TRAIN = {"sample_rate": 8000, "speed_perturb": [0.9, 1.0, 1.1], "stack": 3, "subsample": 3,
         "features": {"preset": "mlperf", "num_mel_bins": 64, "dither": 1e-5},
         "spec_augment": {"freq_masks": 2, "freq_width": 10, "adaptive": True, "time_width": 0.05},
         "shuffle_buffer": 300, "sort_buffer": 1000, "batch": {"type": "dynamic", "max_frames": 4000}}


def pipeline(fsdd, train=True, list_name="train.list", **overrides):
    return Pipeline(str(fsdd / list_name), data_config({**TRAIN, **overrides}), Tokenizer(str(fsdd / "lang")), train)


def training_keys(fsdd) -> list[str]:
    """The keys of the training data dir the shards were written from, sorted."""
    return sorted(line.split()[0] for line in (fsdd / "train900" / "text").read_text().splitlines())


def keys_of(batches):
    return [k for b in batches for k in b["keys"]]


def spy_on_audio(monkeypatch) -> dict[str, list]:
    """What the pipeline opens, in order: {'header': [audio, ...] (length read from the header alone),
    'decode': [audio, ...] (samples decoded)}."""
    opened: dict[str, list] = {"header": [], "decode": []}
    for kind, name in (("header", "audio_length"), ("decode", "load_audio")):
        real = getattr(stages, name)
        monkeypatch.setattr(stages, name, lambda audio, *span, real=real, kind=kind:
                            opened[kind].append(audio) or real(audio, *span))
    return opened


# --- stages alone -----------------------------------------------------------------------------------

def test_decoding_takes_each_key_once_and_names_a_repeat(fsdd, tmp_path, caplog):
    """A list line repeated (training's upsampling), or two shards holding a key: each was decoded, the last
    hypothesis and reference kept for the key, the other utterance lost unnamed ('decoded 2 of 2' of 3)."""
    lines = (fsdd / "test.list").read_text().splitlines()[:3]
    (tmp_path / "dup.list").write_text("\n".join([lines[0], lines[1], lines[0], lines[2]]) + "\n")
    config = data_config({**TRAIN, "batch": {"type": "static", "batch_size": 2}})
    with caplog.at_level(logging.WARNING):
        decoded = Pipeline(str(tmp_path / "dup.list"), config, Tokenizer(str(fsdd / "lang")), False)
        keys = [key for batch in decoded.batches() for key in batch["keys"]]
    assert sorted(keys) == sorted(json.loads(line)["key"] for line in lines)
    first = json.loads(lines[0])["key"]
    assert f"dup.list: 1 lines repeat a key listed before ({first}); each one's first line is read" in caplog.text
    trained = Pipeline(str(tmp_path / "dup.list"), config, Tokenizer(str(fsdd / "lang")), True)
    assert len([key for batch in trained.batches() for key in batch["keys"]]) == 4  # upsampled, as written


@pytest.mark.parametrize("kind", ["raw", "shard"])
def test_validation_on_every_rank_takes_a_repeated_key_once_and_counts_it_once(fsdd, tmp_path, caplog, kind):
    """Each key of a dev list once across the ranks: repeats were left out within one rank's part, so a key whose
    two lines (or a shard listed twice) fell to two ranks was validated, its loss summed, twice. Rank 0's report
    counts the repeated lines."""
    lines = (fsdd / ("test.list" if kind == "raw" else "train.list")).read_text().splitlines()[:8]
    (tmp_path / "once.list").write_text("\n".join(lines) + "\n")
    (tmp_path / "dup.list").write_text("\n".join(lines + lines[:4]) + "\n")
    config = data_config({**TRAIN, "batch": {"type": "static", "batch_size": 2}})
    once, dev = (Pipeline(str(tmp_path / name), config, Tokenizer(str(fsdd / "lang")), False)
                 for name in ("once.list", "dup.list"))
    with caplog.at_level(logging.INFO):
        keys = [key for rank in range(3) for batch in dev.batches(0, Reader(rank, 3)) for key in batch["keys"]]
    assert sorted(keys) == sorted(keys_of(once.batches())) and len(keys) == len(set(keys)) >= 8
    reason = "4 a key read before" if kind == "raw" else "4 a shard listed before"
    reports = [record.getMessage() for record in caplog.records if "dup.list, rank" in record.getMessage()]
    assert len(reports) == 3 and sum(reason in report for report in reports) == 1, reports


def test_decode_skips_bad_audio_with_a_warning(fsdd, caplog, tmp_path):
    good = next(records(str(fsdd / "test.list")))
    bad = {"key": "bad-1", "txt": "ONE", "audio": b"garbage" * 20, "source": "test:bad"}
    headerless = tmp_path / "a.raw"  # soundfile wants a rate for a .raw path: a TypeError, not its usual error
    headerless.write_bytes(open(good["audio"], "rb").read())
    raw = {"key": "raw-1", "txt": "ONE", "audio": str(headerless), "source": str(headerless)}
    with caplog.at_level(logging.WARNING):
        out = list(stages.waveforms([bad, raw, good], 8000))
    assert [r["key"] for r in out] == [good["key"]]
    assert "skipped bad-1 from test:bad: cannot decode audio (format not recognised)" in caplog.text
    assert f"skipped raw-1 from {headerless}: cannot decode audio" in caplog.text
    assert out[0]["waveform"].dim() == 1 and out[0]["sample_rate"] == 8000


@pytest.mark.parametrize("what,why", [("missing", "no such file"), ("empty", "an empty file (0 bytes)"),
                                      ("no bytes", "no bytes (an empty output)")])
def test_audio_that_is_not_there_says_so_not_libsndfiles_system_error(tmp_path, what, why):
    """A missing file was 'Error opening b'/x.wav': System error.', an empty one 'Format not recognised.' (the path
    as a Python bytes object, a command's output as '<_io.BytesIO object at 0x...>')."""
    (tmp_path / "empty.wav").write_bytes(b"")
    audio = {"missing": str(tmp_path / "x.wav"), "empty": str(tmp_path / "empty.wav"), "no bytes": b""}[what]
    with pytest.raises(AudioError) as error:
        load_audio(audio)
    assert str(error.value) == why


def test_audio_whose_header_cannot_count_it_is_decoded_where_it_is_read(fsdd, tmp_path, monkeypatch):
    """Ogg Vorbis (MP3 the same): a compressed stream's header is no exact length, so the header stage decodes
    it and batching counts what decoding gave; a WAV is only opened there."""
    good = next(records(str(fsdd / "test.list")))
    soundfile.write(tmp_path / "a.ogg", load_audio(good["audio"])[0][0].numpy(), 8000, format="OGG")
    ogg = {**good, "key": "ogg", "audio": str(tmp_path / "a.ogg"), "source": "a.ogg"}
    opened = spy_on_audio(monkeypatch)
    planned = list(stages.audio_lengths([ogg, good], 16000))
    assert opened == {"header": [ogg["audio"], good["audio"]], "decode": [ogg["audio"]]}
    assert "decoded" in planned[0] and "decoded" not in planned[1]
    assert planned[0]["samples"] == 2 * load_audio(ogg["audio"])[0].shape[1]
    assert [r["waveform"].shape[0] for r in stages.with_waveforms(planned)] == [r["samples"] for r in planned]
    assert opened["decode"] == [ogg["audio"], good["audio"]]


def test_ogg_opus_is_counted_from_its_header_as_decoding_counts_it(test_data, monkeypatch):
    """speechocean762's Ogg Opus files were decoded where they were read, and sat decoded in the shuffle and sort
    buffers (300 MB); their headers count them exactly."""
    corpus = test_data / "speechocean762"  # wav.scp's paths are relative to the corpus
    wav_scp = dict(line.split(maxsplit=1) for line in (corpus / "train" / "wav.scp").read_text().splitlines()[:20])
    records_ = [{"key": key, "txt": "A", "audio": str(corpus / path.strip()), "source": "wav.scp"}
                for key, path in wav_scp.items()]
    assert all(soundfile.info(r["audio"]).subtype == "OPUS" for r in records_)
    opened = spy_on_audio(monkeypatch)
    planned = list(stages.audio_lengths(records_, 16000))
    assert opened["decode"] == [] and not any("decoded" in r for r in planned)
    assert [r["samples"] for r in planned] == [load_audio(r["audio"])[0].shape[1] for r in records_]


def test_a_wav_cut_short_is_refused_by_name_from_a_file_and_from_a_shard(fsdd, tmp_path, caplog):
    """libsndfile reads what a cut WAV holds in silence: its transcript went with part of its audio."""
    good = next(records(str(fsdd / "test.list")))
    data = open(good["audio"], "rb").read() if isinstance(good["audio"], str) else bytes(good["audio"])
    (tmp_path / "cut.wav").write_bytes(data[:len(data) // 2])
    for audio in (str(tmp_path / "cut.wav"), data[:len(data) // 2]):
        with pytest.raises(AudioError, match=r"^cut short: its header gives \d+\.\d\d s of audio, the file holds"):
            load_audio(audio)
    streamed = bytearray(data)  # a writer to a pipe's placeholder size (2^31 - 1): no length, not cut short
    streamed[data.index(b"data") + 4:data.index(b"data") + 8] = (0x7FFFFFFF).to_bytes(4, "little")
    assert load_audio(bytes(streamed))[0].shape == load_audio(data)[0].shape
    cut = {**good, "key": "cut", "audio": str(tmp_path / "cut.wav"), "source": "cut.wav"}
    with caplog.at_level(logging.WARNING):
        assert [r["key"] for r in stages.audio_lengths([cut, good], 8000)] == [good["key"]]
    assert "skipped cut from cut.wav: cannot decode audio (cut short: its header gives" in caplog.text


@pytest.mark.parametrize("kind", ["AIFF", "AU", "W64", "RF64"])
def test_an_aiff_au_w64_or_rf64_cut_short_is_refused_by_name_and_whole_or_streamed_one_read(fsdd, kind):
    """AIFF, AU, Sony Wave64 and RF64 files cut in half were read as what they held, in silence (WAV, SPHERE, FLAC
    and Ogg were named)."""
    samples = load_audio(next(records(str(fsdd / "test.list")))["audio"])[0][0]
    written = io.BytesIO()
    soundfile.write(written, samples.numpy(), 8000, format=kind, subtype="PCM_16")
    data = written.getvalue()
    assert torch.allclose(load_audio(data)[0][0], samples, atol=1 / 32768)
    with pytest.raises(AudioError, match=r"^cut short: its header gives \d+\.\d\d s of audio, the file holds"):
        load_audio(data[:len(data) // 2])
    if kind == "AU":  # a data size of all ones: unknown (a writer to a pipe), not cut short
        streamed = data[:8] + b"\xff\xff\xff\xff" + data[12:]
        assert load_audio(streamed[:len(data) // 2])[0].shape[1] < samples.shape[0]


def test_a_wav_whose_data_size_was_left_0_is_read_to_its_end(fsdd, tmp_path, caplog):
    """A writer that never came back to its header (a recording killed) leaves the data chunk's size 0, which
    libsndfile counts as no samples: "no samples" where the file held 0.4 s. Read to the end (as Kaldi's reader does
    where the RIFF size is 0 too): by the pipeline, the data-dir writer's length and a file's blocks; an empty data
    chunk that a chunk of tags follows stays empty."""
    from rnnt.prep.data_dir_writer import audio_info
    from rnnt.segmenting import file_blocks

    good = next(records(str(fsdd / "test.list")))
    data = open(good["audio"], "rb").read()
    left = bytearray(data)
    left[data.index(b"data") + 4:data.index(b"data") + 8] = bytes(4)
    (tmp_path / "left.wav").write_bytes(left)
    assert soundfile.info(tmp_path / "left.wav").frames == 0
    samples = load_audio(data)[0]
    for audio in (bytes(left), str(tmp_path / "left.wav")):
        assert torch.equal(load_audio(audio)[0], samples)
        assert audio_length(audio) == (samples.shape[1], 8000, 1)
        blocks, rate = file_blocks(audio, 0.1)
        assert rate == 8000 and torch.equal(torch.cat(list(blocks)), samples[0])
    assert audio_info(str(tmp_path / "left.wav")).duration == samples.shape[1] / 8000
    left[-1000:] = b""  # a size left 0 is no length to be cut short of
    assert load_audio(bytes(left))[0].shape[1] == samples.shape[1] - 500
    empty = bytearray(data[:data.index(b"data") + 8]) + b"LIST" + (9).to_bytes(4, "little") + b"INFOISFT\0\0"
    empty[data.index(b"data") + 4:data.index(b"data") + 8] = bytes(4)  # no samples, and one chunk of tags after
    with pytest.raises(AudioError, match="^no samples$"):
        load_audio(bytes(empty))


@pytest.mark.parametrize("subtype", ["GSM610", "G721_32"])
def test_a_telephony_codec_libsndfile_cannot_seek_in_is_read_block_by_block(fsdd, tmp_path, subtype):
    """SoundFile.blocks refuses a file libsndfile cannot seek in ('frames must be specified for non-seekable
    files'): --stream and --segment-seconds ended in that traceback where offline transcription read the file."""
    from rnnt.segmenting import file_blocks

    good = next(records(str(fsdd / "test.list")))
    soundfile.write(tmp_path / "coded.wav", load_audio(good["audio"])[0][0].numpy(), 8000, subtype=subtype)
    samples = load_audio(str(tmp_path / "coded.wav"))[0]
    blocks, rate = file_blocks(str(tmp_path / "coded.wav"), 0.05)
    assert rate == 8000 and torch.equal(torch.cat(list(blocks)), samples[0])


def test_an_mp3_read_in_blocks_or_from_a_segments_start_is_the_mp3_decoded_whole(test_data, tmp_path):
    """libsndfile decodes an MP3's second read, or one after a seek, off by up to a quarter of full scale: --stream
    and --segment-seconds heard 20 dB of noise more than a whole-file transcription, and a segment another sound."""
    from rnnt.data.resample import resample
    from rnnt.segmenting import file_blocks

    yesno = load_audio(str(test_data / "waves_yesno" / "0_1_0_1_1_1_0_0.wav"))[0][0]
    sound = resample(yesno, 8000, 44100)
    soundfile.write(tmp_path / "a.mp3", sound.numpy(), 44100, format="MP3")
    whole = load_audio(str(tmp_path / "a.mp3"))[0][0]
    error = (whole - sound).square().sum() / sound.square().sum()
    assert whole.shape == sound.shape and 10 * math.log10(error) < -30  # (blocks of 0.25 s were at -12 dB)
    blocks, rate = file_blocks(str(tmp_path / "a.mp3"), 0.25)
    assert rate == 44100 and torch.equal(torch.cat(list(blocks)), whole)
    assert torch.equal(load_audio(str(tmp_path / "a.mp3"), 1.0, 2.0)[0][0], whole[44100:88200])


def test_an_mp3_cut_short_is_refused_by_name_whole_in_blocks_from_a_pipe_and_after_an_id3_tag(test_data, tmp_path):
    """An MP3 whose Xing or Info frame counts its samples, cut in half: libsndfile decoded what was there, and a
    transcript went with half its audio. One without such a frame gives no length to be cut short of."""
    from rnnt.segmenting import file_blocks

    samples = load_audio(str(test_data / "waves_yesno" / "0_1_0_1_1_1_0_0.wav"))[0][0]  # 6 s at 8 kHz
    written = io.BytesIO()
    soundfile.write(written, samples.numpy(), 8000, format="MP3")
    data = written.getvalue()
    tag = b"ID3\x03\x00\x00" + bytes([0, 0, 1, 0]) + bytes(128)  # an ID3v2 tag of 128 bytes before the frames
    cut = r"^cut short: its header gives \d+\.\d\d s of audio, the file decodes to \d+\.\d\d s$"
    for whole in (data, tag + data):
        assert load_audio(whole)[0].shape[1] == samples.shape[0]
        half = whole[:len(whole) // 2]
        (tmp_path / "half.mp3").write_bytes(half)
        for audio in (half, str(tmp_path / "half.mp3")):
            with pytest.raises(AudioError, match=cut):
                load_audio(audio)
            with pytest.raises(AudioError, match=cut):
                list(file_blocks(audio, 0.25)[0])
        read, write = os.pipe()
        os.write(write, half)  # (under a pipe's buffer)
        os.close(write)
        with pytest.raises(AudioError, match=cut):
            load_audio(f"/dev/fd/{read}")
        os.close(read)
    with pytest.raises(AudioError, match=r"^its frames do not decode \(damaged, or cut short\?\)$"):
        load_audio(data[:100])  # (libsndfile said: 'file does not exist or is not a regular file (possibly a pipe?)')
    untagged = bytearray(data)  # the Xing frame's name overwritten: a count libsndfile guesses from the size
    at = untagged.find(b"Xing") if b"Xing" in untagged else untagged.find(b"Info")
    untagged[at:at + 4] = b"XXXX"
    assert 0 < load_audio(bytes(untagged[:len(untagged) // 2]))[0].shape[1] < samples.shape[0]


def test_an_mp3_whose_frame_count_is_more_than_its_bytes_hold_is_refused(test_data, tmp_path):
    """One flipped byte of the Xing frame's count claimed 1.7e12 samples: decoding asked numpy for 6 TiB and the
    MemoryError ended training and get_utt2dur.sh instead of one file skipped."""
    from rnnt.data.audio import measured_length

    samples = load_audio(str(test_data / "waves_yesno" / "0_1_0_1_1_1_0_0.wav"))[0][0]
    written = io.BytesIO()
    soundfile.write(written, samples.numpy(), 8000, format="MP3")
    data = bytearray(written.getvalue())
    at = data.find(b"Xing") if b"Xing" in data else data.find(b"Info")
    assert data[at + 7] & 1  # its flags say a frame count follows
    data[at + 9] = 255
    path = tmp_path / "damaged.mp3"
    path.write_bytes(bytes(data))
    overcounted = r"^its header gives \d+ s of audio, more than its \d+ bytes hold at any MP3 bit rate \(a damaged"
    for read in (load_audio, measured_length):
        with pytest.raises(AudioError, match=overcounted):
            read(str(path))


def test_a_pipe_is_read_once_a_folder_and_a_headerless_file_are_named(fsdd, tmp_path):
    """A path that is not a regular file (a shell's <(...), a named pipe) can be read once: the header's checks
    read its first 64 KB before libsndfile did, which then decoded the rest alone, in silence."""
    import threading

    from rnnt.segmenting import file_blocks

    good = next(records(str(fsdd / "test.list")))
    samples = load_audio(good["audio"])[0].repeat(1, 20)  # 8 s: more than 64 KB
    soundfile.write(tmp_path / "long.wav", samples[0].numpy(), 8000, subtype="PCM_16")
    data = (tmp_path / "long.wav").read_bytes()
    pipe = tmp_path / "pipe.wav"
    for read in (lambda: load_audio(str(pipe))[0][0], lambda: torch.cat(list(file_blocks(str(pipe))[0]))):
        os.mkfifo(pipe)
        writer = threading.Thread(target=pipe.write_bytes, args=(data,))
        writer.start()
        assert torch.equal(read(), samples[0])
        writer.join()
        pipe.unlink()
    for read in (load_audio, file_blocks):
        with pytest.raises(AudioError, match=r"^a folder, not an audio file: give its files \(folder/\*\.wav\)"):
            read(str(tmp_path))
        (tmp_path / "b.raw").write_bytes(data[44:])
        with pytest.raises(AudioError, match="a headerless file .raw PCM..: give it a header, as sox -t raw"):
            read(str(tmp_path / "b.raw"))


def test_a_flac_stream_that_gives_no_length_is_refused_by_name(fsdd, tmp_path, caplog):
    """A FLAC written to a pipe (its header's sample count unknown): reading it asked numpy for 2^63 - 1
    samples, a ValueError that ended the pass. Now refused, named."""
    good = next(records(str(fsdd / "test.list")))
    write_flac_of_no_length(tmp_path / "pipe.flac", load_audio(good["audio"])[0][0].numpy(), 8000)
    for read in (load_audio, stages.audio_length):
        with pytest.raises(AudioError, match="its FLAC header gives no length"):
            read(str(tmp_path / "pipe.flac"))
    piped = {**good, "key": "piped", "audio": str(tmp_path / "pipe.flac"), "source": "pipe.flac"}
    with caplog.at_level(logging.WARNING):
        assert [r["key"] for r in stages.audio_lengths([piped, good], 8000)] == [good["key"]]
    assert "skipped piped from pipe.flac: cannot decode audio (its FLAC header gives no length" in caplog.text


def test_segments_follow_kaldis_extract_segments_and_non_finite_samples_are_refused(fsdd, tmp_path):
    """A segment ending less than 0.5 s past its recording is cut at its end; one starting past it or ending
    further is refused (Kaldi's extract-segments, whose max_overshoot is 0.5 s); a float file with a NaN sample
    is refused wherever it is read (it would make NaN features, CMVN sums and losses). The header alone gives
    the lengths decoding gives, and refuses the same segments."""
    path = json.loads((fsdd / "test.list").read_text().splitlines()[0])["wav"]
    whole, rate = load_audio(path)
    duration = whole.shape[1] / rate
    cut, _ = load_audio(path, 0.1, duration + 0.4)
    assert torch.equal(cut, whole[:, round(0.1 * rate):])
    for start, end in ((None, None), (0.1, duration + 0.4), (0.2, 0.5), (0.2, -1)):
        assert stages.audio_length(path, start, end) == (load_audio(path, start, end)[0].shape[1], rate, 1)
    for start, end, message in ((0.1, duration + 0.6, "more than 0.5 s past the recording's"),
                                (duration + 0.01, duration + 0.3, "outside the recording's"),
                                (-1.0, 0.5, "outside the recording's"),
                                (1e308, -1, "outside the recording's")):  # (inf samples: an OverflowError)
        for read in (load_audio, stages.audio_length):
            with pytest.raises(AudioError, match=message):
                read(path, start, end)
    samples = whole[0].numpy().copy()
    samples[100] = np.nan
    soundfile.write(tmp_path / "nan.wav", samples, rate, subtype="FLOAT")
    with pytest.raises(AudioError, match="samples are not finite"):
        load_audio(str(tmp_path / "nan.wav"))
    record = {"key": "nan", "txt": "ONE", "audio": str(tmp_path / "nan.wav"), "source": "test:nan"}
    assert list(stages.waveforms([record], rate)) == []  # its header is sound: refused once decoded


def perturbed(record: dict, factors: tuple[float, ...], seed: int = 0, epoch: int = 0) -> dict:
    """The record with its waveform, speed-perturbed as the pipeline does it: the factor drawn before
    batching, the audio resampled after."""
    return stages.with_waveforms(list(stages.speed_perturb([record], factors, seed, epoch)))[0]


def test_speed_perturb_changes_length_by_the_factor_and_is_seeded(fsdd):
    record = next(stages.audio_lengths(records(str(fsdd / "test.list")), 8000))
    n = record["samples"]
    assert "decoded" not in record and n == stages.with_waveforms([record])[0]["waveform"].shape[0]
    lengths = {}
    for key in (f"k{i}" for i in range(30)):
        out = perturbed({**record, "key": key}, (0.9, 1.0, 1.1), seed=1)
        assert out["waveform"].shape[0] == out["samples"]  # the length batching saw
        lengths[round(n / out["samples"], 2)] = out.get("speed", 1.0)
    assert set(lengths) == {0.9, 1.0, 1.1} and all(abs(k - v) < 0.01 for k, v in lengths.items())
    again, first = (perturbed({**record, "key": "k3"}, (0.9, 1.0, 1.1), seed=1) for _ in range(2))
    assert torch.equal(again["waveform"], first["waveform"])


@pytest.mark.parametrize("rate", [8000, 11025, 22050])
def test_speed_perturb_resamples_by_the_factor_as_a_small_fraction_at_any_rate(rate):
    """At 8 kHz (16 kHz the same) the ratio is the one the rates gave (7200 / 8000 = 9 / 10); at 11025 Hz x 1.1
    and 22050 x 1.05 the rounded rates are nearly prime to each other, and their kernel took 4 GB and 24 s."""
    waveform = torch.randn(rate)
    for factor, (up, down) in ((0.9, (9, 10)), (1.1, (11, 10)), (1.05, (21, 20)), (0.95, (19, 20))):
        record = {"decoded": waveform, "samples": rate, "sample_rate": rate}
        key = next(f"k{i}" for i in range(100) if next(stages.speed_perturb(
            [{**record, "key": f"k{i}"}], (factor, 1.0), 0, 0)).get("speed"))
        out = perturbed({**record, "key": key}, (factor, 1.0))
        assert torch.equal(out["waveform"], resample(waveform, up, down))
        assert out["waveform"].shape[0] == math.ceil(rate * down / up)
    assert torch.equal(resample(waveform, 9, 10), resample(waveform, 7200, 8000))


def test_tokenize_and_filter_count_reasons(fsdd):
    tokenizer = Tokenizer(str(fsdd / "lang"))
    config = data_config({**TRAIN, "filter": {"min_duration": 0.3, "max_duration": 0.8, "max_tokens_per_frame": 0.4}})
    recs = list(stages.tokenize(stages.waveforms(records(str(fsdd / "test.list")), 8000), tokenizer))
    assert recs[0]["tokens"] == tokenizer.encode(recs[0]["txt"]) and 1 not in recs[0]["tokens"]
    report = DataReport("test", 8000)
    kept = list(stages.filter_utterances(recs, config, report))
    durations = [r["waveform"].shape[0] / 8000 for r in kept]
    assert kept and all(0.3 <= d <= 0.8 for d in durations)
    assert all(len(r["tokens"]) <= 0.4 * r["num_frames"] for r in kept)
    assert report.dropped["longer than data.filter.max_duration 0.8 s"] > 0
    assert sum(report.dropped.values()) + len(kept) == len(recs)


def test_the_duration_limits_count_the_recorded_audio_where_asked_as_mlperf_does(fsdd):
    """data.filter.duration_before_speed: max_duration counts each utterance as recorded, the same every epoch
    whatever speed it drew (MLPerf's reference filters on the original duration); by default, as perturbed."""
    tokenizer = Tokenizer(str(fsdd / "lang"))
    recs = list(stages.tokenize(stages.audio_lengths(records(str(fsdd / "test.list")), 8000), tokenizer))
    recorded = {r["key"]: r["samples"] / 8000 for r in recs}
    limit = sorted(recorded.values())[len(recorded) // 2]  # half the utterances over it as recorded
    for before, epochs in ((True, range(3)), (False, range(3))):
        kept_by_epoch = []
        for epoch in epochs:
            config = data_config({**TRAIN, "speed_perturb": [0.8, 1.25],
                                  "filter": {"max_duration": limit, "duration_before_speed": before}})
            perturbed = stages.speed_perturb(recs, config.speed_perturb, 0, epoch)
            report = DataReport("test", 8000)
            kept_by_epoch.append({r["key"] for r in stages.filter_utterances(perturbed, config, report)})
        if before:
            assert all(kept == {k for k, d in recorded.items() if d <= limit} for kept in kept_by_epoch)
            assert "(before speed perturbation)" in next(iter(report.dropped))
        else:  # drawn 0.8 (longer) or 1.25 (shorter): another set each epoch
            assert len({frozenset(kept) for kept in kept_by_epoch}) > 1


def test_the_filter_counts_the_encoders_output_frames_and_one_symbol_per_frame(fsdd):
    """Character units over 30 ms frames and StackTime 4 (120 ms): spelled digits ('seven': 5 units in about
    0.4 s) do not fit one symbol per frame, nor the pruned loss's band of 2; the filter counts frames after the
    encoder, not after data.subsample."""
    from rnnt.model.lstm_encoder import LSTMEncoderConfig
    from rnnt.model.transducer import LossConfig

    tokenizer = Tokenizer(str(fsdd / "lang"))
    recs = list(stages.tokenize(stages.audio_lengths(records(str(fsdd / "test.list")), 8000), tokenizer))
    config = data_config(TRAIN)
    encoder = LSTMEncoderConfig(input_dim=192, stack_time=4)
    report = DataReport("test", 8000)
    one_symbol = LossConfig(one_sym_per_frame=True).units_per_frame()
    kept = list(stages.filter_utterances(recs, config, report, encoder.output_frames, one_symbol))
    assert all(len(r["tokens"]) <= encoder.output_frames(r["num_frames"]) for r in kept)
    assert 0 < len(kept) < len(recs) and report.dropped == {
        "over 1 units per encoder frame (one symbol per frame)": len(recs) - len(kept)}
    assert len(list(stages.filter_utterances(recs, config, None, encoder.output_frames))) == len(recs)
    # the pruned loss's band of s_range 2 holds one unit a frame in the standard lattice too: more has no path
    report = DataReport("test", 8000)
    band = LossConfig(type="pruned", s_range=2).units_per_frame()
    assert band == (1.0, "the pruned loss's band of s_range 2", False)
    assert len(list(stages.filter_utterances(recs, config, report, encoder.output_frames, band))) == len(kept)
    assert report.dropped == {"over 1 units per encoder frame (the pruned loss's band of s_range 2)": len(recs) -
                              len(kept)}
    assert LossConfig(type="pruned").units_per_frame()[0] == 4 and LossConfig().units_per_frame()[0] == math.inf
    # CTC: a frame a unit and a blank between repeated units ('three' needs 6 frames, 'seven' 5)
    report = DataReport("test", 8000)
    ctc = LossConfig(type="ctc").units_per_frame()
    kept_ctc = list(stages.filter_utterances(recs, config, report, encoder.output_frames, ctc))
    needed = lambda t: len(t) + sum(a == b for a, b in zip(t, t[1:]))  # noqa: E731
    assert [r["key"] for r in kept_ctc] == [r["key"] for r in kept if needed(r["tokens"]) <= encoder.output_frames(
        r["num_frames"])]
    why = "over 1 units per encoder frame (CTC: a frame a unit and one between repeated units)"
    assert 0 < len(kept_ctc) < len(kept) and report.dropped == {why: len(recs) - len(kept_ctc)}


def mixed_list(fsdd, tmp_path):
    """A raw list of 4 recordings at 8 kHz mono, one made 22.05 kHz stereo and one whose file is missing."""
    import soundfile

    lines = (fsdd / "test.list").read_text().splitlines()[:4]
    first = json.loads(lines[0])
    samples, rate = soundfile.read(first["wav"], dtype="float32")
    stereo = tmp_path / "stereo.wav"
    wide = resample(torch.from_numpy(samples), rate, 22050).numpy()
    soundfile.write(stereo, np.stack([wide, wide], axis=1), 22050)
    lines.append(json.dumps({**first, "key": "stereo", "wav": str(stereo)}))
    lines.append(json.dumps({**first, "key": "missing", "wav": str(tmp_path / "missing.wav")}))
    (tmp_path / "mixed.list").write_text("\n".join(lines) + "\n")
    return tmp_path / "mixed.list"


def test_a_pass_reports_rates_resampling_mixdown_and_drops(fsdd, tmp_path, caplog):
    """The mixed list read at 16 kHz."""
    config = data_config({**TRAIN, "sample_rate": 16000, "filter": {"max_duration": 0.5}})
    with caplog.at_level(logging.INFO, logger="rnnt.data"):
        batches = list(Pipeline(str(mixed_list(fsdd, tmp_path)), config, Tokenizer(str(fsdd / "lang")), True).batches())
    line = [r.message for r in caplog.records if r.message.startswith("data (mixed.list, epoch 1)")]
    assert len(line) == 1, caplog.text
    kept = sum(len(b["keys"]) for b in batches)
    assert line[0].startswith("data (mixed.list, epoch 1): 6 utterances: 4 at 8000 Hz, 1 at 22050 Hz; 5 resampled "
                              "to data.sample_rate 16000 Hz as read"), line[0]
    assert "; 1 mixed down to mono; 1 skipped, their audio unreadable" in line[0]
    assert f"{5 - kept} dropped by the filters ({5 - kept} longer than data.filter.max_duration 0.5 s)" in line[0]


def test_one_audio_cache_for_two_pipelines_keeps_both_within_its_budget_and_tells_shards_apart(fsdd, tmp_path):
    """Training's and validation's pipelines share data.cache_audio_mb (each had the whole budget); two
    shards holding the same key (two corpora's lists joined) are two utterances, not one (the second was
    trained with the first one's audio under its own transcript)."""
    from rnnt.data.audio_cache import AudioCache

    tokenizer, config = Tokenizer(str(fsdd / "lang")), data_config({**TRAIN, "cache_audio_mb": 1, "speed_perturb": []})
    dev_alone = Pipeline(str(fsdd / "test.list"), dataclasses.replace(config, cache_audio_mb=64), tokenizer, False)
    list(dev_alone.batches(0))
    budget = dev_alone.audio_cache.used + 300_000  # the dev list's audio and some of the training list's
    cache = AudioCache(budget)
    train = Pipeline(str(fsdd / "train.list"), config, tokenizer, True, audio_cache=cache)
    dev = Pipeline(str(fsdd / "test.list"), config, tokenizer, False, audio_cache=train.audio_cache)
    for pipe in (dev, train):
        list(pipe.batches(0))
    sources = [source for _, source, _, _ in cache.entries]
    assert sum(".tar:" not in source for source in sources) == 300 and any(".tar:" in s for s in sources)
    assert budget - 50_000 < cache.used <= budget
    shards = []
    for n, line in enumerate((fsdd / "test.list").read_text().splitlines()[:2]):  # one key, two utterances
        entry = json.loads(line)
        shard = tmp_path / f"shard{n}.tar"
        with tarfile.open(shard, "w") as tar:
            for name, data in (("same-1.txt", entry["txt"].encode()), ("same-1.wav", open(entry["wav"], "rb").read())):
                member = tarfile.TarInfo(name)
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
        shards.append(str(shard))
    (tmp_path / "joined.list").write_text("".join(f"{s}\n" for s in shards))
    # trained (decoding takes a key once: stages.first_of_each_key), without SpecAugment's draws
    joined = Pipeline(str(tmp_path / "joined.list"), dataclasses.replace(config, spec_augment=None), tokenizer, True)
    plain = Pipeline(str(tmp_path / "joined.list"), data_config({**TRAIN, "speed_perturb": [], "spec_augment": None}),
                     tokenizer, True)
    cached_feats, plain_feats = ([f for b in p.batches(0) for f in b["feats"]] for p in (joined, plain))
    assert len(cached_feats) == 2 and not torch.equal(cached_feats[0], cached_feats[1])
    assert all(torch.equal(a, b) for a, b in zip(cached_feats, plain_feats))


def test_cached_audio_gives_the_same_batches_and_reports_and_is_decoded_once(fsdd, tmp_path, caplog, monkeypatch):
    """data.cache_audio_mb: epochs 0 and 1 of the mixed list with the cache equal those without it, batch for
    batch and report for report, while the second decodes nothing and opens only the file that could not be
    read; a budget
    smaller than the list keeps what fits and decodes the rest every epoch; DataLoader workers keep nothing."""
    path, tokenizer = str(mixed_list(fsdd, tmp_path)), Tokenizer(str(fsdd / "lang"))
    opened = spy_on_audio(monkeypatch)

    def epochs(**overrides):
        pipe = Pipeline(path, data_config({**TRAIN, "sample_rate": 16000, **overrides}), tokenizer, True)
        out = []
        for epoch in (0, 1):
            opened["header"].clear(), opened["decode"].clear()
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="rnnt.data"):
                batches = list(pipe.batches(epoch))
            out.append((batches, [r.message for r in caplog.records if r.message.startswith("data (")],
                        (len(opened["header"]), len(opened["decode"]))))
        return out, pipe

    plain, _ = epochs()
    cached, pipe = epochs(cache_audio_mb=1)
    from_memory = ("5 resampled to data.sample_rate 16000 Hz as read (once for all: steps/make_shards.py --resample)",
                   "5 at data.sample_rate 16000 Hz from memory, resampled when first read (data.cache_audio_mb)")
    for epoch, ((batches, report, _), (cached_batches, cached_report, _)) in enumerate(zip(plain, cached)):
        assert len(report) == 1 and from_memory[0] in report[0]
        assert cached_report == (report if epoch == 0 else [report[0].replace(*from_memory)])  # not read again
        assert [b["keys"] for b in batches] == [b["keys"] for b in cached_batches]
        assert all(torch.equal(a["feats"], b["feats"]) for a, b in zip(batches, cached_batches))
    # (headers read, files decoded): the missing file fails at its header
    assert [n for _, _, n in plain] == [(6, 5), (6, 5)] and [n for _, _, n in cached] == [(6, 5), (1, 0)]
    sizes = sorted(w.numel() * 4 for w, _, _ in pipe.audio_cache.entries.values())
    assert len(sizes) == 5 and pipe.audio_cache.used == sum(sizes)
    small = Pipeline(path, data_config({**TRAIN, "sample_rate": 16000, "cache_audio_mb": 1}), tokenizer, True)
    small.audio_cache.max_bytes = sum(sizes[:2])
    assert keys_of(small.batches(0)) == keys_of(plain[0][0]) and 0 < len(small.audio_cache.entries) < 5
    opened["decode"].clear()
    assert keys_of(small.batches(1)) == keys_of(plain[1][0])
    assert len(opened["decode"]) == 5 - len(small.audio_cache.entries)
    workers = Pipeline(path, data_config({**TRAIN, "cache_audio_mb": 64, "num_workers": 2}), tokenizer, True)
    assert workers.audio_cache is None  # worker processes start afresh every epoch


def test_a_shard_whose_audio_is_all_cached_is_not_read_again_and_a_damaged_one_always_is(fsdd, tmp_path, monkeypatch,
                                                                                         caplog):
    """Reading shards was a tenth of fsdd's epoch with every waveform in the cache: a shard read whole and clean is
    not opened again once the cache keeps all its audio, and the batches are those without a cache; a damaged shard
    is read (and its damage reported) every epoch."""
    from rnnt.data import shard_reading

    shards = sorted((fsdd / "shards").glob("*.tar"))[:3]
    damaged = tmp_path / "damaged.tar"
    damaged.write_bytes(shards[2].read_bytes()[:60_000])
    data_list = tmp_path / "train.list"
    data_list.write_text(f"{shards[0]}\n{shards[1]}\n{damaged}\n")
    opened = []
    real = shard_reading.open_shard
    monkeypatch.setattr(shard_reading, "open_shard", lambda url: opened.append(os.path.basename(url)) or real(url))
    tokenizer = Tokenizer(str(fsdd / "lang"))
    cached, plain = (Pipeline(str(data_list), data_config({**TRAIN, "cache_audio_mb": mb}), tokenizer, True)
                     for mb in (64, 0))
    for epoch in range(3):
        opened.clear()
        with caplog.at_level(logging.WARNING, logger="rnnt.data"):
            caplog.clear()
            batches = list(cached.batches(epoch))
        assert sum(f"shard {damaged}: damaged after" in r.message for r in caplog.records) == 1
        assert sorted(opened) == ["damaged.tar"] + ([s.name for s in shards[:2]] if epoch == 0 else [])
        expected = list(plain.batches(epoch))
        assert keys_of(batches) == keys_of(expected) and len(keys_of(batches)) > 150
        assert all(torch.equal(a["feats"], b["feats"]) for a, b in zip(batches, expected))
    small = Pipeline(str(data_list), data_config({**TRAIN, "cache_audio_mb": 1}), tokenizer, True)
    small.audio_cache.max_bytes = 400_000  # about one shard's audio: a waveform does not fit
    for epoch in range(2):
        list(small.batches(epoch))
    cache = small.audio_cache
    assert cache.full and all(cache.key_of(u) in cache.entries for kept in cache.shards.values() for u in kept)
    assert len(cache.shards) < 2  # no records kept of a shard the budget leaves out


def test_adaptive_time_masks_grow_with_the_length():
    """Adaptive masks: round(time_mask_ratio x T) of them (at most max_time_masks), each up to time_width x T
    frames: over 400 seeds, 1000 frames at ratio 0.001 mask one run of at most 50 frames, and 50 is reached;
    at 0.004, four masks cover more than 50 frames and at most 200; capped at 2 masks, at most 100; 500 frames
    at 0.004 mask 2 runs of at most 25."""
    def masked_frames(frames, seed, **changes):
        config = SpecAugmentConfig(freq_masks=0, adaptive=True, time_width=0.05, value=1.0,
                                   **{"time_mask_ratio": 0.001, "max_time_masks": 20, **changes})
        rows = spec_augment(torch.zeros(frames, 4), config, torch.Generator().manual_seed(seed))[:, 0] == 1.0
        runs = torch.diff(torch.cat([torch.tensor([0]), rows.int(), torch.tensor([0])])).tolist()
        return int(rows.sum()), runs.count(1)

    one = [masked_frames(1000, seed) for seed in range(400)]
    assert max(n for n, _ in one) == 50 and max(r for _, r in one) == 1
    four = [masked_frames(1000, seed, time_mask_ratio=0.004)[0] for seed in range(400)]
    assert 50 < max(four) <= 200
    capped = [masked_frames(1000, seed, time_mask_ratio=0.004, max_time_masks=2)[0] for seed in range(400)]
    assert 50 < max(capped) <= 100
    assert max(masked_frames(500, seed, time_mask_ratio=0.004)[0] for seed in range(400)) <= 50


def test_spec_augment_masks_are_seeded_and_adaptive():
    feats = torch.randn(200, 80) + 10
    config = SpecAugmentConfig(freq_masks=2, freq_width=10, adaptive=True, time_mask_ratio=0.04, time_width=0.05)
    a = spec_augment(feats, config, torch.Generator().manual_seed(3))
    b = spec_augment(feats, config, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    mean = float(feats.mean())  # unnormalised features are masked with their mean, not with 0
    masked_bins = (a == mean).all(dim=0).sum()
    masked_frames = (a == mean).all(dim=1).sum()
    assert 0 < masked_bins <= 20
    assert 0 < masked_frames <= 8 * 10  # round(0.04 * 200) = 8 masks of at most 0.05 * 200 = 10 frames
    assert (a[a != feats] == mean).all()
    short = torch.randn(20, 80) + 10
    assert (spec_augment(short, config, torch.Generator().manual_seed(3)) == float(short.mean())).all(dim=1).sum() <= 1
    zero = dataclasses.replace(config, value=0.0)  # an explicit value is used as given
    assert torch.equal(spec_augment(feats, zero, torch.Generator().manual_seed(3)) == 0, a == mean)


def test_stack_frames():
    feats = torch.arange(7 * 2, dtype=torch.float32).reshape(7, 2)
    out = stack_frames(feats, 3, 3)
    assert out.shape == (3, 6)
    assert out[1].tolist() == [6, 7, 8, 9, 10, 11] and out[2].tolist() == [12, 13, 0, 0, 0, 0]


def test_resample_matches_an_analytic_tone():
    t = torch.arange(16000, dtype=torch.float64) / 16000
    tone = torch.sin(2 * torch.pi * 440 * t)
    out = resample(tone, 16000, 8000)
    expected = torch.sin(2 * torch.pi * 440 * torch.arange(8000, dtype=torch.float64) / 8000)
    assert out.shape == (8000,) and (out[100:-100] - expected[100:-100]).abs().max() < 1e-3
    # a 6 kHz tone has no place under the 4 kHz Nyquist of 8 kHz audio: filtered out, not folded to 2 kHz
    above = resample(torch.sin(2 * torch.pi * 6000 * t), 16000, 8000)
    assert above[100:-100].square().mean().sqrt() < 0.01 * (0.5 ** 0.5)  # 40 dB under the tone's RMS


@pytest.mark.parametrize("orig,new", [(44100, 16000), (8000, 16000), (16000, 8000), (22050, 16000), (11127, 8000)])
def test_resampling_block_by_block_gives_the_whole_audios_resample(fsdd, orig, new):
    """transcribe.py --stream read a file at another rate than the model's whole, and resampled it whole: 76 MB a
    minute at 44.1 kHz. Blocks of random sizes give the samples resampling it whole gives."""
    speech = load_audio(next(records(str(fsdd / "test.list")))["audio"])[0][0]
    audio = resample(speech, 8000, orig)
    generator = torch.Generator().manual_seed(orig + new)
    resampler, parts, start = StreamingResampler(orig, new), [], 0
    while start < audio.shape[0]:
        size = int(torch.randint(1, 3000, (1,), generator=generator))
        parts.append(resampler.accept(audio[start:start + size]))
        start += size
    joined = torch.cat(parts + [resampler.finish()])
    whole = resample(audio, orig, new)
    assert joined.shape == whole.shape
    torch.testing.assert_close(joined, whole, rtol=0, atol=1e-5)
    same = StreamingResampler(orig, orig)  # equal rates: the audio as it is, as resample gives it
    assert torch.equal(torch.cat([same.accept(audio[:100]), same.accept(audio[100:]), same.finish()]), audio)
    # no samples: none, as the streaming resampler gives (resample raised in its reshape)
    empty = StreamingResampler(orig, new)
    assert resample(audio[:0], orig, new).shape == torch.cat([empty.accept(audio[:0]), empty.finish()]).shape == (0,)


def test_a_rate_of_many_phases_resamples_output_by_output_as_the_polyphase_form_would():
    """11127 Hz (an old Mac rate) to 8000: 8000 phases of 11173 taps, 3 GB and 10 s for a second of audio, kept in a
    cache by every loader worker. Output by output: the same samples, in the memory of a few thousand."""
    from rnnt.data import resample as resampling

    assert not resampling.polyphase(11127, 8000) and resampling.polyphase(441, 160)
    t = torch.arange(11127, dtype=torch.float64) / 11127
    out = resample(torch.sin(2 * torch.pi * 440 * t), 11127, 8000)
    expected = torch.sin(2 * torch.pi * 440 * torch.arange(8000, dtype=torch.float64) / 8000)
    assert out.shape == (8000,) and (out[100:-100] - expected[100:-100]).abs().max() < 1e-3
    x = torch.randn(2, 3000, generator=torch.Generator().manual_seed(0))
    polyphase = resample(x, 44100, 16000)
    direct = resampling._direct(x, 0, 441, 160, 0, polyphase.shape[-1])
    torch.testing.assert_close(direct, polyphase, rtol=0, atol=1e-5)


def test_split_is_disjoint_and_covers_every_epoch():
    units = [f"shard{i}" for i in range(23)]
    for epoch in range(3):
        parts = [part(units, 7, epoch, Reader(r, 2, w, 2)) for r in range(2) for w in range(2)]
        flat = [u for p in parts for u in p]
        assert sorted(flat) == sorted(units) and len(set(flat)) == len(flat)
    assert part(units, 7, 0, Reader(0, 2, 0, 2)) != part(units, 7, 1, Reader(0, 2, 0, 2))


def test_leftover_shards_are_shared_utterance_by_utterance():
    """29 shards of 1000 utterances on 8 ranks of 2 workers: each rank gets 3 whole shards and an eighth
    of the other 5, 3625 utterances; every utterance goes to exactly one (rank, worker) every epoch. Split
    by whole shards, 5 ranks would get 4000 and 3 ranks 3000 (17% of an epoch unused by the old join)."""
    units = [f"shard{i}" for i in range(29)]
    for epoch in range(2):
        taken, per_rank = [], []
        for rank in range(8):
            count = 0
            for worker in range(2):
                for share in part(units, 7, epoch, Reader(rank, 8, worker, 2), share_leftovers=True):
                    mine = [(share.url, i) for i in range(1000) if i % share.every == share.offset]
                    taken += mine
                    count += len(mine)
            per_rank.append(count)
        assert per_rank == [3625] * 8
        assert sorted(taken) == sorted((u, i) for u in units for i in range(1000))


def test_bucketing_gives_every_rank_a_slice_of_one_global_batch_per_step(fsdd):
    """300 real utterances, 4 buckets of 75, 3 ranks of batches of 16: 6 global batches of 48 (12
    utterances dropped); in each step the ranks take disjoint slices of one global batch, which holds
    consecutive utterances of the duration order (at most two neighbouring buckets); the same order on
    every rank, a new one each epoch; workers split their rank's batches."""
    lines = (fsdd / "test.list").read_text().splitlines()
    duration = {json.loads(l)["key"]: json.loads(l)["duration"] for l in lines}
    key = lambda line: json.loads(line)["key"]  # noqa: E731
    ranks = [bucket_batches(lines, 4, 16, seed=0, epoch=0, reader=Reader(r, 3)) for r in range(3)]
    assert [len(r) for r in ranks] == [6, 6, 6] and {len(b) for r in ranks for b in r} == {16}
    used = [key(line) for r in ranks for b in r for line in b]
    assert len(used) == len(set(used)) == 288
    by_rank_order = sorted(duration, key=lambda k: duration[k])
    bucket_of = {k: i // 75 for i, k in enumerate(by_rank_order)}
    for step in zip(*ranks):
        keys = [key(line) for batch in step for line in batch]
        assert len({bucket_of[k] for k in keys}) <= 2
        assert max(bucket_of[k] for k in keys) - min(bucket_of[k] for k in keys) <= 1
    assert bucket_batches(lines, 4, 16, seed=0, epoch=0, reader=Reader(1, 3)) == ranks[1]
    assert bucket_batches(lines, 4, 16, seed=0, epoch=1, reader=Reader(1, 3)) != ranks[1]
    workers = [bucket_batches(lines, 4, 16, seed=0, epoch=0, reader=Reader(2, 3, w, 2)) for w in range(2)]
    assert workers[0] == ranks[2][0::2] and workers[1] == ranks[2][1::2]



def test_bucketing_drops_the_utterances_that_fill_no_global_batch_at_random_places():
    """100 utterances of 1..100 s, global batches of 24: 4 dropped an epoch, from any bucket (cut from the
    end of the duration order, they were the 4 longest every epoch, never trained on)."""
    lines = [json.dumps({"key": f"u{i:03d}", "wav": "x.wav", "txt": "A", "duration": float(i + 1)}) for i in range(100)]
    dropped = []
    for epoch in range(30):
        trained = {json.loads(line)["key"] for batch in global_batches(lines, 4, 24, 0, epoch) for line in batch}
        assert len(trained) == 96
        dropped += sorted({f"u{i:03d}" for i in range(100)} - trained)
    assert len(set(dropped)) > 50 and min(dropped) < "u050"


def test_a_bucketed_list_that_fills_no_global_batch_is_refused_naming_the_sizes(fsdd):
    """300 utterances, batches of 64 on 8 ranks: every utterance was left out, and the training stopped on 'no
    usable utterance' while the data report said none was dropped."""
    bucketed = pipeline(fsdd, list_name="test.list", buckets=3, batch={"type": "static", "batch_size": 64})
    with pytest.raises(ValueError, match=r"test.list: 300 utterances with a duration fill no global batch of "
                                         r"data.batch.batch_size 64 x 8 ranks"):
        make_loader(bucketed, 0, 8)
    assert len(next(iter(make_loader(bucketed, 0, 4)))["keys"]) == 64  # on 4 ranks 256 fill one: 64 a rank

# --- the whole chain --------------------------------------------------------------------------------

def test_whole_chain_over_shards(fsdd):
    p = pipeline(fsdd)
    batches = list(p.batches(epoch=0))
    keys = keys_of(batches)
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 900
    b = batches[0]
    assert b["feats"].dim() == 3 and b["feats"].shape[2] == 3 * 64
    assert (b["feat_lens"] <= b["feats"].shape[1]).all() and b["tokens"].shape[0] == len(b["keys"])
    frames = sum(int(x["feat_lens"].sum()) for x in batches)
    padded = sum(x["feats"].shape[0] * x["feats"].shape[1] for x in batches)
    assert 1 - frames / padded < 0.10  # sort buffer of about ten batches


def test_tail_silence_follows_each_utterance_when_decoding_and_never_in_training(fsdd):
    """0.5 s at 8 kHz is 50 more 10 ms frames, 16 or 17 more stacked by 3 (mlperf's fbank pads nothing);
    with speed perturbation and SpecAugment off, training batches are the same with and without it."""
    def lengths(train, tail):
        p = pipeline(fsdd, train=train, list_name="test.list", speed_perturb=[], spec_augment=None,
                     shuffle_buffer=0, sort_buffer=0, tail_silence=tail)
        return {k: int(n) for b in p.batches() for k, n in zip(b["keys"], b["feat_lens"])}

    plain, tailed = lengths(False, 0.0), lengths(False, 0.5)
    assert plain.keys() == tailed.keys() and len(plain) == 300
    assert {tailed[k] - plain[k] for k in plain} <= {16, 17} and any(tailed[k] != plain[k] for k in plain)
    assert lengths(True, 0.5) == lengths(True, 0.0)


def test_batches_give_each_utterances_own_seconds(fsdd):
    """Decoding: each recording's own length (soundfile's frames / rate, exactly: decode.py ends its words there as
    decode_sherpa_onnx.py does, where subtracting the silence appended to it gave 0.4799999 and ctm times a
    hundredth apart); training with speed perturbation: the perturbed length, which its features span."""
    lines = [json.loads(line) for line in (fsdd / "test.list").read_text().splitlines()]
    recorded = {e["key"]: soundfile.info(e["wav"]).frames / soundfile.info(e["wav"]).samplerate for e in lines}
    decoding = pipeline(fsdd, train=False, list_name="test.list", tail_silence=0.25, sort_buffer=0)
    seconds = {k: s for b in decoding.batches() for k, s in zip(b["keys"], b["seconds"])}
    assert seconds.keys() == recorded.keys()
    assert seconds == recorded
    perturbed = [(s, n) for b in pipeline(fsdd, list_name="test.list").batches()
                 for s, n in zip(b["seconds"], b["feat_lens"].tolist())]
    assert len(perturbed) == len(recorded) and any(s not in recorded.values() for s, _ in perturbed)
    assert all(abs(s / 0.03 - n) <= 1 for s, n in perturbed)  # mlperf fbank: 10 ms frames stacked by 3


def test_an_utterance_longer_than_max_frames_is_a_dynamic_batch_of_its_own_and_counted(fsdd, caplog):
    """The bound was silently passed (the docs said padded frames <= max_frames): such an utterance is kept, alone,
    and the pass's report line counts it, naming data.filter's max_duration, which drops them."""
    p = pipeline(fsdd, list_name="test.list", speed_perturb=[], batch={"type": "dynamic", "max_frames": 50})
    from rnnt.data.features import num_frames

    with caplog.at_level(logging.INFO):
        batches = list(p.batches())
    lines = [json.loads(line) for line in (fsdd / "test.list").read_text().splitlines()]
    frames = {e["key"]: num_frames(soundfile.info(e["wav"]).frames, 8000, "mlperf") for e in lines}
    oversized = sum(n > 50 for n in frames.values())
    assert 0 < oversized < 300 and len(keys_of(batches)) == 300
    for batch in batches:
        longest = max(frames[key] for key in batch["keys"])
        assert len(batch["keys"]) == 1 if longest > 50 else longest * len(batch["keys"]) <= 50
    assert f"{oversized} longer than data.batch.max_frames, each a batch of its own" in caplog.text


@pytest.mark.parametrize("world_size", [2, 4])
def test_ranks_and_workers_disjoint_complete_and_even(fsdd, world_size):
    """The real shards (9 of 100) on 2 or 4 ranks of 2 workers: a shard left over is shared, so every
    rank reads as many utterances, and together they read each once."""
    p = pipeline(fsdd, num_workers=2, speed_perturb=[], spec_augment=None)
    per_rank = []
    for rank in range(world_size):
        loader = make_loader(p, rank=rank, world_size=world_size)
        loader.dataset.set_epoch(1)
        per_rank.append(keys_of(loader))
    every = training_keys(fsdd)
    assert sorted(k for keys in per_rank for k in keys) == every
    assert {len(keys) for keys in per_rank} == {len(every) // world_size}


@pytest.mark.slow  # 8 s; CI runs it
def test_deterministic_per_epoch_and_resumes_exactly(fsdd):
    """Two workers with unequal parts (5 and 4 shards): resumed at any batch, also after one worker has
    run out and the DataLoader takes every batch from the other, the epoch goes on exactly. Batches of about
    15 clips, so that the worker with 5 shards has batches left when the other runs out."""
    p = pipeline(fsdd, num_workers=2, batch={"type": "dynamic", "max_frames": 700})
    loader = make_loader(p)
    loader.dataset.set_epoch(2)
    full = list(loader)
    loader.dataset.set_epoch(2)
    assert [b["keys"] for b in loader] == [b["keys"] for b in full]
    roles = [b["role"] for b in full]
    one_left = next(i for i in range(1, len(roles)) if roles[i] == roles[i - 1])  # the other ran out
    assert roles[:4] == [0, 1, 0, 1] and one_left < len(full) - 1
    for start in (1, 5, one_left - 1, one_left, one_left + 1, len(full) - 1):
        position = LoaderPosition(2)
        for batch in full[:start]:
            position.delivered(batch["role"], batch["position"])
        position = LoaderPosition.from_state(position.state_dict())  # as a checkpoint carries it
        loader.dataset.set_epoch(2, position)
        resumed = list(loader)
        assert [b["keys"] for b in resumed] == [b["keys"] for b in full[start:]], start
        for a, b in zip(resumed, full[start:]):
            assert torch.equal(a["feats"], b["feats"])  # augmentation included


def test_each_copy_of_an_utterance_a_list_repeats_draws_its_own_augmentation(fsdd, tmp_path):
    """Upsampling by listing a line again (as WeNet's): seeded by key alone, the copies had the same speed, dither
    and SpecAugment masks in every epoch, on every rank; a shard listed again as well. A rerun of the epoch draws
    the same again. A raw line is a copy however it is spelt (lists joined from two tools)."""
    augmented = data_config({**TRAIN, "speed_perturb": [0.9, 1.0, 1.1], "shuffle_buffer": 0,
                             "features": {"preset": "kaldi", "num_mel_bins": 64, "dither": 1.0},
                             "batch": {"type": "static", "batch_size": 1}})
    for name, entry in (("raw.list", (fsdd / "test.list").read_text().splitlines()[0]),
                        ("shards.list", (fsdd / "train.list").read_text().splitlines()[0])):
        spelt_otherwise = json.dumps(json.loads(entry), separators=(",", ":")) if name == "raw.list" else entry
        (tmp_path / name).write_text(f"{entry}\n{spelt_otherwise}\n{entry}\n")
        p = Pipeline(str(tmp_path / name), augmented, Tokenizer(str(fsdd / "lang")), True)
        key = next(iter(p.batches()))["keys"][0]

        def copies():
            return [b["feats"][0, :b["feat_lens"][0]] for b in p.batches() if b["keys"] == [key]]
        first = copies()
        assert len(first) == 3
        assert not torch.equal(first[0], first[1]) and not torch.equal(first[1], first[2]), name
        assert all(torch.equal(a, b) for a, b in zip(first, copies()))


def test_raw_list_with_buckets(fsdd, tmp_path, caplog):
    p = pipeline(fsdd, list_name="test.list", buckets=3, batch={"type": "static", "batch_size": 20})
    batches = list(p.batches())
    assert len(keys_of(batches)) == 300 and max(len(b["keys"]) for b in batches) == 20
    lines = (fsdd / "test.list").read_text().splitlines()  # an entry without a duration: left out, by name
    missing = json.loads(lines[7])
    (tmp_path / "test.list").write_text("\n".join(lines[:7] + [json.dumps({k: v for k, v in missing.items()
                                                                            if k != "duration"})] + lines[8:]))
    with caplog.at_level(logging.WARNING):
        p = Pipeline(str(tmp_path / "test.list"), p.config, p.tokenizer, True)
    assert f"test.list: {missing['key']}: no positive 'duration' to bucket it by; left out" in caplog.text
    assert len(keys_of(p.batches())) == 280 and missing["key"] not in keys_of(p.batches())
    (tmp_path / "strings.list").write_text("".join(json.dumps({**json.loads(line), "duration": str(json.loads(
        line)["duration"])}) + "\n" for line in lines))  # a duration written as a string of a number: read
    strings = Pipeline(str(tmp_path / "strings.list"), p.config, p.tokenizer, True)
    assert keys_of(strings.batches()) == keys_of(pipeline(fsdd, list_name="test.list", buckets=3,
                                                          batch={"type": "static", "batch_size": 20}).batches())


def test_bucketed_ranks_whose_slices_the_filter_empties_stay_on_the_same_global_batch(fsdd):
    """2 ranks, global batches of 2 x 3, speed perturbation and a data.filter.max_duration that empties slices:
    a rank's emptied slice went unyielded, and from there on that rank trained the next global batch while the
    other trained this one. Its place is now held (no keys): step k of every rank is a slice of global batch k."""
    config = {"buckets": 4, "speed_perturb": [0.9, 1.0, 1.1], "filter": {"max_duration": 0.5},
              "batch": {"type": "static", "batch_size": 3}}
    p = pipeline(fsdd, list_name="test.list", **config)
    planned = global_batches(p.entries, 4, 6, p.config.seed, 0)
    global_batch_of = {json.loads(line)["key"]: i for i, lines in enumerate(planned) for line in lines}
    ranks = [list(p.batches(0, Reader(rank, 2))) for rank in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == len(planned)
    held = [sum(not b["keys"] for b in batches) for batches in ranks]
    assert all(held) and 0 < len(keys_of(ranks[0] + ranks[1])) < 300
    for step, batches in enumerate(zip(*ranks)):
        assert {global_batch_of[key] for batch in batches for key in batch["keys"]} <= {step}


def test_a_bucketed_resume_goes_on_exactly_and_reads_no_audio_of_the_batches_before(fsdd, tmp_path, monkeypatch):
    """15 bucketed batches of 20, the third all unreadable audio (its place held: no keys): resumed through the
    loader's position after any batch, also the one before the empty one, the epoch goes on exactly, and the
    only audio read is the batches' still to come."""
    config = {"buckets": 3, "batch": {"type": "static", "batch_size": 20}}
    lines = (fsdd / "test.list").read_text().splitlines()
    planned = bucket_batches(lines, 3, 20, 0, 1)
    empty = set(planned[2])
    (tmp_path / "test.list").write_text("".join(json.dumps({**json.loads(line), "wav": str(tmp_path / "gone.wav")})
                                                + "\n" if line in empty else line + "\n" for line in lines))
    p = Pipeline(str(tmp_path / "test.list"), data_config({**TRAIN, **config}), Tokenizer(str(fsdd / "lang")), True)
    loader = make_loader(p)
    loader.dataset.set_epoch(1)
    full = list(loader)
    assert [b["position"] for b in full] == list(range(1, 16)) and len(keys_of(full)) == 280
    assert full[2] == {"keys": [], "position": 3, "role": 0}
    wav_of = {json.loads(line)["key"]: json.loads(line)["wav"] for line in lines}
    opened = spy_on_audio(monkeypatch)
    for start in (1, 2, 3, 9):
        position = LoaderPosition(1)
        for batch in full[:start]:
            position.delivered(batch["role"], batch["position"])
        opened["header"].clear(), opened["decode"].clear()
        loader.dataset.set_epoch(1, LoaderPosition.from_state(position.state_dict()))
        resumed = list(loader)
        assert [b["keys"] for b in resumed] == [b["keys"] for b in full[start:]], start
        assert all(torch.equal(a["feats"], b["feats"]) for a, b in zip(resumed, full[start:]) if b["keys"])
        gone = [str(tmp_path / "gone.wav")] * 20 if start <= 2 else []  # the empty batch: position 3
        still_to_come = sorted(wav_of[k] for k in keys_of(full[start:]))
        assert sorted(opened["decode"]) == still_to_come, start
        assert sorted(opened["header"]) == sorted(still_to_come + gone), start


def test_a_resume_decodes_no_audio_of_the_batches_before(fsdd, monkeypatch):
    """Unbucketed (shuffled, speed-perturbed, sorted into dynamic batches): resumed after batch k, the
    epoch goes on exactly, reading the headers of all the audio and decoding only the batches' still to
    come; each utterance is as long as its header said, after its speed perturbation."""
    config = {"batch": {"type": "dynamic", "max_frames": 1500, "max_batch_size": 8}, "speed_perturb": [0.9, 1.0, 1.1]}
    p = pipeline(fsdd, list_name="test.list", **config)
    full = list(p.batches(epoch=1))
    wav_of = {r["key"]: r["audio"] for r in records(str(fsdd / "test.list"))}
    assert len(full) > 5 and len(keys_of(full)) == len(wav_of)
    seconds = {k: s for b in full for k, s in zip(b["keys"], b["seconds"])}
    assert sum(seconds[k] * 8000 != len(load_audio(wav)[0][0]) for k, wav in wav_of.items()) > len(wav_of) / 2
    opened = spy_on_audio(monkeypatch)
    for start in (1, 4):
        opened["header"].clear(), opened["decode"].clear()
        resumed = list(p.batches(epoch=1, skip=start))
        assert [b["keys"] for b in resumed] == [b["keys"] for b in full[start:]]
        assert all(torch.equal(a["feats"], b["feats"]) for a, b in zip(resumed, full[start:]) if b["keys"])
        assert sorted(opened["decode"]) == sorted(wav_of[k] for k in keys_of(full[start:]))
        assert sorted(opened["header"]) == sorted(wav_of.values())


def test_audio_not_as_long_as_its_header_said_is_left_out_of_its_batch(fsdd, caplog):
    """A header that lies (a file changed between the two reads, a broken writer) would have batched and
    filtered the utterance by a wrong length: it is left out, named, and counted as unreadable; and not kept in
    the audio cache (data.cache_audio_mb), whose waveform the next epoch planned it by and trained on."""
    from rnnt.data.audio_cache import AudioCache

    planned = list(stages.audio_lengths(records(str(fsdd / "test.list")), 8000))[:3]
    report = DataReport("test.list", 8000)
    for record in planned:
        report.audio_read(record["file_rate"], record["channels"])
    lying = {**planned[1], "samples": planned[1]["samples"] + 1}
    cache = AudioCache(10**8)
    with caplog.at_level(logging.WARNING):
        kept = stages.with_waveforms([planned[0], lying, planned[2]], report, cache)
    assert [r["key"] for r in kept] == [planned[0]["key"], planned[2]["key"]]
    assert f"skipped {lying['key']} from {lying['source']}: cannot decode audio (it decodes to " in caplog.text
    assert report.line().startswith("data (test.list): 3 utterances: 2 at 8000 Hz; 1 skipped, their audio unreadable")
    assert [cache.get(record) is not None for record in planned] == [True, False, True]
    assert torch.equal(cache.get(planned[0])[0], kept[0]["waveform"])


def test_validation_reads_every_utterance_whatever_the_training_buckets(fsdd):
    """data.buckets orders training; the validation pipeline, built from the same data section, reads the whole
    list (bucketing leaves out what fills no batch: 6 of 300 in batches of 7) and takes a shard list."""
    assert len(keys_of(pipeline(fsdd, list_name="test.list", buckets=3, batch={"type": "static", "batch_size": 7})
                       .batches())) == 294
    valid = pipeline(fsdd, train=False, list_name="test.list", buckets=3, batch={"type": "static", "batch_size": 7})
    assert sorted(keys_of(valid.batches())) == sorted(keys_of(pipeline(fsdd, train=False, list_name="test.list")
                                                              .batches()))
    assert len(keys_of(valid.batches())) == 300
    shards = pipeline(fsdd, train=False, buckets=3)  # a shard list: bucketing would refuse it
    assert sorted(keys_of(shards.batches())) == training_keys(fsdd)


def test_damaged_shards_skip_only_the_damage(fsdd, tmp_path, caplog):
    shards = (fsdd / "train.list").read_text().split()[:3]
    truncated, corrupted = tmp_path / "truncated.tar", tmp_path / "corrupted.tar"
    data = open(shards[0], "rb").read()
    truncated.write_bytes(data[: len(data) // 2])
    with tarfile.open(shards[1]) as src, tarfile.open(corrupted, "w") as dst:
        for i, member in enumerate(src.getmembers()):
            payload = src.extractfile(member).read()
            if i == 1:  # the first utterance's audio
                payload = b"\x00garbage" * 50
                member.size = len(payload)
            dst.addfile(member, io.BytesIO(payload))
    (tmp_path / "list").write_text(f"{truncated}\n{corrupted}\n{shards[2]}\n")
    p = Pipeline(str(tmp_path / "list"), data_config({**TRAIN, "shuffle_buffer": 0}), Tokenizer(str(fsdd / "lang")),
                 train=False)
    with caplog.at_level(logging.WARNING):
        keys = keys_of(p.batches())
    assert "damaged after" in caplog.text and "cannot decode audio" in caplog.text
    assert 100 + 99 < len(keys) < 300 and len(keys) == len(set(keys))


def test_shards_stream_from_http_urls(fsdd, tmp_path, server):
    shards = (fsdd / "train.list").read_text().split()[:2]
    for i, shard in enumerate(shards):
        server.files[f"/shard{i}.tar"] = open(shard, "rb").read()
    (tmp_path / "url.list").write_text("".join(f"{server.url}/shard{i}.tar\n" for i in range(2)))
    (tmp_path / "local.list").write_text("".join(f"{s}\n" for s in shards))
    over_http = [(r["key"], r["txt"], r["audio"]) for r in records(str(tmp_path / "url.list"))]
    local = [(r["key"], r["txt"], r["audio"]) for r in records(str(tmp_path / "local.list"))]
    assert over_http == local and len(local) == 200
    assert [path for path, _ in server.requests] == ["/shard0.tar", "/shard1.tar"]


def test_a_shard_cut_in_a_chunked_transfer_or_a_bad_reply_is_skipped_and_the_next_read(fsdd, tmp_path, server,
                                                                                       caplog):
    """http.client's own errors (IncompleteRead of a chunked transfer cut, BadStatusLine) are no OSError: they
    ended the pass, the shards after unread."""
    shards = (fsdd / "train.list").read_text().split()[:2]
    server.files["/cut.tar"] = open(shards[0], "rb").read()
    (tmp_path / "url.list").write_text(f"{server.url}/cut.tar\n{shards[1]}\n")
    whole = [r["key"] for r in shard_records([shards[1]])]
    server.chunked, server.cut_first_after = True, len(server.files["/cut.tar"]) // 2
    report = DataReport("url.list", 8000)
    with caplog.at_level(logging.WARNING):
        keys = [r["key"] for r in shard_records((tmp_path / "url.list").read_text().split(), report)]
    assert 0 < len(keys) - 100 < 50 and keys[-100:] == whole, len(keys)
    assert f"shard {server.url}/cut.tar: damaged after" in caplog.text and "IncompleteRead" in caplog.text
    assert report.shard_skips == {"shards damaged (their rest)": 1}
    server.chunked, server.bad_status = False, True
    report = DataReport("url.list", 8000)
    with caplog.at_level(logging.WARNING):
        assert [r["key"] for r in shard_records((tmp_path / "url.list").read_text().split(), report)] == whole
    assert f"shard {server.url}/cut.tar: cannot open" in caplog.text and report.shard_skips == {
        "shards unreadable": 1}


def test_a_damaged_gzip_shard_keeps_none_of_the_utterance_read_into_the_damage(fsdd, tmp_path, caplog):
    """A byte of a .tar.gz flipped decompresses into wrong bytes, not an error (gzip's CRC is at its end): the
    utterance read just before the header that failed held them, and was kept as whole."""
    shard = (fsdd / "train.list").read_text().split()[0]
    with tarfile.open(shard) as tar:
        members = tar.getmembers()
        truth = {m.name: tar.extractfile(m).read() for m in members}
    packed = bytearray(gzip.compress(open(shard, "rb").read(), mtime=0))
    packed[len(packed) // 2] ^= 0xFF
    damaged = tmp_path / "shard.tar.gz"
    damaged.write_bytes(bytes(packed))
    report = DataReport("gz.list", 8000)
    with caplog.at_level(logging.WARNING):
        got = list(shard_records([str(damaged)], report))
    assert 0 < len(got) < len(members) // 2 and report.shard_skips == {"shards damaged (their rest)": 1}
    for record in got:  # every utterance kept is the shard's own
        audio = next(name for name in truth if name.startswith(f"{record['key']}.") and not name.endswith(".txt"))
        assert record["audio"] == truth[audio] and record["source"] == f"{damaged}:{audio}"
    assert f"damaged after {got[-1]['key']} (" in caplog.text


def test_undecodable_audio_is_named_by_its_member_whatever_the_members_order(tmp_path, caplog):
    """Another tool's tar may hold an utterance's audio before its transcript: the transcript was named."""
    shard = tmp_path / "order.tar"
    with tarfile.open(shard, "w") as tar:
        for name, payload in (("u1.wav", b"\x00garbage" * 50), ("u1.txt", b"YES")):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    report = DataReport("order.list", 8000)
    with caplog.at_level(logging.WARNING):
        assert list(stages.audio_lengths(shard_records([str(shard)]), 8000, report)) == []
    assert f"skipped u1 from {shard}:u1.wav: cannot decode audio" in caplog.text and report.undecodable == 1


def test_utterances_whose_units_hold_unk_are_counted_in_the_report(fsdd):
    """A transcript of words the units lack (another case or normalisation than the lang dir's) trains on <unk>s:
    it went unsaid."""
    tokenizer = Tokenizer(str(fsdd / "lang"))
    recs = list(records(str(fsdd / "test.list")))[:3]
    recs[1] = {**recs[1], "txt": recs[1]["txt"].lower()}  # not the units' case
    report = DataReport("test.list", 8000)
    tokens = [r["tokens"] for r in stages.tokenize(recs, tokenizer, report)]
    assert tokens[1] == [tokenizer.units["<unk>"]] * len(recs[1]["txt"]) and tokenizer.units["<unk>"] not in tokens[0]
    assert report.with_unknown == 1 and "1 with <unk> among their units" in report.line()


def test_fixed_time_masks_are_as_many_and_as_wide_as_configured():
    """Every recipe's SpecAugment: time_masks runs of up to time_width frames, whatever the length; over 300
    seeds both widths reach their bound and the count of masked runs never passes time_masks."""
    config = SpecAugmentConfig(freq_masks=0, time_masks=2, time_width=10, value=1.0)
    widths, runs = [], []
    for seed in range(300):
        rows = spec_augment(torch.zeros(500, 4), config, torch.Generator().manual_seed(seed))[:, 0] == 1.0
        edges = torch.diff(torch.cat([torch.tensor([0]), rows.int(), torch.tensor([0])]))
        starts, ends = (edges == 1).nonzero().flatten(), (edges == -1).nonzero().flatten()
        widths += (ends - starts).tolist()
        runs.append(len(starts))
    assert max(widths) == 10 and max(runs) == 2 and sum(runs) > 300  # two masks (overlapping at times)
    assert spec_augment(torch.zeros(500, 4), dataclasses.replace(config, time_masks=0),
                        torch.Generator().manual_seed(0)).eq(0).all()


@pytest.mark.parametrize("frames", [5, 20, 35])
def test_time_masks_of_the_defaults_never_cover_a_short_utterance(frames):
    """SpecAugment's defaults (two masks of up to 40 frames, Park et al.'s SS policy) on utterances of 5-35 frames:
    each mask at most max_time_share (0.2) of them, so at most 40% masked; two masks of 40 frames covered the whole
    of a 20-frame one in 12% of draws. max_time_share 1.0 is the bound off."""
    config = SpecAugmentConfig(freq_masks=0, value=1.0)
    masked = [int((spec_augment(torch.zeros(frames, 4), config, torch.Generator().manual_seed(seed))[:, 0] == 1).sum())
              for seed in range(1000)]
    assert 0 < max(masked) <= 2 * int(0.2 * frames)
    unbounded = dataclasses.replace(config, max_time_share=1.0)
    assert any(bool((spec_augment(torch.zeros(frames, 4), unbounded, torch.Generator().manual_seed(seed))[:, 0] == 1)
                    .all()) for seed in range(1000))


def test_augmentation_changes_from_epoch_to_epoch_and_never_touches_decoding(fsdd):
    """Speed perturbation, dither and SpecAugment draw from (seed, epoch, key): an epoch repeats itself, the
    next differs; without training, the features are the undithered fbank of the audio as it is."""
    record = next(stages.waveforms(records(str(fsdd / "test.list")), 8000))
    config = data_config({**TRAIN, "speed_perturb": []})
    cmvn = None
    first, again = (stages.features_of(record, config, cmvn, True, 0, epoch=0) for _ in range(2))
    second = stages.features_of(record, config, cmvn, True, 0, epoch=1)
    assert torch.equal(first, again) and not torch.equal(first, second)
    factors = [next(stages.speed_perturb([record], (0.9, 1.0, 1.1), 0, epoch)).get("speed", 1.0) for epoch in range(9)]
    assert len(set(factors)) > 1
    decoded = stages.features_of(record, config, cmvn, False, 0, epoch=0)
    plain = stack_frames(fbank(record["waveform"], 8000, "mlperf", 64), config.stack, config.subsample)
    assert torch.equal(decoded, plain) and torch.equal(decoded, stages.features_of(record, config, cmvn, False, 0, 1))


def test_a_batchs_features_computed_together_are_each_utterances_alone(fsdd):
    """The pipeline computes a batch's fbanks in one FFT and one matmul (features_of_batch): each utterance's
    features, dithered and masked by its own generator, are those it has alone, to the bit."""
    batch = [r for _, r in zip(range(6), stages.waveforms(records(str(fsdd / "test.list")), 8000))]
    config = data_config({**TRAIN, "speed_perturb": [], "features": {"preset": "mlperf", "num_mel_bins": 64,
                                                                      "dither": 1e-5}})
    for train in (True, False):
        together = stages.features_of_batch(batch, config, None, train, 0, 2)
        alone = [stages.features_of(record, config, None, train, 0, 2) for record in batch]
        assert len({f.shape[0] for f in alone}) > 1  # (to the bit on this project's CPUs; a BLAS may differ)
        assert all(a.shape == b.shape and torch.allclose(a, b, rtol=1e-6, atol=1e-6) for a, b in zip(together, alone))
    short = dict(batch[0], waveform=batch[0]["waveform"][:100])  # less than one analysis window
    with pytest.raises(AudioError, match="12.5 ms of audio, shorter than one analysis window"):
        stages.features_of_batch([batch[1], short], config, None, False, 0, 0)


def test_the_max_tokens_filter_drops_and_counts(fsdd):
    tokenizer = Tokenizer(str(fsdd / "lang"))
    recs = list(stages.tokenize(stages.audio_lengths(records(str(fsdd / "test.list")), 8000), tokenizer))
    limit = sorted(len(r["tokens"]) for r in recs)[len(recs) // 2]
    report = DataReport("test", 8000)
    kept = list(stages.filter_utterances(recs, data_config({**TRAIN, "filter": {"max_tokens": limit}}), report))
    assert kept and all(len(r["tokens"]) <= limit for r in kept)
    assert len(kept) < len(recs)
    assert report.dropped == {f"over data.filter.max_tokens {limit} units": len(recs) - len(kept)}


def test_channels_are_averaged(tmp_path):
    """Two channels unlike each other (a tone and silence, its opposite): the mono signal is their mean."""
    tone = 0.5 * np.sin(np.arange(8000) * 2 * np.pi * 440 / 8000)
    path = tmp_path / "stereo.wav"
    soundfile.write(path, np.stack([tone, -0.25 * tone], axis=1), 8000, subtype="FLOAT")
    waveform, _ = load_audio(str(path))
    torch.testing.assert_close(to_mono(waveform), torch.from_numpy(0.375 * tone).float(), rtol=0, atol=1e-6)
