"""make_shards, make_raw_list and build_units on real data: round trips, WeNet layout, resume, bad audio."""

import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import soundfile

from conftest import PYTHON, ROOT, run_tool

STEPS = ROOT / "steps"


def prep(corpus: str, test_data: Path, tmp_path: Path) -> Path:
    if corpus == "librispeech":
        out = run_tool(sys.executable, ROOT / "egs" / "librispeech" / "local" / "data_prep.py",
                       test_data / "librispeech_samples" / "LibriSpeech" / "test-clean", tmp_path / "ls")
        assert out.returncode == 0, out.stderr
        return tmp_path / "ls"
    out = run_tool(sys.executable, ROOT / "egs" / "fsdd" / "local" / "data_prep.py",
                   test_data / "fsdd" / "recordings", tmp_path)
    assert out.returncode == 0, out.stderr
    return tmp_path / "train"


def table(path: Path) -> dict[str, str]:
    return dict(line.split(maxsplit=1) for line in path.read_text().splitlines())


def read_shard(path: str) -> list[tuple[str, bytes]]:
    with tarfile.open(path) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]


def test_flac_shards_round_trip_in_wenet_layout(test_data, tmp_path):
    data = prep("librispeech", test_data, tmp_path)
    out = run_tool(sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "2", data, tmp_path / "shards",
                   tmp_path / "data.list")
    assert out.returncode == 0, out.stderr
    assert "3 shards (0 already complete); this run wrote 5 utterances" in out.stdout
    shards = (tmp_path / "data.list").read_text().split()
    assert len(shards) == 3 and all(os.path.isabs(s) for s in shards)
    text, wav = table(data / "text"), table(data / "wav.scp")
    seen = []
    for shard in shards:
        members = read_shard(shard)
        for (txt_name, txt), (audio_name, audio) in zip(members[::2], members[1::2]):
            key = txt_name[: -len(".txt")]
            assert txt_name == f"{key}.txt" and audio_name == f"{key}.flac"  # consecutive, WeNet names
            assert txt.decode() == text[key]
            assert audio == Path(wav[key]).read_bytes()  # flac kept byte for byte
            samples, rate = soundfile.read(io.BytesIO(audio), dtype="int16")
            original, _ = soundfile.read(wav[key], dtype="int16")
            assert rate == 16000 and np.array_equal(samples, original)
            seen.append(key)
    assert seen == sorted(text)


def test_speed_perturbed_ids_with_dots_are_sharded_and_read_back(test_data, tmp_path):
    """utils/copy_data_dir.sh --utt-prefix sp1.1- (Kaldi's speed-perturbed ids): every utterance sharded under its
    id, dots kept, and read back by the pipeline's shard reader (it splits a member's name at its last dot)."""
    from rnnt.data.sources import records

    data = prep("librispeech", test_data, tmp_path)
    out = run_tool(ROOT / "utils" / "copy_data_dir.sh", "--utt-prefix", "sp1.1-", "--spk-prefix", "sp1.1-", data,
                   tmp_path / "sp")
    assert out.returncode == 0, out.stderr
    out = run_tool(sys.executable, STEPS / "make_shards.py", tmp_path / "sp", tmp_path / "shards",
                   tmp_path / "data.list")
    assert out.returncode == 0 and "skipped" not in out.stderr, out.stderr
    got = {r["key"]: r["txt"] for r in records(str(tmp_path / "data.list"))}
    assert got == {f"sp1.1-{key}": text for key, text in table(data / "text").items()} and len(got) == 5


def test_wav_conversion_resampling_and_segments(test_data, tmp_path):
    data = prep("librispeech", test_data, tmp_path)
    utt = "1089-134686-0000"
    # a segment past the recording's end: skipped, named by its segments line (it was its recording's line)
    (data / "segments").write_text(f"{utt}-a {utt} 0.0 1.5\n{utt}-b {utt} 1.5 3.0\n{utt}-c {utt} 70.0 71.0\n")
    (data / "wav.scp").write_text(f"{utt} {table(data / 'wav.scp')[utt]}\n")
    (data / "text").write_text(f"{utt}-a HE HOPED\n{utt}-b THERE WOULD\n{utt}-c PAST THE END\n")
    out = run_tool(sys.executable, STEPS / "make_shards.py", "--resample", "8000", data,
                   tmp_path / "sh", tmp_path / "l")
    assert out.returncode == 0, out.stderr
    assert f"skipped {data}/segments:3 (its recording {data}/wav.scp:1): {utt}-c: " in out.stderr, out.stderr
    members = dict(read_shard((tmp_path / "l").read_text().split()[0]))
    original, _ = soundfile.read(table(data / "wav.scp")[utt], dtype="float32")
    for name, start in ((f"{utt}-a", 0), (f"{utt}-b", 24000)):
        samples, rate = soundfile.read(io.BytesIO(members[f"{name}.wav"]), dtype="float32")
        assert rate == 8000 and len(samples) == 12000
        # The band-limited 8 kHz copy matches the 16 kHz original decimated (below 3.8 kHz it is the same signal).
        reference = original[start:start + 24000:2]
        assert np.corrcoef(samples[200:-200], reference[200:-200])[0, 1] > 0.9
    assert members[f"{utt}-a.txt"] == b"HE HOPED"


def test_bad_audio_is_skipped_named_and_counted(test_data, tmp_path):
    data = prep("librispeech", test_data, tmp_path)
    empty = tmp_path / "empty.flac"
    empty.write_bytes(b"")
    wav = table(data / "wav.scp")
    wav["1089-134686-0001"] = str(tmp_path / "missing.flac")
    wav["1995-1837-0001"] = str(empty)
    (data / "wav.scp").write_text("".join(f"{k} {v}\n" for k, v in sorted(wav.items())))
    out = run_tool(sys.executable, STEPS / "make_shards.py", data, tmp_path / "sh", tmp_path / "l")
    assert out.returncode == 0, out.stderr
    lines = {key: number for number, key in enumerate(sorted(wav), 1)}  # each skip names its wav.scp line
    assert f"skipped {data}/wav.scp:{lines['1089-134686-0001']}: 1089-134686-0001: no such file" in out.stderr
    assert f"skipped {data}/wav.scp:{lines['1995-1837-0001']}: 1995-1837-0001: unreadable audio" in out.stderr
    assert "wrote 3 utterances" in out.stdout and "skipped 2" in out.stdout
    assert len(read_shard((tmp_path / "l").read_text().split()[0])) == 6


