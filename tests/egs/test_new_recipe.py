"""utils/new_recipe.sh and the recipe it writes from egs/TEMPLATE: a corpus no recipe has seen, a folder of
recordings and a transcript list, to %WER lines by following README's "Adding a corpus"; and how the
template's local/data_prep.py reads a transcript list."""

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch
from conftest import ROOT, run_tool
from recipe_runs import run_recipe

from rnnt.data.resample import resample

NEW_RECIPE = ROOT / "utils" / "new_recipe.sh"
DATA_PREP = ROOT / "egs" / "TEMPLATE" / "local" / "data_prep.py"
DIGITS = ["ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"]
OTHER_CORPORA = re.compile(r"yesno|fsdd|an4|librispeech|speechocean|digit", re.IGNORECASE)


def recordings_by_speaker(test_data: Path) -> dict[str, list[tuple[Path, str]]]:
    """Free Spoken Digit recordings (8 kHz, '<digit>_<speaker>_<n>.wav') and their words, by speaker."""
    by_speaker: dict[str, list[tuple[Path, str]]] = {}
    for path in sorted((test_data / "fsdd" / "recordings").glob("*.wav")):
        digit, speaker, _ = path.stem.split("_")
        by_speaker.setdefault(speaker, []).append((path, DIGITS[int(digit)]))
    return by_speaker


def make_corpus(test_data: Path, dest: Path, files: int, seed: int = 0) -> list[str]:
    """A corpus in no recipe's layout: dest/voice_<k>/take_<n>.wav, each 1-3 digits one speaker said
    (recordings joined with 0.15 s pauses), at 22050 Hz, every 7th stereo. Returns the transcript lines,
    lower case, every other file named without its extension."""
    rng = random.Random(seed)
    by_speaker = recordings_by_speaker(test_data)
    speakers = sorted(by_speaker)
    pause = np.zeros(int(0.15 * 8000), dtype=np.float32)
    lines = []
    for n in range(files):
        k = n % len(speakers)
        picks = rng.sample(by_speaker[speakers[k]], rng.randint(1, 3))
        parts = [pause]
        for path, _ in picks:
            parts += [soundfile.read(path, dtype="float32")[0], pause]
        audio = resample(torch.from_numpy(np.concatenate(parts)), 8000, 22050).numpy()
        if n % 7 == 0:
            audio = np.stack([audio, 0.8 * audio], axis=1)
        name = f"voice_{k}/take_{n:03d}"
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(dest / f"{name}.wav", audio, 22050, subtype="PCM_16")
        lines.append(f"{name if n % 2 else name + '.wav'} {' '.join(word for _, word in picks).lower()}")
    return lines


def wer_of(line: str) -> float:
    return float(re.search(r"%WER ([0-9.]+)", line).group(1))


def table(path: Path) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in path.read_text().splitlines())


def test_new_recipe_writes_the_template_and_refuses_an_existing_or_bad_name(tmp_path):
    egs = tmp_path / "egs"
    egs.mkdir()
    out = run_tool(NEW_RECIPE, "--egs-dir", egs, "mycorpus")
    assert out.returncode == 0, out.stderr
    recipe = egs / "mycorpus"
    template = ROOT / "egs" / "TEMPLATE"
    for name in ("run.sh", "conf/transducer.yaml", "local/data_prep.py", "RESULTS.md"):
        assert (recipe / name).read_bytes() == (template / name).read_bytes(), name
    assert os.access(recipe / "run.sh", os.X_OK) and os.access(recipe / "local" / "data_prep.py", os.X_OK)
    for link in ("path.sh", "utils", "steps"):
        assert (recipe / link).is_symlink() and (recipe / link).resolve() == ROOT / link
        assert (template / link).resolve() == ROOT / link
    assert sorted(p.name for p in recipe.iterdir()) == ["RESULTS.md", "conf", "local", "path.sh", "run.sh", "steps",
                                                         "utils"]
    # In egs/ itself the links are those the other recipes have.
    assert os.readlink(template / "path.sh") == os.readlink(ROOT / "egs" / "yesno" / "path.sh") == "../../path.sh"
    (recipe / "run.sh").write_text("# edited\n")
    again = run_tool(NEW_RECIPE, "--egs-dir", egs, "mycorpus")
    assert again.returncode == 1 and "already exists" in again.stderr
    assert (recipe / "run.sh").read_text() == "# edited\n"
    for bad in ("TEMPLATE", "a b", "../up", "-x", ".hidden", ""):
        refused = run_tool(NEW_RECIPE, "--egs-dir", egs, bad)
        assert refused.returncode == 1 and "cannot name a recipe" in refused.stderr, (bad, refused.stderr)
    assert sorted(p.name for p in egs.iterdir()) == ["mycorpus"] and not (tmp_path / "up").exists()
    assert run_tool(NEW_RECIPE).returncode == 1
    usage = run_tool(NEW_RECIPE, "--help")
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: utils/new_recipe.sh")
    assert not (ROOT / "egs" / "mycorpus").exists()
    spaced = tmp_path / "my corpora"  # the next step printed runs as it is pasted
    spaced.mkdir()
    out = run_tool(NEW_RECIPE, "--egs-dir", spaced, "mine")
    step = out.stdout.split("next: ")[1].split(" && ")[0]
    assert subprocess.run(["bash", "-c", f"{step} && pwd"], capture_output=True, text=True).stdout.strip() == \
        str(spaced / "mine")


