"""local/<corpus>/data_prep.py on the real corpora: valid dirs, Kaldi's splits, bad items skipped by name."""

import shutil
import sys
from pathlib import Path

import numpy as np
import soundfile

from conftest import ROOT, run_tool

VALIDATE = ROOT / "utils" / "validate_data_dir.sh"
DIGITS = ["ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"]


def table(path: Path) -> dict[str, str]:
    return dict(line.split(maxsplit=1) if " " in line else (line, "") for line in path.read_text().splitlines())


def assert_valid(d: Path) -> None:
    out = run_tool(VALIDATE, "--no-feats", d)
    assert out.returncode == 0, out.stderr


def test_yesno_kaldi_split_and_words(test_data, tmp_path):
    out = run_tool(sys.executable, ROOT / "egs" / "yesno" / "local" / "data_prep.py",
                   test_data / "waves_yesno", tmp_path)
    assert out.returncode == 0, out.stderr
    waves = sorted(p.stem for p in (test_data / "waves_yesno").glob("*.wav"))
    train, test = table(tmp_path / "train_yesno" / "text"), table(tmp_path / "test_yesno" / "text")
    assert sorted(train) == [f"yesno-{w}" for w in waves[:30]]
    assert sorted(test) == [f"yesno-{w}" for w in waves[30:]]
    assert train["yesno-0_0_1_0_1_0_0_1"] == "NO NO YES NO YES NO NO YES"
    durations = table(tmp_path / "test_yesno" / "utt2dur")
    assert all(4.9 < float(d) < 6.8 for d in durations.values())  # 4.94 s to 6.74 s
    for split in ("train_yesno", "test_yesno"):
        assert_valid(tmp_path / split)
    assert "wrote" in out.stdout and "30 utterances, 1 speaker, " in out.stdout and "nothing skipped" in out.stdout


def test_yesno_synthesised_sequences_say_their_transcripts(test_data, tmp_path):
    """Random word sequences cut from the training recordings: valid dir, any first word, long runs,
    and audio that holds as many words as its transcript; recordings whose words cannot be found are
    named and counted; the same seed writes the same audio."""
    import itertools

    import soundfile

    sys.path.insert(0, str(ROOT / "egs" / "yesno" / "local"))
    from word_segments import speech_runs

    prep = run_tool(sys.executable, ROOT / "egs" / "yesno" / "local" / "data_prep.py",
                    test_data / "waves_yesno", tmp_path)
    assert prep.returncode == 0, prep.stderr
    synth = ROOT / "egs" / "yesno" / "local" / "synthesize.py"
    out = run_tool(sys.executable, synth, "--num", "60", "--noise-db", "-70", "-50", tmp_path / "train_yesno",
                   tmp_path / "synth")
    assert out.returncode == 0, out.stderr
    d = tmp_path / "synth"
    assert_valid(d)
    text = table(d / "text")
    assert len(text) == 60 and all(utt.startswith("yesno-synth") for utt in text)
    sequences = [t.split() for t in text.values()]
    assert {s[0] for s in sequences} == {"YES", "NO"}  # every training recording starts with NO
    assert max(len(list(run)) for s in sequences for _, run in itertools.groupby(s)) >= 6  # training: 5 at most
    # Recordings whose words merge under the energy detector give only their silences; they are named
    # and counted (4 of the 30 here).
    assert "the words of" in out.stderr and "0_0_1_0_1_0_0_0.wav (7 found, 8 in the transcript)" in out.stderr
    assert "4 words found by energy do not match the transcript (its silences are used)" in out.stdout
    found = 0
    for utt, words in zip(text, sequences):
        audio, rate = soundfile.read(d / "wav" / f"{utt}.wav", dtype="float32")
        assert rate == 8000 and soundfile.info(d / "wav" / f"{utt}.wav").subtype == "PCM_16"
        found += len(speech_runs(audio, rate)) == len(words)
    assert found >= 54, found  # the words are there, apart from a few the detector merges again
    again = run_tool(sys.executable, synth, "--num", "60", "--noise-db", "-70", "-50", tmp_path / "train_yesno",
                     tmp_path / "again")
    assert again.returncode == 0 and table(tmp_path / "again" / "text") == text
    utt = next(iter(text))
    assert (d / "wav" / f"{utt}.wav").read_bytes() == (tmp_path / "again" / "wav" / f"{utt}.wav").read_bytes()


