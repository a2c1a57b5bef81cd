"""Searches, decode.py, score.py, checkpoint averaging and transcription on a model trained here on real yesno audio."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jiwer
import numpy as np
import pytest
import soundfile
import torch
import yaml

from conftest import ROOT, run_tool
from rnnt.data.resample import resample
from rnnt.edit_distance import error_counts
from rnnt.modified_beam_search import modified_beam_search
from rnnt.search import beam_search, greedy_search, label_ends_frame, symbols_per_frame
from search_reference import alignment_log_prob, sequence_log_prob
from rnnt.training import checkpoint
from rnnt.training.checkpoint_names import numbered
from rnnt.training.config_change import units_digest
from rnnt.transcriber import Transcriber, batches_by_length, decoding_pipeline, load_model

STEPS = ROOT / "steps"


def train_five(yesno, root, one_sym_per_frame: bool, epochs: int = 5):
    """The yesno recipe's tiny model trained on five real utterances (5 epochs of the five repeated 24
    times: 120 steps, about 11 s). Its CTC head matters: without it the LSTM prediction network
    memorises the five sequences and the last words are spread over many frames, which sums to the
    right answer but defeats per-frame argmax decisions."""
    values = yaml.safe_load((ROOT / "egs" / "yesno" / "conf" / "tiny.yaml").read_text())
    values["model"]["loss"]["one_sym_per_frame"] = one_sym_per_frame
    values["data"]["batch"] = {"type": "static", "batch_size": 5}
    values["data"]["shuffle_buffer"] = 0
    values["train"].update(epochs=epochs, ema_decay=0.5, schedule={"type": "constant"}, log_every=50)
    (root / "conf.yaml").write_text(yaml.safe_dump(values))
    (root / "train.list").write_text((yesno / "five.list").read_text() * 24)
    exp = root / "exp"
    out = run_tool(sys.executable, STEPS / "train.py", "--config", root / "conf.yaml", "--train-list",
                   root / "train.list", "--lang-dir", yesno / "lang", "--exp-dir", exp)
    assert out.returncode == 0, out.stderr[-2000:]
    return exp


@pytest.fixture(scope="module")
def trained(yesno, tmp_path_factory):
    """As the recipe trains it: a modified transducer (one symbol per frame)."""
    return train_five(yesno, tmp_path_factory.mktemp("trained"), one_sym_per_frame=True)


@pytest.fixture(scope="module")
def trained_standard(yesno, tmp_path_factory):
    """A standard transducer: several labels a frame; trained less (48 steps), as the one test on it holds
    whatever a model learned."""
    return train_five(yesno, tmp_path_factory.mktemp("trained_standard"), one_sym_per_frame=False, epochs=2)


def last_epoch(exp) -> Path:
    """The experiment's checkpoint of its last epoch (5 for `trained`, 2 for `trained_standard`)."""
    return Path(numbered(str(exp), "epoch")[-1])


@pytest.fixture(params=["trained", "trained_standard"])
def either(request):
    """Each search test runs on both kinds of model."""
    return request.getfixturevalue(request.param)


def encoded(exp, yesno):
    experiment, model, tokenizer, _ = load_model(str(exp))
    from rnnt.data.pipeline import Pipeline

    batch = next(Pipeline(str(yesno / "five.list"), experiment.data, tokenizer, train=False).batches())
    with torch.no_grad():
        enc, enc_lens = model.encode(batch["feats"], batch["feat_lens"])
    return model, tokenizer, batch, enc, enc_lens


def test_every_search_scores_what_its_labels_allow(either, yesno):
    """On a trained model, whatever it learned: greedy's score is its alignment's probability, and no
    search claims more probability for its labels than all their alignments have. A modified transducer
    is searched one label a frame."""
    model, _, _, enc, enc_lens = encoded(either, yesno)
    cap = symbols_per_frame(model, None)
    ends = label_ends_frame(model, cap)
    assert cap == (1 if model.config.loss.one_sym_per_frame else 3)
    modified = modified_beam_search(model, enc, enc_lens, beam=4)
    for b, hyp in enumerate(greedy_search(model, enc, enc_lens)):
        length = int(enc_lens[b])
        assert hyp.score == pytest.approx(alignment_log_prob(model, enc[b, :length], hyp.tokens, hyp.frames, cap,
                                                             ends), abs=1e-3)
        found = beam_search(model, enc[b], length, beam=4)
        if ends:
            found += modified[b]
        for other in found:
            assert other.score <= sequence_log_prob(model, enc[b, :length], other.tokens, cap, ends) + 1e-3
            if ends:
                assert len(set(other.frames)) == len(other.frames)


@pytest.mark.parametrize("method", ["greedy", "modified_beam"])
def test_decode_writes_kaldi_outputs_and_wer_equals_jiwer(trained, yesno, method):
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", method, trained, yesno / "test.list", "test")
    assert out.returncode == 0, out.stderr
    assert "RTF" in out.stdout
    d = trained / f"decode-test-{method}"
    hyp = dict(line.split(maxsplit=1) if " " in line else (line, "") for line in (d / "hyp").read_text().splitlines())
    ref = dict(line.split(maxsplit=1) for line in (d / "ref").read_text().splitlines())
    assert len(ref) == 30 and set(hyp) == set(ref)
    keys = sorted(ref)
    expected = 100 * jiwer.wer([ref[k] for k in keys], [hyp[k] for k in keys])
    wer_line = (d / "wer").read_text().strip()
    assert wer_line.startswith(f"%WER {expected:.2f} [ ")
    measures = jiwer.process_words([ref[k] for k in keys], [hyp[k] for k in keys])
    errors = measures.substitutions + measures.deletions + measures.insertions  # the total is any minimum's
    ins, dels, sub = (sum(split) for split in zip(*(error_counts(ref[k].split(), hyp[k].split()) for k in keys)))
    assert wer_line == (f"%WER {expected:.2f} [ {errors} / {sum(len(ref[k].split()) for k in keys)}, {ins} ins, "
                        f"{dels} del, {sub} sub ]")  # split as compute-wer splits it
    errs = (d / "errs").read_text()
    assert errs.startswith(wer_line) and "SUBSTITUTIONS:" in errs and "PER-WORD STATS:" in errs
    assert len((d / "recogs").read_text().splitlines()) == 60


def test_hotwords_favour_their_phrase_and_at_score_0_change_nothing(trained, yesno, tmp_path):
    """--hotwords: at score 0 modified beam search through the hotwords' fusion decodes as without; at a large
    score the phrase wins where the audio leaves room for it (it is in more transcripts), in a decode dir of its
    own, and transcribe.py favours it the same; greedy search cannot take them."""
    (tmp_path / "hot.txt").write_text("NO NO NO NO\n")

    def hyps(*options) -> dict[str, str]:
        out = run_tool(sys.executable, STEPS / "decode.py", "--method", "modified_beam", *options, trained,
                       yesno / "test.list", "hot")
        assert out.returncode == 0, out.stderr[-2000:]
        folder = trained / f"decode-hot-modified_beam{'+hotwords' if options else ''}"
        return dict(line.split(" ", 1) if " " in line else (line, "") for line in (folder / "hyp").read_text()
                    .splitlines())

    plain = hyps()
    assert hyps("--hotwords", tmp_path / "hot.txt", "--hotwords-score", "0") == plain
    favoured = hyps("--hotwords", tmp_path / "hot.txt", "--hotwords-score", "8")
    assert sum("NO NO NO NO" in text for text in favoured.values()) > sum("NO NO NO NO" in t for t in plain.values())
    (tmp_path / "hot2.txt").write_text("NO NO NO NO\nMAYBE\n")  # a line the units cannot spell: it aborted the run
    for options, expected in (((), plain), (("--hotwords", tmp_path / "hot2.txt", "--hotwords-score", "8"), favoured)):
        out = run_tool(sys.executable, STEPS / "transcribe.py", "--method", "modified_beam", *options, "--scp",
                       yesno / "data" / "test_yesno" / "wav.scp", trained)
        assert out.returncode == 0, out.stderr[-2000:]
        assert dict(line.split(" ", 1) if " " in line else (line, "") for line in out.stdout.splitlines()) == expected
    assert f"transcribe.py: {tmp_path / 'hot2.txt'}:2: 'MAYBE' holds what the model's units cannot spell (<unk>); " \
        f"left out\ntranscribe.py: {tmp_path / 'hot2.txt'}: 1 hotword kept, 1 left out (named above)\n" in out.stderr
    greedy = run_tool(sys.executable, STEPS / "decode.py", "--hotwords", tmp_path / "hot.txt", trained,
                      yesno / "test.list", "hot")
    assert greedy.returncode == 2 and "--hotwords goes with a beam search" in greedy.stderr


def test_decode_times_words_in_the_recordings_where_the_data_dir_has_segments(trained, yesno, tmp_path):
    """Five recordings cut at 1.5 s by segments: the ctm names each recording's file and channel
    (reco2file_and_channel) and counts from its start: the words and times of a dir whose recordings are
    those cuts, 1.5 s later."""
    cut, segmented = tmp_path / "cut", tmp_path / "segmented"
    cut.mkdir(), segmented.mkdir()
    tables = {"cut": {"wav.scp": [], "text": [], "utt2spk": []},
              "segmented": {"wav.scp": [], "text": [], "utt2spk": [], "segments": [], "reco2file_and_channel": []}}
    texts = dict(line.split(maxsplit=1) for line in (yesno / "five" / "text").read_text().splitlines())
    for line in (yesno / "five" / "wav.scp").read_text().splitlines():
        utt, path = line.split()
        samples, rate = soundfile.read(path, dtype="int16")
        soundfile.write(cut / f"{utt}.wav", samples[int(1.5 * rate):], rate)
        for name, wav in (("cut", cut / f"{utt}.wav"), ("segmented", path)):
            tables[name]["text"].append(f"{utt}-cut {texts[utt]}")
            tables[name]["utt2spk"].append(f"{utt}-cut global")
        tables["cut"]["wav.scp"].append(f"{utt}-cut {cut / f'{utt}.wav'}")
        tables["segmented"]["wav.scp"].append(f"{utt} {path}")
        tables["segmented"]["segments"].append(f"{utt}-cut {utt} 1.50 {len(samples) / rate:.3f}")
        tables["segmented"]["reco2file_and_channel"].append(f"{utt} {utt}.wav A")
    ctms = {}
    for name, files in tables.items():
        for file, lines in files.items():
            (tmp_path / name / file).write_text("".join(f"{line}\n" for line in sorted(lines)))
        out = run_tool(sys.executable, STEPS / "make_raw_list.py", tmp_path / name, tmp_path / name / "data.list")
        assert out.returncode == 0, out.stderr
        out = run_tool(sys.executable, STEPS / "decode.py", trained, tmp_path / name / "data.list", name)
        assert out.returncode == 0, out.stderr
        ctms[name] = [line.split() for line in (trained / f"decode-{name}-greedy" / "ctm").read_text().splitlines()]
    assert len(ctms["cut"]) >= 10
    assert ctms["segmented"] == [[f"{utt.removesuffix('-cut')}.wav", "A", f"{float(start) + 1.5:.2f}", duration, word,
                                  confidence] for utt, _, start, duration, word, confidence in ctms["cut"]]
    assert all(0 < float(confidence) <= 1 for *_, confidence in ctms["cut"])