def test_template_run_sh_says_its_options_and_needs_a_corpus(tmp_path):
    recipe = ROOT / "egs" / "TEMPLATE"
    usage = run_recipe(recipe, "--help")
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: ./run.sh --corpus-dir DIR"), usage.stderr
    assert "--transcripts FILE" in usage.stdout and "--speaker-regex RE" in usage.stdout
    assert "'speaker1/rec01.wav HELLO WORLD'" in usage.stdout  # the transcript list's format
    assert not OTHER_CORPORA.search((recipe / "run.sh").read_text())
    missing = run_recipe(recipe)
    assert missing.returncode == 1 and "--corpus-dir must name the folder of recordings" in missing.stderr
    gpus = torch.cuda.device_count()
    more = run_recipe(recipe, "--ngpu", str(gpus + 1))  # more GPUs than there are: refused before any stage
    assert more.returncode == 1 and f"--ngpu {gpus + 1}: torch sees {gpus} GPU(s) here" in more.stderr, more.stderr
    assert not (recipe / "data").exists() and not (recipe / "exp").exists()


@pytest.fixture
def small_corpus(tmp_path, test_data) -> Path:
    """8 recordings by 2 speakers: a/one.wav ... b/four.flac, their transcripts in the template's format."""
    corpus = tmp_path / "corpus"
    by_speaker = recordings_by_speaker(test_data)
    for speaker, folder in (("george", "a"), ("jackson", "b")):
        (corpus / folder).mkdir(parents=True)
        for i, (path, _) in enumerate(by_speaker[speaker][:200:50]):  # digits 0 to 3
            audio, rate = soundfile.read(path)
            soundfile.write(corpus / folder / f"{DIGITS[i].lower()}.{'flac' if folder == 'b' else 'wav'}", audio, rate)
    return corpus


def test_a_header_line_is_said_to_be_one_not_a_recording_not_found(small_corpus, tmp_path):
    """README: a header line is skipped as naming no file. It was counted as 'audio file not found', a data
    problem to look for; a later line naming no file still is one."""
    listing = small_corpus / "list.txt"
    listing.write_text("path\ttranscript\na/one.wav one\nb/two.flac two\na/gone.wav gone\n")
    out = run_tool(sys.executable, DATA_PREP, "--transcripts", listing, "--test-fraction", "0", "--dev-fraction",
                   "0.4", small_corpus, tmp_path / "data")
    assert out.returncode == 0, out.stderr
    said = out.stdout + out.stderr
    assert f"skipped {listing}:1 (path\ttranscript): a first line naming no file, taken for a header" in said
    assert f"skipped {listing}:4 ({small_corpus}/a/gone.wav): audio file not found" in said


def test_sentence_markers_of_sphinx_transcripts_are_removed_and_counted(small_corpus, tmp_path):
    """'<s> ONE </s>' (Sphinx's transcripts, AN4's among them) trained as the letters < S > and scored as words, in
    silence; a line of markers alone has no transcript."""
    listing = small_corpus / "list.txt"
    listing.write_text("a/one.wav <s> one </s>\nb/two.flac two\na/three.wav <s> </s>\nb/one.flac one\n")
    out = run_tool(sys.executable, DATA_PREP, "--transcripts", listing, "--test-fraction", "0", "--dev-fraction",
                   "0.4", small_corpus, tmp_path / "data")
    assert out.returncode == 0, out.stderr
    assert f"data_prep.py: {listing}: 2 transcripts held sentence markers (<s>, </s>): removed" in out.stderr
    assert f"skipped {listing}:3: malformed line" in out.stderr
    texts = {**table(tmp_path / "data" / "train" / "text"), **table(tmp_path / "data" / "dev" / "text")}
    assert sorted(texts.values()) == ["ONE", "ONE", "TWO"]


def test_extra_columns_and_two_recordings_of_one_id_are_named_not_merged(small_corpus, tmp_path):
    """A list with more tab-separated columns is refused by line (the columns were words of the transcript);
    a/one.wav and a-one.wav both make the id a-one: the second is named with the first, not 'listed again'."""
    import shutil

    shutil.copy(small_corpus / "a" / "one.wav", small_corpus / "a-one.wav")
    (small_corpus / "transcripts.txt").write_text("a/one.wav\tone\na/two.wav\ttwo\talice\t1.50\na-one.wav\tone\n"
                                                  "b/three\tthree\n")
    out = run_tool(sys.executable, DATA_PREP, "--dev-fraction", "0.2", "--test-fraction", "0", small_corpus,
                   tmp_path / "data")
    assert out.returncode == 0, out.stderr
    listing = small_corpus / "transcripts.txt"
    assert f"skipped {listing}:2: more than two tab-separated fields" in out.stderr
    assert (f"skipped {listing}:3 (a-one): another recording makes the same utterance id as "
            f"{small_corpus / 'a' / 'one.wav'}: rename one") in out.stderr
    texts = {**table(tmp_path / "data" / "train" / "text"), **table(tmp_path / "data" / "dev" / "text")}
    assert texts == {"a-one": "ONE", "b-three": "THREE"}


def test_a_utf16_list_is_refused_with_what_to_do(small_corpus, tmp_path):
    """Notepad's 'Unicode': line 1 was 'not UTF-8', every other line a file not found, NULs on the terminal."""
    (small_corpus / "transcripts.txt").write_text("a/one.wav ONE\nb/two TWO\n", encoding="utf-16")
    out = run_tool(sys.executable, DATA_PREP, small_corpus, tmp_path / "data")
    assert out.returncode == 1
    assert out.stderr == (f"data_prep.py: {small_corpus}/transcripts.txt is UTF-16 (Notepad's 'Unicode'): save it "
                          "as UTF-8\n")


