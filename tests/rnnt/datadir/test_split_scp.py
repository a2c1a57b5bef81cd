"""rnnt.datadir.split_scp (utils/split_scp.py) makes the parts Kaldi's split_scp.pl makes: contiguous parts, the
first ones a line longer, of real tables and by hand; with --utt2spk whole speakers, balanced by moving a part's
edge speaker while that brings two neighbours closer; every line once, raw (tabs kept, CR dropped); too many parts,
an empty table, an utterance without a speaker and a missing file refused with the file named."""

import pytest

from conftest import UTILS, keys, run_tool
from rnnt.datadir.split_scp import balance_speakers, main, moving_helps, split_lines


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
    unwritable = run_tool(UTILS / "split_scp.py", librispeech_dir / "wav.scp", tmp_path / "a", tmp_path / "no" / "b")
    assert unwritable.returncode == 1 and "Traceback" not in unwritable.stderr
    assert unwritable.stderr.startswith("split_scp.py: ") and f"{tmp_path}/no/b" in unwritable.stderr


def test_split_lines_by_hand():
    eight = [f"u{i}" for i in range(8)]
    assert split_lines(eight, 1) == [list(range(8))]
    assert split_lines(eight, 3) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert split_lines(eight, 5) == [[0, 1], [2, 3], [4, 5], [6], [7]]
    assert split_lines(eight, 8) == [[i] for i in range(8)]
    with pytest.raises(ValueError, match=r"^cannot split 8 lines into 9 non-empty parts$"):
        split_lines(eight, 9)
    with pytest.raises(ValueError, match=r"^cannot split 0 lines into 1 non-empty parts$"):
        split_lines([], 1)


@pytest.mark.parametrize("n_parts,sizes", [
    (2, [1250, 1250]), (3, [834, 833, 833]), (7, [358] + [357] * 6), (16, [157] * 4 + [156] * 12)])
def test_split_lines_of_real_utt2spk_by_utterance(speechocean_dir, n_parts, sizes):
    utts = keys(speechocean_dir / "utt2spk")
    parts = split_lines(utts, n_parts)
    assert [len(part) for part in parts] == sizes
    assert [i for part in parts for i in part] == list(range(len(utts)))  # contiguous, in order, each once


@pytest.mark.parametrize("n_parts", [2, 3, 7, 8, 16, 125])
def test_split_lines_of_real_utt2spk_by_speaker(speechocean_dir, n_parts):
    rows = [line.split() for line in (speechocean_dir / "utt2spk").read_text().splitlines()]
    parts = split_lines([u for u, _ in rows], n_parts, [s for _, s in rows])
    assert [i for part in parts for i in part] == list(range(2500))  # sorted by speaker already: order kept
    speakers = [{rows[i][1] for i in part} for part in parts]
    assert sum(len(s) for s in speakers) == 125  # no speaker in two parts
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 20  # within one speaker's 20 utterances
    if n_parts == 3:  # speaker j to part j * 3 // 125: 42, 42 and 41 speakers, and no move brings two closer
        assert sizes == [840, 840, 820]


def test_balance_speakers_gathers_a_speakers_scattered_lines():
    # a has lines 0 and 2: a and b start in part 0 (3 lines against 1), then b moves to part 1
    assert balance_speakers(["a", "b", "a", "c"], 2) == [[0, 2], [1, 3]]
    with pytest.raises(ValueError, match="^cannot split 3 speakers into 4 non-empty parts$"):
        balance_speakers(["a", "b", "a", "c"], 4)


@pytest.mark.parametrize("source,dest,count,helps", [
    (5, 3, 1, True), (5, 3, 2, False), (4, 4, 1, False), (10, 0, 4, True), (10, 0, 10, False), (0, 5, 1, False)])
def test_moving_helps(source, dest, count, helps):
    assert moving_helps(source, dest, count) is helps


def test_tool_writes_the_raw_lines(speechocean_dir, tmp_path):
    wav = speechocean_dir / "wav.scp"  # tab-separated
    original = wav.read_text()
    lines = original.splitlines(keepends=True)
    wav.write_text(original.replace("\n", "\r\n", 3).replace("\n", "\n\n", 5))  # CRs and blank lines
    outs = [tmp_path / f"wav.{i}.scp" for i in range(4)]
    assert main([str(wav), *map(str, outs)]) == 0
    assert [o.read_text() for o in outs] == ["".join(lines[i * 625:(i + 1) * 625]) for i in range(4)]


def test_tool_by_speaker_on_real_data(speechocean_dir, tmp_path):
    outs = [tmp_path / f"text.{i}" for i in range(3)]
    text = speechocean_dir / "text"
    assert main(["--utt2spk", str(speechocean_dir / "utt2spk"), str(text), *map(str, outs)]) == 0
    lines = text.read_text().splitlines(keepends=True)
    assert [o.read_text() for o in outs] == ["".join(lines[:840]), "".join(lines[840:1680]), "".join(lines[1680:])]