def test_yesno_synthesis_needs_usable_recordings(tmp_path):
    (tmp_path / "src").mkdir()
    for name in ("wav.scp", "text"):
        (tmp_path / "src" / name).write_text("")
    out = run_tool(sys.executable, ROOT / "egs" / "yesno" / "local" / "synthesize.py",
                   tmp_path / "src", tmp_path / "dest")
    assert out.returncode == 1 and "no recording could be cut into words" in out.stderr
    out = run_tool(sys.executable, ROOT / "egs" / "yesno" / "local" / "synthesize.py",
                   tmp_path / "missing", tmp_path / "dest")
    assert out.returncode == 1 and "missing/wav.scp not found" in out.stderr


def test_yesno_synthesis_skips_a_recording_gone_or_not_audio_naming_its_line(test_data, tmp_path):
    """Before, soundfile's traceback on the first such recording, and nothing written."""
    prep = run_tool(sys.executable, ROOT / "egs" / "yesno" / "local" / "data_prep.py",
                    test_data / "waves_yesno", tmp_path)
    assert prep.returncode == 0, prep.stderr
    scp = tmp_path / "train_yesno" / "wav.scp"
    lines = scp.read_text().splitlines()
    (tmp_path / "junk.wav").write_bytes(b"not audio at all")
    lines[1] = f"{lines[1].split()[0]} {tmp_path / 'gone.wav'}"
    lines[2] = f"{lines[2].split()[0]} {tmp_path / 'junk.wav'}"
    scp.write_text("\n".join(lines) + "\n")
    out = run_tool(sys.executable, ROOT / "egs" / "yesno" / "local" / "synthesize.py", "--num", "5",
                   tmp_path / "train_yesno", tmp_path / "synth")
    assert out.returncode == 0, out.stderr
    assert f"{scp}:2: {tmp_path / 'gone.wav'}" in out.stderr and f"{scp}:3: {tmp_path / 'junk.wav'}" in out.stderr
    assert "2 unreadable audio" in out.stdout and len(table(tmp_path / "synth" / "text")) == 5


def test_fsdd_split_by_index(test_data, tmp_path):
    out = run_tool(sys.executable, ROOT / "egs" / "fsdd" / "local" / "data_prep.py",
                   test_data / "fsdd" / "recordings", tmp_path)
    assert out.returncode == 0, out.stderr
    test, dev, train = (table(tmp_path / name / "text") for name in ("test", "dev", "train"))
    assert len(test) == 300 and len(dev) == 180 and len(train) == 2520
    assert all(int(utt.split("-")[2]) <= 4 for utt in test)
    assert all(5 <= int(utt.split("-")[2]) <= 7 for utt in dev)  # every speaker's: dev is of training speakers
    assert test["jackson-7-03"] == "SEVEN"
    assert len(table(tmp_path / "train" / "spk2utt")) == len(table(tmp_path / "dev" / "spk2utt")) == 6
    for name in ("train", "dev", "test"):
        assert_valid(tmp_path / name)


def test_fsdd_given_the_datasets_own_folder_says_to_give_its_recordings(test_data, tmp_path):
    out = run_tool(sys.executable, ROOT / "egs" / "fsdd" / "local" / "data_prep.py", test_data / "fsdd", tmp_path)
    assert out.returncode == 1
    assert out.stderr == (f"data_prep.py: no .wav files in {test_data / 'fsdd'}: give FSDD's recordings/ folder "
                          "({digit}_{speaker}_{index}.wav)\n")