def piped_through_tools(test_data, tmp_path, tools: dict[int, str]):
    """LibriSpeech's data dir whose wav.scp pipes the recordings at those places (of the sorted keys) through those
    commands, which tmp_path/bin, first on PATH, does not hold yet, and make_shards of it in shards of 2 to
    tmp_path/sh: (the data dir, its sorted keys, the bin folder, a function that runs make_shards)."""
    data = prep("librispeech", test_data, tmp_path)
    wav = table(data / "wav.scp")
    keys = sorted(wav)
    for place, tool in tools.items():
        wav[keys[place]] = f"{tool} {wav[keys[place]]} |"
    (data / "wav.scp").write_text("".join(f"{k} {v}\n" for k, v in sorted(wav.items())))
    tool_dir = tmp_path / "bin"
    tool_dir.mkdir()
    env = {**os.environ, "PATH": f"{tool_dir}:{os.environ['PATH']}"}
    args = [PYTHON, STEPS / "make_shards.py", "--utts-per-shard", "2", data, tmp_path / "sh", tmp_path / "l"]
    return data, keys, tool_dir, lambda: subprocess.run([str(a) for a in args], capture_output=True, text=True,
                                                         env=env, cwd=ROOT)


def test_a_shard_that_left_audio_out_is_written_again_when_it_reads(test_data, tmp_path):
    """A wav.scp command that fails (its tool not installed yet): the utterance is skipped and its shard
    listed as incomplete, so the rerun after the fix writes it with the utterance; a dir whose every audio
    fails is an error, not an empty shard list."""
    data, keys, tool_dir, run = piped_through_tools(test_data, tmp_path, {1: "mytool"})
    key = keys[1]
    wav = table(data / "wav.scp")
    out = run()
    where = f"{data}/wav.scp:2"
    assert out.returncode == 0 and f"skipped {where}: {key}: command 'mytool" in out.stderr, out.stderr
    assert "wrote 4 utterances" in out.stdout and out.stdout.rstrip().endswith("skipped 1"), out.stdout
    first = tmp_path / "sh" / "shards_000000.tar"
    assert Path(f"{first}.skipped").read_text().startswith(f"{where}: {key}: command 'mytool")
    (tool_dir / "mytool").write_text('#!/bin/sh\ncat "$1"\n')
    (tool_dir / "mytool").chmod(0o755)
    out = run()
    assert out.returncode == 0 and "3 shards (2 already complete); this run wrote 2 utterances" in out.stdout
    assert out.stdout.rstrip().endswith("skipped 0") and not Path(f"{first}.skipped").exists()
    assert f"{key}.txt" in [name for name, _ in read_shard(str(first))]  # its audio too: wav, as a pipe gives it
    again = run()
    assert "3 shards (3 already complete)" in again.stdout
    (data / "wav.scp").write_text("".join(f"{k} nosuchtool {v} |\n" for k, v in sorted(wav.items())))
    out = run_tool(sys.executable, STEPS / "make_shards.py", data, tmp_path / "none", tmp_path / "l2")
    assert out.returncode == 1 and "no utterance's audio could be read" in out.stderr, out.stderr
    assert not (tmp_path / "l2").exists()
    for bad in ("0", "-5"):
        out = run_tool(sys.executable, STEPS / "make_shards.py", "--utts-per-shard", bad, data, tmp_path / "x",
                       tmp_path / "l3")
        assert out.returncode == 2
        assert f"--utts-per-shard: expected a whole number at least 1, got '{bad}'" in out.stderr


@pytest.mark.parametrize("tool", ["make_shards.py", "make_raw_list.py"])
def test_transcripts_kaldis_rules_refuse_are_each_one_utterance_skipped_named_once(test_data, tmp_path, tool):
    """Its text line left out, its audio then had no transcript: one utterance named and counted twice. Not UTF-8,
    a NUL (packed into a shard as it was), <s>: each named by its line, the rest kept."""
    data = prep("librispeech", test_data, tmp_path)
    text = table(data / "text")
    keys = sorted(text)
    bad = {keys[1]: b"NO\x00 WAY", keys[2]: b"CAF\xc9", keys[4]: b"<s> HELLO"}
    (data / "text").write_bytes(b"".join(f"{k} ".encode() + bad.get(k, text[k].encode()) + b"\n" for k in keys))
    outputs = [tmp_path / "sh", tmp_path / "out.list"] if tool == "make_shards.py" else [tmp_path / "out.list"]
    out = run_tool(sys.executable, STEPS / tool, data, *outputs)
    assert out.returncode == 0, out.stderr
    assert f"{data}/text:2: {keys[1]}: non-printable character U+0000" in out.stderr
    assert f"{data}/text:3: {keys[2]}: a transcript that is not UTF-8" in out.stderr
    assert f"{data}/text:5: {keys[4]}: reserved symbol '<s>' in a transcript" in out.stderr
    assert all(out.stderr.count(key) == 1 for key in bad) and out.stdout.rstrip().endswith("skipped 3"), \
        (out.stdout, out.stderr)


@pytest.mark.parametrize("tool", ["make_shards.py", "make_raw_list.py"])
def test_a_bad_transcript_of_a_segment_named_as_its_recording_leaves_the_recordings_other_segments(
        test_data, tmp_path, tool):
    """With segments, wav.scp is keyed by recording: a segment whose utterance id is its recording's loses its
    transcript alone, named once; the recording's other segment is kept."""
    data = prep("librispeech", test_data, tmp_path)
    recording = next(iter(table(data / "wav.scp").values()))
    (data / "wav.scp").write_text(f"r1 {recording}\n")
    (data / "segments").write_text("r1 r1 0.0 1.0\nr1-b r1 1.0 2.0\n")
    (data / "text").write_bytes(b"r1 CAF\xc9\nr1-b HELLO\n")
    (data / "utt2spk").write_text("r1 s\nr1-b s\n")
    outputs = [tmp_path / "out", tmp_path / "out.list"] if tool == "make_shards.py" else [tmp_path / "out.list"]
    out = run_tool(sys.executable, STEPS / tool, data, *outputs)
    assert out.returncode == 0, out.stderr
    assert f"{data}/text:1: r1: a transcript that is not UTF-8" in out.stderr and out.stderr.count("r1:") == 1
    assert out.stdout.rstrip().endswith("skipped 1") and "r1-b" not in out.stderr, (out.stdout, out.stderr)


