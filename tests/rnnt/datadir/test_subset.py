"""rnnt.datadir.subset (utils/subset_data_dir.sh): spread picks what Kaldi's subset_scp.pl picks (by hand, and its
halving rule checked over many sizes); choose takes the first, last, evenly spread or seeded random N of the real
speechocean762 dir and refuses a negative N or more than the dir has; --per-spk, --shortest and --speakers pick
what Kaldi's options pick (the first two checked against Kaldi's script by hand-worked lists); the tool keeps every
file to the chosen utterances, their speakers (--spk-list) and, with segments, their recordings, keeps stm to
those recordings and copies frame_shift, and the dir stays valid."""

import pytest

from conftest import UTILS, assert_valid, keys, run_tool
from rnnt.datadir.layout import load_dir
from rnnt.datadir.subset import choose, kaldi_shuffle, main, per_speaker, random_speakers, spread


@pytest.mark.parametrize("how,expected", [("--first", [0, 1, 2]), ("--last", [5, 6, 7]), (None, [3, 5, 7])])
def test_subset_first_last_spread(librispeech_dir, tmp_path, how, expected):
    dest = tmp_path / "subset"
    run_tool(UTILS / "subset_data_dir.sh", *([how] if how else []), librispeech_dir, "3", dest, check=True)
    all_utts = keys(librispeech_dir / "utt2spk")
    assert keys(dest / "utt2spk") == [all_utts[i] for i in expected]
    assert keys(dest / "wav.scp") == keys(dest / "text") == keys(dest / "utt2dur") == keys(dest / "utt2spk")
    assert_valid(dest)


def test_a_subset_written_over_an_earlier_one_keeps_none_of_its_files(librispeech_dir, tmp_path):
    """The second subset's source has no utt2dur: the first one's, left in dest, named utterances the new dir
    has not (the validator refused it, fix_data_dir would have dropped the real ones)."""
    dest, plain = tmp_path / "subset", tmp_path / "plain"
    run_tool(UTILS / "copy_data_dir.sh", librispeech_dir, plain, check=True)
    (plain / "utt2dur").unlink()
    run_tool(UTILS / "subset_data_dir.sh", "--first", librispeech_dir, "2", dest, check=True)
    assert (dest / "utt2dur").is_file()
    run_tool(UTILS / "subset_data_dir.sh", "--last", plain, "2", dest, check=True)
    assert not (dest / "utt2dur").exists() and keys(dest / "utt2spk") == keys(plain / "utt2spk")[-2:]
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


@pytest.mark.parametrize("end,n,expected", [
    # worked by Kaldi's rule: halve the range (first half the smaller), the first half gets n // 2
    (8, 3, [3, 5, 7]), (5, 2, [1, 4]), (7, 3, [2, 4, 6]), (8, 8, list(range(8))), (8, 0, []), (1, 1, [0]),
    (10, 4, [1, 4, 6, 9]),
])
def test_spread_by_hand(end, n, expected):
    assert spread(0, end, n) == expected