def test_librispeech_speakers_are_reader_chapter_with_gender(test_data, tmp_path):
    subset = test_data / "librispeech_samples" / "LibriSpeech" / "test-clean"
    out = run_tool(sys.executable, ROOT / "egs" / "librispeech" / "local" / "data_prep.py",
                   subset, tmp_path / "test_clean")
    assert out.returncode == 0, out.stderr
    d = tmp_path / "test_clean"
    assert_valid(d)
    assert table(d / "utt2spk")["1089-134686-0000"] == "1089-134686"
    assert table(d / "spk2gender") == {"1089-134686": "m", "1089-134691": "m", "1995-1837": "f"}
    assert table(d / "text")["1089-134691-0000"] == "HE COULD WAIT NO LONGER"
    assert table(d / "wav.scp")["1995-1837-0001"].endswith("test-clean/1995/1837/1995-1837-0001.flac")
    root = subset.parent  # LibriSpeech/ itself: "no usable utterances (nothing skipped)" said nothing of why
    out = run_tool(sys.executable, ROOT / "egs" / "librispeech" / "local" / "data_prep.py", root, tmp_path / "x")
    assert out.returncode == 1 and f"{root} holds subsets (dev-clean, test-clean), not a subset's " \
        f"<reader>/<chapter>/ folders: give one, e.g. {root}/dev-clean" in out.stderr, out.stderr


def test_librispeech_bad_items_are_named_counted_and_skipped(test_data, tmp_path):
    corpus = tmp_path / "LibriSpeech"
    shutil.copytree(test_data / "librispeech_samples" / "LibriSpeech" / "dev-clean", corpus / "dev-clean")
    chapter = corpus / "dev-clean" / "2412" / "153948"
    with open(chapter / "2412-153948.trans.txt", "a") as f:
        f.write("2412-153948-0099 A LINE WITHOUT AUDIO\n2412-153948-0000 A REPEATED ID\n")
    with open(chapter / "2412-153948.trans.txt", "ab") as f:
        f.write("2412-153948-0098 CAF\u00c9 IN LATIN-1\n".encode("latin-1"))  # its transcript would hold U+FFFD
    shutil.copy(chapter / "2412-153948-0000.flac", chapter / "2412-153948-0050.flac")  # audio, no transcript
    (chapter / "2412-153948-0001.flac").write_bytes(b"")  # unreadable audio
    other = next((corpus / "dev-clean").glob("1272/*/1272-141231-0002.flac"))
    samples, _ = soundfile.read(other)  # made 22.05 kHz stereo (its samples as they are: only the header matters)
    soundfile.write(other, np.stack([samples, samples], axis=1), 22050)
    out = run_tool(sys.executable, ROOT / "egs" / "librispeech" / "local" / "data_prep.py",
                   corpus / "dev-clean", tmp_path / "d")
    assert out.returncode == 0, out.stderr
    assert ("audio: 1 at 16000 Hz, 1 at 22050 Hz, 1 with several channels (mixed down to mono when read); training "
            "resamples to its config's data.sample_rate on the fly, every epoch") in out.stdout, out.stdout
    assert "2412-153948.trans.txt:3 (2412-153948-0099): transcript without audio" in out.stderr
    assert "2412-153948-0050.flac: audio without transcript" in out.stderr
    assert (f"{chapter / '2412-153948.trans.txt'}:2 (2412-153948-0001, {chapter / '2412-153948-0001.flac'}): "
            "unreadable or empty audio") in out.stderr  # named by the transcript's line
    assert "2412-153948.trans.txt:4 (2412-153948-0000; first on " in out.stderr
    assert "2412-153948.trans.txt:5: not UTF-8 (re-encode the file as UTF-8)" in out.stderr
    assert ("1 audio without transcript, 1 not UTF-8 (re-encode the file as UTF-8), 1 repeated key (the first kept), 1 "
            "transcript without audio, 1 unreadable or empty audio" in out.stdout)
    assert sorted(table(tmp_path / "d" / "text")) == ["1272-141231-0002", "2412-153948-0000"]
    assert table(tmp_path / "d" / "text")["2412-153948-0000"] != "A REPEATED ID"
    assert_valid(tmp_path / "d")