def test_tool_names_an_utterance_without_a_speaker(speechocean_dir, tmp_path, capsys):
    utt2spk = speechocean_dir / "utt2spk"
    lines = utt2spk.read_text().splitlines(keepends=True)
    utt2spk.write_text("".join(lines[:10] + lines[11:]))  # text line 11's utterance has no speaker now
    text = speechocean_dir / "text"
    assert main(["--utt2spk", str(utt2spk), str(text), str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert capsys.readouterr().err == \
        f"split_scp.py: {text}:11: utterance '{lines[10].split()[0]}' is not in {utt2spk}\n"
    assert not (tmp_path / "a").exists()


def test_tool_refuses_a_speaker_of_more_than_one_word(tmp_path, capsys):
    """Kaldi's dies on 'u1 s1 extra' ('Bad line'): the rest of the line was taken as the speaker, another than u3's
    s1, and s1's utterances split over the parts."""
    (tmp_path / "utt2spk").write_text("u1 s1 extra\nu2 s2\nu3 s1\n")
    (tmp_path / "scp").write_text("u1 a\nu2 b\nu3 c\n")
    assert main(["--utt2spk", str(tmp_path / "utt2spk"), str(tmp_path / "scp"), str(tmp_path / "a"),
                 str(tmp_path / "b")]) == 1
    assert capsys.readouterr().err == f"split_scp.py: {tmp_path}/utt2spk:1: not '<utterance> <speaker>': " \
        "'u1 s1 extra'\n"
    assert not (tmp_path / "a").exists()


def test_tool_refuses_an_empty_table_and_too_many_parts(tmp_path, capsys):
    # Kaldi's split_scp.pl warns about an empty table and writes empty parts; here it is an error
    (tmp_path / "empty").write_text("\n")
    assert main([str(tmp_path / "empty"), str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert capsys.readouterr().err == f"split_scp.py: {tmp_path / 'empty'}: cannot split 0 lines into 2 non-empty " \
                                      "parts\n"
    (tmp_path / "two").write_text("u1 a\nu2 b\n")
    assert main([str(tmp_path / "two"), *(str(tmp_path / p) for p in "abc")]) == 1
    assert capsys.readouterr().err == f"split_scp.py: {tmp_path / 'two'}: cannot split 2 lines into 3 non-empty " \
                                      "parts\n"
    assert not any((tmp_path / p).exists() for p in "abc")


def test_tool_names_a_missing_file(speechocean_dir, tmp_path):
    for args in ([tmp_path / "absent"], ["--utt2spk", tmp_path / "absent", speechocean_dir / "text"]):
        out = run_tool(UTILS / "split_scp.py", *args, tmp_path / "a")
        assert out.returncode == 1
        assert out.stderr == f"split_scp.py: {tmp_path / 'absent'}: No such file or directory\n"


@pytest.mark.parametrize("n_jobs", [1, 3, 7])
def test_one_part_of_n_is_that_part_of_the_full_split(speechocean_dir, tmp_path, n_jobs):
    """-j N K writes what the full split writes to its K-th output (checked against Kaldi's split_scp.pl -j,
    with and without --utt2spk and --one-based), to a file or to standard output."""
    utt2spk = speechocean_dir / "utt2spk"
    for by_speaker in ([], ["--utt2spk", str(utt2spk)]):
        outs = [tmp_path / f"all{i}" for i in range(n_jobs)]
        assert main([*by_speaker, str(speechocean_dir / "text"), *map(str, outs)]) == 0
        for job in range(n_jobs):
            text, one = str(speechocean_dir / "text"), str(tmp_path / "one")
            assert main(["-j", str(n_jobs), str(job), *by_speaker, text, one]) == 0
            assert (tmp_path / "one").read_bytes() == outs[job].read_bytes()
            out = run_tool(UTILS / "split_scp.py", "-j", n_jobs, job + 1, "--one-based", *by_speaker,
                           speechocean_dir / "text")
            assert out.returncode == 0 and out.stdout.encode() == outs[job].read_bytes()


@pytest.mark.parametrize("args,message", [
    (["-j", "3", "3"], "-j 3 3: the part must be 0 to 2"),
    (["-j", "3", "0", "--one-based"], "-j 3 0 --one-based: the part must be 1 to 3"),
    (["-j", "0", "0"], "-j 0 0: the number of parts must be 1 or more"),
    (["-j", "2", "0", "IN", "a", "b"], "with -j, one output at most"),
    ([], "give at least one output (or -j N K)"),
])
def test_part_numbers_are_checked(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*args, "IN"] if "IN" not in args else args)
    assert exit_.value.code == 2 and capsys.readouterr().err.endswith(f"error: {message}\n")