def test_score_marks_missing_hypotheses_partial(tmp_path):
    (tmp_path / "ref").write_text("u1 YES NO\nu2 NO NO YES\nu3\n")
    (tmp_path / "hyp").write_text("u1 YES YES\nu3 NO\n")
    out = run_tool(sys.executable, STEPS / "score.py", "--errs", tmp_path / "errs", tmp_path / "ref", tmp_path / "hyp")
    assert out.returncode == 0, out.stderr
    # u1: 1 sub; u2 missing: 3 del; u3 empty reference: 1 ins. 5 errors over 5 reference words.
    assert out.stdout.strip() == "%WER 100.00 [ 5 / 5, 1 ins, 3 del, 1 sub ] [PARTIAL]"
    assert "u2 #csid 0 0 0 3" in (tmp_path / "errs").read_text()


def test_averaged_checkpoint_equals_hand_computed_average(trained):
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--last", "3", trained)
    assert out.returncode == 0, out.stderr
    averaged = checkpoint.load(str(trained / "avg-3.pt"))["model"]
    states = [checkpoint.load(str(trained / f"epoch-{n}.pt")) for n in (3, 4, 5)]
    for name, value in averaged.items():
        weights = [s["ema"][name] for s in states]  # EMA weights are averaged where kept
        if value.dtype.is_floating_point:
            torch.testing.assert_close(value, sum(w.double() for w in weights).float() / 3, rtol=1e-6, atol=1e-7)
        else:
            assert torch.equal(value, weights[-1])
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--last", "0", trained)
    assert out.returncode == 2 and "at least 1" in out.stderr


def test_an_average_of_raw_weights_is_not_written_where_the_recipes_tag_would_decode_it(trained, tmp_path):
    """--no-ema wrote avg-N.pt, which decoding's tag avgN-epoch-K names: the recipe decoded the raw average under the
    name of its EMA one. It is avg-N-raw.pt (avg-best-N-raw.pt), decoded with --checkpoint."""
    for n in (3, 4):
        state = checkpoint.load(str(trained / f"epoch-{n}.pt"))
        state["meta"]["valid_loss"] = float(n)
        checkpoint.save(str(tmp_path / f"epoch-{n}.pt"), state)
    for how, written in (("--last", "avg-2-raw.pt"), ("--best", "avg-best-2-raw.pt")):
        out = run_tool(sys.executable, STEPS / "average_checkpoints.py", how, "2", "--no-ema", tmp_path)
        assert out.returncode == 0 and out.stdout.startswith(f"average_checkpoints.py: {tmp_path / written}: "), out
        assert checkpoint.load_meta(str(tmp_path / written))["averaged_weights"] == "raw"
    assert not (tmp_path / "avg-2.pt").exists() and os.readlink(tmp_path / "model.pt") == "avg-best-2-raw.pt"


def test_the_best_epochs_are_averaged_into_their_own_file(trained, tmp_path):
    """--best N picks the epochs of lowest validation loss and writes avg-best-N.pt: avg-N.pt is the last N
    epochs to decoding's model tags (avgN-epoch-K), which would misname these. The epochs go in their order,
    10 after 4 (not as text), the newest's meta carried."""
    for n, source, loss in ((3, 3, 3.0), (4, 4, 1.0), (5, 5, 2.0), (10, 5, 1.5)):
        state = checkpoint.load(str(trained / f"epoch-{source}.pt"))
        state["meta"].update(valid_loss=loss, epoch=n)
        checkpoint.save(str(tmp_path / f"epoch-{n}.pt"), state)
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--best", "2", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"average_checkpoints.py: {tmp_path}/avg-best-2.pt: averaged epoch-4.pt, epoch-10.pt")
    meta = checkpoint.load(str(tmp_path / "avg-best-2.pt"))["meta"]
    assert meta["averaged"] == ["epoch-4.pt", "epoch-10.pt"] and meta["epoch"] == 10
    assert not (tmp_path / "avg-2.pt").exists() and checkpoint.numbered(str(tmp_path), "average") == []


def test_best_epochs_leave_out_one_validated_on_part_of_dev(trained, tmp_path):
    """An epoch whose validation left a batch out of memory scored a shorter dev set (its longest utterances
    gone): its lower loss is not comparable, and it is not ranked."""
    for n, loss, skipped in ((3, 3.0, 0), (4, 1.0, 0), (5, 0.5, 4), (6, 2.0, 0)):
        state = checkpoint.load(str(trained / "epoch-5.pt"))
        state["meta"].update(valid_loss=loss, epoch=n, **({"valid_skipped_out_of_memory": skipped} if skipped else {}))
        checkpoint.save(str(tmp_path / f"epoch-{n}.pt"), state)
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--best", "2", tmp_path)
    assert out.returncode == 0 and "averaged epoch-4.pt, epoch-6.pt" in out.stdout, out.stdout + out.stderr
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--best", "4", tmp_path)
    assert out.returncode == 1 and "only 3 epochs were validated on the whole dev set" in out.stderr


def test_best_epochs_leave_out_one_whose_validation_loss_is_not_a_number(trained, tmp_path):
    """A NaN is neither below nor above another loss: sorted() left the list in no order, and the worst epoch
    and the NaN one were averaged."""
    for n, loss in ((1, 5.0), (2, float("nan")), (3, 1.0), (4, 2.0), (5, 0.5)):
        state = checkpoint.load(str(trained / "epoch-5.pt"))
        state["meta"].update(valid_loss=loss, epoch=n)
        checkpoint.save(str(tmp_path / f"epoch-{n}.pt"), state)
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--best", "2", tmp_path)
    assert out.returncode == 0 and "averaged epoch-3.pt, epoch-5.pt" in out.stdout, out.stdout + out.stderr
    assert f"{tmp_path}/epoch-2.pt: validation loss nan; not ranked" in out.stderr
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--best", "5", tmp_path)
    assert out.returncode == 1 and "only 4 epochs were validated on the whole dev set to a finite loss" in out.stderr


def test_best_epochs_leave_out_those_trained_before_a_valid_list_was_given(trained, tmp_path):
    """paths.valid_list is a key a resume honours: epochs 1-2 trained without one, 3-5 with it. --best refused
    the whole ranking ('some epochs have no validation loss'); the unvalidated are named and not ranked, and
    epochs none of which was validated are still refused."""
    for n, loss in ((1, None), (2, None), (3, 3.0), (4, 1.0), (5, 2.0)):
        state = checkpoint.load(str(trained / "epoch-5.pt"))
        state["meta"] = {key: value for key, value in state["meta"].items() if not key.startswith("valid_")}
        state["meta"].update(epoch=n, **({"valid_loss": loss} if loss is not None else {}))
        checkpoint.save(str(tmp_path / f"epoch-{n}.pt"), state)
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--best", "2", tmp_path)
    assert out.returncode == 0 and "averaged epoch-4.pt, epoch-5.pt" in out.stdout, out.stdout + out.stderr
    assert f"{tmp_path}/epoch-1.pt: not validated; not ranked" in out.stderr
    for n in (3, 4, 5):
        (tmp_path / f"epoch-{n}.pt").unlink()
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--best", "1", tmp_path)
    assert out.returncode == 1 and "no epoch has a validation loss (train with a valid list)" in out.stderr


def test_best_epochs_rank_the_validated_when_the_newest_were_trained_after_the_valid_list_was_dropped(trained,
                                                                                                        tmp_path):
    """The reverse of the above: epochs 1-3 validated on one dev set, 4-5 resumed without a valid list. The dev
    set of reference was the newest epoch's, none, which refused every validated epoch; it is the newest
    validated one's, and an epoch validated on another dev set is still not ranked."""
    for n, loss, dev_set in ((1, 3.0, "30-aa"), (2, 1.0, "30-bb"), (3, 2.0, "30-bb"), (4, None, None), (5, None, None)):
        state = checkpoint.load(str(trained / "epoch-5.pt"))
        state["meta"] = {key: value for key, value in state["meta"].items() if not key.startswith("valid_")}
        state["meta"].update(epoch=n, **({"valid_loss": loss, "valid_dev_set": dev_set} if loss is not None else {}))
        checkpoint.save(str(tmp_path / f"epoch-{n}.pt"), state)
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--best", "2", tmp_path)
    assert out.returncode == 0 and "averaged epoch-2.pt, epoch-3.pt" in out.stdout, out.stdout + out.stderr
    assert f"{tmp_path}/epoch-5.pt: not validated; not ranked" in out.stderr
    assert f"{tmp_path}/epoch-1.pt: validated on another dev set than epoch-3.pt; not ranked" in out.stderr


def test_a_damaged_checkpoint_is_named_and_nothing_is_averaged(trained, tmp_path):
    for n in (3, 4, 5):
        (tmp_path / f"epoch-{n}.pt").write_bytes((trained / f"epoch-{n}.pt").read_bytes()[:None if n != 4 else 1000])
    for how in ("--last", "--best"):
        out = run_tool(sys.executable, STEPS / "average_checkpoints.py", how, "3", tmp_path)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.startswith(f"average_checkpoints.py: {tmp_path}/epoch-4.pt: not a readable checkpoint (")
        assert not (tmp_path / "avg-3.pt").exists()
    (tmp_path / "epoch-4.pt").unlink()
    (tmp_path / "epoch-4.pt").symlink_to(tmp_path / "gone.pt")  # a link to a checkpoint that is gone: a traceback
    for how in ("--last", "--best"):
        out = run_tool(sys.executable, STEPS / "average_checkpoints.py", how, "3", tmp_path)
        assert out.returncode == 1 and out.stderr == f"average_checkpoints.py: {tmp_path}/epoch-4.pt: no such " \
            "file (a link to a checkpoint that is gone?); nothing averaged (remove it, or retrain that epoch)\n", \
            out.stderr


def test_another_models_or_a_bare_state_dict_among_the_epochs_is_named_and_nothing_is_averaged(trained, tmp_path,
                                                                                               yesno):
    """A checkpoint of another model copied in (a tensor of another shape) was a traceback of torch's; a bare
    state_dict saved by another tool was "decode.py: 'model'"."""
    for n in (3, 4, 5):
        shutil.copy(trained / f"epoch-{n}.pt", tmp_path)
    state = checkpoint.load(str(tmp_path / "epoch-4.pt"))
    weights = state["ema"] if state.get("ema") is not None else state["model"]  # the ones averaged
    weights[next(iter(weights))] = torch.zeros(3)
    checkpoint.save(str(tmp_path / "epoch-4.pt"), state)
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--last", "3", tmp_path)
    assert out.returncode == 1 and out.stderr == (f"average_checkpoints.py: {tmp_path}/epoch-4.pt: another model than "
                                                  f"{tmp_path}/epoch-3.pt's (other tensors or shapes); nothing "
                                                  "averaged\n")
    torch.save(checkpoint.load(str(trained / "epoch-4.pt"))["model"], tmp_path / "epoch-4.pt")
    for tool in ("average_checkpoints.py", "decode.py"):
        args = ["--last", "3", tmp_path] if tool == "average_checkpoints.py" else \
            ["--checkpoint", tmp_path / "epoch-4.pt", trained, yesno / "test.list", "x"]
        out = run_tool(sys.executable, STEPS / tool, *args)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert f"{tmp_path}/epoch-4.pt: not a checkpoint of this project (a dict with 'model' and 'meta'" in out.stderr
    assert not (tmp_path / "avg-3.pt").exists()


