"""utt2spk/spk2utt conversion, filter_scp, split_scp, subset_data_dir and combine_data on real data dirs."""

import os
from pathlib import Path

import pytest

from conftest import ROOT, run_tool
from rnnt.datadir.split_scp import split_lines

UTILS = ROOT / "utils"


def keys(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text().splitlines() if line.strip()]


def assert_valid(d: Path) -> None:
    out = run_tool(UTILS / "validate_data_dir.sh", "--no-feats", d)
    assert out.returncode == 0, out.stderr


def test_utt2spk_spk2utt_round_trip(librispeech_dir):
    spk2utt = run_tool(UTILS / "utt2spk_to_spk2utt.py", librispeech_dir / "utt2spk", check=True).stdout
    assert spk2utt == (librispeech_dir / "spk2utt").read_text()
    utt2spk = run_tool(UTILS / "spk2utt_to_utt2spk.py", stdin=spk2utt, check=True).stdout
    assert utt2spk == (librispeech_dir / "utt2spk").read_text()


def test_utt2spk_to_spk2utt_rejects_malformed_line_by_number(tmp_path):
    bad = tmp_path / "utt2spk"
    bad.write_text("a-1 a\na-2\n")
    out = run_tool(UTILS / "utt2spk_to_spk2utt.py", bad)
    assert out.returncode == 1 and f"{bad}:2" in out.stderr


def test_filter_scp_include_exclude_and_field(librispeech_dir, tmp_path):
    wav = librispeech_dir / "wav.scp"
    ids = tmp_path / "ids"
    chosen = keys(wav)[1:6:2]
    ids.write_text("".join(f"{k}\n" for k in chosen))
    assert keys_of(run_tool(UTILS / "filter_scp.py", ids, wav, check=True).stdout) == chosen
    excluded = keys_of(run_tool(UTILS / "filter_scp.py", "--exclude", ids, wav, check=True).stdout)
    assert excluded == [k for k in keys(wav) if k not in chosen]
    # -f 2: match the speaker column of utt2spk against a speaker list
    spk = keys(librispeech_dir / "spk2utt")[0]
    ids.write_text(f"{spk}\n")
    by_speaker = keys_of(run_tool(UTILS / "filter_scp.py", "-f", "2", ids, librispeech_dir / "utt2spk").stdout)
    assert by_speaker and all(k.startswith(spk) for k in by_speaker)


def keys_of(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines()]


def test_split_scp_by_utterance_is_contiguous_and_balanced(librispeech_dir, tmp_path):
    outs = [tmp_path / f"part{i}" for i in range(3)]
    run_tool(UTILS / "split_scp.py", librispeech_dir / "wav.scp", *outs, check=True)
    parts = [o.read_text() for o in outs]
    assert "".join(parts) == (librispeech_dir / "wav.scp").read_text()
    assert [len(p.splitlines()) for p in parts] == [3, 3, 2]  # Kaldi's split_scp.pl: the first parts longer


def test_split_scp_by_speaker_keeps_speakers_whole(librispeech_dir, tmp_path):
    outs = [tmp_path / f"part{i}" for i in range(3)]
    run_tool(UTILS / "split_scp.py", "--utt2spk", librispeech_dir / "utt2spk", librispeech_dir / "wav.scp",
             *outs, check=True)
    speaker_of = dict(line.split() for line in (librispeech_dir / "utt2spk").read_text().splitlines())
    seen = {}
    for i, out in enumerate(outs):
        utts = keys(out)
        assert utts, "every part gets at least one speaker"
        for u in utts:
            assert seen.setdefault(speaker_of[u], i) == i, f"speaker {speaker_of[u]} split across parts"
    assert sum(len(keys(o)) for o in outs) == 8


SPEAKER_LINES = [5, 1, 1, 1, 6, 2, 2, 3, 1]  # lines of speakers s0..s8


@pytest.mark.parametrize("parts,speakers,sizes", [
    # what Kaldi's egs/wsj/s5/utils/split_scp.pl writes for these 22 lines, with --utt2spk and without
    (2, [[0, 1, 2, 3, 4], [5, 6, 7, 8]], [11, 11]),
    (3, [[0, 1, 2], [3, 4], [5, 6, 7, 8]], [8, 7, 7]),
    (4, [[0, 1, 2], [3, 4], [5, 6], [7, 8]], [6, 6, 5, 5]),
    (7, [[0], [1, 2], [3], [4], [5, 6], [7], [8]], [4, 3, 3, 3, 3, 3, 3]),
])
def test_split_scp_gives_kaldis_parts(parts, speakers, sizes):
    groups = [f"s{s}" for s, n in enumerate(SPEAKER_LINES) for _ in range(n)]
    keys = [f"{g}-u{i}" for i, g in enumerate(groups)]
    by_speaker = split_lines(keys, parts, groups)
    assert [sorted({int(groups[i][1:]) for i in part}) for part in by_speaker] == speakers
    assert [len(part) for part in split_lines(keys, parts)] == sizes