def test_missing_corpus_dir_is_a_clear_error(tmp_path):
    out = run_tool(sys.executable, ROOT / "egs" / "librispeech" / "local" / "data_prep.py",
                   tmp_path / "nope", tmp_path / "d")
    assert out.returncode == 1 and "nope: no such directory" in out.stderr


def test_fsdd_digit_strings_join_one_speakers_recordings(test_data, tmp_path):
    """Strings of 2-7 digits from the test split: a valid dir; each string's audio holds its digits'
    recordings in order, all of its speaker, with pauses of 50-300 ms and at most 200 ms at either end;
    a transcript that is not one word and audio at another rate are named, counted and skipped; the same
    seed writes the same strings."""
    import numpy as np
    import soundfile

    prep = run_tool(sys.executable, ROOT / "egs" / "fsdd" / "local" / "data_prep.py",
                    test_data / "fsdd" / "recordings", tmp_path)
    assert prep.returncode == 0, prep.stderr
    source = tmp_path / "test"
    text = (source / "text").read_text().replace("jackson-0-00 ZERO", "jackson-0-00 ZERO ONE")
    (source / "text").write_text(text)
    latin1 = len(text.splitlines()) + 1
    with open(source / "text", "ab") as f:  # counted in the summary, not only named
        f.write("theo-0-99 Z\u00c9RO\n".encode("latin-1"))
    wav_scp = (source / "wav.scp").read_text().splitlines()
    resampled = tmp_path / "16k.wav"  # george-0-00 at 16 kHz
    index = next(i for i, line in enumerate(wav_scp) if line.startswith("george-0-00 "))
    soundfile.write(resampled, np.zeros(16000, dtype=np.float32), 16000)
    wav_scp[index] = f"george-0-00 {resampled}"
    (source / "wav.scp").write_text("\n".join(wav_scp) + "\n")
    strings = ROOT / "egs" / "fsdd" / "local" / "digit_strings.py"
    out = run_tool(sys.executable, strings, "--num", "12", source, tmp_path / "strings")
    assert out.returncode == 0, out.stderr
    line = text.splitlines().index("jackson-0-00 ZERO ONE") + 1
    assert f"{source}/text:{line}: not one word" in out.stderr
    assert f"{source}/wav.scp:{index + 1} (16000 Hz" in out.stderr
    assert "1 not mono audio at 8000 Hz" in out.stdout and "1 not one word" in out.stdout
    assert f"{source}/text:{latin1}: byte 0xc9 at column 12 is not UTF-8" in out.stderr
    assert "1 not UTF-8 (re-encode the file as UTF-8)" in out.stdout, out.stdout
    d = tmp_path / "strings"
    assert_valid(d)
    transcripts, speakers = table(d / "text"), table(d / "utt2spk")
    assert len(transcripts) == 12 and len(set(speakers.values())) >= 3
    recordings = {utt: soundfile.read(source_path, dtype="float32")[0]
                  for utt, source_path in table(source / "wav.scp").items() if utt != "george-0-00"}
    rate = 8000
    for utt, words in transcripts.items():
        words = words.split()
        assert utt.startswith(f"{speakers[utt]}-strings-")
        assert 2 <= len(words) <= 7 and set(words) <= set(DIGITS)
        audio, file_rate = soundfile.read(d / "wav" / f"{utt}.wav", dtype="float32")
        assert file_rate == rate
        # Find each digit's source recording in the audio, in order: the earliest place after the last
        # digit where a recording of this speaker saying that digit matches (to 16-bit rounding and the
        # added noise). The gap before it is the leading silence or a pause. Candidates are the places
        # where the 32 samples at the recording's loudest match (its quiet start matches any silence).
        windows = np.lib.stride_tricks.sliding_window_view(audio, 32)
        position = end = 0
        for n, word in enumerate(words):
            matches = []  # (start, end) of each candidate recording's first match
            for u, r in recordings.items():
                speaker, digit, _ = u.split("-")
                if speaker != speakers[utt] or DIGITS[int(digit)] != word:
                    continue
                loudest = min(int(np.abs(r).argmax()), len(r) - 32)
                starts = np.flatnonzero(np.abs(windows[position + loudest:] - r[loudest:loudest + 32]).max(axis=1)
                                        < 0.01) + position
                match = next((int(t) for t in starts
                              if t + len(r) <= len(audio) and np.abs(audio[t:t + len(r)] - r).max() < 0.01), None)
                if match is not None:
                    matches.append((match, match + len(r)))
            assert matches, (utt, word)
            silence = (min(matches)[0] - end) / rate  # since the last digit, or the start
            assert silence <= 0.2 if n == 0 else 0.05 <= silence <= 0.3, (utt, n, silence)
            end = min(matches)[1]
            position = end + int(0.05 * rate)
        assert (len(audio) - end) / rate <= 0.2, utt
    again = run_tool(sys.executable, strings, "--num", "12", source, tmp_path / "again" / "strings")
    assert again.returncode == 0 and table(tmp_path / "again" / "strings" / "text") == transcripts
    for utt in transcripts:
        assert ((d / "wav" / f"{utt}.wav").read_bytes()
                == (tmp_path / "again" / "strings" / "wav" / f"{utt}.wav").read_bytes())
    times = {path.name: path.stat().st_mtime_ns for path in (d / "wav").iterdir()}  # a rerun in place: files left
    assert run_tool(sys.executable, strings, "--num", "12", source, d).returncode == 0  # alone, shards reused
    assert {path.name: path.stat().st_mtime_ns for path in (d / "wav").iterdir()} == times
    missing = run_tool(sys.executable, strings, tmp_path / "missing", tmp_path / "dest")
    assert missing.returncode == 1 and "missing/wav.scp not found" in missing.stderr