def test_an_average_that_cannot_be_written_is_one_line_and_leaves_no_part_file(trained, tmp_path):
    """--output in a dir that is not there, or naming a dir: a traceback, and the second left <dir>.tmp."""
    (tmp_path / "adir").mkdir()
    for output in (tmp_path / "nodir" / "x.pt", tmp_path / "adir"):
        out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--last", "2", "--output", output, trained)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.startswith(f"average_checkpoints.py: {output}: cannot write the average (")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]


def test_integer_samples_are_scaled_and_word_times_end_with_the_audio(trained, yesno):
    """16-bit PCM given as integers transcribes as the same samples in [-1, 1], 8-bit too; a word's times never pass the
    audio's end (the silence decoding appends is not audio: a word's last unit emitted in it ends there, and a word
    emitted in it whole takes the last frame: a CTM line of no duration before)."""
    from rnnt.search import Hypothesis
    from rnnt.transcriber import words_with_times

    transcriber = Transcriber.from_exp_dir(str(trained))
    entry = json.loads(sorted((yesno / "five.list").read_text().splitlines())[0])
    samples, rate = soundfile.read(entry["wav"], dtype="int16")
    as_ints = transcriber.transcribe((torch.from_numpy(samples), rate))
    as_floats = transcriber.transcribe((torch.from_numpy(samples).float() / 32768, rate))
    assert (as_ints.text, as_ints.words) == (as_floats.text, as_floats.words) and as_ints.text
    as_float64 = transcriber.transcribe(soundfile.read(entry["wav"]))  # numpy float64, soundfile's default
    assert (as_float64.text, as_float64.words) == (as_floats.text, as_floats.words)
    stereo, _ = soundfile.read(entry["wav"], always_2d=True)  # soundfile's (samples, channels): the shorter side
    stereo = stereo.repeat(2, axis=1)  # is the channels (it was read as 2 channels of a few samples each)
    as_stereo = transcriber.transcribe((stereo, rate))
    assert (as_stereo.text, as_stereo.words) == (as_floats.text, as_floats.words)
    eight_bit = (samples.astype("int32") // 256 + 128).astype("uint8")  # WAV's 8-bit PCM: unsigned around 128
    torch.testing.assert_close(transcriber.waveform((eight_bit, rate)), transcriber.waveform((samples, rate)),
                               atol=1 / 128, rtol=0)  # it came out as inf
    assert max(w["end"] for w in as_ints.words) <= len(samples) / rate
    tokenizer = transcriber.tokenizer
    yes, no = tokenizer.units["YES"], tokenizer.units["NO"]
    words = words_with_times(tokenizer, Hypothesis([yes, no], [10, 99], 0.0), 0.03, duration=2.5)
    assert words == [{"word": "YES", "start": 0.3, "end": 0.33}, {"word": "NO", "start": 2.49, "end": 2.5}]


def test_transcribe_any_format_rate_and_channels(trained, yesno, tmp_path):
    """A stereo 44.1 kHz Ogg/Vorbis copy of a yesno file is mixed down and resampled to the features of
    the original (up to the codec's loss); transcribe() decodes as greedy search over the pipeline's
    features; the tool prints both files with word times inside the audio."""
    entry = json.loads(sorted((yesno / "five.list").read_text().splitlines())[0])
    samples, rate = soundfile.read(entry["wav"], dtype="float32")
    stereo = resample(torch.from_numpy(samples), rate, 44100).numpy()
    stereo = np.stack([stereo, stereo * 0.9], axis=1)
    converted = tmp_path / "stereo_44k.ogg"
    soundfile.write(converted, stereo, 44100, format="OGG", subtype="VORBIS")
    transcriber = Transcriber.from_exp_dir(str(trained))
    original, copy = transcriber.features(entry["wav"]), transcriber.features(str(converted))
    assert original.shape == copy.shape
    assert float((original - copy).abs().mean()) < 0.1 * float(original.std())
    model, tokenizer, batch, enc, enc_lens = encoded(trained, yesno)
    index = batch["keys"].index(entry["key"])
    searched = greedy_search(model, enc[index:index + 1], enc_lens[index:index + 1])[0]
    assert transcriber.transcribe(entry["wav"]).text == tokenizer.decode(searched.tokens)
    out = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--word-times", trained, converted, entry["wav"])
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["file"] for r in rows] == [str(converted), entry["wav"]]
    assert rows[1]["text"] == tokenizer.decode(searched.tokens)
    streamed = run_tool(sys.executable, STEPS / "transcribe.py", "--stream", trained, converted)  # resampled block
    assert streamed.stdout.splitlines()[-1] == f"{converted} {rows[0]['text']}".rstrip(), streamed.stderr  # by block
    for row in rows:
        words = row["words"]
        assert [w["word"] for w in words] == row["text"].split()
        assert all(0 <= w["start"] < w["end"] <= len(samples) / rate + 0.1 for w in words)
        assert [w["start"] for w in words] == sorted(w["start"] for w in words)
    bad = run_tool(sys.executable, STEPS / "transcribe.py", trained, tmp_path / "missing.wav")
    assert bad.returncode == 1 and "cannot transcribe its audio" in bad.stderr
    short = tmp_path / "short.wav"  # 10 ms: no 25 ms analysis window fits
    soundfile.write(short, samples[:rate // 100], rate)
    nan = tmp_path / "nan.wav"  # a float file with a NaN sample: an empty transcript before, NaN all through
    soundfile.write(nan, np.where(np.arange(len(samples)) == 500, np.nan, samples), rate, subtype="FLOAT")
    mixed = run_tool(sys.executable, STEPS / "transcribe.py", trained, short, tmp_path / "missing.wav", nan,
                     entry["wav"])
    assert mixed.returncode == 1, mixed.stderr  # the good file is transcribed after the three bad ones, and
    assert f"{tmp_path / 'missing.wav'}: cannot transcribe its audio (no such file)" in mixed.stderr  # 1 says not all
    assert mixed.stdout.split("\n")[0] == f"{entry['wav']} {rows[1]['text']}".rstrip()
    assert f"{short}: cannot transcribe its audio (10.0 ms of audio, shorter than one analysis window)" in mixed.stderr
    assert f"{nan}: cannot transcribe its audio (some of its samples are not finite (NaN or inf))" in mixed.stderr
    assert "transcribe.py: 1 of 4 files transcribed; 3 could not be (named above)" in mixed.stderr
    streamed = run_tool(sys.executable, STEPS / "transcribe.py", "--stream", trained, short)  # an empty transcript
    assert streamed.returncode == 1 and streamed.stdout == ""  # and exit 0 before
    assert f"{short}: cannot transcribe its audio (10.0 ms of audio, shorter than one analysis" in streamed.stderr


@pytest.mark.slow  # (an integration run: the full suite's)
def test_transcribe_a_wav_scp_gives_its_keys_transcripts_as_a_hyp_file_score_py_reads(trained, yesno, tmp_path):
    """--scp: a Kaldi wav.scp's files and commands transcribed under their keys (one that cannot be read named,
    the rest kept), a hyp file steps/score.py scores against the data dir's text."""
    entries = [json.loads(line) for line in sorted((yesno / "five.list").read_text().splitlines())[:3]]
    scp = tmp_path / "wav.scp"
    scp.write_text(f"{entries[0]['key']} {entries[0]['wav']}\n{entries[1]['key']} cat {entries[1]['wav']} |\n"
                   f"{entries[2]['key']} {entries[2]['wav']}\nbroken false |\nkeyonly\n"
                   f"broken {entries[0]['wav']}\nlost {tmp_path / 'lost.wav'}\n")
    out = run_tool(sys.executable, STEPS / "transcribe.py", "--scp", scp, trained)
    # a recording that cannot be read: named by its line, key and path or command (by its key alone before)
    assert out.returncode == 1 and f"transcribe.py: {scp}:4: broken: false |: cannot transcribe its audio (command " \
        "'false' failed" in out.stderr, out.stderr
    assert f"transcribe.py: {scp}:7: lost: {tmp_path / 'lost.wav'}: cannot transcribe its audio (no such file)" \
        in out.stderr
    # a key alone: named by its line, not "keyonly: cannot transcribe its audio (no such file)"; a repeated key's
    # line named and counted (left out without a word in the summary, which then said all were done)
    assert f"transcribe.py: {scp}:5: keyonly: no audio after the key\n" in out.stderr
    assert f"transcribe.py: {scp}:6: broken: repeats the key of line 4; left out" in out.stderr
    assert "3 of 7 recordings transcribed; 4 could not be (named above)" in out.stderr
    piped = run_tool(sys.executable, STEPS / "transcribe.py", "--scp", "-", trained, stdin=scp.read_text())
    assert (piped.returncode, piped.stdout) == (1, out.stdout)  # '-': standard input, as Kaldi's tools read it
    assert "transcribe.py: /dev/stdin:5: keyonly: no audio after the key\n" in piped.stderr
    empty = tmp_path / "empty.scp"  # nothing transcribed, with exit status 0 and no word
    empty.write_text("")
    nothing = run_tool(sys.executable, STEPS / "transcribe.py", "--scp", empty, trained)
    assert (nothing.returncode, nothing.stderr) == (1, f"transcribe.py: {empty}: no recordings in it to transcribe\n")
    files = run_tool(sys.executable, STEPS / "transcribe.py", trained, *(e["wav"] for e in entries))
    texts = [line.split(" ", 1)[1] if " " in line else "" for line in files.stdout.splitlines()]
    assert out.stdout.splitlines() == [f"{e['key']} {text}".rstrip() for e, text in zip(entries, texts)]
    (tmp_path / "hyp").write_text(out.stdout)
    (tmp_path / "ref").write_text("".join(f"{e['key']} {e['txt']}\n" for e in entries))
    scored = run_tool(sys.executable, STEPS / "score.py", tmp_path / "ref", tmp_path / "hyp")
    assert scored.returncode == 0 and scored.stdout.startswith("%WER "), scored.stderr
    both = run_tool(sys.executable, STEPS / "transcribe.py", "--scp", scp, trained, entries[0]["wav"])
    assert both.returncode == 2 and "give the audio files, or --scp naming them, one of the two" in both.stderr
    latin = os.fsencode(tmp_path) + b"/caf\xe9.wav"  # a Latin-1 file name, which make_shards.py takes: it was
    shutil.copy(entries[0]["wav"], latin)  # refused as a line that is not UTF-8, and its key's also printed as it is
    (tmp_path / "latin.scp").write_bytes(b"k\xe9y " + latin + b"\n")
    named = subprocess.run([sys.executable, str(STEPS / "transcribe.py"), "--scp", str(tmp_path / "latin.scp"),
                            str(trained)], capture_output=True, cwd=ROOT)
    assert named.returncode == 0, named.stderr.decode(errors="replace")
    assert named.stdout == b"k\xe9y" + (b" " + texts[0].encode() if texts[0] else b"") + b"\n"
    strict = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}  # (as under a UTF-8 locale) the name given as a file:
    for json_option in ([], ["--json"]):  # a traceback at the print; --json wrote its byte, no JSON
        given = subprocess.run([sys.executable, str(STEPS / "transcribe.py"), *json_option, str(trained), latin,
                                entries[0]["wav"]], capture_output=True, cwd=ROOT, env=strict)
        assert given.returncode == 0, given.stderr.decode(errors="replace")
        first, second = given.stdout.splitlines()
        if json_option:
            assert os.fsencode(json.loads(first)["file"]) == latin and json.loads(second)["text"] == texts[0]
        else:
            assert first == latin + (b" " + texts[0].encode() if texts[0] else b"")


def test_transcribe_the_segments_of_a_wav_scp_under_their_utterances_keys(trained, yesno, tmp_path):
    """--segments: each segment cut from its recording (a file, a command) transcribed as the same samples cut into a
    file of their own are, under its utterance's key; one of no recording named by its line, the rest kept. Without
    --segments, a segments file beside the wav.scp is named (its recordings were transcribed whole, unsaid)."""
    entries = [json.loads(line) for line in sorted((yesno / "five.list").read_text().splitlines())[:2]]
    scp, segments = tmp_path / "wav.scp", tmp_path / "segments"
    scp.write_text(f"rec0 {entries[0]['wav']}\nrec1 cat {entries[1]['wav']} |\n")
    spans = {"rec0-a": ("rec0", 0.0, 2.0), "rec0-b": ("rec0", 2.0, -1), "rec1-a": ("rec1", 0.5, 3.0)}
    segments.write_text("".join(f"{utt} {rec} {start} {end}\n" for utt, (rec, start, end) in spans.items())
                        + "lost rec9 0.0 1.0\n")
    cuts = []
    for utt, (rec, start, end) in spans.items():
        samples, rate = soundfile.read(entries[int(rec[-1])]["wav"], dtype="int16")
        cuts.append(tmp_path / f"{utt}.wav")
        soundfile.write(cuts[-1], samples[int(start * rate):None if end == -1 else int(end * rate)], rate)
    out = run_tool(sys.executable, STEPS / "transcribe.py", "--scp", scp, "--segments", segments, trained)
    assert out.returncode == 1 and f"transcribe.py: {segments}:4: lost: no recording rec9 in {scp}" in out.stderr
    assert "3 of 4 segments transcribed; 1 could not be (named above)" in out.stderr
    files = run_tool(sys.executable, STEPS / "transcribe.py", trained, *cuts)
    texts = [line.split(" ", 1)[1] if " " in line else "" for line in files.stdout.splitlines()]
    assert out.stdout.splitlines() == [f"{utt} {text}".rstrip() for utt, text in zip(spans, texts)]
    assert len(set(texts)) > 1
    whole = run_tool(sys.executable, STEPS / "transcribe.py", "--scp", scp, trained)
    assert whole.returncode == 0 and [line.split()[0] for line in whole.stdout.splitlines()] == ["rec0", "rec1"]
    assert f"{segments} is beside {scp}: its recordings are transcribed whole" in whole.stderr
    segments.write_text("")
    nothing = run_tool(sys.executable, STEPS / "transcribe.py", "--scp", scp, "--segments", segments, trained)
    assert nothing.returncode == 1 and f"transcribe.py: {segments}: no segments in it to transcribe" in nothing.stderr


def test_transcribe_in_batches_prints_what_one_at_a_time_does_in_the_files_order(either, test_data, tmp_path):
    """--batch-size: recordings of unlike lengths (yesno's, and cuts of them from 0.4 s to 2.4 s) encoded and
    searched together, longest first among those read ahead (8 batches' worth), are printed in the wav.scp's
    order with the transcripts, words and n-best lists one at a time gives; a recording that cannot be read
    among them is named and the rest kept."""
    lines = []
    for n, path in enumerate(sorted((test_data / "waves_yesno").glob("*.wav"))[:14]):
        samples, rate = soundfile.read(path, dtype="float32")
        if n % 2:
            path = tmp_path / f"cut{n}.wav"
            soundfile.write(path, samples[: int(rate * (0.4 + n / 5))], rate)
        lines.append(f"utt{n:02d} {path}")
    lines.insert(5, "broken false |")
    (tmp_path / "wav.scp").write_text("\n".join(lines) + "\n")

    def transcribed(batch_size: int) -> list[dict]:
        out = run_tool(sys.executable, STEPS / "transcribe.py", "--scp", tmp_path / "wav.scp", "--json",
                       "--word-times", "--nbest", "--method", "modified_beam", "--batch-size", batch_size, either)
        assert out.returncode == 1 and "wav.scp:6: broken: false |: cannot transcribe its audio" in out.stderr, \
            out.stderr
        assert "14 of 15 recordings transcribed" in out.stderr
        return [json.loads(line) for line in out.stdout.splitlines()]

    alone, batched = transcribed(1), transcribed(3)
    assert [row["file"] for row in batched] == [f"utt{n:02d}" for n in range(14)]
    assert len({row["text"] for row in batched}) > 3  # the cuts hold fewer words: not one transcript for all
    for one, many in zip(alone, batched):
        assert (one["text"], one["words"]) == (many["text"], many["words"])
        assert [h["text"] for h in one["nbest"]] == [h["text"] for h in many["nbest"]]
        assert all(abs(a["score"] - b["score"]) < 1e-3 for a, b in zip(one["nbest"], many["nbest"]))


def test_recordings_are_batched_longest_first_within_the_count_and_the_padded_seconds():
    seconds = [3.0, 30.0, 5.0, 29.0, 4.0, 3600.0, 2.0]
    assert batches_by_length(seconds, 3) == [[5, 1, 3], [2, 4, 0], [6]]
    # an hour-long recording alone; 30 s with 29 s (60 s padded), not with 5 s more (90 s)
    assert batches_by_length(seconds, 3, max_seconds=60) == [[5], [1, 3], [2, 4, 0], [6]]
    assert batches_by_length(seconds, 1) == [[5], [1], [3], [2], [4], [0], [6]]
    assert batches_by_length([], 4) == []


@pytest.mark.slow
def test_transcribe_reads_a_pipe_once_and_names_what_it_cannot_read(trained, yesno, tmp_path):
    """A shell's <(...) lost its first 64 KB to the header's checks (the transcript of the rest, exit 0); a .raw file
    ended --segment-seconds and --stream in a traceback; '-' without --stream was a file named '-', and an MP3 on
    standard input was decoded as raw PCM, noise."""
    wav = json.loads(sorted((yesno / "five.list").read_text().splitlines())[0])["wav"]
    assert Path(wav).stat().st_size > 65536
    tool = [sys.executable, STEPS / "transcribe.py"]
    text = run_tool(*tool, trained, wav).stdout.split(" ", 1)[1]
    assert text.split()
    for options in ("", "--segment-seconds 30", "--stream"):
        piped = run_tool("bash", "-c", f"{shlex.join(map(str, tool))} {options} {trained} <(cat {shlex.quote(wav)})")
        assert piped.returncode == 0, piped.stderr
        assert piped.stdout.splitlines()[-1].split(" ", 1)[1] == text.rstrip("\n"), (options, piped.stdout)
    raw = tmp_path / "b.raw"
    raw.write_bytes(Path(wav).read_bytes()[44:])
    for options in ([], ["--segment-seconds", "30"], ["--stream"]):
        out = run_tool(*tool, *options, trained, raw, wav)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert f"{raw}: cannot transcribe its audio (samplerate must be specified: a headerless file (raw PCM?)" \
            in out.stderr
        assert out.stdout.splitlines()[-1] == f"{wav} {text}".rstrip("\n")
    out = run_tool(*tool, trained, "-")
    assert out.returncode == 2 and "'-' (standard input) is read with --stream only" in out.stderr
    out = run_tool("bash", "-c", f"set -o pipefail; {shlex.join(map(str, tool))} --stream {trained} {wav} {wav} "
                   "| head -1")  # each file was 'cannot transcribe its audio ([Errno 32] Broken pipe)', and decoded
    assert (out.returncode, len(out.stdout.splitlines()), out.stderr) == (141, 1, ""), out.stderr
    mp3 = tmp_path / "a.mp3"
    soundfile.write(mp3, soundfile.read(wav)[0], 8000, format="MP3")
    out = run_tool("bash", "-c", f"{shlex.join(map(str, tool))} --stream {trained} - < {mp3}")
    assert out.returncode == 1 and "standard input holds an MP3 stream, not raw PCM" in out.stderr, out.stderr
    out = run_tool("bash", "-c", f"{shlex.join(map(str, tool))} --stream {trained} <(cat {mp3})")  # as it comes
    assert out.returncode == 1 and re.search(r"/dev/fd/\d+ holds an MP3 stream, not raw PCM", out.stderr), out.stderr


def test_nbest_lists_from_decode_and_transcribe(trained, yesno, tmp_path):
    """--nbest: per utterance the beam's hypotheses, best first, the first the one scored; unit times
    in order; transcribe --json --nbest the same for a file."""
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", "modified_beam", "--beam", "3", "--nbest",
                   trained, yesno / "five.list", "nbest")
    assert out.returncode == 0, out.stderr[-2000:]
    decode_dir = trained / "decode-nbest-modified_beam+beam3"  # apart from the default beam's
    rows = [json.loads(line) for line in (decode_dir / "nbest.json").read_text().splitlines()]
    hyps = dict(line.split(maxsplit=1) if " " in line else (line, "")
                for line in (decode_dir / "hyp").read_text().splitlines())
    assert sorted(r["key"] for r in rows) == sorted(hyps)
    for row in rows:
        assert 1 <= len(row["hyps"]) <= 3 and row["hyps"][0]["text"] == hyps[row["key"]]
        assert [h["score"] for h in row["hyps"]] == sorted((h["score"] for h in row["hyps"]), reverse=True)
        for hyp in row["hyps"]:
            assert " ".join(t["unit"] for t in hyp["tokens"]) == hyp["text"]  # word units
            assert [t["time"] for t in hyp["tokens"]] == sorted(t["time"] for t in hyp["tokens"])
    entry = json.loads((yesno / "five.list").read_text().splitlines()[0])
    one = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--nbest", "--method", "modified_beam",
                   "--beam", "3", trained, entry["wav"])
    row = json.loads(one.stdout)
    assert (row["nbest"][0]["text"] == row["text"]
            == next(r for r in rows if r["key"] == entry["key"])["hyps"][0]["text"])
    refused = run_tool(sys.executable, STEPS / "transcribe.py", "--nbest", trained, entry["wav"])
    assert refused.returncode == 2 and "--nbest needs --json" in refused.stderr
    for tool, options, why in (
            ("transcribe.py", ["--beam", "0", trained, entry["wav"]], "--beam: expected a whole number at least 1"),
            ("transcribe.py", ["--stream", "--segment-seconds", "30", trained, entry["wav"]], "give one"),
            ("transcribe.py", ["--stream", "--batch-size", "4", trained, entry["wav"]],  # ignored, silently
             "--batch-size batches whole recordings; --stream decodes one stream as it comes: leave it out"),
            ("transcribe.py", ["--segment-seconds", "0.5", trained, entry["wav"]],  # words cut apart, decoded alone
             "--segment-seconds 0.5 cuts inside words: give at least 2 (30 is usual), or 0 for the whole recording"),
            ("decode.py", ["--method", "modified_beam", "--lm-fusion", "lm.yaml", trained, yesno / "five.list", "x"],
             "--lm-fusion goes with an LM-fused method (*_lm, *_lodr), not modified_beam"),
            # options the method would ignore, its results named as of a search that did not run
            ("decode.py", ["--method", "modified_beam", "--max-symbols-per-frame", "5", trained, yesno / "five.list",
                           "x"], "--max-symbols-per-frame goes with greedy, beam, beam_lm and beam_lodr, not "
                                 "modified_beam (a modified beam emits one a frame at most)"),
            ("decode.py", ["--method", "ctc_greedy", "--max-symbols-per-frame", "5", trained, yesno / "five.list",
                           "x"], "not ctc_greedy (CTC emits one a frame at most)"),
            ("decode.py", ["--beam", "8", trained, yesno / "five.list", "x"], "--beam goes with a beam search"),
            ("transcribe.py", ["--method", "ctc_greedy", "--beam", "8", trained, entry["wav"]],
             "--beam goes with a beam search (modified_beam, beam, ctc_prefix_beam or an LM-fused one), not "
             "ctc_greedy")):
        refused = run_tool(sys.executable, STEPS / tool, *options)
        assert refused.returncode == 2 and why in refused.stderr, (tool, refused.stderr)
    # options between the exp dir and the files (a usage error: 'unrecognized arguments: a.wav'); a --scp not there
    between = run_tool(sys.executable, STEPS / "transcribe.py", trained, "--json", entry["wav"])
    assert between.returncode == 0 and json.loads(between.stdout)["file"] == entry["wav"], between.stderr
    missing = run_tool(sys.executable, STEPS / "transcribe.py", "--scp", yesno / "none.scp", trained)
    assert missing.returncode == 1 and missing.stderr == f"transcribe.py: {yesno / 'none.scp'}: No such file or " \
        "directory\n", missing.stderr