@pytest.mark.parametrize("tool", ["make_shards.py", "make_raw_list.py"])
def test_unpaired_malformed_and_repeated_entries_are_named_counted_and_the_rest_kept(test_data, tmp_path, tool):
    """A data dir not through fix_data_dir: audio without a transcript, a transcript without audio, a
    repeated key; with segments, a short line, bad times, an unknown recording, a transcript without a
    segment. Each is named by file and line and counted; every good utterance is kept."""
    data = prep("librispeech", test_data, tmp_path)
    text, wav = table(data / "text"), table(data / "wav.scp")
    keys = sorted(text)
    (data / "text").write_text("".join(f"{k} {text[k]}\n" for k in keys[1:]) + f"{keys[1]} A REPEAT\n")
    (data / "wav.scp").write_text("".join(f"{k} {wav[k]}\n" for k in keys[:3]) + f"{keys[3]}\n")
    outputs = lambda n: ([tmp_path / f"sh{n}"] if tool == "make_shards.py" else []) + [tmp_path / f"l{n}"]
    out = run_tool(sys.executable, STEPS / tool, data, *outputs(1))
    assert out.returncode == 0, out.stderr
    assert f"skipped {data}/wav.scp:1: {keys[0]}: no transcript in text" in out.stderr
    assert f"skipped {data}/wav.scp:4: {keys[3]}: no audio after the key" in out.stderr
    assert f"skipped {data}/text:4: {keys[4]}: no audio in wav.scp" in out.stderr
    assert f"skipped {data}/text:5: {keys[1]}: repeats the key of line 1; left out" in out.stderr
    assert "2 utterances" in out.stdout or "wrote 2 utterances" in out.stdout
    assert out.stdout.rstrip().endswith("skipped 4")
    (data / "text").write_text("")  # nothing to list: an error, as no list at all
    empty = run_tool(sys.executable, STEPS / tool, data, *outputs(0))
    assert empty.returncode == 1 and "no utterance has both audio and text" in empty.stderr, empty.stderr
    (data / "text").write_text("".join(f"{k} {text[k]}\n" for k in keys[1:]) + f"{keys[1]} A REPEAT\n")
    recording = keys[1]
    (data / "wav.scp").write_text(f"{recording} {wav[recording]}\n")
    (data / "segments").write_text(f"a {recording} 0.0 1.5\nb {recording} 1.5\nc {recording} 2.0 1.0\n"
                                   f"d other 0.0 1.0\ne {recording} 3.0 4.0\n")
    (data / "text").write_text("a HE HOPED\nb THERE\nc WOULD\nd BE\nf STEW\n")
    out = run_tool(sys.executable, STEPS / tool, data, *outputs(2))
    assert out.returncode == 0, out.stderr
    segments = data / "segments"
    for reason in (f"{segments}:2: b: expected '<utterance> <recording> <start> <end>', got 3 fields",
                   f"{segments}:3: c: bad segment times 2.0..1.0", f"{segments}:4: d: its recording other is not",
                   f"{segments}:5: e: no transcript in text", f"{data}/text:5: f: no segment in segments"):
        assert f"skipped {reason}" in out.stderr
    assert out.stdout.rstrip().endswith("skipped 5") and (" 1 utterance," in out.stdout)