def test_spread_follows_the_halving_rule_for_every_size():
    for size in range(1, 41):
        for n in range(size + 1):
            picks = spread(0, size, n)
            assert len(picks) == n and picks == sorted(set(picks)) and all(0 <= i < size for i in picks)
            assert [i + 100 for i in picks] == spread(100, 100 + size, n)  # only the length of the range counts
            if size > 1:
                half = size // 2
                assert picks == spread(0, half, n // 2) + [half + i for i in spread(0, size - half, n - n // 2)]


@pytest.fixture
def utts(speechocean_dir) -> list[str]:
    return keys(speechocean_dir / "utt2spk")


def test_choose_first_last_and_spread_of_real_utterances(utts):
    assert choose(utts, 10, "first") == utts[:10]
    assert choose(utts, 10, "last") == utts[-10:]
    spread_out = choose(utts, 100, "spread")
    assert spread_out == [utts[i] for i in spread(0, 2500, 100)]
    assert len(spread_out) == 100 and spread_out[-1] == utts[-1]  # the last of each range, the last included
    speakers = {u[:5] for u in spread_out}  # utterance ids start with 0 + the 4-digit speaker
    assert len(speakers) >= 90  # spread over the dir, unlike the first 100 (5 speakers)
    assert len({u[:5] for u in choose(utts, 100, "first")}) == 5
    for how in ("first", "last", "random", "spread"):
        one = choose(utts, 1, how)  # the fewest: 0 is refused, as Kaldi's subset_data_dir.sh refuses it
        assert len(one) == 1 and (how == "random" or one == [utts[0 if how == "first" else -1]])
        assert choose(utts, 2500, how) == utts


def test_choose_random_is_seeded_sorted_and_distinct(utts):
    a = choose(utts, 50, "random", seed=3)
    assert a == choose(utts, 50, "random", seed=3)
    assert a == sorted(set(a)) and set(a) <= set(utts) and len(a) == 50
    assert a != choose(utts, 50, "random", seed=4)


@pytest.mark.parametrize("n,message", [
    (2501, "asked for 2501 utterances but the dir has only 2500"),
    (-1, "asked for -1 utterances; the number must be 1 or more (as Kaldi's)"),
    (0, "asked for 0 utterances; the number must be 1 or more (as Kaldi's)"),
])
def test_choose_refuses_impossible_counts(utts, n, message):
    for how in ("first", "last", "random", "spread"):
        with pytest.raises(ValueError) as error:
            choose(utts, n, how)
        assert str(error.value) == message


def test_tool_by_utterance_list_keeps_each_file_to_them(speechocean_dir, tmp_path, capsys):
    utts = keys(speechocean_dir / "utt2spk")
    wanted = [utts[1999], utts[5], utts[6], "no-such-utterance"]
    (tmp_path / "list").write_text("\n".join(wanted) + "\n")
    dest = tmp_path / "dest"
    assert main(["--utt-list", str(tmp_path / "list"), str(speechocean_dir), str(dest)]) == 0
    out, err = capsys.readouterr()
    assert out == f"subset_data_dir.sh: wrote 3 of 2500 utterances from {speechocean_dir} to {dest}\n"
    assert err == (f"subset_data_dir.sh: 1 ids of {tmp_path / 'list'} are not among the utterances of "
                   f"{speechocean_dir}: no-such-utterance\n")  # named, not a smaller subset in silence
    kept = sorted(wanted[:3])
    source = load_dir(str(speechocean_dir))
    result = load_dir(str(dest))
    for name in ("utt2spk", "text", "wav.scp"):
        assert result[name] == {u: source[name][u] for u in kept}, name
    speakers = sorted({source["utt2spk"][u] for u in kept})
    assert result["spk2gender"] == {s: source["spk2gender"][s] for s in speakers}
    assert (dest / "spk2utt").read_text() == f"0001 {utts[5]} {utts[6]}\n{speakers[1]} {utts[1999]}\n"
    assert not (dest / "spk2age").exists()  # not a file Kaldi's data dirs know
    assert_valid(dest)


def test_tool_by_speaker_list_keeps_whole_speakers(speechocean_dir, tmp_path):
    speakers = keys(speechocean_dir / "spk2gender")[10:13]
    (tmp_path / "list").write_text("".join(f"{s} ignored\n" for s in speakers))
    dest = tmp_path / "dest"
    assert main(["--spk-list", str(tmp_path / "list"), str(speechocean_dir), str(dest)]) == 0
    utt2spk = (speechocean_dir / "utt2spk").read_text().splitlines(keepends=True)
    assert (dest / "utt2spk").read_text() == "".join(line for line in utt2spk if line.split()[1] in speakers)
    assert keys(dest / "spk2utt") == keys(dest / "spk2gender") == speakers
    assert len(keys(dest / "text")) == 60


def test_tool_with_segments_keeps_the_recordings_of_the_chosen_segments(librispeech_dir, tmp_path):
    # each LibriSpeech recording cut into two segments, keyed <recording>-a and <recording>-b
    recordings = keys(librispeech_dir / "wav.scp")
    d = tmp_path / "segmented"
    d.mkdir()
    speaker = dict(line.split() for line in (librispeech_dir / "utt2spk").read_text().splitlines())
    segs = [(f"{r}-{half}", r) for r in recordings for half in "ab"]
    (d / "segments").write_text("".join(f"{u} {r} {'0 1.5' if u.endswith('a') else '1.5 3'}\n" for u, r in segs))
    (d / "utt2spk").write_text("".join(f"{u} {speaker[r]}\n" for u, r in segs))
    (d / "text").write_text("".join(f"{u} WORD\n" for u, _ in segs))
    (d / "wav.scp").write_text((librispeech_dir / "wav.scp").read_text())
    dest = tmp_path / "dest"
    assert main(["--first", str(d), "3", str(dest)]) == 0
    assert keys(dest / "segments") == [f"{recordings[0]}-a", f"{recordings[0]}-b", f"{recordings[1]}-a"]
    assert keys(dest / "wav.scp") == recordings[:2]
    assert_valid(dest)


@pytest.mark.parametrize("args,message", [
    (["{src}", "-2", "{dest}"], "subset_data_dir.sh: asked for -2 utterances; the number must be 1 or more (as "
                                "Kaldi's)\n"),
    (["--shortest", "{src}", "3", "{dest}"], "subset_data_dir.sh: --shortest needs utt2num_frames or utt2dur in "
                                             "the source dir\n"),
    (["--first", "{src}", "2501", "{dest}"], "subset_data_dir.sh: asked for 2501 utterances but the dir has only "
                                             "2500\n"),
    (["--utt-list", "{tmp}/absent", "{src}", "{dest}"],
     "subset_data_dir.sh: {tmp}/absent: No such file or directory\n"),
    (["{tmp}", "3", "{dest}"], "subset_data_dir.sh: {tmp}/utt2spk: missing; every data dir needs utt2spk\n"),
    (["--first", "{src}", "3", "{src}/"], "subset_data_dir.sh: {src}/: the subset must go to another dir than its "
                                          "source {src}\n"),  # which it would have cut to 3 utterances
])
def test_tool_refusals_write_nothing(speechocean_dir, tmp_path, capsys, args, message):
    names = {"src": speechocean_dir, "dest": tmp_path / "dest", "tmp": tmp_path}
    assert main([a.format(**names) for a in args]) == 1
    assert capsys.readouterr().err == message.format(**names)
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("option", ["--utt-list", "--spk-list"])
def test_a_list_that_matches_nothing_writes_nothing_and_fails(speechocean_dir, tmp_path, capsys, option):
    """It wrote an empty dir (which validation refuses) and ended 0, where N=0 is refused."""
    (tmp_path / "ids").write_text("nobody\n")
    assert main([option, str(tmp_path / "ids"), str(speechocean_dir), str(tmp_path / "dest")]) == 1
    err = capsys.readouterr().err
    assert f"none of {speechocean_dir}'s utterances is on {tmp_path / 'ids'}; nothing written" in err
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("how", ["--per-spk", "--speakers"])
def test_per_speaker_and_whole_speakers_refuse_more_than_the_dir_holds(speechocean_dir, tmp_path, capsys, how):
    """As Kaldi's, which compares N with the dir's utterances before any mode (its "cannot subset to more utterances
    than you originally had"); a speaker's share may still be more than the speaker has (--per-spk 2500)."""
    assert main([how, str(speechocean_dir), "2501", str(tmp_path / "dest")]) == 1
    assert capsys.readouterr().err == "subset_data_dir.sh: asked for 2501 utterances but the dir has only 2500\n"
    assert main([how, str(speechocean_dir), "2500", str(tmp_path / "dest")]) == 0
    assert (tmp_path / "dest" / "utt2spk").read_text() == (speechocean_dir / "utt2spk").read_text()


def test_whole_speakers_come_in_the_order_of_kaldis_shuffle_list(tmp_path):
    """perl -e 'srand(0); print rand()' gives 0.17082803610629, 0.749901980484964, 0.0963716556235674, ...:
    shuffle_list.pl sorts the lines by those as strings, so the third line comes first, then the first, then
    the second (checked against Kaldi's own script on this machine)."""
    assert kaldi_shuffle(["a", "b", "c", "d", "e"]) == ["c", "a", "e", "b", "d"]
    spk2utt = {"s1": ["u1", "u2"], "s2": ["u3"], "s3": ["u4", "u5", "u6"]}
    assert random_speakers(spk2utt, 4, 0) == ["u4", "u5", "u6", "u1", "u2"]  # s3 first, then s1 while 3 < 4


def test_tool_argument_counts(speechocean_dir, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["--utt-list", str(tmp_path / "list"), str(speechocean_dir), "3", str(tmp_path / "dest")])
    assert exit_.value.code == 2
    for args in ([str(speechocean_dir), str(tmp_path / "dest")], [str(speechocean_dir), "x", str(tmp_path / "d")],
                 ["--per-spk", "--speakers", str(speechocean_dir), "3", str(tmp_path / "d")]):
        with pytest.raises(SystemExit) as exit_:
            main(args)
        assert exit_.value.code == 2


def test_an_utterance_without_its_segment_is_left_out_and_a_file_in_the_way_is_named(librispeech_dir, tmp_path,
                                                                                      capsys):
    d = librispeech_dir
    recordings = keys(d / "wav.scp")
    (d / "segments").write_text("".join(f"{r} {r} 0 1.5\n" for r in recordings[1:]))  # the first has none
    assert main(["--first", str(d), "3", str(tmp_path / "dest")]) == 0
    # the first 3 of those it can write (it wrote 2 of the first 3 and said 3)
    assert keys(tmp_path / "dest" / "segments") == recordings[1:4]
    assert keys(tmp_path / "dest" / "wav.scp") == recordings[1:4]
    assert capsys.readouterr().out == (f"subset_data_dir.sh: wrote 3 of {len(recordings)} utterances from {d} to "
                                       f"{tmp_path / 'dest'}; left out 1 not in segments\n")
    assert_valid(tmp_path / "dest")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "wav.scp").write_text("u1 /a.wav\nu2\nu3 /c.wav\n")  # line 2 malformed: dropped, named
    (bad / "text").write_text("u1 A\nu2 B\nu3 C\n")
    (bad / "utt2spk").write_text("u1 u1\nu2 u2\nu3 u3\n")
    assert main([str(bad), "3", str(tmp_path / "sub")]) == 1  # 2 usable (it kept u2 without audio, exit 0, invalid)
    assert main([str(bad), "2", str(tmp_path / "sub")]) == 0
    assert keys(tmp_path / "sub" / "utt2spk") == ["u1", "u3"] and keys(tmp_path / "sub" / "text") == ["u1", "u3"]
    assert_valid(tmp_path / "sub")
    capsys.readouterr()
    (tmp_path / "a_file").write_text("")
    assert main(["--first", str(d), "3", str(tmp_path / "a_file")]) == 1
    assert capsys.readouterr().err.endswith(f"subset_data_dir.sh: {tmp_path}/a_file: exists and is not a directory\n")


