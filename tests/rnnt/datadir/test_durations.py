"""utils/get_utt2dur.sh (Kaldi's utils/data/get_utt2dur.sh) and steps/import_data_dir.py on real LibriSpeech
audio: durations of files, of piped commands, of Ogg Vorbis (whose header does not count its samples: decoded)
and of segments; a recording that cannot be read named by its wav.scp line, its utterance left out and the rest
kept."""

import os
import sys

import soundfile

import pytest

from conftest import ROOT, UTILS, assert_valid, keys, run_tool


def durations(path) -> dict[str, float]:
    return {key: float(value) for key, value in (line.split() for line in path.read_text().splitlines())}


def with_bad_entries(d, tmp_path) -> dict[str, float]:
    """d's utt2dur removed (returned), its first recording piped through cat, its second as Ogg Vorbis, and an
    utterance 'zz' whose recording is not audio."""
    expected = durations(d / "utt2dur")
    (d / "utt2dur").unlink()
    lines = (d / "wav.scp").read_text().splitlines()
    first, second = lines[0].split(), lines[1].split()
    samples, rate = soundfile.read(second[1], dtype="float32")
    soundfile.write(tmp_path / "vorbis.ogg", samples, rate, format="OGG", subtype="VORBIS")
    lines[0] = f"{first[0]} cat {first[1]} |"
    lines[1] = f"{second[0]} {tmp_path / 'vorbis.ogg'}"
    (tmp_path / "noise.wav").write_bytes(b"RIFF, but not audio")
    (d / "wav.scp").write_text("\n".join(lines + [f"zz {tmp_path / 'noise.wav'}"]) + "\n")
    for name, value in (("text", "A WORD"), ("utt2spk", "zz")):
        with open(d / name, "a") as f:
            f.write(f"zz {value}\n")
    return expected


def test_utt2dur_of_files_pipes_and_headers_without_a_length(librispeech_dir, tmp_path):
    expected = with_bad_entries(librispeech_dir, tmp_path)
    out = run_tool(UTILS / "get_utt2dur.sh", "--nj", "2", librispeech_dir)
    assert out.returncode == 0, out.stderr
    assert durations(librispeech_dir / "utt2dur") == pytest.approx(expected, abs=0.002)  # zz left out
    assert f"get_utt2dur.sh: left out {librispeech_dir}/wav.scp:9: zz: " in out.stderr, out.stderr
    assert out.stdout.startswith(f"get_utt2dur.sh: wrote {librispeech_dir}/utt2dur: 8 utterances, ") and \
        out.stdout.endswith("; 1 of 9 left out (1 entry named above)\n"), out.stdout
    again = run_tool(UTILS / "get_utt2dur.sh", "--cmd", "run.pl", "--frame-shift", "0.01", "--read-entire-file",
                     "true", librispeech_dir)  # as Kaldi's recipes call it (its other options were usage errors):
    assert again.returncode == 0 and again.stdout == out.stdout  # a partial one is made again (kept, zz never measured)
    with open(librispeech_dir / "utt2dur", "a") as f:
        f.write("zz 1.5\n")  # as Kaldi's: one of every utterance is kept
    again = run_tool(UTILS / "get_utt2dur.sh", librispeech_dir)
    assert again.returncode == 0 and "already exists, an utterance a line; kept" in again.stdout
    assert durations(librispeech_dir / "utt2dur") == pytest.approx({**expected, "zz": 1.5}, abs=0.002)


def test_a_file_name_that_is_not_utf8_is_measured_and_a_repeated_key_counted(librispeech_dir, tmp_path):
    """A Latin-1 file name (a real file, which the copying tools keep and make_shards packs) was left out of utt2dur
    (its utterance dropped by import_data_dir.py), and the summary said '0 left out'."""
    expected = durations(librispeech_dir / "utt2dur")
    (librispeech_dir / "utt2dur").unlink()
    lines = (librispeech_dir / "wav.scp").read_bytes().splitlines()
    key, path = lines[0].split()
    latin = os.path.join(os.fsencode(tmp_path), b"caf\xe9.flac")
    with open(path, "rb") as f, open(latin, "wb") as g:
        g.write(f.read())
    lines[0] = key + b" " + latin
    lines.append(lines[1])  # a key twice: the second line left out, and counted
    (librispeech_dir / "wav.scp").write_bytes(b"\n".join(lines) + b"\n")
    out = run_tool(UTILS / "get_utt2dur.sh", librispeech_dir)
    assert out.returncode == 0 and out.stdout.endswith("; 0 of 8 left out (1 entry named above)\n"), out.stdout
    assert f"wav.scp:{len(lines)}: {lines[1].split()[0].decode()}: repeats the key of line 2" in out.stderr
    assert durations(librispeech_dir / "utt2dur") == pytest.approx(expected, abs=0.002)