def test_rerun_skips_complete_shards_and_redoes_missing_ones(test_data, tmp_path):
    data = prep("librispeech", test_data, tmp_path)
    args = [sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "2", data, tmp_path / "sh", tmp_path / "l"]
    assert run_tool(*args).returncode == 0
    second = tmp_path / "sh" / "shards_000001.tar"
    original = second.read_bytes()
    second.unlink()
    Path(f"{second}.tmp").write_bytes(original[:1000])  # what a killed writer leaves behind
    out = run_tool(*args)
    assert "3 shards (2 already complete); this run wrote 2 utterances" in out.stdout
    assert second.read_bytes() == original  # deterministic: the same input gives the same shard
    changed = run_tool(sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "3", data, tmp_path / "sh",
                       tmp_path / "l")
    assert changed.returncode == 1 and "other settings or utterances" in changed.stderr
    # --replace (a recipe's shards stage, run again because its data dir changed): the old shards go
    replaced = run_tool(sys.executable, STEPS / "make_shards.py", "--replace", "--utts-per-shard", "3", data,
                        tmp_path / "sh", tmp_path / "l")
    assert replaced.returncode == 0 and "2 shards (0 already complete)" in replaced.stdout, replaced.stderr
    assert sorted(p.name for p in (tmp_path / "sh").glob("*.tar*")) == ["shards_000000.tar", "shards_000001.tar"]
    # another --prefix is another plan: the shards of the old names were left beside the new, the plan the same
    renamed = [sys.executable, STEPS / "make_shards.py", "--prefix", "train", "--utts-per-shard", "3", data,
               tmp_path / "sh", tmp_path / "l"]
    assert "holds shards of other settings or utterances" in run_tool(*renamed).stderr
    assert run_tool(*renamed[:2], "--replace", *renamed[2:]).returncode == 0
    assert sorted(p.name for p in (tmp_path / "sh").glob("*.tar*")) == ["train_000000.tar", "train_000001.tar"]
    assert run_tool(*renamed[:2], "--replace", "--prefix", "shards", *renamed[4:]).returncode == 0
    record = tmp_path / "sh" / ".make_shards.json"  # one from before the names were planned: the default's
    record.write_text(json.dumps({k: v for k, v in json.loads(record.read_text()).items() if k != "prefix"}))
    kept = run_tool(sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "3", data, tmp_path / "sh",
                    tmp_path / "l")
    assert kept.returncode == 0 and "2 shards (2 already complete)" in kept.stdout, kept.stderr
    # the same keys with another transcript (a new normalise()): its shard written again and named, the other kept
    text = (data / "text").read_text().splitlines()
    key = text[0].split()[0]
    (data / "text").write_text("\n".join([f"{key} CHANGED TEXT", *text[1:]]) + "\n")
    again = run_tool(sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "3", data, tmp_path / "sh",
                     tmp_path / "l")
    assert again.returncode == 0 and "2 shards (1 already complete)" in again.stdout, again.stdout + again.stderr
    assert f"{tmp_path / 'sh' / 'shards_000000.tar'}: its utterances' text, audio or times changed" in again.stderr
    with tarfile.open(tmp_path / "sh" / "shards_000000.tar") as shard:
        assert shard.extractfile(f"{key}.txt").read().decode() == "CHANGED TEXT"
    # the same corpus at another path (moved, or copied keeping the files' times): the same audio, shards kept;
    # they were written again, and a training on them set aside for new data
    wav = table(data / "wav.scp")
    corpus = test_data / "librispeech_samples" / "LibriSpeech" / "test-clean"
    shutil.copytree(corpus, tmp_path / "moved")  # its files' times kept
    wav = {utt: str(tmp_path / "moved" / Path(path).relative_to(corpus)) for utt, path in wav.items()}
    (data / "wav.scp").write_text("".join(f"{k} {v}\n" for k, v in sorted(wav.items())))
    again = run_tool(sys.executable, STEPS / "make_shards.py", "--replace", "--utts-per-shard", "3", data,
                     tmp_path / "sh", tmp_path / "l")
    assert again.returncode == 0 and "2 shards (2 already complete)" in again.stdout, again.stdout
    # records of earlier forms: one digest of all the shards, and before that of the paths whole. The same plan,
    # the record left as it was (a recipe's stage fingerprints the folder: an upgrade wrote every shard again)
    spec = importlib.util.spec_from_file_location("make_shards_tool", STEPS / "make_shards.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    from rnnt.prep.shard_plan import digest, item_lines

    record = tmp_path / "sh" / ".make_shards.json"
    plan = json.loads(record.read_text())
    items = tool.read_items(str(data))[0]
    for with_folders in (True, False):
        earlier = json.dumps({**plan, "items": digest(item_lines(items, with_folders))})
        record.write_text(earlier)
        os.utime(record, ns=(1, 1_000_000_000))
        again = run_tool(sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "3", data, tmp_path / "sh",
                         tmp_path / "l")
        assert again.returncode == 0 and "2 shards (2 already complete)" in again.stdout, again.stdout
        assert record.read_text() == earlier and record.stat().st_mtime_ns == 1_000_000_000
    # a record of that form that differs cannot say which shard changed: both written again, the record of today
    record.write_text(json.dumps({**plan, "items": "0" * 64}))
    again = run_tool(sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "3", data, tmp_path / "sh",
                     tmp_path / "l")
    assert again.returncode == 0 and "2 shards (0 already complete)" in again.stdout, again.stdout
    assert json.loads(record.read_text()) == plan
    state = tmp_path / "sh" / ".make_shards.json"  # its record cut short (a full disk), or of a version that kept no
    args = [sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "3", data, tmp_path / "sh", tmp_path / "l"]
    for record in (state.read_text()[:50], json.dumps({k: v for k, v in plan.items() if k != "items"})):  # digest:
        state.write_text(record)  # another plan, not a traceback (KeyError: 'items')
        refused = run_tool(*args)
        assert refused.returncode == 1 and "holds shards of other settings or utterances" in refused.stderr
        assert "Traceback" not in refused.stderr
    again = run_tool(*args[:2], "--replace", *args[2:])
    assert again.returncode == 0 and "2 shards (0 already complete)" in again.stdout, again.stderr
    assert json.loads(state.read_text())["utts_per_shard"] == 3 and not Path(f"{state}.tmp").exists()
    # its record deleted (or shards of an older version, which wrote none), the transcript changed since: the
    # shards were taken as complete, holding the old text
    state.unlink()
    (data / "text").write_text("\n".join([f"{key} CHANGED AGAIN", *text[1:]]) + "\n")
    assert "holds shards of other settings or utterances" in run_tool(*args).stderr
    again = run_tool(*args[:2], "--replace", *args[2:])
    assert again.returncode == 0 and "2 shards (0 already complete)" in again.stdout, again.stderr
    with tarfile.open(tmp_path / "sh" / "shards_000000.tar") as shard:
        assert shard.extractfile(f"{key}.txt").read().decode() == "CHANGED AGAIN"


def test_a_recording_restored_writes_its_shard_again_and_keeps_the_others(test_data, tmp_path):
    """A recording missing at first (its utterance skipped, its shard incomplete), then restored: run by hand, with
    no --replace, the rerun writes that shard again with it and reuses the others; a recording replaced by another
    of the same name does the same. A run stopped after the new record was written leaves the changed shard
    missing, not the old one taken as new."""
    data = prep("librispeech", test_data, tmp_path)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    originals = table(data / "wav.scp")
    keys = sorted(originals)
    wav = {key: str(corpus / Path(path).name) for key, path in originals.items()}
    for key in keys[:4]:
        shutil.copy(originals[key], wav[key])
    (data / "wav.scp").write_text("".join(f"{k} {v}\n" for k, v in sorted(wav.items())))
    args = [sys.executable, STEPS / "make_shards.py", "--utts-per-shard", "2", data, tmp_path / "sh", tmp_path / "l"]
    out = run_tool(*args)
    assert out.returncode == 0 and "wrote 4 utterances" in out.stdout and "skipped 1" in out.stdout, out.stderr
    third = tmp_path / "sh" / "shards_000002.tar"
    assert Path(f"{third}.skipped").exists()
    shutil.copy(originals[keys[4]], wav[keys[4]])
    out = run_tool(*args)
    assert out.returncode == 0 and "3 shards (2 already complete); this run wrote 1 utterance" in out.stdout, \
        out.stdout + out.stderr
    assert f"{third}: its utterances' text, audio or times changed" in out.stderr
    assert [name for name, _ in read_shard(str(third))] == [f"{keys[4]}.txt", f"{keys[4]}.flac"]
    first = tmp_path / "sh" / "shards_000000.tar"
    first_bytes = first.read_bytes()
    shutil.copy(wav[keys[1]], wav[keys[0]])  # another recording copied over the first's
    out = run_tool(*args)
    assert out.returncode == 0 and "3 shards (2 already complete)" in out.stdout, out.stdout + out.stderr
    assert first.read_bytes() != first_bytes
    shutil.copy(originals[keys[0]], wav[keys[0]])  # and back, the run stopped once the record was written
    spec = importlib.util.spec_from_file_location("make_shards_tool", STEPS / "make_shards.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    items = tool.read_items(str(data))[0]
    paths = [str(tmp_path / "sh" / f"shards_{i:06d}.tar") for i in range(3)]
    tool.start_shard_dir(str(tmp_path / "sh"), tool.make_plan(items, 2, "keep", None, "shards"), items, paths, False)
    assert not first.exists()
    out = run_tool(*args)
    assert out.returncode == 0 and "3 shards (2 already complete)" in out.stdout, out.stdout + out.stderr
    assert first.read_bytes() == first_bytes


def test_files_of_one_name_size_and_time_in_two_folders_are_not_taken_for_each_other(tmp_path):
    """A corpus's yes/x.wav and no/x.wav, as extracted from one archive (its times to the second): wav.scp
    corrected to swap them writes the shards again, with each key's own audio."""
    for folder, value in (("yes", 0.25), ("no", -0.5)):
        (tmp_path / folder).mkdir()
        soundfile.write(tmp_path / folder / "x.wav", np.full(1600, value), 16000, subtype="PCM_16")
        os.utime(tmp_path / folder / "x.wav", ns=(1_000_000_000, 1_000_000_000))
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_text("a YES\nb NO\n")
    (data / "utt2spk").write_text("a s\nb s\n")
    args = [sys.executable, STEPS / "make_shards.py", "--replace", data, tmp_path / "sh", tmp_path / "l"]
    for first, second in (("yes", "no"), ("no", "yes")):
        (data / "wav.scp").write_text(f"a {tmp_path / first / 'x.wav'}\nb {tmp_path / second / 'x.wav'}\n")
        out = run_tool(*args)
        assert out.returncode == 0 and "this run wrote 2 utterances" in out.stdout, out.stdout + out.stderr
        audio = dict(read_shard(str(tmp_path / "sh" / "shards_000000.tar")))
        assert soundfile.read(io.BytesIO(audio["a.wav"]))[0][0] == (0.25 if first == "yes" else -0.5)


def test_raw_list(test_data, tmp_path):
    data = prep("librispeech", test_data, tmp_path)
    out = run_tool(sys.executable, STEPS / "make_raw_list.py", data, tmp_path / "raw.list")
    assert out.returncode == 0 and "5 utterances" in out.stdout
    rows = [json.loads(line) for line in (tmp_path / "raw.list").read_text().splitlines()]
    assert [r["key"] for r in rows] == sorted(table(data / "text"))
    assert rows[0]["txt"] == table(data / "text")[rows[0]["key"]] and Path(rows[0]["wav"]).is_file()
    assert abs(rows[0]["duration"] - 10.435) < 1e-3
    # segments: one with times, two to their recordings' end (end -1, which combine_data.sh writes for a source
    # without utt2dur): ending at the recording's length, or from 0 the whole file (WeNet wants no start without
    # an end); one whose recording cannot be read is named
    keys, text, wav = sorted(table(data / "text")), (data / "text").read_text(), table(data / "wav.scp")
    (data / "wav.scp").write_text("".join(f"{k} {wav[k] if k != keys[3] else tmp_path / 'gone.flac'}\n"
                                          for k in keys))
    (data / "segments").write_text(f"{keys[0]} {keys[0]} 0.5 2.25\n{keys[1]} {keys[1]} 1.0 -1\n"
                                   f"{keys[2]} {keys[2]} 0 -1\n{keys[3]} {keys[3]} 1.0 -1\n")
    (data / "text").write_text("".join(f"{k} {table(data / 'text')[k]}\n" for k in keys[:4]))
    out = run_tool(sys.executable, STEPS / "make_raw_list.py", data, tmp_path / "segments.list")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "segments.list").read_text().splitlines()]
    assert (rows[0]["start"], rows[0]["end"]) == (0.5, 2.25)
    assert (rows[1]["start"], rows[1]["end"]) == (1.0, soundfile.info(wav[keys[1]]).duration)
    assert rows[2]["key"] == keys[2] and "start" not in rows[2] and "end" not in rows[2]
    assert len(rows) == 3 and f"{keys[3]}: {tmp_path / 'gone.flac'}: no such file" in out.stderr
    (data / "wav.scp").write_text("".join(f"{k} {wav[k]}\n" for k in keys))  # the dir as it was
    (data / "text").write_text(text)
    durations = (data / "utt2dur").read_text().splitlines()  # one duration that is no number, one missing
    (data / "utt2dur").write_text("\n".join([f"{keys[0]} 0"] + durations[2:]) + "\n")
    (data / "segments").unlink()
    out = run_tool(sys.executable, STEPS / "make_raw_list.py", data, tmp_path / "durations.list")
    assert out.returncode == 0 and out.stdout.endswith("skipped 0; 2 listed without a duration (named above)\n")
    assert f"{keys[0]}: {data / 'utt2dur'}:1: duration '0' is not a positive number; listed without" in out.stderr
    assert f"{keys[1]}: not in {data / 'utt2dur'}; listed without a duration" in out.stderr
    rows = [json.loads(line) for line in (tmp_path / "durations.list").read_text().splitlines()]
    assert [("duration" in row) for row in rows] == [False, False, True, True, True]
    wav = (data / "wav.scp").read_text().splitlines()  # a piped entry: named by its wav.scp line
    (data / "wav.scp").write_text("\n".join(wav[:4] + [f"{keys[4]} sox {wav[4].split()[1]} -t wav - |"]) + "\n")
    out = run_tool(sys.executable, STEPS / "make_raw_list.py", data, tmp_path / "piped.list")
    assert f"skipped {data / 'wav.scp'}:5: {keys[4]}: a piped command cannot be a raw entry" in out.stderr, out.stderr
    # a folder, an empty file, no file: listed (the summary said 'skipped 0'), and skipped by every training after
    (tmp_path / "empty.wav").write_bytes(b"")
    bad = [tmp_path, tmp_path / "empty.wav", tmp_path / "gone.wav"]
    (data / "wav.scp").write_text("\n".join([f"{keys[i]} {bad[i]}" for i in range(3)] + wav[3:]) + "\n")
    out = run_tool(sys.executable, STEPS / "make_raw_list.py", data, tmp_path / "files.list")
    assert out.returncode == 0 and "2 utterances" in out.stdout and "skipped 3" in out.stdout, out.stdout
    for i, why in enumerate(("a folder, not an audio file", "an empty file (0 bytes)", "no such file")):
        assert f"skipped {data / 'wav.scp'}:{i + 1}: {keys[i]}: {bad[i]}: {why}\n" in out.stderr, out.stderr