def test_transcription_says_why_words_are_left_uncalibrated_as_decode_does(trained, yesno, tmp_path):
    """transcribe.py of a CTC search left a transducer head's calibration unapplied without a word, and the Python
    API applied a calibration of the EMA weights to the raw ones (use_ema=False): decode.py says, and refuses, both."""
    from rnnt.confidence import CALIBRATION_FILE
    from rnnt.prep.download import hex_digest

    exp = tmp_path / "exp"
    shutil.copytree(trained, exp)
    path = str(last_epoch(exp))  # (model.pt, an average of EMA weights, has no raw ones to decode)
    (exp / CALIBRATION_FILE).write_text(json.dumps({"scale": 0.5, "offset": 0.2, "checkpoint": Path(path).name,
                                                    "checkpoint_sha256": hex_digest(path), "head": "transducer"}))
    assert Transcriber.from_exp_dir(str(exp), path).calibration is not None
    raw = Transcriber.from_exp_dir(str(exp), path, use_ema=False)
    assert raw.calibration is None and raw.calibration_problem.endswith("EMA weights, not its raw ones (--no-ema)")
    wav = json.loads((yesno / "five.list").read_text().splitlines()[0])["wav"]
    out = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--word-times", "--method", "ctc_greedy",
                   "--checkpoint", path, exp, wav)
    assert out.returncode == 0 and "was fitted on the transducer head's words, not the ctc head's; words' " \
        "confidences left uncalibrated" in out.stderr, out.stderr


