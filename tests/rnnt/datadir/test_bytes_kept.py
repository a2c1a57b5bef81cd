"""The tools that copy tables keep bytes that are not UTF-8 as Kaldi's keep them (a Latin-1 file name in wav.scp,
written by a tool of another age): subset, fix, combine and copy of a data dir, filter_scp, split_scp (to files
and to standard output) and the speaker-map tools write those bytes back unchanged, sorted in byte order as
LC_ALL=C sorts. Before, each such byte became U+FFFD and the path named no file."""

import subprocess

from conftest import ROOT, UTILS

LATIN1_PATH = b"/audio/caf\xe9.wav"  # 'cafe' with e-acute in Latin-1: not UTF-8
UTF8_PATH = "/audio/ni\u00f1o.wav".encode()


def latin1_dir(d):
    """Utterances u1 (the Latin-1 path), u2 (a UTF-8 path) and u3, one speaker each."""
    d.mkdir()
    (d / "wav.scp").write_bytes(b"u1 " + LATIN1_PATH + b"\nu2 " + UTF8_PATH + b"\nu3 /audio/plain.wav\n")
    (d / "utt2spk").write_bytes(b"u1 s1\nu2 s2\nu3 s3\n")
    (d / "spk2utt").write_bytes(b"s1 u1\ns2 u2\ns3 u3\n")
    (d / "text").write_bytes(b"u1 CAFE\nu2 NINO\nu3 PLAIN\n")
    return d


def run(*argv, stdin: bytes = b"") -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in argv], input=stdin, capture_output=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return out


def test_data_dir_tools_write_the_bytes_back(tmp_path):
    src = latin1_dir(tmp_path / "src")
    run(UTILS / "subset_data_dir.sh", "--first", src, "2", tmp_path / "subset")
    assert (tmp_path / "subset" / "wav.scp").read_bytes() == b"u1 " + LATIN1_PATH + b"\nu2 " + UTF8_PATH + b"\n"
    run(UTILS / "copy_data_dir.sh", "--utt-prefix", "p-", "--spk-prefix", "p-", src, tmp_path / "copy")
    assert (tmp_path / "copy" / "wav.scp").read_bytes().startswith(b"p-u1 " + LATIN1_PATH + b"\n")
    run(UTILS / "combine_data.sh", tmp_path / "combined", tmp_path / "subset", tmp_path / "copy")
    assert (tmp_path / "combined" / "wav.scp").read_bytes().count(LATIN1_PATH) == 2
    (src / "wav.scp").write_bytes(b"u3 /audio/plain.wav\r\nu1 " + LATIN1_PATH + b"\n")  # unsorted, a CR, u2 gone
    run(UTILS / "fix_data_dir.sh", src)
    assert (src / "wav.scp").read_bytes() == b"u1 " + LATIN1_PATH + b"\nu3 /audio/plain.wav\n"


