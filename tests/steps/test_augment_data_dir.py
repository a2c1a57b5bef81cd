"""steps/augment_data_dir.py on real speech: LibriSpeech's test-clean samples in Free Spoken Digits' babble, and in a
room; the copy a valid Kaldi dir, each utterance at the SNR asked for, the same on a rerun."""

import math
import sys
from pathlib import Path

import numpy as np
import soundfile

from conftest import ROOT, run_tool

STEPS = ROOT / "steps"


def table(path: Path) -> dict[str, str]:
    return dict(line.split(maxsplit=1) for line in path.read_text().splitlines())


def librispeech_dir(test_data: Path, tmp_path: Path) -> Path:
    out = run_tool(sys.executable, ROOT / "egs" / "librispeech" / "local" / "data_prep.py",
                   test_data / "librispeech_samples" / "LibriSpeech" / "test-clean", tmp_path / "ls")
    assert out.returncode == 0, out.stderr
    return tmp_path / "ls"


def babble(test_data: Path, tmp_path: Path) -> Path:
    paths = sorted((test_data / "fsdd" / "recordings").glob("*_theo_*.wav"))[:20]
    (tmp_path / "babble.scp").write_text("".join(f"theo{n} {path}\n" for n, path in enumerate(paths)))
    return tmp_path / "babble.scp"


def snr_db(clean: np.ndarray, noisy: np.ndarray) -> float:
    return 10 * math.log10(np.mean(clean.astype(np.float64) ** 2) / np.mean((noisy - clean).astype(np.float64) ** 2))


def test_a_noisy_copy_is_a_valid_dir_at_the_snr_asked_for_and_the_same_again(test_data, tmp_path):
    data = librispeech_dir(test_data, tmp_path)
    noise = babble(test_data, tmp_path)
    args = ("--noise-scp", noise, "--snr", "5", "--utt-prefix", "noise-", data)
    out = run_tool(sys.executable, STEPS / "augment_data_dir.py", *args, tmp_path / "noisy")
    assert out.returncode == 0, out.stderr
    noisy = tmp_path / "noisy"
    assert run_tool(ROOT / "utils" / "validate_data_dir.sh", "--no-feats", noisy).returncode == 0
    clean_wav, noisy_wav = table(data / "wav.scp"), table(noisy / "wav.scp")
    assert sorted(noisy_wav) == [f"noise-{key}" for key in sorted(clean_wav)]
    assert table(noisy / "text") == {f"noise-{key}": text for key, text in table(data / "text").items()}
    assert set(table(noisy / "utt2spk").values()) == {f"noise-{s}" for s in table(data / "utt2spk").values()}
    for key, path in clean_wav.items():
        clean, rate = soundfile.read(path, dtype="float32")
        copy, copy_rate = soundfile.read(noisy_wav[f"noise-{key}"], dtype="float32")
        assert copy_rate == rate and copy.shape == clean.shape
        assert abs(snr_db(clean, copy) - 5) < 0.05, key  # 16-bit rounding aside, the babble's level asked for
        assert float(table(noisy / "utt2dur")[f"noise-{key}"]) == round(len(clean) / rate, 3)
    n = len(clean_wav)
    assert f"wrote {noisy} from {data}: {n} of {n} utterances, {n} with noise at 5-5 dB, 0 reverberated" in out.stdout
    again = run_tool(sys.executable, STEPS / "augment_data_dir.py", *args, tmp_path / "again")
    assert again.returncode == 0, again.stderr
    copies = table(tmp_path / "again" / "wav.scp")
    for key, path in noisy_wav.items():  # each utterance's draws from its own id and --seed
        assert np.array_equal(soundfile.read(path)[0], soundfile.read(copies[key])[0])
    # a negative --snr as written ('-5,5' was taken for an option), and another prefix's copy other noise (it was
    # the same: two copies combined held each utterance's noise twice)
    negative = run_tool(sys.executable, STEPS / "augment_data_dir.py", "--noise-scp", noise, "--snr", "-5,5", data,
                        tmp_path / "negative")
    assert negative.returncode == 0 and "with noise at -5-5 dB" in negative.stdout, negative.stderr
    other = run_tool(sys.executable, STEPS / "augment_data_dir.py", *args[:4], "--utt-prefix", "other-", data,
                     tmp_path / "other")
    assert other.returncode == 0, other.stderr
    others = table(tmp_path / "other" / "wav.scp")
    for key in clean_wav:
        copies = (soundfile.read(noisy_wav[f"noise-{key}"])[0], soundfile.read(others[f"other-{key}"])[0])
        assert not np.array_equal(*copies), key