def test_a_path_with_spaces_before_a_tab_a_cr_inside_a_line_and_a_second_lists_bom(small_corpus, tmp_path):
    """'a/one 2.wav<TAB>TWO' beside a/one.wav: the first word named a file, so the line went to a/one.wav with
    '2.WAV TWO' as its words; a CR inside a line split it (its words cut, the later lines numbered one off); the
    byte-order mark of a list appended with cat hid the next line's file."""
    import shutil

    shutil.copy(small_corpus / "a" / "two.wav", small_corpus / "a" / "one 2.wav")
    (small_corpus / "transcripts.txt").write_bytes(
        b"a/one 2.wav\tTWO\na/one.wav\tONE\nb/three THREE\rFOUR\n\xef\xbb\xbfb/two TWO\na/nine NINE\n")
    out = run_tool(sys.executable, DATA_PREP, "--dev-fraction", "0.2", "--test-fraction", "0", small_corpus,
                   tmp_path / "data")
    assert out.returncode == 0, out.stderr
    texts, wav = {}, {}
    for name in ("train", "dev"):
        texts |= table(tmp_path / "data" / name / "text")
        wav |= table(tmp_path / "data" / name / "wav.scp")
    assert texts == {"a-one": "ONE", "a-one_2": "TWO", "b-three": "THREE FOUR", "b-two": "TWO"}, texts
    assert wav["a-one_2"] == str(small_corpus / "a" / "one 2.wav")
    assert f"skipped {small_corpus / 'transcripts.txt'}:5 ({small_corpus}/a/nine): audio file not found" in out.stderr


def test_recordings_named_without_their_extension_are_found_in_any_format_soundfile_reads(small_corpus, tmp_path):
    """Apple's CAF, Sony's Wave64 and RF64 recordings listed without their extensions were 'not found': the
    template knew nine extensions. Where a name has two, the common format is taken."""
    for source, target in (("a/zero.wav", "a/zero.caf"), ("a/one.wav", "a/one.w64"), ("b/zero.flac", "b/zero.rf64")):
        audio, rate = soundfile.read(small_corpus / source)
        soundfile.write(small_corpus / target, audio, rate)
        (small_corpus / source).unlink()
    audio, rate = soundfile.read(small_corpus / "b" / "one.flac")
    soundfile.write(small_corpus / "b" / "one.caf", audio, rate)  # beside b/one.flac
    # b/two.wav is b/two.flac now (a corpus converted since its list was written): 'audio file not found' before
    (small_corpus / "transcripts.txt").write_text("a/zero ZERO\na/one ONE\nb/zero ZERO\nb/one ONE\nb/two.wav TWO\n")
    out = run_tool(sys.executable, DATA_PREP, "--dev-fraction", "0.2", "--test-fraction", "0", small_corpus,
                   tmp_path / "data")
    assert out.returncode == 0 and "skipped" not in out.stderr, out.stderr
    assert {**table(tmp_path / "data" / "train" / "wav.scp"), **table(tmp_path / "data" / "dev" / "wav.scp")} == {
        "a-zero": str(small_corpus / "a" / "zero.caf"), "a-one": str(small_corpus / "a" / "one.w64"),
        "b-zero": str(small_corpus / "b" / "zero.rf64"), "b-one": str(small_corpus / "b" / "one.flac"),
        "b-two": str(small_corpus / "b" / "two.flac")}