def test_split_scp_refuses_more_parts_than_speakers(librispeech_dir, tmp_path):
    n_speakers = len(keys(librispeech_dir / "spk2utt"))
    outs = [tmp_path / f"p{i}" for i in range(n_speakers + 1)]
    out = run_tool(UTILS / "split_scp.py", "--utt2spk", librispeech_dir / "utt2spk", librispeech_dir / "wav.scp", *outs)
    assert out.returncode == 1 and f"cannot split {n_speakers} speakers" in out.stderr


@pytest.mark.parametrize("how,expected", [("--first", [0, 1, 2]), ("--last", [5, 6, 7]), (None, [3, 5, 7])])
def test_subset_first_last_spread(librispeech_dir, tmp_path, how, expected):
    dest = tmp_path / "subset"
    run_tool(UTILS / "subset_data_dir.sh", *([how] if how else []), librispeech_dir, "3", dest, check=True)
    all_utts = keys(librispeech_dir / "utt2spk")
    assert keys(dest / "utt2spk") == [all_utts[i] for i in expected]
    assert keys(dest / "wav.scp") == keys(dest / "text") == keys(dest / "utt2dur") == keys(dest / "utt2spk")
    assert_valid(dest)


def test_subset_random_is_seeded_and_valid(librispeech_dir, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    run_tool(UTILS / "subset_data_dir.sh", "--random", "--seed", "3", librispeech_dir, "4", a, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--random", "--seed", "3", librispeech_dir, "4", b, check=True)
    assert (a / "utt2spk").read_text() == (b / "utt2spk").read_text()
    assert len(keys(a / "utt2spk")) == 4
    assert_valid(a)


def test_subset_by_speaker_list_and_too_many(librispeech_dir, tmp_path):
    speakers = keys(librispeech_dir / "spk2utt")[:2]
    lst = tmp_path / "spk.list"
    lst.write_text("\n".join(speakers) + "\n")
    dest = tmp_path / "by_spk"
    run_tool(UTILS / "subset_data_dir.sh", "--spk-list", lst, librispeech_dir, dest, check=True)
    assert keys(dest / "spk2utt") == speakers
    assert_valid(dest)
    out = run_tool(UTILS / "subset_data_dir.sh", librispeech_dir, "9", tmp_path / "x")
    assert out.returncode == 1 and "only 8" in out.stderr


def test_combine_data_and_duplicate_keys(librispeech_dir, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    run_tool(UTILS / "subset_data_dir.sh", "--first", librispeech_dir, "3", first, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--last", librispeech_dir, "5", second, check=True)
    combined = tmp_path / "combined"
    out = run_tool(UTILS / "combine_data.sh", combined, first, second)
    assert out.returncode == 0, out.stderr
    for name in ("wav.scp", "text", "utt2spk", "spk2utt", "utt2dur"):
        assert (combined / name).read_text() == (librispeech_dir / name).read_text(), name
    dup = run_tool(UTILS / "combine_data.sh", tmp_path / "dup", first, librispeech_dir)
    assert dup.returncode == 1 and "also in" in dup.stderr and "utt2spk" in dup.stderr


def test_combine_leaves_out_files_not_in_every_source(librispeech_dir, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    run_tool(UTILS / "subset_data_dir.sh", "--first", librispeech_dir, "4", first, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--last", librispeech_dir, "4", second, check=True)
    (second / "utt2dur").unlink()
    out = run_tool(UTILS / "combine_data.sh", tmp_path / "c", first, second)
    assert out.returncode == 0 and "utt2dur is not in every source" in out.stderr
    assert not (tmp_path / "c" / "utt2dur").exists()
    assert_valid(tmp_path / "c")


@pytest.mark.parametrize("tool", sorted(p.name for p in UTILS.iterdir() if os.access(p, os.X_OK)))
def test_every_tool_has_help(tool):
    out = run_tool(UTILS / tool, "--help")
    assert out.returncode == 0 and "usage" in out.stdout.lower(), out.stderr


def test_combine_keeps_segments_when_only_some_sources_have_them(librispeech_dir, tmp_path):
    """As Kaldi: a source without segments contributes one whole-recording segment per utterance."""
    first, second = tmp_path / "first", tmp_path / "second"
    run_tool(UTILS / "subset_data_dir.sh", "--first", librispeech_dir, "3", first, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--last", librispeech_dir, "5", second, check=True)
    durations = dict(line.split() for line in (first / "utt2dur").read_text().splitlines())
    (first / "segments").write_text("".join(f"{u} {u} 0.50 {float(d) - 0.5:.2f}\n"
                                            for u, d in sorted(durations.items())))
    out = run_tool(UTILS / "combine_data.sh", tmp_path / "c", first, second)
    assert out.returncode == 0, out.stderr
    segments = dict(line.split(maxsplit=1) for line in (tmp_path / "c" / "segments").read_text().splitlines())
    assert len(segments) == 8
    for utt in (line.split()[0] for line in (second / "utt2spk").read_text().splitlines()):
        assert segments[utt] == f"{utt} 0 -1"
    assert segments[sorted(durations)[0]].split()[:2] == [sorted(durations)[0], "0.50"]
    assert_valid(tmp_path / "c")
