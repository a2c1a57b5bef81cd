"""score.py's and a decode dir's reports in Kaldi's layouts, worked by hand from its scripts' rules: the
per-utterance lines of wer_per_utt_details (columns centred, joined by two spaces, #csid as corr sub ins del),
compute-wer's `Scored` line and its --mode for utterances without a hypothesis, and wer_per_spk_details'
per-speaker table (which reads the #csid lines: their order swapped its Ins and Del columns)."""

import sys

import pytest

from conftest import ROOT, librispeech_utterances, run_tool
from rnnt.decode_results import write_results

SCORE = ROOT / "steps" / "score.py"
PER_SPEAKER = """\
SPEAKER         id       #SENT      #WORD       Corr        Sub        Ins        Del        Err      S.Err
s1              raw          2          6          3          0          2          3          5          2
s1              sys          2          6      50.00       0.00      33.33      50.00      83.33     100.00
s2              raw          1          1          1          0          1          0          1          1
s2              sys          1          1     100.00       0.00     100.00       0.00     100.00     100.00
SUM             raw          3          7          4          0          3          3          6          3
SUM             sys          3          7      57.14       0.00      42.86      42.86      85.71     100.00
"""


def write_case(tmp_path):
    (tmp_path / "ref").write_text("u1 a b c d\nu2 x y\nu3 p\n")
    (tmp_path / "hyp").write_text("u1 a c d e f\nu3 p q\n")
    (tmp_path / "utt2spk").write_text("u1 s1\nu2 s1\nu3 s2\n")


def score(tmp_path, *options):
    return run_tool(sys.executable, SCORE, *options, tmp_path / "ref", tmp_path / "hyp")


def test_mode_all_scores_the_missing_as_deletions_in_kaldis_layout(tmp_path):
    write_case(tmp_path)
    out = score(tmp_path, "--utt2spk", tmp_path / "utt2spk", "--per-spk", tmp_path / "per_spk")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:4] == ["%WER 85.71 [ 6 / 7, 3 ins, 3 del, 0 sub ] [PARTIAL]", "%SER 100.00 [ 3 / 3 ]",
                         "Scored 3 sentences, 1 not present in hyp.", "Without a hypothesis (counted as empty): u2"]
    assert ["u1 ref  a   b   c  d  ***  ***",
            "u1 hyp  a  ***  c  d   e    f ",
            "u1 op   C   D   C  C   I    I ",
            "u1 #csid 3 0 2 1"] == lines[lines.index("u1 ref  a   b   c  d  ***  ***"):][:4]
    assert "u2 #csid 0 0 0 2" in lines
    assert (tmp_path / "per_spk").read_text() == PER_SPEAKER


def test_files_given_through_pipes_are_scored_as_files_and_a_stray_hypothesis_named_by_its_line(tmp_path):
    """score.py ref <(cat hyp): the pipe was read once for a binary check and again for its lines, found empty,
    and every word scored deleted (%WER 100 [PARTIAL], exit 0); a named FIFO hung."""
    import subprocess

    write_case(tmp_path)
    with open(tmp_path / "hyp", "a") as f:
        f.write("x9 stray\n")
    files = score(tmp_path)
    piped = subprocess.run(["bash", "-c", f'"{sys.executable}" "{SCORE}" <(cat ref) /dev/stdin < hyp'],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert piped.returncode == files.returncode == 0, piped.stderr
    assert piped.stdout == files.stdout and files.stdout.startswith("%WER 85.71 [ 6 / 7, ")
    assert f"score.py: {tmp_path / 'hyp'}:3: x9 has no reference; ignored" in files.stderr, files.stderr


def test_an_utt2spk_line_without_a_speaker_is_named_and_its_utterance_its_own_speaker(tmp_path):
    """A key alone put its utterance under a speaker named '' in the table, silently."""
    write_case(tmp_path)
    (tmp_path / "utt2spk").write_text("u1 s1\nu2 s1\nu3\n")
    out = score(tmp_path, "--utt2spk", tmp_path / "utt2spk", "--per-spk", tmp_path / "per_spk")
    assert out.returncode == 0 and f"score.py: {tmp_path / 'utt2spk'}:3: not '<utterance> <speaker>'; u3 scored " \
        "as a speaker of its own" in out.stderr, out.stderr
    assert (tmp_path / "per_spk").read_text() == PER_SPEAKER.replace("s2 ", "u3 ")
    assert out.stderr.count("score.py: ") == 1, out.stderr


def test_an_utt2spk_that_lacks_scored_utterances_is_named_and_one_of_none_of_them_refused(tmp_path):
    """Another set's utt2spk (or a partial one) gave a table of one 'speaker' an utterance, exit 0, not a word."""
    write_case(tmp_path)
    (tmp_path / "utt2spk").write_text("u1 s1\nu9 s9\n")
    out = score(tmp_path, "--utt2spk", tmp_path / "utt2spk", "--per-spk", tmp_path / "per_spk")
    assert out.returncode == 0 and out.stderr == (
        f"score.py: {tmp_path / 'utt2spk'}: 2 of the 3 utterances scored are not in it (u2, u3); each is a speaker "
        "of its own in the per-speaker table\n"), out.stderr
    (tmp_path / "utt2spk").write_text("x1 s1\nx2 s2\n")
    out = score(tmp_path, "--utt2spk", tmp_path / "utt2spk", "--per-spk", tmp_path / "per_spk")
    assert out.returncode == 1 and out.stderr.endswith(": is it the utt2spk of these references?\n"), out.stderr


def test_mode_present_leaves_the_missing_out_and_strict_refuses_them(tmp_path):
    write_case(tmp_path)
    out = score(tmp_path, "--mode", "present")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:4] == [
        "%WER 80.00 [ 4 / 5, 3 ins, 1 del, 0 sub ] [PARTIAL]", "%SER 100.00 [ 2 / 2 ]",
        "Scored 2 sentences, 1 not present in hyp.", "Without a hypothesis (left out): u2"]
    assert "u2 #csid" not in out.stdout
    out = score(tmp_path, "--mode", "strict")
    assert out.returncode == 1 and out.stdout == ""
    assert f"{tmp_path / 'hyp'}: 1 of 3 reference utterances have no hypothesis (mode strict): u2" in out.stderr
    (tmp_path / "hyp").write_text("u1 a b c d\nu2 x y\nu3 p\n")
    out = score(tmp_path, "--mode", "strict")
    assert out.returncode == 0 and out.stdout.splitlines()[:3] == [
        "%WER 0.00 [ 0 / 7, 0 ins, 0 del, 0 sub ]", "%SER 0.00 [ 0 / 3 ]", "Scored 3 sentences, 0 not present in hyp."]