def ragged_dir(d, lengths_file: str = "utt2num_frames"):
    """Speakers a, b and c with 5, 2 and 7 utterances; lengths 100 + (i * 37) % 11 in utt order (a-00 and c-04
    tie at 100); an stm with a comment, and a frame_shift."""
    d.mkdir()
    utts = [f"{s}-{i:02d}" for s, k in (("a", 5), ("b", 2), ("c", 7)) for i in range(k)]
    (d / "utt2spk").write_text("".join(f"{u} {u[0]}\n" for u in utts))
    (d / "wav.scp").write_text("".join(f"{u} /audio/{u}.wav\n" for u in utts))
    (d / "text").write_text("".join(f"{u} HELLO\n" for u in utts))
    (d / lengths_file).write_text("".join(f"{u} {100 + i * 37 % 11}\n" for i, u in enumerate(utts)))
    (d / "stm").write_text(";; CATEGORY \"0\" \"\" \"\"\n" + "".join(f"{u} A {u[0]} 0 1 HELLO\n" for u in utts))
    (d / "frame_shift").write_text("0.01\n")
    return d


@pytest.mark.parametrize("n,expected", [
    # Kaldi's --per-spk awk: skip = max(1, k // n), every skip-th utterance from the first, n at most
    (1, "a-00 b-00 c-00"), (2, "a-00 a-02 b-00 b-01 c-00 c-03"), (3, "a-00 a-01 a-02 b-00 b-01 c-00 c-02 c-04"),
    (6, "a-00 a-01 a-02 a-03 a-04 b-00 b-01 c-00 c-01 c-02 c-03 c-04 c-05"),
])
def test_per_speaker_picks_what_kaldis_per_spk_picks(tmp_path, n, expected):
    src = ragged_dir(tmp_path / "src")
    assert main(["--per-spk", str(src), str(n), str(tmp_path / "dest")]) == 0
    assert keys(tmp_path / "dest" / "utt2spk") == expected.split()
    stm = (tmp_path / "dest" / "stm").read_text().splitlines()
    assert stm[0].startswith(";;") and [line.split()[0] for line in stm[1:]] == expected.split()
    assert (tmp_path / "dest" / "frame_shift").read_text() == "0.01\n"
    assert_valid(tmp_path / "dest")