def test_an_nbest_row_of_an_impossible_hypothesis_is_valid_json(trained):
    """A score of -inf (no hypothesis left whole, or labels the CTC head cannot align) is null in nbest.json and
    transcribe --json --nbest: JSON has no infinity, and strict readers (jq) refused the line."""
    from rnnt.search import Hypothesis
    from rnnt.transcriber import nbest_entries

    _, _, tokenizer, _ = load_model(str(trained))
    rows = nbest_entries(tokenizer, [Hypothesis([1], [0], -1.23456), Hypothesis([], [], float("-inf"))], 0.04, 1.0)
    assert [row["score"] for row in rows] == [-1.2346, None]
    assert json.loads(json.dumps(rows, allow_nan=False)) == rows
    # a unit emitted in the silence appended after the audio is timed inside it, as the words are
    rows = nbest_entries(tokenizer, [Hypothesis([1, 2], [10, 30], -1.0)], 0.04, 1.0)
    assert [unit["time"] for unit in rows[0]["tokens"]] == [0.4, 0.96]


def test_decode_scores_every_reference_even_undecodable_ones(trained, yesno, tmp_path):
    """A test utterance whose audio cannot be read, and one shorter than a frame, stay in the WER's
    denominator as deleted words and are named; the line says [PARTIAL]."""
    entries = [json.loads(line) for line in (yesno / "five.list").read_text().splitlines()]
    (tmp_path / "broken.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt garbage")
    soundfile.write(tmp_path / "short.wav", np.zeros(40, dtype=np.float32), 8000)
    entries[1]["wav"], entries[3]["wav"] = str(tmp_path / "broken.wav"), str(tmp_path / "short.wav")
    data = tmp_path / "test"
    data.mkdir()
    (data / "data.list").write_text("".join(json.dumps(e) + "\n" for e in entries))
    (data / "text").write_text("".join(f"{e['key']} {e['txt']}\n" for e in sorted(entries, key=lambda e: e["key"])))
    out = run_tool(sys.executable, STEPS / "decode.py", trained, data / "data.list", "broken")
    assert out.returncode == 0, out.stderr
    words = sum(len(e["txt"].split()) for e in entries)
    wer_line = (trained / "decode-broken-greedy" / "wer").read_text().strip()
    assert f" / {words}, " in wer_line and wer_line.endswith("[PARTIAL]")
    assert "decoded 3 of 5 utterances" in out.stdout
    for lost in (entries[1]["key"], entries[3]["key"]):
        assert f"{lost} of {data / 'text'} was not decoded" in out.stderr
    # why: the skipped audio by name, the short clip in the pass's data report (it was logged at INFO, never shown)
    assert f"decode.py: skipped {entries[1]['key']} from {tmp_path / 'broken.wav'}: cannot decode audio" in out.stderr
    assert ("decode.py: data (data.list): 5 utterances: 4 at 8000 Hz; 1 skipped, their audio unreadable (named "
            "above); 1 dropped by the filters (1 too short for the encoder: no output frame)") in out.stderr, out.stderr
    lost = " ".join(sorted((entries[1]["key"], entries[3]["key"])))
    assert f"(counted as empty): {lost}" in (trained / "decode-broken-greedy" / "errs").read_text()


def test_the_decoding_pipeline_leaves_out_a_clip_that_gives_the_encoder_no_frame(trained, yesno, tmp_path, caplog):
    """With a conv front end (two 3x3 convolutions of stride 2) a clip of a few stacked frames gives the encoder
    none: the decoding pipeline names it in its report and leaves it out (scored as deleted words), where the
    CTC rescoring and the pooled search refused it and stopped the whole decode."""
    import dataclasses
    import logging

    experiment, _, tokenizer, _ = load_model(str(trained))
    encoder = dataclasses.replace(experiment.model.encoder, conv_channels=4, conv_layers=2)
    experiment = dataclasses.replace(experiment, model=dataclasses.replace(experiment.model, encoder=encoder))
    entries = [json.loads(line) for line in (yesno / "five.list").read_text().splitlines()][:2]
    soundfile.write(tmp_path / "short.wav", np.zeros(800, dtype=np.float32), 8000)  # 0.1 s: 9 fbank frames
    entries[1]["wav"] = str(tmp_path / "short.wav")
    (tmp_path / "two.list").write_text("".join(json.dumps(e) + "\n" for e in entries))
    with caplog.at_level(logging.INFO):
        keys = [k for b in decoding_pipeline(experiment, tokenizer, str(tmp_path / "two.list"), 2).batches()
                for k in b["keys"]]
    assert keys == [entries[0]["key"]] and "1 too short for the encoder: no output frame" in caplog.text
    # each utterance is read once: no audio cache (it kept a whole dev set's waveforms, up to data.cache_audio_mb)
    assert experiment.data.cache_audio_mb > 0
    assert decoding_pipeline(experiment, tokenizer, str(tmp_path / "two.list"), 2).audio_cache is None


@pytest.mark.slow
def test_an_lm_built_from_training_text_is_tuned_on_dev_and_used_by_decode(trained, yesno, tmp_path):
    arpa = tmp_path / "lm.arpa"
    out = run_tool(sys.executable, STEPS / "build_ngram_lm.py", "--order", "3", yesno / "data" / "train_yesno",
                   yesno / "lang", arpa)
    assert out.returncode == 0, out.stderr
    assert "3-gram over" in out.stdout and "30 transcripts" in out.stdout
    out = run_tool(sys.executable, STEPS / "tune_lm_fusion.py", "--arpa", arpa, "--weights", "0,0.5",
                   "--bonuses", "0,1", trained, yesno / "test.list")
    assert out.returncode == 0, out.stderr
    tuned = yaml.safe_load((trained / "lm" / "ctc_prefix_beam_lm.yaml").read_text())
    assert (tuned["weight"], tuned["length_bonus"]) in [(0, 0), (0, 1), (0.5, 0), (0.5, 1)]
    rows = grid_rows(trained / "lm" / "ctc_prefix_beam_lm.tsv")
    assert len(rows) == 1 + 4  # without the LM, the grid (no CTC rescoring in a CTC search)
    wers = {(r["weight"], r["length_bonus"]): float(r["dev_wer"]) for r in rows}
    assert wers[("0.0", "0.0")] == wers[("none", "none")]  # weight 0, bonus 0 is the plain search
    best = min(wers[k] for k in wers if k != ("none", "none"))
    assert tuned["beam"] == 8
    assert "(ctc_prefix_beam without the LM, beam 8 as the LM's: %WER " in out.stdout, out.stdout  # not the recipe's 4
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", "ctc_prefix_beam_lm", trained, yesno / "test.list",
                   "test")  # at the beam the weights were chosen with
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr
    assert (trained / "decode-test-ctc_prefix_beam_lm" / "wer").read_text().startswith(f"%WER {best:.2f} [")
    first = numbered(str(trained), "epoch")[0]  # another model than the weights were chosen with: said
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", "ctc_prefix_beam_lm", "--checkpoint", first,
                   trained, yesno / "five.list", "five")
    assert out.returncode == 0 and (f"warning: {trained}/lm/ctc_prefix_beam_lm.yaml: its weights were chosen with "
                                    f"another checkpoint than {first} (") in out.stderr, out.stderr
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", "ctc_prefix_beam_lm", trained, yesno / "five.list",
                   "five")
    assert out.returncode == 0, out.stderr
    hyps = dict(line.split(maxsplit=1) if " " in line else (line, "") for line in
                (trained / "decode-five-ctc_prefix_beam_lm" / "hyp").read_text().splitlines())
    entry = json.loads((yesno / "five.list").read_text().splitlines()[0])
    one = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--method", "ctc_prefix_beam_lm", trained,
                   entry["wav"])  # the transcriber finds the experiment's LM
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["text"] == hyps[entry["key"]]
    (trained / "lm" / "ctc_prefix_beam_lm.yaml").rename(trained / "lm" / "kept.yaml")
    one = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--method", "ctc_prefix_beam_lm", trained,
                   entry["wav"])
    assert one.returncode == 1 and "or give a weights file (--lm-fusion)" in one.stderr, one.stderr
    one = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--method", "ctc_prefix_beam_lm", "--lm-fusion",
                   trained / "lm" / "kept.yaml", trained, entry["wav"])  # the option that message names
    assert one.returncode == 0 and json.loads(one.stdout)["text"] == hyps[entry["key"]], one.stderr
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", "ctc_prefix_beam_lm", trained,
                   yesno / "test.list", "test")
    assert out.returncode == 1 and "ctc_prefix_beam_lm.yaml" in out.stderr
    # another LM of the same file name, tuned later, is kept beside the first, which other yaml files name
    other = tmp_path / "other" / "lm.arpa"
    assert run_tool(sys.executable, STEPS / "build_ngram_lm.py", "--order", "2", yesno / "data" / "train_yesno",
                    yesno / "lang", other).returncode == 0
    out = run_tool(sys.executable, STEPS / "tune_lm_fusion.py", "--arpa", other, "--weights", "0.5", "--bonuses", "0",
                   trained, yesno / "test.list")
    assert out.returncode == 0, out.stderr
    assert (trained / "lm" / "lm.arpa").read_bytes() == arpa.read_bytes() != other.read_bytes()
    assert (trained / "lm" / "lm-2.arpa").read_bytes() == other.read_bytes()
    assert yaml.safe_load((trained / "lm" / "ctc_prefix_beam_lm.yaml").read_text())["arpa"] == "lm-2.arpa"
    # an LM refused is named as given, and no copy of it is kept (the copy was named, and kept: the LM put right
    # took the next name)
    broken = tmp_path / "broken" / "cut.arpa"
    broken.parent.mkdir()
    broken.write_text(other.read_text().replace("ngram 1=", "ngram 1=9"))
    out = run_tool(sys.executable, STEPS / "tune_lm_fusion.py", "--arpa", broken, "--weights", "0.5", "--bonuses", "0",
                   trained, yesno / "test.list")
    assert out.returncode == 1 and f"{broken}:3: \\data\\ declares 9" in out.stderr, out.stderr
    assert not (trained / "lm" / "cut.arpa").exists()
    # an LM that makes dev worse at every weight tried (of a text of YES alone) is said to, not written in silence
    yes = tmp_path / "yes"
    yes.mkdir()
    (yes / "text").write_text("".join(f"u{i} YES YES YES YES YES YES YES YES\n" for i in range(30)))
    assert run_tool(sys.executable, STEPS / "build_ngram_lm.py", "--order", "2", yes, yesno / "lang",
                    yes / "lm.arpa").returncode == 0
    out = run_tool(sys.executable, STEPS / "tune_lm_fusion.py", "--arpa", yes / "lm.arpa", "--weights", "5",
                   "--bonuses", "0", trained, yesno / "test.list")
    assert out.returncode == 0 and "warning: the LM makes dev worse at every weight tried" in out.stderr, out.stderr