def test_keys_that_are_not_utf8_sort_in_byte_order(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    # keys: 'x' + byte 0xE9 (not UTF-8), 'x' + U+4E2D (UTF-8 E4 B8 AD), 'x~': C order is x~ < x\xe4.. < x\xe9
    (d / "utt2spk").write_bytes(b"x\xe9 s\nx\xe4\xb8\xad s\nx~ s\n")
    run(UTILS / "fix_data_dir.sh", d)
    assert (d / "utt2spk").read_bytes() == b"x~ s\nx\xe4\xb8\xad s\nx\xe9 s\n"


def test_line_tools_pass_the_bytes_through(tmp_path):
    src = latin1_dir(tmp_path / "src")
    (tmp_path / "ids").write_bytes(b"u1\n")
    kept = run(UTILS / "filter_scp.py", tmp_path / "ids", "-", stdin=(src / "wav.scp").read_bytes()).stdout
    assert kept == b"u1 " + LATIN1_PATH + b"\n"
    parts = [tmp_path / "a", tmp_path / "b"]
    run(UTILS / "split_scp.py", src / "wav.scp", *parts)
    assert b"".join(p.read_bytes() for p in parts) == (src / "wav.scp").read_bytes()
    first = run(UTILS / "split_scp.py", "-j", "2", "0", src / "wav.scp").stdout
    assert first == parts[0].read_bytes() == b"u1 " + LATIN1_PATH + b"\nu2 " + UTF8_PATH + b"\n"
    spk2utt = b"sp\xe9 u1 u2\n"
    assert run(UTILS / "spk2utt_to_utt2spk.py", stdin=spk2utt).stdout == b"u1 sp\xe9\nu2 sp\xe9\n"
    assert run(UTILS / "utt2spk_to_spk2utt.py", stdin=b"u1 sp\xe9\nu2 sp\xe9\n").stdout == spk2utt


def test_validation_keeps_keys_apart_and_the_packers_open_the_path_as_its_bytes_name_it(test_data, tmp_path):
    """Two keys that differ in a byte that is not UTF-8 were one key (U+FFFD) to the validator: a duplicate
    Kaldi's does not see, and fix_data_dir could not cure. A Latin-1 file name opens for make_shards (it read
    'no such file'); make_raw_list, whose JSON lines cannot hold it, names it instead of writing another path."""
    import json
    import shutil
    import sys
    import tarfile

    d = tmp_path / "keys"
    d.mkdir()
    (d / "utt2spk").write_bytes(b"a\xe9-1 a\na\xff-1 a\n")
    (d / "spk2utt").write_bytes(b"a a\xe9-1 a\xff-1\n")
    assert run(UTILS / "validate_data_dir.sh", "--no-feats", "--no-text", "--no-wav", d).returncode == 0
    wav = sorted((test_data / "waves_yesno").glob("*.wav"))[0]
    audio = tmp_path / "audio"
    audio.mkdir()
    shutil.copyfile(wav, bytes(audio) + b"/caf\xe9.wav")
    shutil.copyfile(wav, audio / "plain.wav")
    d = tmp_path / "latin1"
    d.mkdir()
    (d / "wav.scp").write_bytes(b"u1 " + bytes(audio) + b"/caf\xe9.wav\nu2 " + bytes(audio) + b"/plain.wav\n")
    (d / "text").write_bytes(b"u1 YES\nu2 NO\n")
    (d / "utt2spk").write_bytes(b"u1 s1\nu2 s2\n")
    (d / "spk2utt").write_bytes(b"s1 u1\ns2 u2\n")
    assert run(UTILS / "validate_data_dir.sh", "--no-feats", d).returncode == 0
    out = run(sys.executable, ROOT / "steps" / "make_shards.py", d, tmp_path / "shards", tmp_path / "shards.list")
    assert b"skipped 0" in out.stdout, out.stderr
    with tarfile.open((tmp_path / "shards.list").read_text().split()[0]) as shard:
        assert shard.extractfile("u1.wav").read() == wav.read_bytes()
    out = run(sys.executable, ROOT / "steps" / "make_raw_list.py", d, tmp_path / "raw.list")
    assert b"u1: its path is not UTF-8" in out.stderr and out.stdout.rstrip().endswith(b"skipped 1")
    assert [json.loads(line)["key"] for line in (tmp_path / "raw.list").read_text().splitlines()] == ["u2"]


def test_a_no_break_space_is_inside_a_key_as_kaldi_reads_it(tmp_path):
    """Kaldi's tools split at ASCII whitespace alone: str.split's cut a key holding a no-break space (U+00A0), so
    filter_scp lost its line, the speaker maps made two utterances of it or refused it, and fix_data_dir dropped
    the segments of a recording so named, all in dirs both validators accept."""
    nbsp = "\u00a0".encode()
    (tmp_path / "scp").write_bytes(b"a" + nbsp + b"b 1\ne 3\n")
    (tmp_path / "ids").write_bytes(b"a" + nbsp + b"b\ne\n")
    assert run(UTILS / "filter_scp.py", tmp_path / "ids", tmp_path / "scp").stdout == (tmp_path / "scp").read_bytes()
    assert run(UTILS / "utt2spk_to_spk2utt.py", stdin=b"a" + nbsp + b"b s1\nc s1\n").stdout == \
        b"s1 a" + nbsp + b"b c\n"
    assert run(UTILS / "spk2utt_to_utt2spk.py", stdin=b"s1 a" + nbsp + b"b c\n").stdout == \
        b"a" + nbsp + b"b s1\nc s1\n"
    d = tmp_path / "d"
    d.mkdir()
    (d / "utt2spk").write_bytes(b"a-1 a\na-2 a\nb-1 b\n")
    (d / "spk2utt").write_bytes(b"a a-1 a-2\nb b-1\n")
    (d / "text").write_bytes(b"a-1 X\na-2 Y\nb-1 Z\n")
    (d / "wav.scp").write_bytes(b"r" + nbsp + b"1 /w/r1.wav\nr2 /w/r2.wav\n")
    (d / "segments").write_bytes(b"a-1 r" + nbsp + b"1 0 1\na-2 r" + nbsp + b"1 1 2\nb-1 r2 0 1\n")
    assert b"kept 3 of 3 utterances" in run(UTILS / "fix_data_dir.sh", d).stdout
    assert run(UTILS / "subset_data_dir.sh", "--first", d, "2", tmp_path / "first2").returncode == 0
    assert (tmp_path / "first2" / "wav.scp").read_bytes() == b"r" + nbsp + b"1 /w/r1.wav\n"