def test_an4_prep_reads_the_corpus_lists_and_names_what_it_skips(test_data, tmp_path):
    """Our FLAC copy in the corpus's own layout; one file id without audio and one malformed transcript
    line are named by file and line and skipped, nothing else is lost."""
    corpus = tmp_path / "an4"
    shutil.copytree(test_data / "an4" / "etc", corpus / "etc")
    (corpus / "wav").symlink_to(test_data / "an4" / "wav")
    with open(corpus / "etc" / "an4_train.fileids", "a") as f:
        f.write("an4_clstk/fash/an999-fash-b\nan4_clstk/fash/an251-fash-b\n")  # no audio; a file listed again
    with open(corpus / "etc" / "an4_train.transcription", "a") as f:
        f.write("<s> HELLO </s> (an999-fash-b)\nthis line has no id\n<s> HI </s> (an998-fash-b)\n")  # no file id
    out = run_tool(sys.executable, ROOT / "egs" / "an4" / "local" / "data_prep.py", corpus, tmp_path / "data")
    assert out.returncode == 0, out.stderr
    assert (f"{corpus / 'etc' / 'an4_train.fileids'}:949 (wav/an4_clstk/fash/an999-fash-b.*): "
            "audio not found") in out.stderr
    assert f"{corpus / 'etc' / 'an4_train.transcription'}:950: malformed transcript line" in out.stderr
    fileids = corpus / "etc" / "an4_train.fileids"
    assert (f"skipped {fileids}:950 (fash-an251-b, {corpus}/wav/an4_clstk/fash/an251-fash-b.flac); first {fileids}:"
            in out.stderr) and ": repeated utterance id (the first kept)" in out.stderr
    assert (f"{corpus / 'etc' / 'an4_train.transcription'}:951 (an998-fash-b): transcript whose id the file list "
            "lacks") in out.stderr
    counts = {name: len((tmp_path / "data" / name / "text").read_text().splitlines())
              for name in ("train", "dev", "test")}
    assert counts == {"train": 849, "dev": 99, "test": 130}
    lines = {line.split()[3].rstrip(":").rsplit("/", 1)[-1]: line for line in out.stdout.splitlines()
             if " wrote " in line and "/" in line}  # a dir's line names what writing it skipped, the last all
    assert [lines[name].split("; ")[1] for name in ("train", "test")] == ["nothing skipped"] * 2, out.stdout
    assert lines["dev"].split("; ")[1] == "1 repeated utterance id (the first kept)", out.stdout  # fash: dev
    assert out.stdout.splitlines()[-1].startswith("an4 data_prep: wrote 1078 utterances in 3 data dirs; skipped in "
                                                  "all: 1 audio not found, 1 malformed transcript line (want '<s> "
                                                  "WORDS </s> (id)'), 1 repeated utterance id (the first kept)")
    text = dict(line.split(maxsplit=1) for line in (tmp_path / "data" / "test" / "text").read_text().splitlines())
    assert text["fcaw-an406-b"] == "RUBOUT G M E F THREE NINE"  # the test file's lines have no <s> </s>
    train_text = (tmp_path / "data" / "train" / "text").read_text()
    assert "<s>" not in train_text and "</s>" not in train_text and "(" not in train_text
    (corpus / "etc" / "an4_test.fileids").unlink()  # a traceback before, after the training half's work
    out = run_tool(sys.executable, ROOT / "egs" / "an4" / "local" / "data_prep.py", corpus, tmp_path / "d")
    assert out.returncode == 1 and out.stderr == f"data_prep.py: {corpus}: no etc/an4_test.fileids; give the an4/ " \
                                                 "folder of the corpus\n", out.stderr