def test_segments_take_their_times_and_an_end_of_minus_one_its_recording(librispeech_dir):
    (librispeech_dir / "utt2dur").unlink()
    recordings = [line.split() for line in (librispeech_dir / "wav.scp").read_text().splitlines()]
    seconds = soundfile.info(recordings[0][1]).duration
    rec = recordings[0][0]
    (librispeech_dir / "wav.scp").write_text(f"{rec} {recordings[0][1]}\n")
    speaker = "-".join(rec.split("-")[:2])
    segments = {f"{rec}-a": "0.50 1.75", f"{rec}-b": "1.00 -1", f"{rec}-c": f"{seconds + 2:.2f} -1",
                f"{rec}-d": "0.50 0.20", f"{rec}-e": "abc -1",  # d, e: bad times, their recording read for b
                f"{rec}-f": f"1.00 {seconds + 0.3:.2f}", f"{rec}-g": f"1.00 {seconds + 5:.2f}",
                f"{rec}-h": f"{seconds + 1:.2f} {seconds + 2:.2f}"}  # f cut at the end, as extract-segments cuts it;
    (librispeech_dir / "segments").write_text(  # g past it by more than it allows, h after it: left out (they were
        "".join(f"{u} {rec} {t}\n" for u, t in segments.items()))  # written as they came, 1 s of no audio)
    for name, value in (("text", "SOME WORDS"), ("utt2spk", speaker)):
        (librispeech_dir / name).write_text("".join(f"{u} {value}\n" for u in segments))
    out = run_tool(UTILS / "get_utt2dur.sh", librispeech_dir)  # 3 of 8: written, and a failure, as Kaldi's
    assert out.returncode == 1 and "fewer than half the utterances (3 of 8) have a duration" in out.stderr
    assert durations(librispeech_dir / "utt2dur") == pytest.approx(
        {f"{rec}-a": 1.25, f"{rec}-b": seconds - 1.0, f"{rec}-f": seconds - 1.0}, abs=1e-6)
    late, later = (float(f"{seconds + n:.2f}") for n in (2, 1))
    assert f"segments:3: {rec}-c: the segment starts at {late} s, outside the recording's " in out.stderr
    assert f"segments:4: {rec}-d: bad segment times 0.50..0.20" in out.stderr
    past = float(f"{seconds + 5:.2f}")
    assert f"segments:7: {rec}-g: the segment ends at {past} s, more than 0.5 s past the recording's " in out.stderr
    assert f"segments:8: {rec}-h: the segment starts at {later} s, outside the recording's " in out.stderr
    assert f"segments:5: {rec}-e: start 'abc' or end '-1' is not a number" in out.stderr
    (librispeech_dir / "utt2dur").unlink()
    (librispeech_dir / "segments").write_text(f"{rec}-c {rec} {seconds + 2:.2f} -1\n")
    out = run_tool(UTILS / "get_utt2dur.sh", librispeech_dir)  # none measured: no utt2dur a rerun would keep
    assert out.returncode == 1 and not (librispeech_dir / "utt2dur").exists()