def test_data_prep_keeps_good_lines_and_names_bad_ones_by_file_and_line(small_corpus, tmp_path):
    (small_corpus / "b" / "broken.wav").write_bytes(b"not audio at all")
    lines = ["a/zero.wav zero",          # 1: with its extension
             "a/one   One\tmore\u0301",  # 2: without; spaces and a tab in the transcript, an accent of its own
             "a/two",                    # 3: no transcript
             "",                         # 4: blank, ignored
             "a/nine.wav nine",          # 5: no such file
             "b/zero zero",              # 6: b/zero.flac
             "b/one.flac one",           # 7
             "b/broken broken",          # 8: unreadable audio
             "a/one.wav one again",      # 9: the recording of line 2 again
             "b/two tw\udce9",             # 10: not UTF-8 (a Latin-1 byte)
             "a/five fi\x08ve",            # 11: a backspace pasted in (a copy of a/zero.wav)
             "b/two two", "b/three three\u2019s", "a/three three", "a/two.wav two"]
    (small_corpus / "a" / "five.wav").write_bytes((small_corpus / "a" / "zero.wav").read_bytes())
    (small_corpus / "transcripts.txt").write_bytes("\n".join(lines).encode("utf-8", "surrogateescape") + b"\n")
    out = run_tool(sys.executable, DATA_PREP, "--dev-fraction", "0.2", "--test-fraction", "0.2",
                   small_corpus, tmp_path / "data")
    assert out.returncode == 0, out.stderr
    listing = small_corpus / "transcripts.txt"
    assert f"skipped {listing}:3: malformed line (want '<file> <transcript>')" in out.stderr
    assert f"skipped {listing}:5 ({small_corpus}/a/nine.wav): audio file not found" in out.stderr
    assert f"skipped {listing}:9 (a-one): the recording is listed again" in out.stderr
    assert f"skipped {listing}:8 (b-broken, {small_corpus}/b/broken.wav): unreadable or empty audio" in out.stderr
    assert f"skipped {listing}:10: not UTF-8 (re-encode the file as UTF-8)" in out.stderr
    assert (f"skipped {listing}:11 (a-five, {small_corpus}/a/five.wav): non-printable character U+0008: "
            "transcript Kaldi's text rules refuse") in out.stderr
    assert out.stdout.splitlines()[-1] == (  # each dir's line names what writing it skipped; the last, all
        "data_prep: wrote 8 utterances in 3 data dirs; skipped in all: 1 audio file not found, 1 malformed line (want "
        "'<file> <transcript>'), 1 not UTF-8 (re-encode the file as UTF-8), 1 the recording is listed again, 1 "
        "transcript Kaldi's text rules refuse, 1 unreadable or empty audio")
    text, wav = {}, {}
    for name in ("train", "dev", "test"):
        assert run_tool(ROOT / "utils" / "validate_data_dir.sh", "--no-feats", tmp_path / "data" / name).returncode == 0
        text |= table(tmp_path / "data" / name / "text")
        wav |= table(tmp_path / "data" / name / "wav.scp")
    assert sorted(text) == ["a-one", "a-three", "a-two", "a-zero", "b-one", "b-three", "b-two", "b-zero"]
    assert text["a-one"] == "ONE MOR\u00c9" and text["b-three"] == "THREE'S"  # NFKC: the accent joins its letter
    assert wav["b-zero"] == str(small_corpus / "b" / "zero.flac")
    assert wav["a-two"] == str(small_corpus / "a" / "two.wav")
    # 8 usable utterances: a fifth each held out as test and dev, after the unreadable recording and the refused
    # transcript were dropped (drawn before, a bad file left its set short, and one set of bad files alone ended
    # the data prep: "no usable utterances")
    assert "test: 2 utterances at random, seed 0" in out.stdout and "dev: 2 utterances at random" in out.stdout
    assert [len(table(tmp_path / "data" / name / "text")) for name in ("train", "dev", "test")] == [4, 2, 2]
    # Each recording its own speaker when the speakers are not named.
    assert table(tmp_path / "data" / "train" / "utt2spk") == {u: u for u in table(tmp_path / "data" / "train" / "text")}


def test_the_sets_are_held_out_of_the_usable_recordings(small_corpus, tmp_path):
    """8 recordings that read and 12 that do not: drawn before the audio was read, the test set of 4 was mostly
    unreadable files, and a set of them alone ended the data prep ("no usable utterances"). Held out of the 8."""
    lines = [f"{speaker}/{digit} {digit}" for speaker in "ab" for digit in ("zero", "one", "two", "three")]
    for i in range(12):
        (small_corpus / "a" / f"broken{i}.wav").write_bytes(b"RIFF")
        lines.append(f"a/broken{i}.wav broken")
    (small_corpus / "transcripts.txt").write_text("\n".join(lines) + "\n")
    out = run_tool(sys.executable, DATA_PREP, "--dev-fraction", "0.2", "--test-fraction", "0.25", small_corpus,
                   tmp_path / "data")
    assert out.returncode == 0, out.stderr
    assert [len(table(tmp_path / "data" / name / "text")) for name in ("train", "dev", "test")] == [4, 2, 2]
    assert "skipped in all: 12 unreadable or empty audio" in out.stdout.splitlines()[-1]


def test_thousands_of_bad_lines_show_twenty_of_each_kind_and_all_go_to_a_file(small_corpus, tmp_path):
    """A list of 8 good lines and 25 naming files that are not there: the terminal shows the first 20 of those
    and says where the rest are; data/local/skipped.txt names all 25 by line; the summary counts 25."""
    good = [f"{folder}/{digit.lower()} {digit}" for folder in "ab" for digit in DIGITS[:4]]
    (small_corpus / "transcripts.txt").write_text("\n".join(good + [f"a/gone{i} GONE" for i in range(25)]) + "\n")
    out = run_tool(sys.executable, DATA_PREP, "--dev-fraction", "0.2", "--test-fraction", "0", small_corpus,
                   tmp_path / "data")
    assert out.returncode == 0, out.stderr
    listing = tmp_path / "data" / "local" / "skipped.txt"
    named = [line for line in out.stderr.splitlines() if line.endswith(": audio file not found")]
    assert len(named) == 20 and f"more skipped as 'audio file not found': named in {listing} only" in out.stderr
    kept = listing.read_text().splitlines()
    assert len(kept) == 25 and kept[-1].startswith(f"data_prep: skipped {small_corpus / 'transcripts.txt'}:33 (")
    assert out.stdout.splitlines()[-1].endswith(f"skipped in all: 25 audio file not found (each named in {listing})")
    again = run_tool(sys.executable, DATA_PREP, "--dev-fraction", "0.2", "--test-fraction", "0", small_corpus,
                     tmp_path / "data")
    assert again.returncode == 0 and len(listing.read_text().splitlines()) == 25  # this run's, not appended