def test_speechocean762_prep_holds_out_whole_speakers_and_names_missing_audio(test_data, tmp_path):
    source = test_data / "speechocean762"
    corpus = tmp_path / "so"
    (corpus / "train").mkdir(parents=True)
    for name in ("text", "utt2spk", "spk2gender"):
        shutil.copy(source / "train" / name, corpus / "train" / name)
    lines = (source / "train" / "wav.scp").read_text().splitlines()
    missing = lines[5].split()[0]
    lines[5] = f"{missing}\tWAVE/NOWHERE/{missing}.opus"
    (corpus / "train" / "wav.scp").write_text("".join(line + "\n" for line in lines))
    (corpus / "WAVE").symlink_to(source / "WAVE")
    (tmp_path / "data" / "test").mkdir(parents=True)  # left by a run on a copy with the test half
    (tmp_path / "data" / "test" / "text").write_text("other 1\n")
    out = run_tool(sys.executable, ROOT / "egs" / "speechocean762" / "local" / "data_prep.py",
                   corpus, tmp_path / "data")
    assert out.returncode == 0, out.stderr
    assert f"data_prep: removed {tmp_path / 'data' / 'test'}: {corpus} has no test half" in out.stdout
    assert (f"{corpus / 'train' / 'wav.scp'}:6 ({corpus / 'WAVE' / 'NOWHERE' / missing}.opus): "
            "audio file not found") in out.stderr
    assert "no test/ half" in out.stderr
    speakers = {}
    for name in ("train", "dev"):
        speakers[name] = {line.split()[0] for line in (tmp_path / "data" / name / "spk2utt").read_text().splitlines()}
    assert len(speakers["dev"]) == 10 and not speakers["dev"] & speakers["train"]
    total = sum(len((tmp_path / "data" / n / "text").read_text().splitlines()) for n in ("train", "dev"))
    assert total == 2499 and not (tmp_path / "data" / "test").exists()
    corpus_genders = dict(line.split() for line in (source / "train" / "spk2gender").read_text().splitlines())
    for name in ("train", "dev"):  # the corpus's own, carried (read to pick dev alone, then dropped)
        written = dict(line.split() for line in (tmp_path / "data" / name / "spk2gender").read_text().splitlines())
        assert written.keys() == speakers[name] and all(written[s] == corpus_genders[s] for s in written)
    (corpus / "train" / "utt2spk").unlink()  # a traceback before
    out = run_tool(sys.executable, ROOT / "egs" / "speechocean762" / "local" / "data_prep.py", corpus, tmp_path / "d")
    assert out.returncode == 1 and out.stderr == f"data_prep.py: {corpus}: no train/utt2spk; give the " \
                                                 "speechocean762/ folder\n", out.stderr