NON_ASCII = ["ÉCOLE NAÏVE CAFÉ", "ÜBER GRÖSSE STRASSE", "中文 语音 识别", "NIÑO AÑO ESPAÑA", "HELLO WORLD"]


@pytest.mark.parametrize("unit_type", ["bpe", "unigram", "char", "word"])
def test_units_round_trip_including_non_ascii(tmp_path, unit_type):
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_text("".join(f"u{i:03d} {NON_ASCII[i % 5]}\n" for i in range(50)))
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", unit_type, "--vocab-size", "40",
                   data, tmp_path / "lang")
    assert out.returncode == 0, out.stderr
    assert "0 transcripts do not round-trip" in out.stdout
    units = (tmp_path / "lang" / "units.txt").read_text().splitlines()
    assert units[:2] == ["<blank> 0", "<unk> 1"]
    assert [int(line.split()[1]) for line in units] == list(range(len(units)))
    from rnnt.data.tokenizer import Tokenizer

    tokenizer = Tokenizer(str(tmp_path / "lang"))
    for line in NON_ASCII:
        ids = tokenizer.encode(line)
        assert 1 not in ids and 0 not in ids and tokenizer.decode(ids) == line
    assert tokenizer.encode("QQQ")[0] == 1 or unit_type in ("bpe", "unigram")  # unseen -> <unk>
    if unit_type == "word":
        assert tokenizer.encode("HELLO MARS") == [tokenizer.units["HELLO"], 1]
    if unit_type == "bpe" and "\u2581" in tokenizer.units:  # a lone word-start piece spells no word of its own
        from rnnt.search import Hypothesis
        from rnnt.transcriber import words_with_times

        ids = [tokenizer.units["\u2581"], *tokenizer.encode("HELLO WORLD")]
        words = words_with_times(tokenizer, Hypothesis(ids, list(range(len(ids))), 0.0), 0.04)
        assert [w["word"] for w in words] == ["HELLO", "WORLD"]