def test_per_speaker_options_go_together(tmp_path):
    write_case(tmp_path)
    out = score(tmp_path, "--utt2spk", tmp_path / "utt2spk")
    assert out.returncode == 2 and "--utt2spk and --per-spk go together" in out.stderr


def test_a_decode_dir_has_the_per_speaker_table_of_its_data_dirs_speakers(tmp_path, test_data):
    rows = librispeech_utterances(test_data)[:3]
    data = tmp_path / "data"
    data.mkdir()
    (data / "utt2spk").write_text("".join(f"{utt} {utt.split('-')[0]}\n" for utt, _, _ in rows))
    refs = {utt: text for utt, _, text in rows}
    hyps = {utt: text for utt, _, text in rows[:2]}
    out = tmp_path / "decode"
    write_results(str(out), refs, hyps, str(data / "text"), "decode.py")
    per_spk = (out / "per_spk").read_text().splitlines()
    words = [len(text.split()) for _, _, text in rows]
    assert per_spk[-2].split() == ["SUM", "raw", "3", str(sum(words)), str(sum(words[:2])), "0", "0",
                                   str(words[2]), str(words[2]), "1"]
    (data / "utt2spk").unlink()
    write_results(str(out), refs, hyps, str(data / "text"), "decode.py")
    assert not (out / "per_spk").exists()  # not left from the run before


def test_a_decode_dir_of_a_key_not_utf8_and_a_bad_utt2spk_line_is_written_whole(tmp_path, capsys):
    """A key whose bytes are not UTF-8 (kept, as the references read it) ended write_results in a
    UnicodeEncodeError, the decode dir half written; an utt2spk line of no speaker or two made speakers '' and
    'spkA extra' in per_spk, silently."""
    from rnnt.datadir.table import KEEP_BYTES, read_table

    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_bytes(b"u\xe9 a b\nu2 c\nu3 d\n")
    (data / "utt2spk").write_bytes(b"u\xe9 spk\xe9\nu2\nu3 spkA extra\n")
    refs = {key: line.value for key, line in read_table(str(data / "text"), errors=KEEP_BYTES).items()}
    out = tmp_path / "decode"
    write_results(str(out), refs, {key: "a b" for key in refs}, str(data / "text"), "decode.py")
    assert b"u\xe9:\tref=['a', 'b']\n" in (out / "recogs").read_bytes() and b"u\xe9 ref" in (out / "errs").read_bytes()
    assert (out / "wer").read_text() == "%WER 100.00 [ 4 / 4, 2 ins, 0 del, 2 sub ]\n"
    err = capsys.readouterr().err
    assert f"decode.py: {data / 'utt2spk'}:2: not '<utterance> <speaker>'; u2 scored as a speaker of its own" in err
    assert f"decode.py: {data / 'utt2spk'}:3: not '<utterance> <speaker>'; u3 scored as a speaker of its own" in err
    assert [line.split(b" ")[0] for line in (out / "per_spk").read_bytes().splitlines()[1::2]] == [
        b"spk\xe9", b"u2", b"u3", b"SUM"]


def test_a_reference_of_no_utterance_is_refused(tmp_path):
    """It scored %WER -nan [ 0 / 0 ] with every hypothesis ignored, and ended 0 (files given the wrong way round)."""
    write_case(tmp_path)
    (tmp_path / "ref").write_text("")
    out = score(tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == f"score.py: {tmp_path / 'ref'}: no reference utterance (the reference first, then the " \
                         "hypotheses)\n"


@pytest.mark.parametrize("mode", ["present", "all"])
def test_hypotheses_of_none_of_the_references_or_a_binary_file_are_refused(tmp_path, mode):
    """Another set's hypotheses scored %WER 100 [PARTIAL] with exit 0 but under --mode present, and an audio file's
    bytes as lines of words."""
    write_case(tmp_path)
    (tmp_path / "hyp").write_text("x1 A\n")
    out = score(tmp_path, "--mode", mode)
    assert out.returncode == 1 and f"{tmp_path / 'hyp'}: none of its 1 hypotheses has a reference in " in out.stderr
    (tmp_path / "hyp").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\nmore\n")
    out = score(tmp_path, "--mode", mode)
    assert out.returncode == 1 and f"{tmp_path / 'hyp'}: a binary file (audio?), not a Kaldi text file" in out.stderr