def test_data_prep_speakers_from_a_regex_and_whole_speakers_held_out(small_corpus, tmp_path, test_data):
    by_speaker = recordings_by_speaker(test_data)
    lines = []
    for k, speaker in enumerate(sorted(by_speaker)):  # 6 speakers x 3 recordings in one folder
        for i, (path, word) in enumerate(by_speaker[speaker][:150:50]):
            audio, rate = soundfile.read(path)
            soundfile.write(small_corpus / f"s{k}_take{i}.wav", audio, rate)
            lines.append(f"s{k}_take{i} {word}")
    lines.append("a/zero.wav zero")  # in a folder: the regex finds no speaker
    outside = small_corpus.parent / "elsewhere" / "s9_take0.wav"  # the regex would read '..' for its speaker
    outside.parent.mkdir()
    outside.write_bytes((small_corpus / "s0_take0.wav").read_bytes())
    lines.append(f"{outside} zero")
    (small_corpus / "list.txt").write_text("\n".join(lines) + "\n")
    split = ("--speaker-regex", r"^(s\d+)_", "--dev-fraction", "0.34", "--test-fraction", "0.34")
    out = run_tool(sys.executable, DATA_PREP, "--transcripts", small_corpus / "list.txt", *split, small_corpus,
                   tmp_path / "data")
    assert out.returncode == 0, out.stderr
    assert f"{small_corpus / 'list.txt'}:19: no speaker in the file name (--speaker-regex '^(s\\d+)_')" in out.stderr
    assert (f"{small_corpus / 'list.txt'}:20 ({outside}): outside the corpus folder, whose paths --speaker-regex "
            "reads") in out.stderr, out.stderr
    # a third of 18 is 6: two whole speakers of 3 each
    assert "test: 6 utterances of 2 whole speakers" in out.stdout and "dev: 6 utterances of 2 whole speakers" \
        in out.stdout
    speakers = {name: set(table(tmp_path / "data" / name / "spk2utt")) for name in ("train", "dev", "test")}
    assert len(speakers["train"]) == 2 and not speakers["train"] & (speakers["dev"] | speakers["test"])
    assert all(u.startswith(s + "-") for u, s in table(tmp_path / "data" / "dev" / "utt2spk").items())
    again = run_tool(sys.executable, DATA_PREP, "--transcripts", small_corpus / "list.txt", *split, small_corpus,
                     tmp_path / "again")
    assert again.returncode == 0, again.stderr
    for name in ("train", "dev", "test"):  # a fixed seed: the same split every time
        assert (tmp_path / "again" / name / "text").read_text() == (tmp_path / "data" / name / "text").read_text()
    no_group = run_tool(sys.executable, DATA_PREP, "--speaker-regex", "^s", small_corpus, tmp_path / "x")
    assert no_group.returncode == 1 and "needs a group" in no_group.stderr
    absent = run_tool(sys.executable, DATA_PREP, small_corpus / "a", tmp_path / "x")
    assert absent.returncode == 1 and "no transcript list" in absent.stderr and not (tmp_path / "x").exists()


def test_data_prep_speakers_named_alike_and_paths_with_spaces(tmp_path, test_data):
    """Speaker folders john and john-smith: utterances sorted are sorted by speaker too (Kaldi's rule, which a
    '-' inside a speaker id breaks: john-smith-a before john-z); a path with spaces is listed with a tab."""
    corpus = tmp_path / "corpus"
    by_speaker = recordings_by_speaker(test_data)
    lines = []
    for folder, speaker in (("john", "george"), ("john-smith", "jackson"), ("Alice Smith", "lucas")):
        (corpus / folder).mkdir(parents=True)
        for i, (path, word) in enumerate(by_speaker[speaker][:150:50]):
            name = f"{folder}/{'z' if folder == 'john' else 'a'} take {i}.wav"
            audio, rate = soundfile.read(path)
            soundfile.write(corpus / name, audio, rate)
            lines.append(f"{name}\t{word}")
    (corpus / "list.txt").write_text("\n".join(lines) + "\n")
    out = run_tool(sys.executable, DATA_PREP, "--transcripts", corpus / "list.txt", "--speaker-regex", "^([^/]+)/",
                   "--dev-fraction", "0.34", "--test-fraction", "0", corpus, tmp_path / "data")
    assert out.returncode == 0, out.stderr
    speakers = {s for name in ("train", "dev") for s in table(tmp_path / "data" / name / "spk2utt")}
    assert speakers == {"john", "john_smith", "Alice_Smith"}
    assert sum(len(table(tmp_path / "data" / name / "text")) for name in ("train", "dev")) == 9
    for name in ("train", "dev"):
        assert run_tool(ROOT / "utils" / "validate_data_dir.sh", "--no-feats", tmp_path / "data" / name).returncode == 0


def test_data_prep_test_set_from_its_own_list_and_none_without(small_corpus, tmp_path):
    (small_corpus / "train.txt").write_text("".join(f"{s}/{w} {w}\n" for s in "ab" for w in ("zero", "one", "two")))
    (small_corpus / "test.txt").write_text("a/three three\nb/three three\na/two two\n")
    out = run_tool(sys.executable, DATA_PREP, "--transcripts", small_corpus / "train.txt", "--test-transcripts",
                   small_corpus / "test.txt", small_corpus, tmp_path / "data")
    assert out.returncode == 0, out.stderr
    assert f"{small_corpus / 'train.txt'}:3 (a-two, " in out.stderr and ": also in the test list" in out.stderr
    assert sorted(table(tmp_path / "data" / "test" / "text")) == ["a-three", "a-two", "b-three"]
    assert len(table(tmp_path / "data" / "train" / "text")) + len(table(tmp_path / "data" / "dev" / "text")) == 5
    none = run_tool(sys.executable, DATA_PREP, "--transcripts", small_corpus / "train.txt", "--test-fraction", "0",
                    small_corpus, tmp_path / "data")
    assert none.returncode == 0 and "removed" in none.stdout and not (tmp_path / "data" / "test").exists()


