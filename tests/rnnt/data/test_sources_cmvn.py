"""Data-list sources (raw and shard, damaged shards) and global CMVN statistics, which training takes only for
the features they were computed on."""

import json
import logging
import re
import sys
import tarfile

import kaldiio
import numpy as np
import pytest
import soundfile
import torch

from conftest import ROOT, run_tool
from rnnt.data.audio import load_audio, to_mono
from rnnt.data.config import data_config
from rnnt.data.features import fbank
from rnnt.data.report import DataReport
from rnnt.data.shard_reading import shard_records
from rnnt.data.sources import records
from rnnt.data.stages import load_cmvn


def shards_of(test_data, tmp_path, per_shard="3"):
    out = run_tool(sys.executable, ROOT / "egs" / "librispeech" / "local" / "data_prep.py",
                   test_data / "librispeech_samples" / "LibriSpeech" / "test-clean", tmp_path / "ls")
    assert out.returncode == 0, out.stderr
    out = run_tool(sys.executable, ROOT / "steps" / "make_shards.py", "--utts-per-shard", per_shard, tmp_path / "ls",
                   tmp_path / "shards", tmp_path / "shard.list")
    assert out.returncode == 0, out.stderr
    out = run_tool(sys.executable, ROOT / "steps" / "make_raw_list.py", tmp_path / "ls", tmp_path / "raw.list")
    assert out.returncode == 0, out.stderr
    return tmp_path / "shard.list", tmp_path / "raw.list"


def test_raw_and_shard_lists_give_the_same_utterances(test_data, tmp_path):
    shard_list, raw_list = shards_of(test_data, tmp_path)
    from_shards = {r["key"]: r for r in records(str(shard_list))}
    from_raw = {r["key"]: r for r in records(str(raw_list))}
    assert sorted(from_shards) == sorted(from_raw) and len(from_raw) == 5
    for key, record in from_raw.items():
        assert from_shards[key]["txt"] == record["txt"]
        a, rate_a = load_audio(from_shards[key]["audio"])
        b, rate_b = load_audio(record["audio"])
        assert rate_a == rate_b == 16000 and torch.equal(a, b)


def test_truncated_shard_and_bad_member_are_skipped_with_a_warning(test_data, tmp_path, caplog):
    shard_list, _ = shards_of(test_data, tmp_path)
    first, second = shard_list.read_text().split()
    data = open(first, "rb").read()
    open(first, "wb").write(data[: len(data) // 2])  # truncated mid-member
    with tarfile.open(second) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    with tarfile.open(second, "w") as tar:
        for member, payload in members:
            if member.name.endswith(".flac") and member.name.startswith("1995"):
                payload = b"not audio at all" * 10
                member.size = len(payload)
            tar.addfile(member, __import__("io").BytesIO(payload))
    with caplog.at_level(logging.WARNING):
        got = list(records(str(shard_list)))
    assert any("damaged after" in r.message and first in r.message for r in caplog.records)
    keys = [r["key"] for r in got]
    assert "1089-134691-0001" in keys and "1995-1837-0001" in keys  # the second shard is whole
    assert len(keys) < 5  # the damaged part of the first is gone
    bad = next(r for r in got if r["key"] == "1995-1837-0001")
    with pytest.raises(Exception, match="not|Format|recogni"):
        load_audio(bad["audio"])


def test_compute_cmvn_stats_kaldi_matrix_and_json(test_data, tmp_path):
    shard_list, raw_list = shards_of(test_data, tmp_path)
    out = run_tool(sys.executable, ROOT / "steps" / "compute_cmvn_stats.py", shard_list, tmp_path / "cmvn")
    assert out.returncode == 0, out.stderr
    stats = kaldiio.load_mat(str(tmp_path / "cmvn"))
    feats = torch.cat([fbank(to_mono(load_audio(r["audio"])[0]), 16000) for r in records(str(raw_list))]).double()
    assert stats.shape == (2, 81) and stats[0, -1] == feats.shape[0] and stats[1, -1] == 0
    np.testing.assert_allclose(stats[0, :-1], feats.sum(0).numpy(), rtol=1e-9)
    np.testing.assert_allclose(stats[1, :-1], feats.square().sum(0).numpy(), rtol=1e-9)
    summary = json.loads((tmp_path / "cmvn.json").read_text())
    assert summary["frame_num"] == feats.shape[0]
    np.testing.assert_allclose(summary["mean"], feats.mean(0).numpy(), rtol=1e-9)
    np.testing.assert_allclose(summary["std"], feats.std(0, unbiased=False).numpy(), rtol=1e-6)
    path = str(tmp_path / "cmvn.json")
    with_nan = json.loads(raw_list.read_text().splitlines()[0])  # a float copy of an utterance with a NaN sample
    samples, rate = soundfile.read(with_nan["wav"], dtype="float32")
    samples[50] = np.nan
    soundfile.write(tmp_path / "nan.wav", samples, rate, subtype="FLOAT")
    (tmp_path / "nan.list").write_text(raw_list.read_text() + json.dumps({**with_nan, "key": "nan", "wav": str(
        tmp_path / "nan.wav")}) + "\n")
    out = run_tool(sys.executable, ROOT / "steps" / "compute_cmvn_stats.py", tmp_path / "nan.list", tmp_path / "nan")
    assert out.returncode == 0 and "skipped nan (" in out.stderr and "samples are not finite" in out.stderr, out.stderr
    assert json.loads((tmp_path / "nan.json").read_text())["mean"] == summary["mean"]  # the rest, as without it
    (tmp_path / "nan.json").write_text(json.dumps({**summary, "mean": [float("nan")] + summary["mean"][1:]}))
    with pytest.raises(ValueError, match="CMVN stats with a mean or deviation that is not finite"):
        load_cmvn(data_config({"features": {"cmvn": str(tmp_path / "nan.json")}}))
    mean, std = load_cmvn(data_config({"features": {"cmvn": path}}))
    assert torch.equal(mean, torch.tensor(summary["mean"])) and torch.equal(std, torch.tensor(summary["std"]))
    for features, rate, differ in (({"preset": "sherpa_onnx"}, 16000, "preset kaldi (the config: sherpa_onnx)"),
                                   ({"num_mel_bins": 40}, 16000, "80 bins (the config: 40)"),
                                   ({}, 8000, "sample_rate 16000 (the config: 8000)")):
        with pytest.raises(ValueError) as error:  # stats of other features would shift every bin silently
            load_cmvn(data_config({"features": {"cmvn": path, **features}, "sample_rate": rate}))
        assert str(error.value).startswith(f"{path}: CMVN stats of other features: {differ}; recompute them")


def test_compute_cmvn_stats_refuses_bins_of_nothing_counts_what_the_list_skips_and_names_an_unwritable_out(
        test_data, tmp_path):
    """1000 bins at 8 kHz wrote a deviation of 1.7e-07 for the empty ones (exit 0); a list line skipped ended
    'skipped 0'; an output that is a folder was a traceback."""
    tool = ROOT / "steps" / "compute_cmvn_stats.py"
    _, raw_list = shards_of(test_data, tmp_path)
    out = run_tool(sys.executable, tool, "--num-mel-bins", "1000", "--sample-rate", "8000", raw_list, tmp_path / "c")
    assert out.returncode == 2 and "--num-mel-bins 1000 is too many for the kaldi preset at 8000 Hz" in out.stderr
    (tmp_path / "bad.list").write_text(raw_list.read_text() + '{"key": "x"}\n')
    out = run_tool(sys.executable, tool, tmp_path / "bad.list", tmp_path / "c")
    assert out.returncode == 0 and out.stdout.endswith("skipped 0; 1 more of the list or its shards skipped (named "
                                                       "above)\n"), out.stdout + out.stderr
    out = run_tool(sys.executable, tool, raw_list, tmp_path)
    assert out.returncode == 1 and f"compute_cmvn_stats.py: {tmp_path}: cannot write the statistics (" in out.stderr


def test_cmvn_stats_as_kaldi_and_wenet_write_them_give_the_same_normalisation(test_data, tmp_path):
    """data.features.cmvn may name the Kaldi matrix (compute-cmvn-stats', or compute_cmvn_stats.py's <out>: then
    read through its <out>.json), or WeNet's global_cmvn JSON; a file of none of these forms is an error naming
    it, not a traceback or a bare codec error."""
    wav = sorted((test_data / "waves_yesno").glob("*.wav"))[:3]
    feats = torch.cat([fbank(to_mono(load_audio(str(w))[0]), 8000) for w in wav]).double()
    sums, squares, frames = feats.sum(0).numpy(), feats.square().sum(0).numpy(), feats.shape[0]
    matrix = np.zeros((2, 81))
    matrix[0, :-1], matrix[0, -1], matrix[1, :-1] = sums, frames, squares
    kaldiio.save_mat(str(tmp_path / "global_cmvn.mat"), matrix)
    rows = ("  " + " ".join(repr(float(x)) for x in row) for row in matrix)  # Kaldi's text form
    (tmp_path / "text.mat").write_text(" [\n" + "\n".join(rows) + " ]\n")
    wenet = {"mean_stat": sums.tolist(), "var_stat": squares.tolist(), "frame_num": frames}
    (tmp_path / "wenet.json").write_text(json.dumps(wenet))
    expected_mean, expected_std = feats.mean(0).float(), feats.std(0, unbiased=False).float()
    config = lambda path: data_config({"features": {"cmvn": str(path)}, "sample_rate": 8000})
    for name in ("global_cmvn.mat", "text.mat", "wenet.json"):
        mean, std = load_cmvn(config(tmp_path / name))
        torch.testing.assert_close(mean, expected_mean, rtol=1e-6, atol=1e-5)
        torch.testing.assert_close(std, expected_std, rtol=1e-5, atol=1e-5)
    (tmp_path / "ours").write_bytes(b"not read: the JSON beside it is")
    (tmp_path / "ours.json").write_text(json.dumps({**wenet, "preset": "sherpa_onnx", "sample_rate": 8000}))
    with pytest.raises(ValueError, match="preset sherpa_onnx"):  # the features it is of, checked
        load_cmvn(config(tmp_path / "ours"))
    bad = {"broken.json": b'{"mean_stat": [1.0,', "latin1.json": b'{"note": "caf\xe9"}', "keys.json": b'{"mean": []}',
           "lengths.json": b'{"mean": [1.0, 2.0], "std": [1.0]}',
           "garbage": b"\x00\x01 binary junk", "empty.mat": b""}
    for name, payload in bad.items():
        (tmp_path / name).write_bytes(payload)
        with pytest.raises(ValueError, match=f"^{tmp_path / name}: "):
            load_cmvn(config(tmp_path / name))
    with pytest.raises(ValueError, match="cannot read"):
        load_cmvn(config(tmp_path / "missing.json"))


def test_bad_raw_list_lines_are_named_by_their_line_and_the_rest_kept(test_data, tmp_path, caplog):
    """Blank lines keep the numbering; a line not UTF-8, one without "txt", one with a start that is not
    a number: each named by file and line and left out, the three good utterances kept. So is a first line that
    is no entry."""
    _, raw_list = shards_of(test_data, tmp_path)
    good = raw_list.read_text().splitlines()
    broken = json.loads(good[3])
    lines = [good[0].encode(), b"", b"", json.dumps({"key": "a", "wav": "x"}).encode(), good[1].encode(),
             good[2].encode().replace(b'"txt": "', b'"txt": "\xe9'), json.dumps({**broken, "start": ""}).encode(),
             good[4].encode()]
    raw_list.write_bytes(b"\n".join(lines) + b"\n")
    with caplog.at_level(logging.WARNING):
        got = [r["key"] for r in records(str(raw_list))]
    assert got == [json.loads(good[i])["key"] for i in (0, 1, 4)]
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    assert f"{raw_list}:4: skipped, not a {{key, wav, txt}} object with a valid start and end: KeyError" in warnings
    assert f"{raw_list}:6: skipped, not UTF-8" in warnings
    assert f"{raw_list}:7: skipped, not a {{key, wav, txt}} object with a valid start and end: ValueError" in warnings
    assert f"{raw_list}: 3 lines skipped (named above), 3 kept" in warnings
    # read again (training reads its list three times), the same file's skips are not named again
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert [r["key"] for r in records(str(raw_list))] == got
    assert not caplog.records
    raw_list.write_bytes(b"\xef\xbb\xbf" + b"\n".join(line.encode() for line in good) + b"\n")  # an editor's BOM
    assert [r["key"] for r in records(str(raw_list))] == [json.loads(line)["key"] for line in good]
    # a first line that is no entry (a comment) made it a shard list: each entry "a shard it cannot open"
    raw_list.write_text("# my dev set\n" + "\n".join(good) + "\n" + good[1] + "\n")
    with caplog.at_level(logging.WARNING):
        caplog.clear()
        got = [r["key"] for r in records(str(raw_list))]
    assert got == [json.loads(line)["key"] for line in good + good[1:2]]  # a line again: upsampled, as in WeNet's
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    assert f"{raw_list}:1: skipped, not a {{key, wav, txt}} object" in warnings


def test_a_kaldi_table_or_a_data_dir_given_as_the_list_is_refused_by_name(test_data, tmp_path):
    """wav.scp given as the list was read as a list of shards, each 'a shard it cannot open'; the data dir itself
    failed with a bare 'Is a directory'."""
    data = test_data / "speechocean762" / "train"
    with pytest.raises(ValueError, match=f"^{data / 'wav.scp'}:1: '<key> <value>', a Kaldi table"):
        list(records(str(data / "wav.scp")))
    with pytest.raises(ValueError, match=f"^{data}: a folder, not a data list"):
        list(records(str(data)))


def test_an_audio_file_given_as_the_list_is_refused_and_a_line_with_a_nul_byte_skipped(test_data, tmp_path, caplog):
    """An audio file given for a list ended decode_sherpa_onnx.py and decode.py in "embedded null byte", naming
    nothing; a NUL byte in a shard list's line did the same."""
    shard_list, _ = shards_of(test_data, tmp_path)
    flac = next((test_data / "librispeech_samples").rglob("*.flac"))
    with pytest.raises(ValueError, match=re.escape(f"{flac}: a binary file (an audio file?), not a data list")):
        list(records(str(flac)))
    shards = shard_list.read_text().splitlines()
    shard_list.write_text(shards[0] + "\n")
    first = [r["key"] for r in records(str(shard_list))]
    shard_list.write_bytes(f"{shards[0]}\n{shards[1]}\0\n".encode())
    with caplog.at_level(logging.WARNING):
        assert [r["key"] for r in records(str(shard_list))] == first and first
    assert f"{shard_list}:2: skipped, holds a NUL byte (no path holds one)" in caplog.text


def test_raw_list_segments_that_no_recording_has_are_named_and_left_out(test_data, tmp_path, caplog):
    """A start or end of NaN or Infinity (JSON's bare literals, which json reads), a negative start, an end
    at or before the start: each named by line and left out (decoding failed on them, or took a NaN for a
    sample count and stopped the epoch); an end of -1 (to the recording's end, as Kaldi's) is kept."""
    _, raw_list = shards_of(test_data, tmp_path)
    good = [json.loads(line) for line in raw_list.read_text().splitlines()]
    segments = ['"start": NaN, "end": 1.0', '"start": 0.5, "end": Infinity', '"start": -0.5, "end": 1.0',
                '"start": 1.0, "end": 1.0', '"start": 0.5, "end": -1']
    raw_list.write_text("".join(json.dumps(entry)[:-1] + f", {segment}}}\n" for entry, segment in zip(good, segments)))
    with caplog.at_level(logging.WARNING):
        got = list(records(str(raw_list)))
    assert [(r["key"], r["start"], r["end"]) for r in got] == [(good[4]["key"], 0.5, -1.0)]
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    for line, why in enumerate(("start nan is not a finite number", "end inf is not a finite number",
                                "the segment [-0.5, 1.0) s is empty or starts before the recording",
                                "the segment [1.0, 1.0) s is empty"), 1):
        assert f"{raw_list}:{line}: skipped, not a {{key, wav, txt}} object with a valid start and end: " in warnings
        assert why in warnings, why
    assert load_audio(got[0]["audio"], got[0]["start"], got[0]["end"])[0].shape[1] > 0


def test_a_shard_cut_or_damaged_at_a_header_is_named_and_counted(test_data, tmp_path, caplog):
    """Python's tarfile ends a streamed archive quietly at a header it cannot read: cut at one, inside one, or
    one damaged. Each is named as damage after the last whole utterance, which is kept, and counted in the
    pass's report; a whole shard is not."""
    shard_list, _ = shards_of(test_data, tmp_path, per_shard="5")
    shard = shard_list.read_text().split()[0]
    data = open(shard, "rb").read()
    with tarfile.open(shard) as tar:
        third = tar.getmembers()[4].offset  # the header of the third utterance's first member
        keys = [m.name.rsplit(".", 1)[0] for m in tar.getmembers()][::2]
    flipped = bytearray(data)
    flipped[third + 1] ^= 0xFF  # its name, and so its checksum, wrong
    for damage in (data[:third], data[:third + 300], bytes(flipped), data):
        open(shard, "wb").write(damage)
        report = DataReport("shard.list", 16000)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            got = [r["key"] for r in shard_records([shard], report)]
        if damage is data:
            assert got == keys and not report.shard_skips and not caplog.records
            continue
        assert got == keys[:2] and report.shard_skips == {"shards damaged (their rest)": 1}
        assert f"shard {shard}: damaged after {keys[1]} (a header that cannot be read" in caplog.text
        assert "skipped reading the shards (named above): 1 shards damaged (their rest)" in report.line()
    open(shard, "wb").write(data[:third + 512 + 100])  # cut inside the third utterance's first member: it is lost,
    report = DataReport("shard.list", 16000)  # and the damage was named after it, as if it were kept
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert [r["key"] for r in shard_records([shard], report)] == keys[:2]
    assert f"shard {shard}: damaged after {keys[1]} (" in caplog.text and keys[2] not in caplog.text


def test_a_shard_transcript_not_utf8_loses_only_its_utterance(test_data, tmp_path, caplog):
    shard_list, _ = shards_of(test_data, tmp_path, per_shard="5")
    shard = shard_list.read_text().split()[0]
    with tarfile.open(shard) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    bad_key = members[2][0].name.rsplit(".", 1)[0]  # the second utterance's transcript
    with tarfile.open(shard, "w") as tar:
        for member, payload in members:
            if member.name == f"{bad_key}.txt":
                payload = b"\xe9" + payload
                member.size = len(payload)
            tar.addfile(member, __import__("io").BytesIO(payload))
    with caplog.at_level(logging.WARNING):
        keys = [r["key"] for r in records(str(shard_list))]
    assert len(keys) == 4 and bad_key not in keys
    assert any(f"utterance {bad_key} has a transcript that is not UTF-8; skipped" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("stats", [{"mean": ["0.5"] * 2, "std": [1.0] * 2}, {"mean": [0.5, True], "std": [1.0] * 2}])
def test_cmvn_stats_that_are_not_numbers_are_named(tmp_path, stats):
    """A string in the mean was torch's TypeError, a traceback from train.py."""
    path = tmp_path / "cmvn.json"
    path.write_text(json.dumps(stats))
    with pytest.raises(ValueError, match=f"^{path}: the CMVN mean and deviation must be lists of numbers of one"):
        load_cmvn(data_config({"features": {"cmvn": str(path), "num_mel_bins": 2}}))


def test_a_wenet_shard_of_m4a_or_wma_audio_is_read_as_audio_and_named_where_it_cannot_be_decoded(tmp_path, caplog):
    """WeNet's shards may hold .m4a and .wma members: each utterance was 'has no audio; skipped', which named
    the wrong cause; now its audio is read, and decoding it (soundfile has no AAC or WMA) names the file's format."""
    import io

    from rnnt.data.audio import AudioError

    shard = tmp_path / "wenet.tar"
    with tarfile.open(shard, "w") as tar:
        for name, payload in (("u1.txt", b"A"), ("u1.m4a", b"\0\0\0 ftypM4A "), ("u2.txt", b"B"), ("u2.wma", b"0&")):
            member = tarfile.TarInfo(name)
            member.size = len(payload)
            tar.addfile(member, io.BytesIO(payload))
    with caplog.at_level(logging.WARNING):
        got = list(shard_records([str(shard)]))
    assert [(r["key"], r["txt"]) for r in got] == [("u1", "A"), ("u2", "B")] and not caplog.records
    with pytest.raises(AudioError):
        load_audio(got[0]["audio"])
