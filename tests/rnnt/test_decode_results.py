"""rnnt.decode_results on LibriSpeech transcripts: where the references come from (the Kaldi text beside
the list, a given text, else the list's own transcripts), and the decode dir written from hypotheses that
miss utterances, add unknown ones or are empty: hyp, ref, recogs, errs and a WER line counted by hand."""

import json

import pytest

from conftest import librispeech_utterances
from rnnt.cli import ToolError
from rnnt.decode_results import reference_texts, write_results
from rnnt.prep.shard_writer import AudioOptions, ShardItem, write_shard


def table(path) -> list[tuple[str, str]]:
    """(key, value) of each line of a Kaldi table file, in file order."""
    return [tuple((line.split(" ", 1) + [""])[:2]) for line in path.read_text().splitlines()]


def test_missing_and_unknown_hypotheses_are_named_and_the_missing_scored_as_deletions(tmp_path, test_data, capsys):
    rows = librispeech_utterances(test_data)[:3]
    refs = {utt: text for utt, _, text in rows}
    (exact, _, exact_text), (changed, _, changed_text), (missing, _, missing_text) = rows
    changed_words = changed_text.split()
    # First word substituted, last word dropped: one substitution and one deletion.
    hyps = {exact: exact_text, changed: " ".join(["XYZZY"] + changed_words[1:-1]), "stray-utt": "HELLO"}
    out = tmp_path / "decode"
    report = write_results(str(out), refs, hyps, "data/test/text", "decode.py")

    err = capsys.readouterr().err.splitlines()
    assert err == ["decode.py: stray-utt has no reference in data/test/text; not scored",
                   f"decode.py: {missing} of data/test/text was not decoded (audio unreadable, see above, or "
                   "shorter than a frame); scored as deleted words"]
    assert table(out / "hyp") == sorted((k, v) for k, v in hyps.items() if k != "stray-utt")
    assert table(out / "ref") == sorted(refs.items())
    words = sum(len(text.split()) for text in refs.values())
    deletions = 1 + len(missing_text.split())
    wer_line = (f"%WER {100 * (1 + deletions) / words:.2f} [ {1 + deletions} / {words}, 0 ins, {deletions} del, "
                "1 sub ] [PARTIAL]")
    assert (out / "wer").read_text() == wer_line + "\n"
    assert report.wer_line == wer_line
    errs = (out / "errs").read_text().splitlines()
    assert errs[:4] == [wer_line, "%SER 66.67 [ 2 / 3 ]", "Scored 3 sentences, 1 not present in hyp.",
                        f"Without a hypothesis (counted as empty): {missing}"]
    assert f"{missing} #csid 0 0 0 {len(missing_text.split())}" in errs  # corr sub ins del
    assert f"{changed} #csid {len(changed_words) - 2} 1 0 1" in errs
    assert f"1   {changed_words[0]} -> XYZZY" in errs
    recogs = (out / "recogs").read_text().splitlines()
    assert len(recogs) == 6
    assert recogs[0] == f"{exact}:\tref={exact_text.split()}" and recogs[1] == f"{exact}:\thyp={exact_text.split()}"
    assert recogs[4:] == [f"{missing}:\tref={missing_text.split()}", f"{missing}:\thyp=[]"]


def test_nothing_decoded_is_refused_and_a_run_before_leaves_no_optional_output(tmp_path, test_data):
    """decode_sherpa_onnx.py scored %WER 100 [PARTIAL] and ended well when nothing could be decoded; decode.py without
    --nbest left the nbest.json of a run before beside its hypotheses (which combine_nbest.py pooled)."""
    rows = librispeech_utterances(test_data)[:2]
    refs = {utt: text for utt, _, text in rows}
    out = tmp_path / "decode"
    with pytest.raises(ToolError, match=f"^no utterance of text could be decoded .*; {out} left as it was$"):
        write_results(str(out), refs, {}, "text", "decode_sherpa_onnx.py")
    assert not out.exists()
    # decoded against another set's text (or an empty one): none of the hypotheses scored, no report of 100%
    for other in ({f"x{key}": text for key, text in refs.items()}, {}):
        with pytest.raises(ToolError, match=f"^none of the 2 utterances decoded \\(the first {min(refs)}\\) has a "
                                            f"reference in text \\({len(other)} references.*; {out} left as it was$"):
            write_results(str(out), other, dict(refs), "text", "decode.py")
    assert not out.exists()
    out.mkdir()
    for name in ("nbest.json", "ctm", "per", "notes.txt"):
        (out / name).write_text("a run before's\n")
    write_results(str(out), refs, dict(refs), "text", "decode.py")
    assert sorted(p.name for p in out.iterdir()) == ["errs", "hyp", "notes.txt", "recogs", "ref", "wer"]


