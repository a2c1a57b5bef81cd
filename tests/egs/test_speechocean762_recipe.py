"""egs/speechocean762 on a handful of the real corpus's speakers with tiny models."""

import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from recipe_runs import copy_recipe, run_recipe, words_in

from rnnt.data.lexicon import cmu_pronunciations

pytestmark = pytest.mark.slow


def run_shrunk(recipe: Path, corpus: Path, config: str, shrink, exp: str, *args: str, seeds: str = "1"):
    """The recipe on `corpus` (2 dev speakers) with conf/CONFIG made small by shrink(config dict), trained
    with `seeds` seeds."""
    conf = yaml.safe_load((recipe / "conf" / config).read_text())
    shrink(conf)
    conf["train"]["log_every"] = 1
    (recipe / "conf" / f"tiny_{config}").write_text(yaml.safe_dump(conf))
    return run_recipe(recipe, "--corpus-dir", str(corpus), "--train-config", f"conf/tiny_{config}", "--exp", exp,
                      "--dev-speakers", "2", "--seeds", seeds, *args)


def test_speechocean762_every_stage_on_a_handful(test_data, tmp_path):
    """egs/speechocean762 on 6 speakers of the real corpus (4 utterances each) with a tiny model: the
    corpus's own tables read, whole speakers held out as dev, and a test/ half put beside train/
    decoded with no other change."""
    source = test_data / "speechocean762"
    corpus = tmp_path / "corpus"
    by_speaker: dict[str, list[str]] = {}
    for line in (source / "train" / "utt2spk").read_text().splitlines():
        utt, speaker = line.split()
        by_speaker.setdefault(speaker, []).append(utt)
    speakers = sorted(by_speaker)[:6]
    tables = {name: dict(line.split(maxsplit=1) for line in (source / "train" / name).read_text().splitlines())
              for name in ("text", "wav.scp", "utt2spk", "spk2gender")}
    for half, chosen in (("train", speakers[:5]), ("test", speakers[5:])):
        (corpus / half).mkdir(parents=True)
        utts = sorted(u for s in chosen for u in by_speaker[s][:4])
        for name in ("text", "utt2spk"):
            (corpus / half / name).write_text("".join(f"{u}\t{tables[name][u]}\n" for u in utts))
        (corpus / half / "wav.scp").write_text("".join(f"{u}\t{source / tables['wav.scp'][u].strip()}\n" for u in utts))
        (corpus / half / "spk2gender").write_text("".join(f"{s}\t{tables['spk2gender'][s]}\n" for s in chosen))
    conf = yaml.safe_load((ROOT / "egs" / "speechocean762" / "conf" / "transducer.yaml").read_text())
    conf["model"]["encoder"].update(hidden=32, pre_layers=1, post_layers=1)
    conf["model"]["predictor"].update(embed_dim=16, hidden=32)
    conf["model"]["joiner"]["hidden"] = 32
    conf["train"].update(epochs=2, log_every=1)
    recipe = copy_recipe("speechocean762", tmp_path)
    (recipe / "conf" / "tiny.yaml").write_text(yaml.safe_dump(conf))
    args = ("--corpus-dir", str(corpus), "--train-config", "conf/tiny.yaml", "--exp", "exp/tiny", "--dev-speakers", "2",
            "--unit-type", "bpe", "--vocab-size", "40", "--average", "2", "--methods", "greedy modified_beam",
            "--seeds", "1")
    out = run_recipe(recipe, *args)
    assert out.returncode == 0, out.stderr[-3000:]
    data = recipe / "data"
    assert len((data / "train" / "text").read_text().splitlines()) == 12
    assert len((data / "dev" / "spk2utt").read_text().splitlines()) == 2
    assert len((data / "test" / "text").read_text().splitlines()) == 4
    for set_name in ("dev", "test"):
        for method in ("greedy", "modified_beam"):
            wer = (recipe / "exp" / "tiny" / f"decode-{set_name}-{method}-avg2-epoch-2" / "wer").read_text()
            assert f"/ {words_in(data / set_name / 'text')}," in wer
            assert f"speechocean762 {set_name} {method} (tiny avg2-epoch-2): {wer.strip()}" in out.stdout
    # words' confidences calibrated on dev first (or, should all its words be right, the stage says so)
    assert "calibrate_confidence.py: " in (recipe / "exp" / "tiny" / "log" / "6.confidence-greedy-avg2-epoch-2.log"
                                           ).read_text()
    # nothing changed: data, shards, units, training, average, the confidences' calibration, 4 decodes skipped
    again = run_recipe(recipe, *args)
    assert again.returncode == 0 and again.stdout.count("done before; skipped") == 10, again.stdout[-3000:]
    conf["train"]["epochs"] = 3  # a changed config: training goes on, and the new model is averaged and decoded
    (recipe / "conf" / "tiny.yaml").write_text(yaml.safe_dump(conf))
    more = run_recipe(recipe, *args)
    assert more.returncode == 0, more.stderr[-3000:]
    assert "stage 4 (train): its inputs changed since it was done (what changed: " in more.stdout
    assert more.stdout.count("done before; skipped") == 3  # data, shards, units
    assert (recipe / "exp" / "tiny" / "decode-test-modified_beam-avg2-epoch-3" / "wer").is_file()
    # conf/deploy.yaml over characters (as the recipe runs it), as tiny, beside it: exported offline and
    # streaming, and decoded in sherpa-onnx

    def shrink_deploy(conf):
        conf["model"]["encoder"].update(hidden=32, pre_layers=1, post_layers=1)
        conf["model"]["predictor"]["embed_dim"] = 16
        conf["model"]["joiner"]["hidden"] = 32
        conf["train"].update(epochs=2)

    out = run_shrunk(recipe, corpus, "deploy.yaml", shrink_deploy, "exp/deploy", "--unit-type", "char",
                     "--average", "2", "--methods", "greedy", "--deploy", "offline streaming")
    assert out.returncode == 0, out.stderr[-3000:]
    for kind in ("offline", "streaming"):
        assert (recipe / "exp" / "deploy" / f"onnx-{kind}-avg2-epoch-2" / "sherpa-onnx.json").is_file()
        for set_name in ("dev", "test"):
            line = next(x for x in out.stdout.splitlines()
                        if x.startswith(f"speechocean762 {set_name} sherpa_onnx_{kind} "))
            assert f"/ {words_in(data / set_name / 'text')}," in line, line
    # phone units from the CMU dictionary and a word LM through the lexicon, on DeepSpeech 2 as tiny

    def shrink_deepspeech(conf):
        conf["model"]["encoder"].update(conv_channels=4, hidden=32, pre_layers=1)
        conf["train"].update(epochs=1)

    out = run_shrunk(recipe, corpus, "deepspeech.yaml", shrink_deepspeech, "exp/phone", "--unit-type", "phone",
                     "--lm-over", "words", "--lm-order", "2", "--average", "0",
                     "--methods", "ctc_greedy ctc_prefix_beam_lm")
    assert out.returncode == 0, out.stderr[-3000:]
    lexicon = {line.split()[0] for line in (data / "lang_phone" / "lexicon.txt").read_text().splitlines()}
    assert lexicon == set(" ".join(line.split(maxsplit=1)[1] for line in (data / "train" / "text").read_text()
                                   .splitlines()).split()) - set((data / "lang_phone" / "oov.txt").read_text().split())
    assert yaml.safe_load((recipe / "exp" / "phone" / "lm" / "ctc_prefix_beam_lm.yaml").read_text())["over"] == "words"
    dictionary = cmu_pronunciations()
    for set_name in ("dev", "test"):
        decoded = recipe / "exp" / "phone" / f"decode-{set_name}-ctc_prefix_beam_lm-epoch-1"
        assert f"/ {words_in(data / set_name / 'text')}," in (decoded / "wer").read_text()
        hyp_words = {word for line in (decoded / "hyp").read_text().splitlines() for word in line.split()[1:]}
        assert hyp_words and hyp_words <= lexicon  # the search spells only words of the lexicon
        # the phone error rate beside the WER: against the CMU dictionary, which has dev's and test's words too
        per = (recipe / "exp" / "phone" / f"decode-{set_name}-ctc_greedy-epoch-1" / "per").read_text().strip()
        _, phones, outside = map(int, re.fullmatch(
            r"%PER [0-9.]+ \[ (\d+) / (\d+) \], (\d+) reference words outside the lexicon left out", per).groups())
        ref_words = [w for line in (data / set_name / "text").read_text().splitlines() for w in line.split()[1:]]
        assert (outside == sum(w not in dictionary for w in ref_words) < len(ref_words)
                and phones >= len(ref_words) - outside)
        wer = (recipe / "exp" / "phone" / f"decode-{set_name}-ctc_greedy-epoch-1" / "wer").read_text().strip()
        assert f"speechocean762 {set_name} ctc_greedy (phone epoch-1): {wer}; {per}" in out.stdout
    # none of those configs starts from another model: the default --init-config's was never trained; the
    # transducer started from DeepSpeech 2 (conf/transducer_conv_pruned_from_ctc.yaml, as tiny) starts from
    # the tiny DeepSpeech 2 above, named by --init-config, its training done before and skipped

    def shrink_transducer(conf):
        shrink_deepspeech(conf)
        conf["model"]["predictor"]["embed_dim"] = 32
        conf["model"]["joiner"]["hidden"] = 32

    assert not (recipe / "exp" / "deepspeech_phone").exists()
    companion = yaml.safe_load((recipe / "conf" / "transducer_conv_pruned.yaml").read_text())
    shrink_transducer(companion)
    (recipe / "conf" / "tiny_companion.yaml").write_text(yaml.safe_dump(companion))
    from_ctc = ("--unit-type", "phone", "--init-config", "conf/tiny_deepspeech.yaml", "--init-exp", "exp/phone",
                "--init-average", "0", "--average", "0", "--methods", "greedy",
                "--companion-config", "conf/tiny_companion.yaml", "--companion-exp", "exp/scratch")
    out = run_shrunk(recipe, corpus, "transducer_conv_pruned_from_ctc.yaml", shrink_transducer, "exp/from_ctc",
                     *from_ctc, seeds="2")
    assert out.returncode == 0, out.stderr[-3000:]
    # the companion, a transducer from nothing, trained beside DeepSpeech 2 (trained before, skipped here)
    assert "initialised" not in (recipe / "exp" / "scratch" / "log" / "4.train.log").read_text()
    # --seeds 2: two transducers from the tiny DeepSpeech 2, trained at once, their output in their logs
    init = recipe / "exp" / "phone" / "epoch-1.pt"
    assert out.stdout.count("2 trainings at once") == 1
    for exp in ("from_ctc", "from_ctc_seed1"):
        log = (recipe / "exp" / exp / "log" / "4.train.log").read_text()
        assert re.search(rf"initialised \d+ of \d+ tensors from {re.escape(str(init))} ", log), log[-3000:]
    assert re.search(r" stage 4 \(train\): done before; skipped.*\n.* stage 4 \(train\)\n", out.stdout), out.stdout
    chosen = re.search(r"of 2 seeds, exp/(\S+) is the best on dev", out.stdout).group(1)
    other = {"from_ctc": "from_ctc_seed1", "from_ctc_seed1": "from_ctc"}[chosen]
    assert f"speechocean762 dev greedy ({chosen} epoch-1): %WER" in out.stdout
    # the default --combine: the chosen transducer, the other seed, the companion and DeepSpeech 2 the seeds
    # started from, their n-bests pooled, the weights chosen on dev and applied to test
    name = (f"{chosen}-greedy-epoch-1+{other}-greedy-epoch-1+scratch-greedy-epoch-1"
            "+phone-ctc_prefix_beam_lm-epoch-1")
    for set_name in ("dev", "test"):
        combined = recipe / "exp" / "combination" / f"decode-{set_name}-combined-{name}"
        wer, per = ((combined / result).read_text().strip() for result in ("wer", "per"))
        assert f"/ {words_in(data / set_name / 'text')}," in wer and per.startswith("%PER ")
        assert f"speechocean762 {set_name} combined ({name}): {wer}; {per}" in out.stdout
        for exp, method in ((other, "greedy"), ("scratch", "greedy"), ("phone", "ctc_prefix_beam_lm")):
            own = (recipe / "exp" / exp / f"decode-{set_name}-{method}-epoch-1" / "wer").read_text().strip()
            assert f"speechocean762 {set_name} {method} ({exp} epoch-1): {own}" in out.stdout
    log = (recipe / "exp" / "combination" / "log" / f"9.combine-test-{name}.log").read_text()
    assert log.startswith(
        f"# steps/combine_nbest.py --system exp/{chosen} exp/{chosen}/epoch-1.pt"
        f" exp/{chosen}/decode-test-greedy-epoch-1"
        f" --system exp/{other} exp/{other}/epoch-1.pt exp/{other}/decode-test-greedy-epoch-1"
        " --system exp/scratch exp/scratch/epoch-1.pt exp/scratch/decode-test-greedy-epoch-1"
        " --system exp/phone exp/phone/epoch-1.pt exp/phone/decode-test-ctc_prefix_beam_lm-epoch-1"
        " --lm-fusion exp/phone/lm/ctc_prefix_beam_lm-epoch-1.yaml"
        f" --weights exp/combination/decode-dev-combined-{name}/weights.yaml data/test/data.list "), log
    # DeepSpeech 2 trained again (its config edited): the transducer started from the old one trains anew;
    # the companion's config edited too: it trains at once with DeepSpeech 2
    for config in ("tiny_deepspeech.yaml", "tiny_companion.yaml"):
        conf = yaml.safe_load((recipe / "conf" / config).read_text())
        conf["train"]["seed"] = 3
        (recipe / "conf" / config).write_text(yaml.safe_dump(conf))
    out = run_shrunk(recipe, corpus, "transducer_conv_pruned_from_ctc.yaml", shrink_transducer, "exp/from_ctc",
                     *from_ctc, seeds="2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("2 trainings at once") == 2  # DeepSpeech 2 and the companion, then the two seeds
    assert (recipe / "exp" / "scratch.1" / "epoch-1.pt").is_file()
    for exp in ("from_ctc", "from_ctc_seed1"):  # each seed's old run set aside
        assert "train.init_from_sha256" in (recipe / "exp" / exp / "log" / "4.train.log").read_text()
        assert (recipe / "exp" / f"{exp}.1" / "epoch-1.pt").is_file()
    assert (recipe / "exp" / "phone.1" / "epoch-1.pt").is_file()  # DeepSpeech 2's old run, set aside too
    if re.search(rf"of 2 seeds, exp/{chosen} is the best on dev", out.stdout):
        assert f"stage 9 (combine-test-{name}): its inputs changed since it was done (what changed: " in out.stdout
    else:  # the other seed chosen this time: a combination of another name
        assert re.search(rf"stage 9 \(combine-test-{other}-greedy-epoch-1\+{chosen}-greedy", out.stdout), out.stdout


def test_a_companion_that_cannot_decode_the_leading_method_is_refused_before_any_stage(tmp_path):
    """--companion-config of a model without a CTC head beside --methods leading with a CTC search: the companion,
    decoded in --combine default's combination by that method, failed at stage 6 after the trainings."""
    recipe = copy_recipe("speechocean762", tmp_path)
    conf = yaml.safe_load((recipe / "conf" / "transducer_conv_pruned.yaml").read_text())
    conf["model"]["loss"]["ctc_weight"] = 0.0
    (recipe / "conf" / "no_ctc.yaml").write_text(yaml.safe_dump(conf))
    out = run_recipe(recipe, "--corpus-dir", str(tmp_path), "--companion-config", "conf/no_ctc.yaml", "--methods",
                     "ctc_prefix_beam_lm")
    assert out.returncode == 1 and "stage" not in out.stdout, out.stdout + out.stderr
    assert "ctc_prefix_beam_lm" in out.stderr and "no_ctc.yaml" in out.stderr, out.stderr