@pytest.mark.parametrize("unit_type", ["bpe", "word", "char"])
def test_rare_characters_and_a_literal_unk_train_as_unk_not_a_failure(tmp_path, unit_type):
    """--character-coverage under 1 leaves rare characters out of BPE units, and Kaldi-style text may hold a
    literal <unk>: their transcripts train with id 1 there, counted; before, they failed the round-trip check
    (after writing units.txt), and a word <unk> became a second unit beside id 1."""
    data = tmp_path / "data"
    data.mkdir()
    common = [f"u{i:04d} {NON_ASCII[i % 5]}" for i in range(300)]
    rare = [f"r{i:04d} HELLO {chr(0x4E00 + 500 + i)}" for i in range(6)]  # six characters seen once each
    (data / "text").write_text("\n".join([*common, *rare, "z0000 HELLO <unk> WORLD"]) + "\n")
    coverage = ["--character-coverage", "0.995"] if unit_type == "bpe" else []
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", unit_type, "--vocab-size", "60",
                   *coverage, data, tmp_path / "lang")
    assert out.returncode == 0, out.stderr
    units = (tmp_path / "lang" / "units.txt").read_text().splitlines()
    assert [line.split()[0] for line in units].count("<unk>") == 1
    have_unk = int(out.stdout.split(" have <unk>")[0].rsplit(" ", 1)[1])
    # char units spell '<unk>' with the characters <, u, n, k, >: nothing unknown there
    assert "0 transcripts do not round-trip" in out.stdout and have_unk >= {"bpe": 7, "word": 1, "char": 0}[unit_type]


def test_a_transcript_nfkc_changes_trains_as_its_normal_form_named_by_line(tmp_path):
    """A decomposed É (NFD) or a ½: sentencepiece's NFKC normalisation changed it, and the whole stage failed with
    'does not round-trip: CAFÉ OK', the text it printed looking the same as the normal form and no line named."""
    data = tmp_path / "data"
    data.mkdir()
    lines = [f"u{i:03d} {' '.join(['CAFÉ', 'OK', 'HALF', 'NOW'][(i + j) % 4] for j in range(3))}" for i in range(60)]
    (data / "text").write_text("\n".join([*lines, "z000 CAFE\u0301 OK", "z001 \u00bd NOW"]) + "\n")
    out = run_tool(sys.executable, STEPS / "build_units.py", "--vocab-size", "30", data, tmp_path / "lang")
    assert out.returncode == 0, out.stderr
    assert "0 transcripts do not round-trip, 2 train as their NFKC form" in out.stdout
    assert f"{data}/text:61: trains as its NFKC form 'CAFÉ OK'" in out.stderr and f"{data}/text:62: " in out.stderr


@pytest.mark.parametrize("unit_type", ["bpe", "unigram"])
def test_a_literal_unk_in_lowercase_text_is_the_unit_unk(tmp_path, unit_type):
    """A lowercase corpus (Kaldi's <unk> for a word not transcribed, as TED-LIUM writes it): sentencepiece learns
    u, n and k from the other words, and spelt the word <unk> as < u n k >, ids 1 at its brackets alone."""
    data = tmp_path / "data"
    data.mkdir()
    words = "go now unknown kind sun under thank you ok".split()
    lines = [f"u{i:04d} {' '.join(words[(i + j) % len(words)] for j in range(4))}" for i in range(200)]
    (data / "text").write_text("\n".join([*lines, "z0000 go <unk> now <unk>"]) + "\n")
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", unit_type, "--vocab-size", "40", data,
                   tmp_path / "lang")
    assert out.returncode == 0, out.stderr
    from rnnt.data.tokenizer import Tokenizer

    tokenizer = Tokenizer(str(tmp_path / "lang"))
    assert tokenizer.pieces("go <unk> now <unk>") == [*tokenizer.pieces("go"), "▁", "<unk>", *tokenizer.pieces("now"),
                                                      "▁", "<unk>"]
    assert tokenizer.encode("<unk> go").count(1) == 1 and "u" in tokenizer.units  # a piece of its own
    for text in ("go <unk> now <unk>", "<unk> go", "<unk>"):
        assert tokenizer.decode(tokenizer.encode(text)) == text