def kaldi_dirs(test_data: Path, root: Path) -> tuple[Path, Path]:
    """Kaldi data dirs as a user's Kaldi recipe leaves them: train (10 recordings of each of 5 speakers, one
    read through a command, one not audio; no utt2dur) and dev (a speaker's recordings cut by segments)."""
    by_speaker = recordings_by_speaker(test_data)
    train, dev = root / "train", root / "dev"
    rows = [(f"{speaker}-{n:02d}", str(path), word) for speaker in ("george", "jackson", "lucas", "nicolas", "theo")
            for n, (path, word) in enumerate(by_speaker[speaker][:10])]
    rows[3] = (rows[3][0], f"cat {rows[3][1]} |", rows[3][2])
    train.mkdir(parents=True)
    (root / "broken.wav").write_bytes(b"RIFF, but not audio")
    rows.append(("theo-99", str(root / "broken.wav"), "NINE"))
    (train / "wav.scp").write_text("".join(f"{utt} {source}\n" for utt, source, _ in rows))
    (train / "text").write_text("".join(f"{utt} {word}\n" for utt, _, word in rows))
    (train / "utt2spk").write_text("".join(f"{utt} {utt.split('-')[0]}\n" for utt, _, _ in rows))
    dev.mkdir()
    recordings = by_speaker["yweweler"][:6]
    (dev / "wav.scp").write_text("".join(f"yweweler-r{n} {path}\n" for n, (path, _) in enumerate(recordings)))
    (dev / "segments").write_text("".join(f"yweweler-{n:02d} yweweler-r{n} 0.00 -1\n" for n in range(6)))
    (dev / "text").write_text("".join(f"yweweler-{n:02d} {word}\n" for n, (_, word) in enumerate(recordings)))
    (dev / "utt2spk").write_text("".join(f"yweweler-{n:02d} yweweler\n" for n in range(6)))
    return train, dev