def test_segments_a_room_and_an_unreadable_recording(test_data, tmp_path):
    """Segments of one recording become files of their own; a room's reverberation keeps each one's power; a
    wav.scp line whose file is gone is named by its line and its utterance left out, the rest kept."""
    data = librispeech_dir(test_data, tmp_path)
    utt = "1089-134686-0000"
    path = table(data / "wav.scp")[utt]
    (data / "wav.scp").write_text(f"{utt} {path}\nzz-gone {tmp_path / 'gone.flac'}\n")
    (data / "segments").write_text(f"{utt}-a {utt} 0.0 1.5\n{utt}-b {utt} 1.5 3.0\nzz-gone-a zz-gone 0 1\n")
    (data / "text").write_text(f"{utt}-a HE HOPED\n{utt}-b THERE WOULD\nzz-gone-a GONE\n")
    (data / "utt2spk").write_text(f"{utt}-a 1089\n{utt}-b 1089\nzz-gone-a zz\n")
    (data / "spk2utt").write_text(f"1089 {utt}-a {utt}-b\nzz zz-gone-a\n")
    for name in ("utt2dur", "spk2gender"):
        (data / name).unlink(missing_ok=True)
    impulse = np.zeros(4000, dtype=np.float32)
    impulse[30], impulse[800], impulse[2500] = 1.0, 0.6, 0.3  # a direct path and two echoes
    soundfile.write(tmp_path / "room.wav", impulse, 16000, subtype="FLOAT")
    (tmp_path / "rooms.scp").write_text(f"room {tmp_path / 'room.wav'}\n")
    out = run_tool(sys.executable, STEPS / "augment_data_dir.py", "--reverb-scp", tmp_path / "rooms.scp", data,
                   tmp_path / "wet")
    assert out.returncode == 0, out.stderr
    assert f"left out {data / 'segments'}:3 (its recording {data / 'wav.scp'}:2): zz-gone-a: " in out.stderr
    wet = tmp_path / "wet"
    assert not (wet / "segments").exists() and sorted(table(wet / "wav.scp")) == [f"{utt}-a", f"{utt}-b"]
    original, rate = soundfile.read(path, dtype="float32")
    for key, start in ((f"{utt}-a", 0), (f"{utt}-b", 24000)):
        copy, _ = soundfile.read(table(wet / "wav.scp")[key], dtype="float32")
        clean = original[start:start + 24000]
        full = np.convolve(clean.astype(np.float64), impulse)[30:30 + 24000]
        expected = full * math.sqrt(np.mean(clean.astype(np.float64) ** 2) / np.mean(full ** 2))
        assert copy.shape == clean.shape and np.abs(copy - expected).max() < 2e-4  # 16-bit rounding
    assert "2 of 3 utterances, 0 with noise, 2 reverberated; 0 scaled down not to clip; 1 unreadable left out" \
        in out.stdout
    (tmp_path / "empty.scp").write_text(f"gone {tmp_path / 'gone.wav'}\n")
    empty = run_tool(sys.executable, STEPS / "augment_data_dir.py", "--noise-scp", tmp_path / "empty.scp", data,
                     tmp_path / "x")
    assert empty.returncode == 1 and f"--noise-scp {tmp_path / 'empty.scp'}: no recording it lists can be read" \
        in empty.stderr, empty.stderr
    assert not (tmp_path / "x").exists()  # refused before anything is written
    none = run_tool(sys.executable, STEPS / "augment_data_dir.py", data, tmp_path / "x")
    assert none.returncode == 2 and "give --noise-scp, --reverb-scp or both" in none.stderr
    backwards = run_tool(sys.executable, STEPS / "augment_data_dir.py", "--noise-scp", tmp_path / "rooms.scp",
                         "--snr", "20,10", data, tmp_path / "x")
    assert backwards.returncode == 2 and "--snr is [low, high] in dB, -100 <= low <= high <= 100" in backwards.stderr


def test_a_transcript_kaldis_rules_refuse_or_without_audio_is_named_and_counted(test_data, tmp_path):
    """A transcript with a NUL made the copy invalid (exit 1, after all the audio was written); one without audio
    was dropped unnamed, the summary's total leaving it out."""
    data = librispeech_dir(test_data, tmp_path)
    lines = (data / "text").read_bytes().splitlines()
    nul = lines[1].split()[0].decode()
    lines[1] += b"\x00"
    (data / "text").write_bytes(b"\n".join(lines + [b"ghost A WORD"]) + b"\n")
    speaker = (data / "utt2spk").read_text().split()[1]
    with open(data / "utt2spk", "a") as f:
        f.write(f"ghost {speaker}\n")
    out = run_tool(sys.executable, STEPS / "augment_data_dir.py", "--noise-scp", babble(test_data, tmp_path), data,
                   tmp_path / "noisy")
    assert out.returncode == 0, out.stderr
    assert f"left out {data / 'text'}:2: {nul}: non-printable character U+0000" in out.stderr
    assert f"left out {data / 'text'}:{len(lines) + 1}: ghost: no audio in wav.scp" in out.stderr
    n = len(lines) + 1
    assert f"{n - 2} of {n} utterances" in out.stdout and out.stdout.endswith(
        "; 2 left out of the source's tables (named above)\n"), out.stdout
    assert nul not in table(tmp_path / "noisy" / "text")
    assert run_tool(ROOT / "utils" / "validate_data_dir.sh", "--no-feats", tmp_path / "noisy").returncode == 0