def grid_rows(path) -> list[dict[str, str]]:
    """The rows of a tune_lm_fusion.py table by column name (the first: the search without the LM, one a CTC
    rescoring weight)."""
    header, *lines = path.read_text().splitlines()
    return [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]


@pytest.mark.slow
def test_the_transducer_searches_with_an_lm_and_lodr_are_tuned_on_dev_and_decode(trained, yesno, tmp_path):
    arpas = {}
    for order in (3, 2):
        arpas[order] = tmp_path / f"lm_{order}gram.arpa"
        out = run_tool(sys.executable, STEPS / "build_ngram_lm.py", "--order", order, yesno / "data" / "train_yesno",
                       yesno / "lang", arpas[order])
        assert out.returncode == 0, out.stderr
    for method, lodr in (("modified_beam_lm", []), ("beam_lodr", ["--lodr-arpa", arpas[2], "--lodr-weights", "0,0.3"])):
        out = run_tool(sys.executable, STEPS / "tune_lm_fusion.py", "--nj", "1", "--method", method, "--arpa",
                       arpas[3], *lodr, "--weights", "0,0.5", "--bonuses", "0,1", "--ctc-weights", "0,0.5", "--beam",
                       "4", trained, yesno / "test.list")
        assert out.returncode == 0, out.stderr
        tuned = yaml.safe_load((trained / "lm" / f"{method}.yaml").read_text())
        assert ("lodr_weight" in tuned) == bool(lodr) and tuned["beam"] == 4
        rows = grid_rows(trained / "lm" / f"{method}.tsv")
        assert len(rows) == 2 + 4 * (2 if lodr else 1) * 2  # the CTC head's rescoring weights too, without the LM
        assert [(r["weight"], r["ctc_weight"]) for r in rows[:2]] == [("none", "0.0"), ("none", "0.5")]  # too
        plain = min(float(r["dev_wer"]) for r in rows[:2])  # the LM's points are compared with its best
        assert f"without the LM, beam 4 as the LM's: %WER {plain:.2f} [" in out.stdout, out.stdout
        chosen = min(rows[2:], key=lambda r: tuple(float(r[k]) for k in ("dev_wer", "weight", "lodr_weight",
                                                                            "ctc_weight")))  # ties: smaller weights
        best = float(chosen["dev_wer"])
        assert (float(chosen["weight"]), float(chosen["ctc_weight"])) == (tuned["weight"], tuned.get("ctc_weight", 0))
        out = run_tool(sys.executable, STEPS / "decode.py", "--method", method, trained, yesno / "test.list", "test")
        assert out.returncode == 0, out.stderr
        assert (trained / f"decode-test-{method}" / "wer").read_text().startswith(f"%WER {best:.2f} [")
        (tmp_path / "hot.txt").write_text("YES NO\n")  # over the LM (and LODR), at score 0 as without them
        out = run_tool(sys.executable, STEPS / "decode.py", "--method", method, "--hotwords", tmp_path / "hot.txt",
                       "--hotwords-score", "0", trained, yesno / "test.list", "test")
        assert out.returncode == 0, out.stderr
        assert (trained / f"decode-test-{method}+hotwords" / "hyp").read_text() == \
            (trained / f"decode-test-{method}" / "hyp").read_text()
    serial = {name: (trained / "lm" / name).read_bytes() for name in ("beam_lodr.tsv", "beam_lodr.yaml")}
    out = run_tool(sys.executable, STEPS / "tune_lm_fusion.py", "--nj", "3", "--method", "beam_lodr", "--arpa",
                   arpas[3], "--lodr-arpa", arpas[2], "--lodr-weights", "0,0.3", "--weights", "0,0.5", "--bonuses",
                   "0,1", "--ctc-weights", "0,0.5", "--beam", "4", trained, yesno / "test.list")
    assert out.returncode == 0, out.stderr  # the grid's points searched by 3 processes at once: the same table
    # as one process's
    assert {name: (trained / "lm" / name).read_bytes() for name in serial} == serial
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", "modified_beam_lm", trained, yesno / "five.list",
                   "five")
    assert out.returncode == 0, out.stderr
    entry = json.loads((yesno / "five.list").read_text().splitlines()[0])
    hyp = next(line for line in (trained / "decode-five-modified_beam_lm" / "hyp").read_text().splitlines()
               if line.split()[0] == entry["key"])
    one = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--method", "modified_beam_lm", trained,
                   entry["wav"])  # the transcriber finds the method's LM
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["text"] == hyp.split(maxsplit=1)[1]
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", "modified_beam_lodr", trained,
                   yesno / "test.list", "test")  # tuned for beam_lodr only
    assert out.returncode == 1 and "modified_beam_lodr.yaml" in out.stderr
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", "modified_beam_lodr", "--lm-fusion",
                   trained / "lm" / "modified_beam_lm.yaml", trained, yesno / "test.list", "test")
    assert out.returncode == 1 and "lacks a low-order LM" in out.stderr