@pytest.mark.slow  # run.sh's data stages eight times: 25 s
def test_kaldi_data_dirs_of_your_own_instead_of_a_folder_of_recordings(test_data, tmp_path):
    """--data-dirs "TRAIN DEV": stage 1 copies them in (steps/import_data_dir.py: utt2dur measured, the unreadable
    recording named by its wav.scp line and dropped), stages 2-3 shard them and build units; the next run takes
    the same dirs without the option, and a folder of recordings given later replaces them."""
    train, dev = kaldi_dirs(test_data, tmp_path / "kaldi")
    lines = (train / "wav.scp").read_text().splitlines()  # its first recording a copy of the user's own
    first, source = lines[0].split(maxsplit=1)
    shutil.copy(source, tmp_path / "kaldi" / "first.wav")
    (train / "wav.scp").write_text("\n".join([f"{first} {tmp_path / 'kaldi' / 'first.wav'}", *lines[1:]]) + "\n")
    egs = tmp_path / "egs"
    egs.mkdir()
    assert run_tool(NEW_RECIPE, "--egs-dir", egs, "mine").returncode == 0
    recipe = egs / "mine"
    out = run_recipe(recipe, "--data-dirs", f"{train} {dev}", "--stop-stage", "3")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"left out {train}/wav.scp:51: theo-99: " in out.stdout  # (logged: the stage's output is one stream)
    assert f"import_data_dir.py: wrote data/train from {train}: 50 of 51 utterances, 5 speakers, " in out.stdout
    assert len(table(recipe / "data" / "train" / "utt2dur")) == 50 and not (recipe / "data" / "test").exists()
    assert sorted(table(recipe / "data" / "dev" / "segments")) == [f"yweweler-{n:02d}" for n in range(6)]
    for name in ("train", "dev"):
        assert run_tool(ROOT / "utils" / "validate_data_dir.sh", "--no-feats", recipe / "data" / name).returncode == 0
        assert len((recipe / "data" / name / "data.list").read_text().splitlines()) == 1
    assert (recipe / "data" / "lang_char" / "units.txt").is_file()
    again = run_recipe(recipe, "--stop-stage", "3")
    assert again.returncode == 0, again.stderr
    assert f"run.sh: --data-dirs {train} {dev}, as given before (data/.data_dirs)" in again.stderr
    assert "stage 1 (data): done before; skipped" in again.stdout
    segments = recipe / "data" / "dev" / "segments"  # edited by hand: sharded again (it was 'done before')
    segments.write_text(segments.read_text().replace("0.00 -1\n", "0.10 -1\n", 1))
    edited = run_recipe(recipe, "--stop-stage", "2")
    assert edited.returncode == 0 and "(shards): its inputs changed" in edited.stdout, edited.stdout
    # a recording replaced at its path (the tables the same): sharded again, where the old audio trained on
    shutil.copy(lines[1].split(maxsplit=1)[1], tmp_path / "kaldi" / "first.wav")
    replaced = run_recipe(recipe, "--stop-stage", "2")
    assert replaced.returncode == 0 and "stage 2 (shards): done before" not in replaced.stdout, replaced.stdout
    assert "(shards): its inputs changed" in replaced.stdout, replaced.stdout
    # the recording that could not be read put right: imported again, where stage 1's tables were the same
    shutil.copy(lines[2].split(maxsplit=1)[1], tmp_path / "kaldi" / "broken.wav")
    mended = run_recipe(recipe, "--stop-stage", "1")
    assert mended.returncode == 0 and f"wrote data/train from {train}: 51 of 51 utterances" in mended.stdout, \
        mended.stdout
    same = run_recipe(recipe, "--data-dirs", f"{train} {train}", "--stop-stage", "1")  # dev = train: said
    assert same.returncode == 0 and "warning: data/dev shares 51 of its 51 utterances with data/train" in same.stdout
    bad = run_recipe(recipe, "--data-dirs", f"{train}", "--stop-stage", "1")
    assert bad.returncode == 1 and "--data-dirs must name two or three Kaldi data dirs" in bad.stderr
    corpus = tmp_path / "recordings"
    (corpus / "transcripts.txt").parent.mkdir()
    (corpus / "transcripts.txt").write_text("\n".join(make_corpus(test_data, corpus, files=30)) + "\n")
    folder = run_recipe(recipe, "--corpus-dir", str(corpus), "--stop-stage", "1")
    assert folder.returncode == 0, folder.stderr
    assert not (recipe / "data" / ".data_dirs").exists()
    assert "voice_0" in (recipe / "data" / "train" / "text").read_text()
    # the options of the corpus, left out, are the ones given before (README: a rerun without --transcripts
    # failed, one without --dev-fraction re-split the data and retrained); another corpus forgets them
    listing = tmp_path / "listing.txt"
    shutil.copy(corpus / "transcripts.txt", listing)
    options = ["--transcripts", str(listing), "--dev-fraction", "0.2", "--test-fraction", "0.3"]
    first = run_recipe(recipe, "--corpus-dir", str(corpus), *options, "--stop-stage", "1")
    assert first.returncode == 0 and "stage 1 (data): its inputs changed" in first.stdout, first.stdout
    bare = run_recipe(recipe, "--stop-stage", "1")
    assert bare.returncode == 0 and "stage 1 (data): done before; skipped" in bare.stdout, bare.stdout + bare.stderr
    assert f"run.sh: --transcripts {listing}, as given before (data/.transcripts)" in bare.stderr
    assert "run.sh: --dev-fraction 0.2, as given before (data/.dev_fraction)" in bare.stderr
    shutil.rmtree(recipe / "data" / "test")  # was not an output of stage 1: the test set dropped without a word
    again = run_recipe(recipe, "--stop-stage", "1")
    assert "stage 1 (data): its output data/test/text is gone or changed" in again.stdout, again.stdout
    assert (recipe / "data" / "test" / "text").is_file()
    for option, typo in (("--dev-fraction", "0.6"), ("--dev-fraction", "0"), ("--test-fraction", "0.5")):
        refused = run_recipe(recipe, option, typo, "--stop-stage", "1")  # not kept: every plain rerun failed on it
        assert refused.returncode == 1 and "must be above 0" in refused.stderr, refused.stderr
    assert "--dev-fraction 0.2, as given before" in run_recipe(recipe, "--stop-stage", "1").stderr
    (tmp_path / "link").symlink_to(corpus)  # the same corpus spelt otherwise: its options kept (they were lost,
    for spelt in (f"{corpus}/", str(tmp_path / "link")):  # the data split again)
        same = run_recipe(recipe, "--corpus-dir", spelt, "--stop-stage", "1")
        assert same.returncode == 0 and "--dev-fraction 0.2, as given before" in same.stderr, same.stderr
    other = tmp_path / "other"
    shutil.copytree(corpus, other)
    moved = run_recipe(recipe, "--corpus-dir", str(other), "--stop-stage", "1")
    assert moved.returncode == 0 and "as given before" not in moved.stderr, moved.stderr
    assert not (recipe / "data" / ".transcripts").exists() and not (recipe / "data" / ".dev_fraction").exists()
    written = run_recipe(recipe, "--dev-fraction", "2e-1", "--stop-stage", "1")  # as data_prep.py reads it: it was
    assert written.returncode == 0, written.stderr  # refused as 'must be above 0'
    assert (recipe / "data" / ".dev_fraction").read_text().split() == ["2e-1"]