def test_per_speaker_spreads_each_real_speaker(speechocean_dir):
    spk2utt = {line.split()[0]: line.split()[1:] for line in (speechocean_dir / "spk2utt").read_text().splitlines()}
    for n, picks in ((3, [0, 6, 12]), (7, [0, 2, 4, 6, 8, 10, 12]), (20, list(range(20))), (30, list(range(20)))):
        assert per_speaker(spk2utt, n) == [utts[i] for utts in spk2utt.values() for i in picks]


@pytest.mark.parametrize("lengths_file", ["utt2num_frames", "utt2dur"])
def test_shortest_sorts_by_length_then_id(tmp_path, lengths_file):
    src = ragged_dir(tmp_path / "src", lengths_file)
    for n, expected in ((1, "a-00"), (4, "a-00 a-03 b-01 c-04"), (6, "a-00 a-01 a-03 b-01 c-02 c-04")):
        dest = tmp_path / f"dest{n}"
        assert main(["--shortest", str(src), str(n), str(dest)]) == 0
        assert keys(dest / "utt2spk") == expected.split()  # as Kaldi's --shortest gives (a-01 beats c-05 at 104)


def test_shortest_prefers_frame_counts_and_reads_real_durations(librispeech_dir, tmp_path):
    lines = (librispeech_dir / "utt2dur").read_text().splitlines()
    durations = {u: float(d) for u, d in (line.split() for line in lines)}
    assert main(["--shortest", str(librispeech_dir), "3", str(tmp_path / "dest")]) == 0
    assert set(keys(tmp_path / "dest" / "utt2spk")) == set(sorted(durations, key=durations.get)[:3])
    reverse = {u: 100000 - round(d * 100) for u, d in durations.items()}  # frame counts ordered the other way
    (librispeech_dir / "utt2num_frames").write_text("".join(f"{u} {n}\n" for u, n in sorted(reverse.items())))
    assert main(["--shortest", str(librispeech_dir), "3", str(tmp_path / "dest2")]) == 0
    assert set(keys(tmp_path / "dest2" / "utt2spk")) == set(sorted(durations, key=durations.get)[-3:])


def test_speakers_takes_whole_random_speakers_until_n(speechocean_dir, tmp_path):
    spk2utt = {line.split()[0]: line.split()[1:] for line in (speechocean_dir / "spk2utt").read_text().splitlines()}
    for n in (1, 20, 21, 55, 2500):
        chosen = random_speakers(spk2utt, n, seed=0)
        speakers = list(dict.fromkeys(u[1:5] for u in chosen))  # utterance ids are 0 + speaker + 4 digits
        assert chosen == [u for s in speakers for u in spk2utt[s]]
        assert len(chosen) == 20 * -(-n // 20)  # 20 a speaker: whole speakers until n or more
    assert random_speakers(spk2utt, 60, seed=1) != random_speakers(spk2utt, 60, seed=0)
    assert main(["--speakers", "--seed", "1", str(speechocean_dir), "50", str(tmp_path / "dest")]) == 0
    assert len(keys(tmp_path / "dest" / "spk2utt")) == 3 and len(keys(tmp_path / "dest" / "text")) == 60
    assert_valid(tmp_path / "dest")