@pytest.mark.slow
def test_two_models_n_bests_combined_are_scored_by_both_and_tuned(trained, trained_standard, yesno, tmp_path):
    """combine_nbest.py pools both models' n-bests: every transcript is one of its utterance's pooled
    hypotheses; each model's transducer alone (the others weighted 0) picks the hypothesis of its highest
    log-likelihood over all alignments; --tune tries the whole grid and writes the weights that a rerun with
    --weights reproduces; utterances a system's list lacks are named, not a crash; a broken n-best line is
    named by file and line."""
    from rnnt.pooled_search import transducer_log_likelihoods
    from rnnt.system_combination import pool, read_nbest

    arpa = tmp_path / "lm.arpa"
    assert run_tool(sys.executable, STEPS / "build_ngram_lm.py", "--order", "2", yesno / "data" / "train_yesno",
                    yesno / "lang", arpa).returncode == 0
    fusion = tmp_path / "fusion.yaml"
    fusion.write_text(yaml.safe_dump({"arpa": str(arpa), "over": "units", "weight": 0.5, "length_bonus": 0.0,
                                      "beam": 3}))
    systems = []
    for exp in (trained, trained_standard):
        out = run_tool(sys.executable, STEPS / "decode.py", "--method", "modified_beam", "--beam", "3", "--nbest",
                       "--checkpoint", last_epoch(exp), exp, yesno / "test.list", "combine")
        assert out.returncode == 0, out.stderr[-2000:]
        systems += ["--system", exp, last_epoch(exp), exp / "decode-combine-modified_beam+beam3"]
    out_dir = tmp_path / "combined"
    out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems, "--lm-fusion", fusion, "--tune",
                   yesno / "test.list", out_dir)
    assert out.returncode == 0, out.stderr[-2000:]
    names = [f"{trained} transducer", f"{trained} ctc", f"{trained_standard} transducer",
             f"{trained_standard} ctc", "lm"]
    chosen = yaml.safe_load((out_dir / "weights.yaml").read_text())["weights"]
    assert list(chosen) == names and chosen[names[0]] == chosen["lm"] == 1.0
    rows = (out_dir / "tuning.tsv").read_text().splitlines()
    assert rows[0].split("\t") == names + ["wer"] and len(rows) == 1 + 5 ** 3
    assert f"%WER {min(float(r.split()[-1]) for r in rows[1:]):.2f} [" in (out_dir / "wer").read_text()
    pools = pool([read_nbest(str(exp / "decode-combine-modified_beam+beam3" / "nbest.json"), 4)
                  for exp in (trained, trained_standard)])
    hyps = dict(line.split(maxsplit=1) if " " in line else (line, "")
                for line in (out_dir / "hyp").read_text().splitlines())
    assert hyps.keys() == pools.keys()
    assert all(hyps[key] in {" ".join(h.words) for h in pools[key]} for key in hyps)
    again = tmp_path / "again"
    out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems, "--lm-fusion", fusion, "--weights",
                   out_dir / "weights.yaml", yesno / "test.list", again)
    assert out.returncode == 0 and (again / "hyp").read_text() == (out_dir / "hyp").read_text()
    earlier = [*systems[:1], trained, numbered(str(trained), "epoch")[-2], *systems[3:]]  # weights of epoch 5's
    out = run_tool(sys.executable, STEPS / "combine_nbest.py", *earlier, "--lm-fusion", fusion, "--weights",
                   out_dir / "weights.yaml", yesno / "test.list", tmp_path / "earlier")
    assert out.returncode == 1 and f"weights.yaml: tuned with another checkpoint of {trained} than " \
        f"{numbered(str(trained), 'epoch')[-2]} ({last_epoch(trained)} as it was then): tune again on dev" \
        in out.stderr, out.stderr[-2000:]
    retuned = tmp_path / "retuned.yaml"  # another LM weight: the combination's LM weight was tuned with the first
    retuned.write_text(fusion.read_text().replace("weight: 0.5", "weight: 0.9"))
    out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems, "--lm-fusion", retuned, "--weights",
                   out_dir / "weights.yaml", yesno / "test.list", tmp_path / "retuned")
    assert out.returncode == 1 and f"weights.yaml: tuned with another --lm-fusion than {retuned} ({fusion} as it " \
        "was then)" in out.stderr, out.stderr[-2000:]
    out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems, "--lm-fusion", fusion, "--weights",
                   out_dir / "weights.yaml", yesno / "five.list", tmp_path / "other_list")  # none of the pooled keys
    assert f"combine_nbest.py: {trained} scored no hypothesis of 30 pooled utterances (not in" in out.stderr
    assert out.returncode == 1 and "none of the 30 utterances decoded" in out.stderr, out.stderr[-2000:]
    assert not (tmp_path / "other_list" / "wer").exists()  # not a report of every word deleted
    (tmp_path / "nan.yaml").write_text(yaml.safe_dump({"weights": {n: float("nan") for n in names}}))
    out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems, "--lm-fusion", fusion, "--weights",
                   tmp_path / "nan.yaml", yesno / "test.list", tmp_path / "nan")  # every total nan: the first chosen
    assert out.returncode == 1 and "a weight that is not a finite number of at least 0" in out.stderr, out.stderr
    (tmp_path / "cut.yaml").write_text("weights: {a: 1\n")  # was yaml's ParserError traceback
    out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems, "--lm-fusion", fusion, "--weights",
                   tmp_path / "cut.yaml", yesno / "test.list", tmp_path / "cut")
    assert out.returncode == 1 and f"{tmp_path / 'cut.yaml'}:2:1: " in out.stderr and "Traceback" not in out.stderr
    for exp in (trained, trained_standard):  # one model's transducer alone
        (tmp_path / "alone.yaml").write_text(yaml.safe_dump({"weights": {n: float(n == f"{exp} transducer")
                                                                         for n in names}}))
        out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems, "--lm-fusion", fusion, "--weights",
                       tmp_path / "alone.yaml", yesno / "test.list", tmp_path / "alone")
        assert out.returncode == 0, out.stderr[-2000:]
        experiment, model, tokenizer, _ = load_model(str(exp), str(last_epoch(exp)))
        batch = next(decoding_pipeline(experiment, tokenizer, str(yesno / "test.list"), 8).batches())
        with torch.no_grad():
            enc, enc_lens = model.encode(batch["feats"], batch["feat_lens"])
        alone = dict(line.split(maxsplit=1) if " " in line else (line, "")
                     for line in (tmp_path / "alone" / "hyp").read_text().splitlines())
        for b, key in enumerate(batch["keys"]):
            likelihoods = transducer_log_likelihoods(model, enc[b], int(enc_lens[b]), pools[key])
            best = pools[key][max(range(len(likelihoods)), key=likelihoods.__getitem__)]
            assert alone[key] == " ".join(best.words)
    broken = tmp_path / "broken"  # a line that is none, one of a unit that is none: named, left out, the rest kept
    broken.mkdir()
    good = (trained_standard / "decode-combine-modified_beam+beam3" / "nbest.json").read_text().splitlines()
    row = json.loads(good[0])
    row["hyps"][0]["tokens"][0]["id"] = 99
    (broken / "nbest.json").write_text("\n".join(['{"key": "a", "hyps": [{"text": "YES"}]}', json.dumps(row)]
                                                 + good[1:]) + "\n")
    out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems[:4], "--system", trained_standard,
                   systems[6], broken, "--lm-fusion", fusion, "--weights", out_dir / "weights.yaml",
                   yesno / "test.list", tmp_path / "no")
    assert out.returncode == 0 and f"{broken / 'nbest.json'}:1: not a decode.py n-best line" in out.stderr
    assert f"combine_nbest.py: {broken / 'nbest.json'} lacks 1 of the 30 pooled utterances (a decode of another " \
           f"list, or cut short): theirs are the other systems' hypotheses alone: {row['key']}" in out.stderr
    assert f"{broken / 'nbest.json'}:2: not a decode.py n-best line (ValueError: unit id 99 is none of the " \
           "model's units 1 to 3); left out" in out.stderr
    # weights of other systems, a file that holds none, a grid that is not numbers: one line each, no traceback
    (tmp_path / "other.yaml").write_text(yaml.safe_dump({"weights": {"exp/a transducer": 1.0, "lm": 1.0}}))
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "more.yaml").write_text(yaml.safe_dump({"weights": {**{name: 1.0 for name in names},
                                                                    "exp/c transducer": 5.0}}))
    for options, message in (
            (["--weights", tmp_path / "other.yaml"], f"{tmp_path / 'other.yaml'}: no weight for {names[0]}, "),
            # a third system's weights, this run of two: they were dropped, a combination of others
            (["--weights", tmp_path / "more.yaml"], f"{tmp_path / 'more.yaml'}: weights for exp/c transducer, which "
                                                    "this run has no feature of"),
            (["--weights", tmp_path / "empty.yaml"], f"{tmp_path / 'empty.yaml'}: expected 'weights:' mapping"),
            (["--tune", "--grid", "0,0.5x"], "--grid: expected finite numbers of at least 0 separated by commas, got "
                                              "'0,0.5x'"),
            (["--tune", "--grid", "nan,0.2"], "--grid: expected finite numbers of at least 0")):
        out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems, "--lm-fusion", fusion, *options,
                       yesno / "test.list", tmp_path / "refused")
        assert out.returncode in (1, 2) and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    renamed = tmp_path / "renamed"  # a model over other units (IndexError in the scoring before)
    shutil.copytree(trained_standard, renamed)
    units = renamed / "lang" / "units.txt"
    units.write_text(units.read_text().replace("YES", "JA"))
    config = renamed / "config.yaml"
    config.write_text(config.read_text().replace(str(trained_standard), str(renamed)))
    weights = renamed / last_epoch(trained_standard).name  # as trained over JA (its units' digest is of those)
    state = torch.load(weights, weights_only=True)
    state["meta"]["units"] = units_digest(str(renamed / "lang"))
    torch.save(state, weights)
    out = run_tool(sys.executable, STEPS / "combine_nbest.py", *systems[:4], "--system", renamed,
                   renamed / last_epoch(trained_standard).name, renamed / "decode-combine-modified_beam+beam3",
                   "--lm-fusion", fusion, "--tune", yesno / "test.list", tmp_path / "refused")
    assert out.returncode == 1 and f"{renamed}: its units are not those of {trained}" in out.stderr, out.stderr


def test_a_missing_or_empty_data_list_is_one_line_naming_it(trained, yesno, tmp_path):
    """decode.py with the references beside the list (so that the list is first read by the pipeline) and
    train.py: one line naming the list, exit 1, no traceback."""
    (tmp_path / "text").write_text("yesno-0_0_0_0_1_1_1_1 NO NO NO NO YES YES YES YES\n")
    missing, empty = tmp_path / "missing.list", tmp_path / "empty.list"
    empty.write_text("")
    for data_list, named in ((missing, f"{missing}: No such file or directory"),
                             (empty, f"{empty}: the data list is empty")):
        runs = {"decode.py": [trained, data_list, "test"],
                "train.py": ["--config", trained / "config.yaml", "--train-list", data_list, "--lang-dir",
                             yesno / "lang", "--exp-dir", tmp_path / "exp"]}
        for tool, args in runs.items():
            out = run_tool(sys.executable, STEPS / tool, *args)
            assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
            assert out.stderr.splitlines()[-1].startswith(f"{tool}: ") and named in out.stderr, out.stderr


def test_decoding_loads_the_ema_weights_where_kept(trained):
    """Decoding, transcription and export load a checkpoint's averaged weights (the ones validated), the trained
    ones only when asked."""
    state = checkpoint.load(str(trained / "epoch-5.pt"))
    assert any(not torch.equal(state["ema"][k], v) for k, v in state["model"].items())
    for use_ema, kept in ((True, "ema"), (False, "model")):
        model = load_model(str(trained), str(trained / "epoch-5.pt"), use_ema=use_ema)[1]
        assert all(torch.equal(v, state[kept][k]) for k, v in model.state_dict().items())


def test_an_average_says_which_weights_it_holds_and_raw_ones_are_not_asked_of_an_ema_average(trained, tmp_path):
    """An average of EMA weights keeps them as its only weights: decode.py --no-ema decoded them, silently."""
    for options, name, kind in (([], "avg-ema.pt", "ema"), (["--no-ema"], "avg-raw.pt", "raw")):
        out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--last", "2", *options, "--output",
                       tmp_path / name, trained)
        assert out.returncode == 0 and out.stdout.rstrip().endswith(f"epoch-5.pt ({kind} weights)"), out.stdout
        assert checkpoint.load_meta(str(tmp_path / name))["averaged_weights"] == kind
    with pytest.raises(ValueError, match=f"^{tmp_path / 'avg-ema.pt'}: an average of EMA weights; for the raw"):
        load_model(str(trained), str(tmp_path / "avg-ema.pt"), use_ema=False)
    assert load_model(str(trained), str(tmp_path / "avg-raw.pt"), use_ema=False)[3] == str(tmp_path / "avg-raw.pt")


def test_score_compares_words_as_bytes(tmp_path):
    """Latin-1 words, not UTF-8: each undecodable byte became U+FFFD, so café and cafè were one word (0 errors);
    compute-wer compares bytes, and the report keeps them."""
    (tmp_path / "ref").write_bytes(b"u1 caf\xe9 na\xefve\n")
    (tmp_path / "hyp").write_bytes(b"u1 caf\xe8 na\xefve\n")
    out = run_tool(sys.executable, STEPS / "score.py", "--errs", tmp_path / "errs", tmp_path / "ref", tmp_path / "hyp")
    assert out.returncode == 0 and out.stdout.strip() == "%WER 50.00 [ 1 / 2, 0 ins, 0 del, 1 sub ]", out.stderr
    assert b"1   caf\xe9 -> caf\xe8\n" in (tmp_path / "errs").read_bytes()


@pytest.mark.parametrize("section, key, value", [("model", "joiner", {"activation": "relu"}),
                                               ("data", "sample_rate", 16000), ("data", "subsample", 1)])
def test_a_config_edited_after_training_is_refused_naming_what_changed(trained, tmp_path, section, key, value):
    """The weights were read under the edit, silently: a joiner's activation (2.50 -> 2.92 %WER), the sample rate
    (65.83), the frames stacked (5.83); only an edit of a tensor's shape was caught. A dropout edited is no edit of
    the weights' meaning."""
    copy = tmp_path / "exp"
    shutil.copytree(trained, copy)
    config = yaml.safe_load((copy / "config.yaml").read_text())
    config[section][key] = {**config[section].get(key, {}), **value} if isinstance(value, dict) else value
    (copy / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ValueError, match=r"trained under other settings than .*config.yaml gives \((model|data)\."):
        load_model(str(copy))
    config = yaml.safe_load((trained / "config.yaml").read_text())
    config["model"]["joiner"] = {**config["model"].get("joiner", {}), "dropout": 0.3}
    (copy / "config.yaml").write_text(yaml.safe_dump(config))
    load_model(str(copy))