def test_segments_alone_give_their_utterances_lengths_as_kaldis_do(tmp_path):
    """Without wav.scp, utt2dur was refused ('wav.scp: no such file'); Kaldi's get_utt2dur.sh takes the segments'
    times, and so now this one, naming a segment that runs to its recording's end, which only the audio knows."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "segments").write_text("a rec 0.5 1.75\nb rec 2 3\nc rec 3 -1\n")
    (d / "utt2spk").write_text("a s\nb s\nc s\n")
    out = run_tool(UTILS / "get_utt2dur.sh", d)
    assert out.returncode == 0 and durations(d / "utt2dur") == {"a": 1.25, "b": 1.0}, out.stderr
    assert f"get_utt2dur.sh: left out {d}/segments:3: c: recording rec not in wav.scp" in out.stderr, out.stderr
    (d / "segments").unlink()
    out = run_tool(UTILS / "get_utt2dur.sh", d)
    assert out.returncode == 1 and "wav.scp: no such file (nor segments)" in out.stderr


def test_utterances_left_out_are_counted_as_utterances_and_fewer_than_half_fail_as_kaldis(librispeech_dir, tmp_path):
    """Five segments of a recording that is not there and one of a file: one message for the recording, and the
    count said '1 left out' and passed, where Kaldi's rule (utt2spk longer than twice utt2dur) fails; utterances of
    utt2spk without a wav.scp line were not counted at all."""
    real = (librispeech_dir / "wav.scp").read_text().split()[1]
    d = tmp_path / "d"
    d.mkdir()
    (d / "wav.scp").write_text(f"gone {tmp_path / 'gone.wav'}\nhere {real}\n")
    (d / "segments").write_text("".join(f"g{i} gone {i} {i + 1}\n" for i in range(5)) + "h here 0 1\n")
    (d / "utt2spk").write_text("".join(f"g{i} s\n" for i in range(5)) + "h s\n")
    out = run_tool(UTILS / "get_utt2dur.sh", d)
    assert out.returncode == 1 and durations(d / "utt2dur") == {"h": 1.0}, out.stderr
    assert out.stdout.endswith("; 5 of 6 left out (1 entry named above)\n"), out.stdout
    assert "fewer than half the utterances (1 of 6) have a duration" in out.stderr
    (d / "segments").unlink()
    (d / "utt2dur").unlink()
    (d / "wav.scp").write_text(f"h {real}\n")
    out = run_tool(UTILS / "get_utt2dur.sh", d)
    assert out.returncode == 1 and out.stdout.endswith("; 5 of 6 left out\n"), out.stdout + out.stderr  # unnamed


def test_a_kaldi_dir_of_your_own_is_copied_in_repaired_measured_and_valid(librispeech_dir, tmp_path):
    """The source untouched; the copy sorted, its unreadable utterance dropped (named by the source's wav.scp line
    and its id: the copy's line was named, of a file sorted and rewritten after), utt2dur measured, valid by Kaldi's
    rules; a dir without text refused by name."""
    expected = with_bad_entries(librispeech_dir, tmp_path)
    for name in "text", "wav.scp":  # unsorted: Kaldi's rules refuse it
        lines = (librispeech_dir / name).read_text().splitlines()
        (librispeech_dir / name).write_text("\n".join(reversed(lines)) + "\n")
    source = {p.name: p.read_bytes() for p in librispeech_dir.iterdir()}
    dest = tmp_path / "data" / "train"
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 0, out.stderr
    assert {p.name: p.read_bytes() for p in librispeech_dir.iterdir()} == source
    assert_valid(dest)
    assert durations(dest / "utt2dur") == pytest.approx(expected, abs=0.002) and keys(dest / "text") == sorted(expected)
    assert f"left out {librispeech_dir}/wav.scp:1: zz: " in out.stderr
    why = "no duration: audio unreadable or a bad segment (named above)"
    assert out.stdout == (f"import_data_dir.py: wrote {dest} from {librispeech_dir}: 8 of 9 utterances, 5 speakers, "
                          f"0.02 h; utt2dur of 8 utterances measured, 1 left out; 1 {why}\n"), out.stdout
    assert (dest / ".backup" / "dropped_utterances").read_text() == f"zz {why}\n"
    noise = tmp_path / "noise.wav"  # 5 of 9 recordings unreadable: named, and fewer than half is refused
    unread = sorted(expected)[:4] + ["zz"]
    lines = (librispeech_dir / "wav.scp").read_text().splitlines()
    readable = [line for line in lines if line.split()[0] not in unread]
    (librispeech_dir / "wav.scp").write_text("".join(f"{utt} {noise}\n" for utt in unread) + "\n".join(readable) + "\n")
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, tmp_path / "none")
    assert out.returncode == 1 and "the recordings of only 4 of its 9 utterances could be read (the others named " \
        "above): fewer than half" in out.stderr, out.stderr
    assert out.stderr.count("import_data_dir.py: left out") == 5
    for name in ("wav.scp", "utt2spk"):  # empty: 'DEST/utt2dur: No such file or directory', or 'only 0 of its 9
        kept = (librispeech_dir / name).read_bytes()  # utterances could be read (the others named above)', none was
        (librispeech_dir / name).write_text("\n")
        out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, tmp_path / "empty")
        assert (out.returncode, out.stderr) == (
            1, f"import_data_dir.py: {librispeech_dir}/{name} is empty: no utterance to import\n")
        (librispeech_dir / name).write_bytes(kept)
    (librispeech_dir / "utt2spk").unlink()  # a traceback's '[Errno 2] No such file' once wav.scp and text were there
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 1 and f"{librispeech_dir}: no utt2spk (each utterance's speaker" in out.stderr
    assert f"awk '{{print $1, $1}}' {librispeech_dir}/text > {librispeech_dir}/utt2spk" in out.stderr, out.stderr
    (librispeech_dir / "text").unlink()
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 1 and "not a data dir with wav.scp and text" in out.stderr


def test_an_utterance_the_copy_leaves_out_is_counted_and_named_as_dropped(librispeech_dir, tmp_path):
    """A malformed utt2spk line (its speaker missing): the copy leaves its utterance out, naming the line; the summary
    said "8 of 8 utterances ... nothing dropped" of a source of 9, and dropped_utterances lacked it."""
    lines = (librispeech_dir / "utt2spk").read_text().splitlines()
    lost = lines[2].split()[0]
    lines[2] = lost  # its key alone
    (librispeech_dir / "utt2spk").write_text("\n".join(lines) + "\n")
    dest = tmp_path / "data" / "train"
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 0, out.stderr
    assert f"{librispeech_dir}/utt2spk:3: dropped, 1 fields" in out.stderr
    assert out.stdout.startswith(f"import_data_dir.py: wrote {dest} from {librispeech_dir}: {len(lines) - 1} of "
                                 f"{len(lines)} utterances"), out.stdout
    assert out.stdout.endswith("; 1 left out of the copy (named above)\n"), out.stdout
    assert lost not in keys(dest / "text")
    assert (dest / ".backup" / "dropped_utterances").read_text() == f"{lost} left out of the copy (named above)\n"


def test_an_empty_transcript_is_kept_and_named_by_its_line_in_the_source(librispeech_dir, tmp_path):
    """Trained as saying nothing, it was kept without a word (the summary and every later stage silent)."""
    lines = (librispeech_dir / "text").read_text().splitlines()
    silent = lines[4].split()[0]
    lines[4] = silent + " "
    (librispeech_dir / "text").write_text("\n".join(reversed(lines)) + "\n")
    dest = tmp_path / "data" / "train"
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 0, out.stderr
    assert f"import_data_dir.py: {librispeech_dir}/text:{len(lines) - 4}: {silent}: an empty transcript; kept, " \
        "trained as saying nothing" in out.stderr, out.stderr
    assert "; 1 with an empty transcript (named above); nothing dropped" in out.stdout, out.stdout
    assert silent in keys(dest / "text")


def test_a_transcript_kaldis_rules_refuse_drops_its_utterance_not_the_import(librispeech_dir, tmp_path):
    """A transcript in Latin-1, or with a NUL: the whole import was refused, the copy's line named."""
    lines = (librispeech_dir / "text").read_bytes().splitlines()
    latin, nul = lines[2].split()[0].decode(), lines[4].split()[0].decode()
    lines[2] += b" CAF\xc9"
    lines[4] += b"\x00"
    (librispeech_dir / "text").write_bytes(b"\n".join(lines) + b"\n")
    dest = tmp_path / "data" / "train"
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 0, out.stderr
    assert f"{librispeech_dir}/text:3: {latin}: non-printable character U+FFFD (invalid UTF-8); dropped" in out.stderr
    assert f"{librispeech_dir}/text:5: {nul}: non-printable character U+0000; dropped" in out.stderr
    assert out.stdout.endswith("; 2 refused by Kaldi's text rules (named above)\n"), out.stdout
    assert latin not in keys(dest / "text") and nul not in keys(dest / "utt2spk")
    assert_valid(dest)


def test_a_source_utt2dur_without_a_duration_of_each_is_measured_again(librispeech_dir, tmp_path):
    """An utt2dur line missing, or one whose value is no duration: their utterances were dropped, the audio good."""
    expected = durations(librispeech_dir / "utt2dur")
    lines = (librispeech_dir / "utt2dur").read_text().splitlines()
    lines[1] = lines[1].split()[0] + " x"
    del lines[3]
    (librispeech_dir / "utt2dur").write_text("\n".join(lines) + "\n")
    wav = (librispeech_dir / "wav.scp").read_text().splitlines()
    unsourced = wav.pop(5).split()[0]  # no audio: dropped as such, not as audio that could not be read
    (librispeech_dir / "wav.scp").write_text("\n".join(wav) + "\n")
    dest = tmp_path / "data" / "train"
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 0, out.stderr
    assert f"{len(expected) - 1} of {len(expected)} utterances" in out.stdout and "no duration" not in out.stdout
    assert durations(dest / "utt2dur") == pytest.approx({k: v for k, v in expected.items() if k != unsourced},
                                                        abs=1e-3)


def test_relative_paths_are_found_from_the_source_dir_or_a_folder_above_it(librispeech_dir, tmp_path):
    """speechocean762's lists name WAVE/... from the corpus root, and a Kaldi recipe's from its s5 folder: from
    the recipe that imports them such paths name nothing (every utterance dropped); each is taken as the file it
    names from the source dir or up to three folders above it."""
    corpus = tmp_path / "corpus"
    source = corpus / "data" / "train"
    source.parent.mkdir(parents=True)
    librispeech_dir.rename(source)
    (corpus / "audio").mkdir()
    lines = []
    for line in (source / "wav.scp").read_text().splitlines():
        utt, path = line.split()
        os.symlink(path, corpus / "audio" / f"{utt}.flac")
        lines.append(f"{utt} audio/{utt}.flac")
    (source / "wav.scp").write_text("\n".join(lines) + "\n")
    dest = tmp_path / "recipe" / "data" / "train"
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", source, dest)
    assert out.returncode == 0, out.stderr
    assert out.stdout.endswith(f"8 of 8 utterances, 5 speakers, 0.02 h; 8 relative paths found under {corpus}; "
                               "nothing dropped\n"), out.stdout
    assert all(line.split()[1] == f"{corpus}/audio/{line.split()[0]}.flac"
               for line in (dest / "wav.scp").read_text().splitlines())
    assert (source / "wav.scp").read_text() == "\n".join(lines) + "\n"


def test_a_segments_duration_is_written_to_the_microsecond():
    """1.2345 was written 1.234, and a segment of 0.4 ms left out, where Kaldi's writes 1.2345 and 0.0004."""
    from rnnt.datadir.durations import seconds_text

    assert [seconds_text(s) for s in (1.2345, 1.0, 0.0004, 3601.25, 1 / 3)] == ["1.2345", "1", "0.0004", "3601.25",
                                                                                 "0.333333"]
    assert seconds_text(4e-7) == "0"


def test_a_dir_kaldis_rules_refuse_to_repair_is_named_as_the_users_not_as_the_copy_left_unchanged(librispeech_dir,
                                                                                                   tmp_path):
    """No utterance with a transcript: refused (Kaldi's fix refuses to leave an empty dir), the user's dir named, not
    the fix's 'nothing changed' of the copy it had just written."""
    lines = (librispeech_dir / "text").read_text().splitlines()
    (librispeech_dir / "text").write_text("".join(f"x{line}\n" for line in lines))
    dest = tmp_path / "data" / "train"
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 1
    assert f"import_data_dir.py: {librispeech_dir}: its copy {dest} cannot be repaired: {dest}: no utterances would " \
        f"remain ({len(lines)} not in text); {librispeech_dir} is as it was" in out.stderr, out.stderr


def test_utterance_ids_their_speakers_do_not_prefix_are_given_them_where_kaldis_order_needs_it(librispeech_dir,
                                                                                                tmp_path):
    """Speakers whose order is not their utterances' (a dir made by hand): refused by Kaldi's fix, with no way
    through. Each id is now prefixed with its speaker's, utt2uniq maps it back, and what is named is named by its
    line in the user's files."""
    expected = with_bad_entries(librispeech_dir, tmp_path)
    lines = (librispeech_dir / "utt2spk").read_text().splitlines()
    speaker = {line.split()[0]: f"s{len(lines) - n}" for n, line in enumerate(lines)}  # s9 ... s1: the other way
    (librispeech_dir / "utt2spk").write_text("".join(f"{utt} {spk}\n" for utt, spk in speaker.items()))
    first = sorted(expected)[0]
    text = (librispeech_dir / "text").read_text().splitlines()
    where = next(n for n, line in enumerate(text, 1) if line.startswith(f"{first} "))
    text[where - 1] = f"{first} "  # an empty transcript, named by its line in the user's text
    (librispeech_dir / "text").write_text("\n".join(text) + "\n")
    dest = tmp_path / "data" / "train"
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 0, out.stderr
    assert_valid(dest)
    assert keys(dest / "text") == sorted(f"{speaker[utt]}-{utt}" for utt in expected)
    assert dict(line.split() for line in (dest / "utt2uniq").read_text().splitlines()) == {
        f"{speaker[utt]}-{utt}": utt for utt in expected}
    assert f"left out {librispeech_dir}/wav.scp:9: s1-zz: " in out.stderr, out.stderr
    assert f"{librispeech_dir}/text:{where}: {speaker[first]}-{first}: an empty transcript" in out.stderr, out.stderr
    assert "; 9 utterance ids prefixed with the speaker's, as Kaldi's order rule wants (utt2uniq maps them back); " \
        in out.stdout, out.stdout


def test_thousands_of_unreadable_recordings_show_twenty_and_all_go_to_a_file(tmp_path):
    """A wav.scp of paths relative to another folder: a line each on the terminal buried the diagnosis after them."""
    src = tmp_path / "src"
    src.mkdir()
    keys = [f"s1-u{i:02d}" for i in range(30)]
    (src / "wav.scp").write_text("".join(f"{key} elsewhere/{key}.wav\n" for key in keys))
    (src / "text").write_text("".join(f"{key} YES\n" for key in keys))
    (src / "utt2spk").write_text("".join(f"{key} s1\n" for key in keys))
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", src, tmp_path / "dest")
    assert out.returncode == 1 and out.stderr.count("import_data_dir.py: left out ") == 21, out.stderr
    listed = tmp_path / "dest" / ".backup" / "unread_audio"
    assert f"left out 10 more, each named in {listed} with the 20 above" in out.stderr
    assert len(listed.read_text().splitlines()) == 30 and "elsewhere/s1-u29.wav" in listed.read_text()
    assert "(the others named above, and in .backup/unread_audio): fewer than half" in out.stderr
    assert "paths relative to another folder?" in out.stderr.splitlines()[-1]


def test_segments_of_a_recording_whose_command_fails_are_named_and_left_out_of_the_import(librispeech_dir):
    """An LDC corpus's segments cut 'sph2pipe -f wav x.sph |' recordings: with sph2pipe missing the import kept
    every utterance, its durations from the segments table, and each stage after skipped them all. get_utt2dur.sh
    takes the table's times as Kaldi's does, not running the commands."""
    recordings = [line.split() for line in (librispeech_dir / "wav.scp").read_text().splitlines()]
    (librispeech_dir / "utt2dur").unlink()
    (librispeech_dir / "wav.scp").write_text(f"good cat {recordings[0][1]} |\n"
                                             f"lost no-such-program-here -f wav {recordings[1][1]} |\n")
    segments = {"s-a": "good 0.5 1.5", "s-b": "good 1.5 2.5", "s-c": "lost 0 1", "s-d": "lost 1 2"}
    (librispeech_dir / "segments").write_text("".join(f"{u} {s}\n" for u, s in segments.items()))
    (librispeech_dir / "text").write_text("".join(f"{u} SOME WORDS\n" for u in segments))
    (librispeech_dir / "utt2spk").write_text("".join(f"{u} s\n" for u in segments))
    (librispeech_dir / "spk2utt").write_text("s s-a s-b s-c s-d\n")
    out = run_tool(UTILS / "get_utt2dur.sh", librispeech_dir)
    assert out.returncode == 0 and durations(librispeech_dir / "utt2dur") == {u: 1.0 for u in segments}
    (librispeech_dir / "utt2dur").unlink()
    dest = librispeech_dir.parent / "imported"
    out = run_tool(sys.executable, ROOT / "steps" / "import_data_dir.py", librispeech_dir, dest)
    assert out.returncode == 0, out.stderr
    assert (f"import_data_dir.py: left out {librispeech_dir}/wav.scp:2: lost: command 'no-such-program-here -f wav "
            f"{recordings[1][1]}' failed (exit 127)") in out.stderr, out.stderr
    assert keys(dest / "text") == ["s-a", "s-b"] and durations(dest / "utt2dur") == {"s-a": 1.0, "s-b": 1.0}
    assert "2 of 4 utterances" in out.stdout and "2 no duration: audio unreadable" in out.stdout, out.stdout
    assert "utt2dur of 2 utterances measured, 2 left out" in out.stdout, out.stdout  # (said: 1, the recording)