@pytest.mark.slow
def test_a_new_corpus_from_recordings_to_wer_by_the_readme(test_data, tmp_path):
    """README's "Adding a corpus" step by step on 300 recordings of 1-3 spoken digits by 6 speakers (Free
    Spoken Digits joined, resampled to 22050 Hz, some stereo, in folders of their own naming) with three bad
    lines in the transcript list: the %WER lines of dev and test, the bad lines named by line, and a WER that
    a model ignoring the audio cannot reach."""
    corpus = tmp_path / "recordings"
    lines = make_corpus(test_data, corpus, files=300)
    (corpus / "voice_4" / "take_broken.wav").write_bytes(b"RIFF, but no audio")
    lines += ["voice_1/take_999 one two", "voice_2/take_123.wav", "voice_4/take_broken four"]  # lines 301-303
    (corpus / "transcripts.txt").write_text("\n".join(lines) + "\n")
    egs = tmp_path / "egs"
    egs.mkdir()
    made = run_tool(NEW_RECIPE, "--egs-dir", egs, "mycorpus")
    assert made.returncode == 0, made.stderr
    recipe = egs / "mycorpus"
    # README: a shorter schedule is an edit of conf/ (30 epochs of the default's 40)
    config = (recipe / "conf" / "transducer.yaml").read_text()
    (recipe / "conf" / "quick.yaml").write_text(config.replace("epochs: 40", "epochs: 30"))
    args = ["--corpus-dir", str(corpus), "--speaker-regex", "^([^/]+)/", "--train-config", "conf/quick.yaml"]
    out = run_recipe(recipe, *args)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    listing = corpus / "transcripts.txt"
    assert f"skipped {listing}:301 ({corpus}/voice_1/take_999): audio file not found" in out.stdout
    assert f"skipped {listing}:302: malformed line" in out.stdout
    assert (f"skipped {listing}:303 (voice_4-take_broken, {corpus}/voice_4/take_broken.wav): unreadable or empty "
            "audio") in out.stdout
    counted = "1 audio file not found, 1 malformed line (want '<file> <transcript>'), 1 unreadable or empty audio"
    assert counted in out.stdout and f"{listing}:302" in (recipe / "exp" / "log" / "1.data.log").read_text()
    data = recipe / "data"
    sizes = {name: len((data / name / "text").read_text().splitlines()) for name in ("train", "dev", "test")}
    assert sum(sizes.values()) == 300 and 29 <= sizes["dev"] <= 30 and 29 <= sizes["test"] <= 30, sizes
    results = {line.split(" greedy ")[0]: line for line in out.stdout.splitlines()
               if re.match(r"mycorpus \w+ greedy", line)}
    assert sorted(results) == ["mycorpus dev", "mycorpus test"], out.stdout[-2000:]
    for name, line in results.items():
        words = sum(len(t.split()) for t in table(data / name.split()[1] / "text").values())
        assert line.startswith(f"{name} greedy (transducer avg5-epoch-30): %WER ") and f"/ {words}," in line, line
        # measured here: dev 18.6, test 15.1 (the whole test 80 s); a model deaf to the audio: about 100
        assert wer_of(line) < 40, line
    markers = sorted(p.name for p in (recipe / "exp").rglob("*.done"))
    assert markers == ["1.data.done", "2.shards.done", "3.units-char.done", "4.train.done",
                       "5.average-5-epoch-30.done", "6.confidence-greedy-avg5-epoch-30.done",
                       "6.decode-dev-greedy-avg5-epoch-30.done", "6.decode-test-greedy-avg5-epoch-30.done"], markers
    calibrated = (recipe / "exp" / "transducer" / "decode-test-greedy-avg5-epoch-30" / "confidence").read_text()
    assert calibrated.endswith("calibrated by exp/transducer/confidence_calibration.json\n"), calibrated  # on dev
    assert not OTHER_CORPORA.search(" ".join(markers) + " ".join(results.values()))
    again = run_recipe(recipe, *args)
    assert again.returncode == 0 and again.stdout.count("done before; skipped") == 8, again.stdout[-2000:]
    assert sorted(results.values()) == sorted(x for x in again.stdout.splitlines() if x.startswith("mycorpus "))
    # an LM-fused method (the recipe had no LM options: 'lm_order: unbound variable' after the training), and no
    # --corpus-dir or --speaker-regex: those given before (without the latter, the data was re-split by recording)
    lm = run_recipe(recipe, *args[4:], "--stage", "6", "--methods", "greedy modified_beam_lm", "--lm-weights",
                    "0.2,0.4", "--lm-bonuses", "0,1")
    assert lm.returncode == 0, lm.stdout[-3000:] + lm.stderr[-3000:]
    assert f"run.sh: --corpus-dir {corpus}, as given before (data/.corpus_dir)" in lm.stderr
    assert "run.sh: --speaker-regex ^([^/]+)/, as given before (data/.speaker_regex)" in lm.stderr
    for name in ("dev", "test"):
        line = next(x for x in lm.stdout.splitlines() if x.startswith(f"mycorpus {name} modified_beam_lm "))
        assert "(transducer avg5-epoch-30): %WER" in line and wer_of(line) < 40, line
    assert "from before your changes" not in lm.stdout
    misspelt = run_recipe(recipe, *args, "--methods", "greedy modifed_beam")  # refused before any stage runs
    assert misspelt.returncode == 1 and "got 'modifed_beam'" in misspelt.stderr and "stage" not in misspelt.stdout
    # README step 5: the recipe's conf/deploy.yaml (on the same schedule) exported and run in sherpa-onnx,
    # offline and streaming, from the same data and units; its WERs those of our greedy search
    deploy = (recipe / "conf" / "deploy.yaml").read_text().replace("epochs: 40", "epochs: 30")
    (recipe / "conf" / "quick_deploy.yaml").write_text(deploy)
    out = run_recipe(recipe, *args[:-1], "conf/quick_deploy.yaml", "--exp", "exp/deploy", "--deploy",
                     "offline streaming")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.count("done before; skipped") == 3, out.stdout[-2000:]  # data, shards, units
    for name in ("dev", "test"):
        greedy, *sherpa = (next(x for x in out.stdout.splitlines() if x.startswith(f"mycorpus {name} {method} "))
                           for method in ("greedy", "sherpa_onnx_offline", "sherpa_onnx_streaming"))
        assert "(deploy avg5-epoch-30): %WER" in greedy and wer_of(greedy) < 40, greedy  # measured: 17.0, 22.6
        assert all(abs(wer_of(line) - wer_of(greedy)) <= 0.1 for line in sherpa), sherpa
    assert (recipe / "exp" / "deploy" / "onnx-streaming-avg5-epoch-30" / "encoder.onnx").is_file()
    assert not (ROOT / "egs" / "mycorpus").exists()