def test_an_experiment_moved_or_copied_decodes_with_the_units_it_holds(trained, tmp_path):
    """config.yaml names the experiment's lang dir by absolute path: a moved experiment failed on the old
    place's units.json, and a copy read the original's units, however they had changed since."""
    first, moved = tmp_path / "first", tmp_path / "moved"
    shutil.copytree(trained, first)
    config = first / "config.yaml"  # as if trained in first: its config.yaml names first's lang dir
    config.write_text(config.read_text().replace(str(trained), str(first)))
    assert str(first / "lang") in config.read_text()
    shutil.copytree(first, moved)
    experiment, _, tokenizer, _ = load_model(str(first))
    assert experiment.paths.lang_dir == str(first / "lang")
    swapped = {2: 3, 3: 2}  # the original's words trade ids: NO and YES
    (first / "lang" / "units.txt").write_text("".join(f"{symbol} {swapped.get(i, i)}\n"
                                                      for symbol, i in tokenizer.units.items()))
    with pytest.raises(ValueError, match=f"trained with other units than {first / 'lang'}/units.txt"):
        load_model(str(first))  # its checkpoint keeps a digest of the units it was trained with (it decoded as YES NO)
    experiment, _, moved_tokenizer, _ = load_model(str(moved))
    assert experiment.paths.lang_dir == str(moved / "lang") and moved_tokenizer.units == tokenizer.units
    shutil.rmtree(first)
    assert load_model(str(moved))[2].units == tokenizer.units
    from rnnt.training.experiment import load_trained  # and the CMVN statistics it holds, where it has them

    config = yaml.safe_load((moved / "config.yaml").read_text())
    config["data"].setdefault("features", {})["cmvn"] = str(first / "global_cmvn.json")
    (moved / "config.yaml").write_text(yaml.safe_dump(config))
    (moved / "global_cmvn.json").write_text('{"mean": [0.0], "std": [1.0]}')
    assert load_trained(str(moved)).data.features.cmvn == str(moved / "global_cmvn.json")


def test_another_models_checkpoint_or_a_device_not_here_is_named_not_a_traceback(trained, tmp_path):
    """A --checkpoint of another experiment raised torch's size-mismatch list; --device cuda on a machine
    without CUDA, torch's assertion from the first tensor moved."""
    other = tmp_path / "other"
    shutil.copytree(trained, other)
    config = yaml.safe_load((other / "config.yaml").read_text())
    config["model"]["joiner"]["hidden"] = 64
    (other / "config.yaml").write_text(yaml.safe_dump(config))
    checkpoint_path = str(last_epoch(trained))
    with pytest.raises(ValueError, match=f"^{checkpoint_path}: trained under other settings than {other}/config.yaml "
                                         r"gives \(model.joiner.hidden: 128 -> 64\)"):
        load_model(str(other), checkpoint_path)
    from rnnt.training import checkpoint  # one saved before its settings were kept: the weights' shapes tell

    state = checkpoint.load(checkpoint_path)
    state["meta"].pop("inference")
    checkpoint.save(str(tmp_path / "older.pt"), state)
    with pytest.raises(ValueError, match=f"^{tmp_path / 'older.pt'}: not weights of the model {other}/config.yaml "
                                         r"describes \(with 4 units\): size mismatch for joiner"):
        load_model(str(other), str(tmp_path / "older.pt"))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="^--device cuda: .*; use --device cpu$"):
            load_model(str(trained), device="cuda")
    with pytest.raises(ValueError, match="^--device gpu: not a device"):
        load_model(str(trained), device="gpu")
    # auto, as steps/train.py takes it (decode.py, transcribe.py and tune_lm_fusion.py refused it)
    assert load_model(str(trained), device="auto")[1].joiner.output.weight.device.type == (
        "cuda" if torch.cuda.is_available() else "cpu")


def test_a_set_name_or_tag_with_a_slash_is_refused_before_decoding(trained, yesno):
    """data/test as the set name decoded everything, then wrote decode-data/test-greedy: a dir inside another."""
    for args in (["data/test"], ["--tag", "avg/5", "test"]):
        out = run_tool(sys.executable, STEPS / "decode.py", *args[:-1], trained, yesno / "five.list", args[-1])
        assert out.returncode == 2 and "no '/' in" in out.stderr, out.stderr


def test_a_bad_line_of_a_raw_list_without_a_text_beside_it_is_named_once(trained, yesno, tmp_path):
    """The references read from the list named its bad lines bare, then the decode's pass named them again."""
    raw = tmp_path / "bad.list"
    raw.write_text((yesno / "five.list").read_text() + "not json\n")
    out = run_tool(sys.executable, STEPS / "decode.py", "--method", "greedy", trained, raw, "bad")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count(f"{raw}:6: skipped") == 1 and f"decode.py: {raw}:6: skipped" in out.stderr, out.stderr


def test_a_long_recording_decoded_whole_where_the_time_grows_with_its_labels_is_warned_of(tmp_path, capsys):
    """The scoring of whole lattices (pooled_beam_lm's, the CTC rescoring's) takes frames x labels; the advice was
    only in the docs. The searches, in proportion to the frames, or a short file: nothing said. The length is the
    decoded audio's (a file's header that cannot count its samples, Ogg Vorbis's or MP3's, gave no warning)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("transcribe_tool", STEPS / "transcribe.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    long, short = tmp_path / "long.ogg", "short.wav"
    for path, seconds, method, ctc_weight in ((long, 301, "greedy", 0), (long, 301, "beam_lm", 0),
                                              (long, 301, "ctc_prefix_beam", 0), (short, 10, "pooled_beam_lm", 0.3)):
        tool.warn_if_long(str(path), seconds, method, ctc_weight)
    assert capsys.readouterr().err == ""
    tool.warn_if_long(str(long), 301, "pooled_beam_lm", 0)
    tool.warn_if_long(str(long), 301, "modified_beam_lm", 0.3)
    assert capsys.readouterr().err == (
        f"transcribe.py: {long}: 5 minutes decoded whole with pooled_beam_lm, whose time grows with frames x labels: "
        "give --segment-seconds 30 for a long recording\n"
        f"transcribe.py: {long}: 5 minutes decoded whole with the CTC rescoring, whose time grows with frames x "
        "labels: give --segment-seconds 30 for a long recording\n")


def test_confidences_calibrated_on_a_dev_set_go_into_decodes_and_transcription(trained, yesno, tmp_path):
    """steps/calibrate_confidence.py against a reference with every third word swapped (YES for NO), so that right
    and wrong words are both many: the map it fits raises the set's NCE, and the confidences decode.py gives the
    set's words through it average the share of them that are right (a logistic fit's mark); --raw-confidences
    gives the model's posteriors, and the Transcriber applies the map too."""
    exp = tmp_path / "exp"
    shutil.copytree(trained, exp)
    swapped, count = [], 0
    for line in (yesno / "data" / "test_yesno" / "text").read_text().splitlines():
        key, *words = line.split()
        for i, word in enumerate(words):
            count += 1
            if count % 3 == 0:
                words[i] = "NO" if word == "YES" else "YES"
        swapped.append(" ".join([key, *words]))
    (tmp_path / "swapped").write_text("\n".join(swapped) + "\n")
    out = run_tool(sys.executable, STEPS / "calibrate_confidence.py", "--text", tmp_path / "swapped", exp,
                   yesno / "test.list")
    assert out.returncode == 0, out.stderr
    calibration = json.loads((exp / "confidence_calibration.json").read_text())
    assert 0 < calibration["right"] < calibration["words"] and calibration["nce_after"] > calibration["nce_before"]
    assert calibration["checkpoint"].endswith(".pt") and calibration["checkpoint"] in out.stdout  # decode.py's
    assert (calibration["head"], len(calibration["checkpoint_sha256"])) == ("transducer", 64)
    means, aucs = {}, []
    for options in (["--raw-confidences", "--tag", "raw"], []):
        out = run_tool(sys.executable, STEPS / "decode.py", "--text", tmp_path / "swapped", *options, exp,
                       yesno / "test.list", "test")
        assert out.returncode == 0, out.stderr
        decode = exp / f"decode-test-greedy{'-raw' if options else ''}"
        confidences = [float(line.split()[5]) for line in (decode / "ctm").read_text().splitlines()]
        means["raw" if options else "calibrated"] = sum(confidences) / len(confidences)
        line = (decode / "confidence").read_text()
        assert line.endswith("uncalibrated posteriors (--raw-confidences)\n" if options else
                             f"calibrated by {exp}/confidence_calibration.json\n"), line
        assert f"NCE {calibration['nce_before' if options else 'nce_after']:.3f}," in line
        aucs.append(re.search(r"AUC (\S+) over", line).group(1))
    assert aucs[0] == aucs[1], aucs  # a map that keeps the order keeps AUC (confidences rounded first made ties)
    assert means["calibrated"] == pytest.approx(calibration["right"] / calibration["words"], abs=0.01)
    assert abs(means["raw"] - means["calibrated"]) > 0.05
    # another checkpoint's words, or the CTC head's: left uncalibrated, and why
    for options, why in [(["--checkpoint", exp / "epoch-4.pt"],
                          f"fitted with another checkpoint than {exp}/epoch-4.pt"),
                         (["--method", "ctc_greedy"], "fitted on the transducer head's words, not the ctc head's")]:
        out = run_tool(sys.executable, STEPS / "decode.py", *options, "--tag", "other", exp, yesno / "test.list", "x")
        assert out.returncode == 0 and why in out.stderr, out.stderr
        method = options[1] if options[0] == "--method" else "greedy"
        line = (exp / f"decode-x-{method}-other" / "confidence").read_text()
        assert f"; uncalibrated posteriors: {exp}/confidence_calibration.json was {why}" in line, line
    transcriber = Transcriber.from_exp_dir(str(exp))
    raw = Transcriber(transcriber.experiment, transcriber.model, transcriber.tokenizer)  # no experiment dir: raw
    audio = (yesno / "five" / "wav.scp").read_text().split()[1]
    calibrated_words, raw_words = transcriber.transcribe(audio).words, raw.transcribe(audio).words
    assert [w["confidence"] for w in calibrated_words] == pytest.approx(
        [transcriber.calibration.apply(w["confidence"]) for w in raw_words], abs=2e-4)
    # transcribe.py with another checkpoint's words: raw, and said so as decode.py says it (it was left unsaid)
    out = run_tool(sys.executable, STEPS / "transcribe.py", "--json", "--word-times", "--checkpoint",
                   exp / "epoch-4.pt", exp, audio)
    assert out.returncode == 0 and f"transcribe.py: {exp}/confidence_calibration.json was fitted with another " \
        f"checkpoint than {exp}/epoch-4.pt" in out.stderr, out.stderr


def test_best_epochs_leave_out_those_validated_on_another_dev_set_than_the_newest(trained, tmp_path):
    """A dev list edited on a resume: the epochs before scored another set, their losses are not comparable with
    the newest's (an easier set won every place). Epochs from before dev sets were recorded are ranked."""
    for n, loss, dev_set in ((1, 0.5, None), (2, 0.6, "5-aa"), (3, 0.7, "5-aa"), (4, 2.0, "6-bb"), (5, 1.0, "6-bb")):
        state = checkpoint.load(str(trained / "epoch-5.pt"))
        state["meta"].pop("valid_dev_set", None)
        state["meta"].update(valid_loss=loss, epoch=n, **({"valid_dev_set": dev_set} if dev_set else {}))
        checkpoint.save(str(tmp_path / f"epoch-{n}.pt"), state)
    out = run_tool(sys.executable, STEPS / "average_checkpoints.py", "--best", "2", tmp_path)
    assert out.returncode == 0 and "averaged epoch-1.pt, epoch-5.pt" in out.stdout, out.stdout + out.stderr
    assert f"{tmp_path}/epoch-2.pt: validated on another dev set than epoch-5.pt; not ranked" in out.stderr