def test_a_complete_decoding_is_not_partial_and_says_nothing(tmp_path, test_data, capsys):
    rows = librispeech_utterances(test_data)[:2]
    refs = {utt: text for utt, _, text in rows}
    report = write_results(str(tmp_path / "a" / "b"), refs, dict(refs), "ref.txt", "decode.py")
    assert capsys.readouterr().err == ""
    words = sum(len(text.split()) for text in refs.values())
    assert (tmp_path / "a" / "b" / "wer").read_text() == f"%WER 0.00 [ 0 / {words}, 0 ins, 0 del, 0 sub ]\n"
    assert report.missing == [] and report.sentence_errors == 0


def test_an_empty_hypothesis_is_decoded_not_missing_and_an_empty_reference_makes_insertions(tmp_path, capsys):
    refs = {"utt1": "YES NO YES", "utt2": ""}
    hyps = {"utt1": "", "utt2": "NO NO"}
    write_results(str(tmp_path), refs, hyps, "text", "decode_sherpa_onnx.py")
    assert capsys.readouterr().err == ""
    assert (tmp_path / "hyp").read_text() == "utt1\nutt2 NO NO\n"
    assert (tmp_path / "ref").read_text() == "utt1 YES NO YES\nutt2\n"
    # 3 deletions + 2 insertions over 3 reference words; nothing is missing, so the line is not [PARTIAL].
    assert (tmp_path / "wer").read_text() == "%WER 166.67 [ 5 / 3, 2 ins, 3 del, 0 sub ]\n"


def raw_list(path, rows) -> str:
    path.write_text("".join(json.dumps({"key": utt, "wav": wav, "txt": text}) + "\n" for utt, wav, text in rows))
    return str(path)


def test_references_come_from_the_text_beside_the_list_first(tmp_path, test_data):
    rows = librispeech_utterances(test_data)[:2]
    data_list = raw_list(tmp_path / "data.list", [(u, w, "TRANSCRIPT IN THE LIST") for u, w, _ in rows])
    (tmp_path / "text").write_text("".join(f"{u} {t}\n" for u, _, t in rows))
    refs, source = reference_texts(data_list, None)
    assert refs == {u: t for u, _, t in rows} and source == str(tmp_path / "text")


def test_a_reference_line_that_is_not_utf8_is_scored_and_named(tmp_path, test_data, capsys):
    """Left out, the rest were scored as if they were all (no [PARTIAL]); its undecodable bytes are errors."""
    rows = librispeech_utterances(test_data)[:2]
    data_list = raw_list(tmp_path / "data.list", rows)
    (tmp_path / "text").write_bytes(f"{rows[0][0]} {rows[0][2]}\n{rows[1][0]} CAF\u00c9 NOIR\n".encode("latin-1"))
    refs, _ = reference_texts(data_list, None)
    assert refs == {rows[0][0]: rows[0][2], rows[1][0]: "CAF\ufffd NOIR"}
    assert f"{tmp_path}/text:2: the reference of {rows[1][0]} is not UTF-8" in capsys.readouterr().err
    report = write_results(str(tmp_path / "out"), refs, {rows[0][0]: rows[0][2], rows[1][0]: "CAFE NOIR"},
                           str(tmp_path / "text"), "decode.py")
    assert report.counts.substitutions == 1 and report.sentences == 2


def test_a_given_text_overrides_the_one_beside_the_list(tmp_path, test_data):
    rows = librispeech_utterances(test_data)[:2]
    data_list = raw_list(tmp_path / "data.list", rows)
    (tmp_path / "text").write_text("".join(f"{u} BESIDE\n" for u, _, _ in rows))
    given = tmp_path / "other_text"
    given.write_text(f"{rows[1][0]} GIVEN TEXT\n")
    refs, source = reference_texts(data_list, str(given))
    assert refs == {rows[1][0]: "GIVEN TEXT"} and source == str(given)
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}/typo: no such file \\(--text"):
        reference_texts(data_list, str(tmp_path / "typo"))  # never the list's own transcripts in its place


def test_without_a_text_file_the_transcripts_of_a_raw_list_are_the_references(tmp_path, test_data):
    rows = librispeech_utterances(test_data)[:3]
    data_list = raw_list(tmp_path / "data.list", rows)
    refs, source = reference_texts(data_list, None)
    assert refs == {u: t for u, _, t in rows} and source == data_list


def test_without_a_text_file_the_transcripts_of_a_shard_list_are_the_references(tmp_path, test_data):
    rows = librispeech_utterances(test_data)[:2]
    shard = tmp_path / "shard-000000.tar"
    write_shard(str(shard), [ShardItem(u, t, w) for u, w, t in rows], AudioOptions())
    (tmp_path / "shards.list").write_text(f"{shard}\n")
    refs, source = reference_texts(str(tmp_path / "shards.list"), None)
    assert refs == {u: t for u, _, t in rows} and source == str(tmp_path / "shards.list")