@pytest.mark.parametrize("unit_type", ["bpe", "unigram"])
def test_zero_width_characters_and_a_literal_unk_round_trip_in_sentencepiece_units(tmp_path, unit_type):
    """Persian's zero-width non-joiner (which the data dir rules accept) is inside a word: sentencepiece's default
    normalisation made a word boundary of it, and such a transcript failed the round-trip check. A literal <unk>
    decoded as U+2047, where sherpa-onnx's tokens.txt prints <unk>."""
    data = tmp_path / "data"
    data.mkdir()
    persian = ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \u0628\u0631\u0648\u0645",
               "\u06a9\u062a\u0627\u0628\u200c\u0647\u0627 \u0631\u0627 "
               "\u0645\u06cc\u200c\u062e\u0648\u0627\u0646\u0645"]
    (data / "text").write_text("".join(f"u{i:03d} {persian[i % 2]}\n" for i in range(40)) + "z HELLO <unk> WORLD\n")
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", unit_type, "--vocab-size", "30",
                   data, tmp_path / "lang")
    assert out.returncode == 0 and "0 transcripts do not round-trip" in out.stdout, out.stdout + out.stderr
    from rnnt.data.tokenizer import Tokenizer

    tokenizer = Tokenizer(str(tmp_path / "lang"))
    assert [tokenizer.decode(tokenizer.encode(line)) for line in persian] == persian
    assert tokenizer.decode(tokenizer.encode("HELLO <unk> WORLD")) == "HELLO <unk> WORLD"


@pytest.mark.parametrize("unit_type", ["bpe", "unigram"])
def test_a_tab_between_words_and_a_line_of_5000_bytes_train_sentencepiece_as_kaldis_text_reads_them(tmp_path,
                                                                                                     unit_type):
    """Kaldi's text takes a TAB between words as a space: under NFKC it was a piece of its own, units.txt got a
    line of it that no reader takes (a traceback), and encoding a tabbed transcript with units built without
    one gave <unk> for the word boundary. A line over sentencepiece's default 4192 bytes was left out of its
    training in silence: a character only such a line holds had no unit at coverage 1.0."""
    data = tmp_path / "data"
    data.mkdir()
    words = ["go", "now", "stop", "left", "right"]
    lines = [f"u{i:03d} {' '.join(words[(i + j) % 5] for j in range(3))}" for i in range(60)]
    long = " ".join(["stop zebra"] * 500)  # 5499 bytes
    (data / "text").write_text("\n".join([*lines, "v000 go\tnow", f"w000 {long}"]) + "\n")
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", unit_type, "--vocab-size", "40", data,
                   tmp_path / "lang")
    assert out.returncode == 0 and "0 transcripts do not round-trip, 0 have <unk>" in out.stdout, \
        out.stdout + out.stderr
    from rnnt.data.tokenizer import Tokenizer

    tokenizer = Tokenizer(str(tmp_path / "lang"))
    assert "\t" not in "".join(tokenizer.units) and any("z" in unit for unit in tokenizer.units)
    assert tokenizer.encode("left\t right") == tokenizer.encode("left right")
    assert tokenizer.decode(tokenizer.encode("go\tzebra")) == "go zebra"
    (data / "text").write_text("".join(f"u{i:03d} {words[i % 5].upper()}\n" for i in range(60)))  # command words:
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", unit_type, "--vocab-size", "20", data,
                   tmp_path / "lang")  # sentencepiece refused a longest line of 6 bytes (under 10) as the limit
    assert out.returncode == 0, out.stderr


def test_sentencepiece_sizes_out_of_range_are_named_by_our_options(tmp_path):
    """--vocab-size 0 was sentencepiece's INTERNAL check, a size under the characters' its message naming its own
    --character_coverage flag, --character-coverage 2 another INTERNAL check; --vocab-size 5000 over a small text
    gave 46 units without a word."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_text("a HELLO WORLD\nb GOOD DAY\n")  # 10 characters: 13 units at least

    def build(*options):
        return run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", "bpe", *options, data,
                        tmp_path / "lang")
    for size in ("0", "12"):
        out = build("--vocab-size", size)
        assert out.returncode == 1 and (f"--vocab-size {size}: the text has 10 characters, so bpe units need at "
                                        "least 13") in out.stderr, out.stderr
    out = build("--character-coverage", "2")
    assert out.returncode == 1 and "--character-coverage 2.0: sentencepiece takes 0.98 to 1.0" in out.stderr
    assert build("--vocab-size", "13").returncode == 0
    out = build("--vocab-size", "5000")
    assert out.returncode == 0 and "--vocab-size 5000 asked, the text gives 46 units (bpe)" in out.stderr


def test_a_line_left_out_of_the_text_is_counted_in_the_summaries(tmp_path):
    """A line that is not UTF-8 was named, but the summaries said 'from 2 transcripts' as if nothing was left out."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_bytes(b"a YES NO\nb NO\xe9 YES\nc NO NO\n")
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", "word", data, tmp_path / "lang")
    text = data / "text"
    assert out.returncode == 0 and f"build_units.py: {text}:2: byte 0xe9 at column 5" in out.stderr, out.stderr
    assert out.stdout.rstrip().endswith(f"; 1 line of {text} left out (named above)"), out.stdout
    out = run_tool(sys.executable, STEPS / "build_ngram_lm.py", "--order", "2", data, tmp_path / "lang",
                   tmp_path / "lm.arpa")
    assert out.returncode == 0 and f"build_ngram_lm.py: {text}:2: byte 0xe9" in out.stderr, out.stderr
    assert "from 2 transcripts" in out.stdout and out.stdout.rstrip().endswith(f"1 line of {text} left out "
                                                                              "(named above)"), out.stdout