def test_an4_spelled_names_are_a_hotwords_file_with_distractors(test_data, tmp_path):
    """egs/an4/local/spelled_names.py on AN4's own test transcripts: the runs of 3 or more letters, each once, then
    distractors from other names only, the same for the same seed."""
    etc = test_data / "an4" / "etc"
    for name, ids in (("said", range(0, 60)), ("others", range(60, 130))):
        (tmp_path / name).mkdir()
        lines = (etc / "an4_test.transcription").read_text().splitlines()
        (tmp_path / name / "text").write_text("".join(f"u{i:03d} {lines[i].rsplit(' (', 1)[0]}\n" for i in ids))
    (tmp_path / "said" / "text").write_text((tmp_path / "said" / "text").read_text() + "x1 A B ONE C D E\nx2 R U N\n")
    script = ROOT / "egs" / "an4" / "local" / "spelled_names.py"
    out = run_tool(sys.executable, script, "--distractors", "5", "--distractors-from", tmp_path / "others",
                   tmp_path / "said", tmp_path / "names.txt")
    assert out.returncode == 0, out.stderr
    names = (tmp_path / "names.txt").read_text().splitlines()
    said = [n for n in names if n in (tmp_path / "said" / "text").read_text()]
    assert "C D E" in said and "R U N" in said and "A B" not in names and len(set(names)) == len(names)
    assert len(names) == len(said) + 5 and all(len(n.split()) >= 3 for n in names)
    assert f"{len(said)} names spelt in {tmp_path / 'said'} and 5 distractors from" in out.stdout
    again = run_tool(sys.executable, script, "--distractors", "5", "--distractors-from", tmp_path / "others",
                     tmp_path / "said", tmp_path / "again.txt")
    assert again.returncode == 0 and (tmp_path / "again.txt").read_text() == "\n".join(names) + "\n"


def test_a_corpus_under_a_folder_whose_name_globs_is_read_whole(test_data, tmp_path):
    """A corpus path holding '[' (a folder named 'run[1]'): it was a glob pattern, matched nothing, and every recipe
    said its corpus held no audio."""
    corpora = tmp_path / "corpora[1]"
    corpora.mkdir()
    for name, source in (("yesno", "waves_yesno"), ("fsdd", "fsdd/recordings"), ("an4", "an4"),
                         ("librispeech", "librispeech_samples/LibriSpeech/test-clean")):
        (corpora / name).symlink_to(test_data / source)
    written = (("yesno", "train_yesno", 30), ("fsdd", "train", 2520), ("an4", "train", 849), ("librispeech", "", 5))
    for recipe, dir_written, utterances in written:
        out_dir = tmp_path / recipe
        out = run_tool(sys.executable, ROOT / "egs" / recipe / "local" / "data_prep.py", corpora / recipe, out_dir)
        assert out.returncode == 0, f"{recipe}: {out.stderr}"
        assert len(table(out_dir / dir_written / "text")) == utterances, recipe