@pytest.mark.parametrize("unit_type", ["word", "char"])
def test_a_transcript_with_a_control_character_is_named_and_left_out_of_the_units(tmp_path, unit_type):
    """A NUL became a unit of its own (char), and NO followed by one a word unit. A form feed after the key or a
    vertical tab at the line's end (outside the transcript as Kaldi splits it) was let through here, where
    make_shards left the utterance out."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_bytes(b"a YES NO\nb NO\x00 YES\nc NO NO\nd </s> YES\ne\x0cYES\nf NO\x0b\n")
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", unit_type, data, tmp_path / "lang")
    assert out.returncode == 0 and f"{data / 'text'}:2: b: non-printable character U+0000; left out" in out.stderr
    assert f"{data / 'text'}:4: d: reserved symbol '</s>' in a transcript; left out" in out.stderr
    assert f"{data / 'text'}:5: e: whitespace U+000C (Kaldi allows only space and TAB); left out" in out.stderr
    assert f"{data / 'text'}:6: f: whitespace U+000B (Kaldi allows only space and TAB); left out" in out.stderr
    assert "from 2 transcripts" in out.stdout and out.stdout.rstrip().endswith(
        "; 4 transcripts Kaldi's rules refuse left out (named above)"), out.stdout
    assert "\x00" not in (tmp_path / "lang" / "units.txt").read_text()


def test_a_literal_blank_in_a_transcript_is_unknown_not_the_blank(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_text("a YES NO\nb NO <blank> YES\n")
    run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", "word", data, tmp_path / "lang", check=True)
    from rnnt.data.tokenizer import Tokenizer

    tokenizer = Tokenizer(str(tmp_path / "lang"))
    assert tokenizer.encode("NO <blank> YES") == [tokenizer.units["NO"], 1, tokenizer.units["YES"]]


def test_sphere_audio_is_written_as_wav_for_wenets_reader(test_data, tmp_path):
    """Kept as it is, a SPHERE file (AN4's CMU archive) would be a .sph member, which WeNet's reader does not
    take for audio; it is written as wav, the same samples, and so is one named .wav (TIMIT's)."""
    from rnnt.prep.shard_writer import AudioOptions, ShardItem, audio_member

    wav = sorted((test_data / "waves_yesno").glob("*.wav"))[0]
    samples, rate = soundfile.read(wav, dtype="int16")
    sph = tmp_path / "a.sph"
    soundfile.write(sph, samples, rate, format="NIST", subtype="PCM_16")
    data, extension, seconds = audio_member(ShardItem("a", "YES", str(sph)), AudioOptions())
    assert extension == "wav" and data[:4] == b"RIFF" and seconds == pytest.approx(len(samples) / rate)
    assert (soundfile.read(io.BytesIO(data), dtype="int16")[0] == samples).all()
    data, extension, _ = audio_member(ShardItem("b", "YES", str(wav)), AudioOptions())
    assert extension == "wav" and data == wav.read_bytes()  # wav, flac, ... are kept byte for byte
    timit = tmp_path / "sa1.WAV"  # TIMIT's: SPHERE under a .WAV name (the bytes were kept: a NIST header in a .wav)
    soundfile.write(timit, samples, rate, format="NIST", subtype="PCM_16")
    data, extension, _ = audio_member(ShardItem("c", "YES", str(timit)), AudioOptions())
    assert extension == "wav" and data[:4] == b"RIFF" and (soundfile.read(io.BytesIO(data), dtype="int16")[0]
                                                           == samples).all()


def test_lists_in_a_folder_not_there_yet_are_written_and_one_that_cannot_be_is_named(test_data, tmp_path):
    """A list path in a folder not there was a FileNotFoundError traceback, after every shard was packed."""
    data = prep("librispeech", test_data, tmp_path)
    out = run_tool(sys.executable, STEPS / "make_raw_list.py", data, tmp_path / "new" / "raw.list")
    assert out.returncode == 0 and (tmp_path / "new" / "raw.list").is_file(), out.stderr
    out = run_tool(sys.executable, STEPS / "make_shards.py", data, tmp_path / "shards", tmp_path / "lists" / "d.list")
    assert out.returncode == 0 and (tmp_path / "lists" / "d.list").is_file(), out.stderr
    (tmp_path / "afile").write_text("")
    for tool, args in (("make_raw_list.py", [tmp_path / "afile" / "raw.list"]),
                       ("make_shards.py", [tmp_path / "shards2", tmp_path / "afile" / "d.list"]),
                       ("make_shards.py", [tmp_path / "afile" / "shards", tmp_path / "d.list"])):
        out = run_tool(sys.executable, STEPS / tool, data, *args)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert f"{tool}: {tmp_path / 'afile'}" in out.stderr and "cannot write" in out.stderr
    assert not (tmp_path / "shards2").exists() or not list((tmp_path / "shards2").glob("*.tar"))
    (tmp_path / "shards3" / ".make_shards.json.tmp").mkdir(parents=True)  # the plan's record cannot be written
    out = run_tool(sys.executable, STEPS / "make_shards.py", data, tmp_path / "shards3", tmp_path / "d3.list")
    assert out.returncode == 1 and f"{tmp_path / 'shards3' / '.make_shards.json'}: cannot write the plan (Is a " \
        "directory)" in out.stderr and "Errno" not in out.stderr, out.stderr


def test_sentencepiece_trained_on_a_sample_of_a_long_text_draws_the_same_sample_every_run(tmp_path):
    """A text of more lines than sentencepiece is trained on (10M; here 200 of 2000) was sampled by sentencepiece,
    which draws another sample in every process, whatever seed it is given: other units from the same text."""
    rng = np.random.default_rng(5)
    words = ["".join(rng.choice(list("ABCDEFGHIJKLMNOP"), size=rng.integers(2, 9))) for _ in range(400)]
    (tmp_path / "text").write_text("".join(" ".join(rng.choice(words, size=6)) + "\n" for _ in range(2000)))
    train = ("import importlib.util, json, sys\n"
             f"spec = importlib.util.spec_from_file_location('build_units_tool', {str(STEPS / 'build_units.py')!r})\n"
             "tool = importlib.util.module_from_spec(spec)\n"
             "spec.loader.exec_module(tool)\n"
             "tool.SAMPLED_SENTENCES = 200\n"
             "lines = open(sys.argv[1]).read().splitlines()\n"
             "print(json.dumps(tool.train_sentencepiece(lines, sys.argv[2], 'bpe', 80, 1.0)))\n")
    runs = []
    for run in range(2):
        (tmp_path / f"lang{run}").mkdir()
        out = run_tool(sys.executable, "-c", train, tmp_path / "text", tmp_path / f"lang{run}")
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout))
    assert runs[0] == runs[1] and len(runs[0]) > 40


def test_build_units_warns_of_punctuation_and_mixed_case_in_the_transcripts(tmp_path):
    """'ZERO.', '"zero",' and 'Zero' passed silently into the units (a unit for '.', for 'z') and into the WER
    ('ZERO.' a word apart from 'ZERO'); the marks inside words (DON'T, TWENTY-ONE) are no warning."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_text("u1 Zero.\nu2 ZERO\nu3 \"zero\", ONE!\nu4 DON'T TWENTY-ONE\n")
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", "char", data, tmp_path / "lang")
    assert out.returncode == 0, out.stderr
    assert (f"warning: punctuation in the transcripts: '!' (first {data}/text:3), '\"' (first {data}/text:3), ',' "
            f"(first {data}/text:3), '.' (first {data}/text:1): units of its own") in out.stderr, out.stderr
    assert f"letters in both cases in the transcripts: E/e (first {data}/text:2 and {data}/text:1)" in out.stderr
    (data / "text").write_text("u1 ZERO\nu2 DON'T TWENTY-ONE\n")
    out = run_tool(sys.executable, STEPS / "build_units.py", "--unit-type", "char", data, tmp_path / "lang2")
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr
