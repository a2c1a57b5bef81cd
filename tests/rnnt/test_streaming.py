"""rnnt.streaming on real LibriSpeech speech with small seeded models: what can stream and in what units,
chunks of any size giving offline greedy search's result (tokens, frames, words), the encoder and
prediction network states carried from chunk to chunk, CMVN applied to the streamed frames, every
remainder of the last chunk, and the end of a stream.

The models are untrained: their outputs are arbitrary but fixed, so any difference between a stream and
the whole utterance shows in the tokens. Transcriber.stream() on AN4, long recordings and the exported
models are tests/rnnt/export/test_deploy.py's."""

import copy
import json

import numpy as np
import pytest
import soundfile
import torch
import yaml

from conftest import librispeech_utterances
from rnnt.data.audio import AudioError, float_samples
from rnnt.data.tokenizer import SPACE, Tokenizer
from rnnt.model.transducer import Transducer
from rnnt.search import greedy_search, joint_log_probs, start_hypotheses
from rnnt.streaming import Partial, Stream, stream_refusals, stream_unit_and_overlap
from rnnt.training.experiment import load_experiment, save_experiment
from rnnt.transcriber import Transcriber

BINS = 40
STACKED = {"input_dim": 3 * BINS, "hidden": 32, "norm": "layer", "pre_layers": 1, "post_layers": 1,
           "stack_time": 2, "input_batch_norm": True}
# a conv front end (two strides of 2) on unstacked frames, re-reading 3 frames of the chunk before
CONV = {"input_dim": BINS, "hidden": 32, "norm": "layer", "conv_channels": 4, "conv_layers": 2, "stack_time": 1,
        "pre_layers": 2, "post_layers": 0, "input_batch_norm": True}
# a streaming Conformer on unstacked frames: attention in chunks of 2 encoder frames (8 fbank frames), 2 before
CONFORMER = {"kind": "conformer", "input_dim": BINS, "input_batch_norm": True, "conv_channels": 4, "dim": 32,
             "layers": 2, "heads": 2, "ff_mult": 2, "kernel_size": 5, "chunk_frames": 2, "left_chunks": 2}
STATELESS = {"kind": "stateless", "embed_dim": 16, "context": 2}
LSTM = {"kind": "lstm", "embed_dim": 16, "hidden": 16, "layers": 1}
# (encoder, stack, predictor, one symbol per frame): modified transducers with a stateless predictor, and a
# standard one (up to 3 symbols a frame, a blank ends it) whose LSTM predictor's state goes from chunk to chunk
MODELS = {"stacked": (STACKED, 3, STATELESS, True), "conv": (CONV, 1, STATELESS, True),
          "lstm": (STACKED, 3, LSTM, False), "conformer": (CONFORMER, 1, STATELESS, True)}


@pytest.fixture(scope="module")
def lang(tmp_path_factory, test_data):
    """Character units of the LibriSpeech samples' transcripts."""
    lang = tmp_path_factory.mktemp("lang_char")
    chars = sorted({c for _, _, text in librispeech_utterances(test_data) for c in text if c != " "})
    (lang / "units.txt").write_text("".join(f"{s} {i}\n" for i, s in enumerate(["<blank>", "<unk>", SPACE, *chars])))
    (lang / "units.json").write_text(json.dumps({"type": "char"}))
    return lang


@pytest.fixture(scope="module")
def speech(test_data):
    """The two shortest samples (2.1 s and 3.3 s) as float32 tensors at 16 kHz."""
    rows = sorted(librispeech_utterances(test_data), key=lambda row: soundfile.info(row[1]).duration)[:2]
    out = []
    for _, flac, _ in rows:
        samples, rate = soundfile.read(flac, dtype="float32")
        assert rate == 16000
        out.append(torch.from_numpy(samples))
    return out


def transcriber(tmp_path, lang, speech, name="stacked", tail_silence=0.0, cmvn=None, loss=None,
                **encoder) -> Transcriber:
    """A Transcriber of a seeded untrained model whose output follows the speech (follows_speech)."""
    enc, stack, predictor, one_sym = MODELS[name]
    values = {"model": {"encoder": {**enc, **encoder}, "predictor": predictor,
                        "joiner": {"hidden": 32, "activation": "tanh"},
                        "loss": {"type": "full", "one_sym_per_frame": one_sym, **(loss or {})}},
              "data": {"features": {"preset": "kaldi", "num_mel_bins": BINS, "cmvn": cmvn}, "stack": stack,
                       "subsample": stack, "tail_silence": tail_silence},
              "paths": {"lang_dir": str(lang)}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values))
    experiment = load_experiment(str(path))
    tokenizer = Tokenizer(str(lang))
    torch.manual_seed(3)
    t = Transcriber(experiment, Transducer(experiment.model, tokenizer.vocab_size).eval(), tokenizer)
    follows_speech(t, speech)
    return t


@torch.no_grad()
def follows_speech(t: Transcriber, speech: list[torch.Tensor]) -> None:
    """At their initial scale an untrained model's tokens hardly depend on the audio: one unit at every
    frame, whatever came before. So that a frame encoded wrongly, or an LSTM state lost, shows in the
    tokens: the input batch norm gets the speech's statistics (as training leaves it), the conv front
    end's weights and the encoder's projection into the joint network are scaled up, and the blank is
    made about as likely as the best other unit on the median frame: tokens of many units, and blanks. <unk>
    never wins. Not exactly as likely: that frame's tie would be broken by rounding, differently in a stream's
    chunks than in one piece (frames equal to 1e-6, not to the bit)."""
    model = t.model
    feats = torch.cat([t.features((s, 16000)) for s in speech])
    if model.encoder.input_norm is not None:
        model.encoder.input_norm.running_mean.copy_(feats.mean(0))
        model.encoder.input_norm.running_var.copy_(feats.var(0))
    for conv in model.encoder.frontend.convs if model.encoder.frontend is not None else ():
        conv.weight.mul_(10.0)
    if model.joiner is None:  # CTC
        return
    model.joiner.enc_proj.weight.mul_(10.0)
    feats = t.features((speech[0], 16000))
    enc, _ = model.encode(feats[None], torch.tensor([feats.shape[0]]))
    start = start_hypotheses(model, 1)[0]
    log_probs = joint_log_probs(model.joiner, model.joiner.enc_proj(enc[0]), start.pred_proj)
    model.joiner.output.bias[0] += (log_probs[:, 2:].max(-1).values - log_probs[:, 0]).median() + 0.05
    model.joiner.output.bias[1] = -100.0


def offline(transcriber: Transcriber, samples: torch.Tensor):
    """Greedy search over the whole utterance (followed by data.tail_silence): the hypothesis and the
    encoder's frames."""
    feats = transcriber.features((samples, 16000))
    with torch.no_grad():
        enc, lengths = transcriber.model.encode(feats[None], torch.tensor([feats.shape[0]]))
    return greedy_search(transcriber.model, enc, lengths)[0], int(lengths[0])


def feed(stream: Stream, samples: torch.Tensor, sizes) -> list[Partial]:
    partials, start = [], 0
    for size in sizes:
        if start >= len(samples):
            break
        partials.append(stream.accept(samples[start:start + size]))
        start += size
    if start < len(samples):
        partials.append(stream.accept(samples[start:]))
    return partials


def load_experiment_with(tmp_path, transcriber, **data):
    """The transcriber's experiment with data keys changed."""
    save_experiment(transcriber.experiment, str(tmp_path / "changed.yaml"))
    values = yaml.safe_load((tmp_path / "changed.yaml").read_text())
    values["data"].update(data)
    (tmp_path / "changed.yaml").write_text(yaml.safe_dump(values))
    return load_experiment(str(tmp_path / "changed.yaml"))


def test_what_can_stream_and_in_what_units(tmp_path, lang, speech):
    stacked, conv = transcriber(tmp_path, lang, speech), transcriber(tmp_path, lang, speech, "conv")
    assert stream_refusals(stacked.experiment, stacked.model) == []
    assert stream_refusals(conv.experiment, conv.model) == []
    # fbank frames per encoder frame (stacking 3 x StackTime 2; the conv front end's strides 2 x 2), and
    # the frames a chunk reads again (the conv front end's overlap)
    assert stream_unit_and_overlap(stacked.experiment, stacked.model) == (6, 0)
    assert stream_unit_and_overlap(conv.experiment, conv.model) == (4, 3)
    both = transcriber(tmp_path, lang, speech, "conv", stack_time=2, post_layers=1)
    assert stream_unit_and_overlap(both.experiment, both.model) == (8, 3)
    conformer = transcriber(tmp_path, lang, speech, "conformer")  # whole attention chunks: 2 x 4 frames
    assert stream_unit_and_overlap(conformer.experiment, conformer.model) == (8, 3)
    offline_conformer = transcriber(tmp_path, lang, speech, "conformer", chunk_frames=0)
    assert stream_refusals(offline_conformer.experiment, offline_conformer.model) == [
        "an offline Conformer (model.encoder.chunk_frames 0) attends to every frame, those ahead too: it cannot stream"]

    bidirectional = transcriber(tmp_path, lang, speech, bidirectional=True)
    assert stream_refusals(bidirectional.experiment, bidirectional.model) == [
        "a bidirectional encoder reads every utterance backwards too: it cannot stream"]
    overlapping = transcriber(tmp_path, lang, speech, bidirectional=True)
    overlapping.experiment = load_experiment_with(tmp_path, overlapping, subsample=1)
    why = stream_refusals(overlapping.experiment, overlapping.model)
    assert len(why) == 2 and "data.stack 3 != data.subsample 1: overlapping stacked frames cannot stream" in why


def test_a_stream_is_refused_for_what_cannot_stream(tmp_path, lang, speech):
    with pytest.raises(ValueError, match="^a bidirectional encoder reads every utterance backwards too"):
        Stream(transcriber(tmp_path, lang, speech, bidirectional=True))
    ctc = transcriber(tmp_path, lang, speech, bidirectional=True, loss={"type": "ctc", "one_sym_per_frame": False})
    with pytest.raises(ValueError) as refused:
        Stream(ctc)
    assert str(refused.value) == ("streaming decodes a transducer with greedy search; this is a CTC model; "
                                  "a bidirectional encoder reads every utterance backwards too: it cannot stream")


@pytest.mark.parametrize("name,tail_silence", [("stacked", 0.0), ("stacked", 0.3), ("conv", 0.3), ("lstm", 0.0),
                                               ("conformer", 0.3)])
def test_chunks_of_any_size_give_the_whole_utterances_result(tmp_path, lang, speech, name, tail_silence):
    """Chunks of random sizes (3 ms to 0.25 s): partial results only grow, the frames not yet encoded stay
    under a chunk's worth, and the final tokens, their frames, the text and word times are offline greedy
    search's over the whole utterance (both followed by data.tail_silence)."""
    t = transcriber(tmp_path, lang, speech, name, tail_silence=tail_silence)
    unit, overlap = stream_unit_and_overlap(t.experiment, t.model)
    generator = torch.Generator().manual_seed(0)
    units = set()
    for samples in speech:
        stream, start, tokens, partials = Stream(t), 0, [], []
        while start < len(samples):
            size = int(torch.randint(50, 4000, (1,), generator=generator))
            partial = stream.accept(samples[start:start + size])
            start += size
            assert not partial.final and stream.hypothesis.tokens[:len(tokens)] == tokens
            assert partial.text == t.tokenizer.text(stream.hypothesis)
            assert stream.pending.shape[0] < unit + overlap
            tokens = list(stream.hypothesis.tokens)
            partials.append((partial, copy.deepcopy(stream.hypothesis)))
        final = stream.finish()
        for partial, then in partials:  # words made when read, late: those of the hypothesis of their time
            assert partial.words == t.words(then)
        whole, frames = offline(t, samples)
        assert final.final and len(whole.tokens) > 10
        units.update(whole.tokens)
        assert (stream.hypothesis.tokens, stream.hypothesis.frames) == (whole.tokens, whole.frames)
        assert stream.hypothesis.score == pytest.approx(whole.score, rel=1e-4)
        assert stream.encoder_frames == frames
        transcript = t.transcribe((samples, 16000))
        assert (final.text, final.words) == (transcript.text, transcript.words)
    assert len(units) > 3  # the tokens follow the speech: not one unit at every frame


@pytest.mark.parametrize("name", ["stacked", "conv", "lstm", "conformer"])
def test_the_states_go_from_chunk_to_chunk(tmp_path, lang, speech, name):
    """Fed 25 ms at a time or all at once, a stream has encoded the same frames into the same states (LSTMs';
    a Conformer's caches and its count of frames); one that forgot its states between chunks (started each
    from zeros) would give another result."""
    t = transcriber(tmp_path, lang, speech, name)
    samples = speech[0]
    small, whole = Stream(t), Stream(t)
    feed(small, samples, [400] * (len(samples) // 400))
    whole.accept(samples)
    assert small.encoder_frames == whole.encoder_frames > 30
    for a, b in zip(small.state, whole.state):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert (small.hypothesis.tokens, small.hypothesis.frames) == (whole.hypothesis.tokens, whole.hypothesis.frames)

    forgetful = Stream(t)
    start_state = forgetful.state
    for start in range(0, len(samples), 1600):
        forgetful.accept(samples[start:start + 1600])
        forgetful.state = tuple(s.clone() for s in start_state)
    assert forgetful.finish().text != whole.finish().text


def test_cmvn_is_applied_to_the_streamed_frames(tmp_path, lang, speech):
    """With data.features.cmvn, each streamed fbank frame is normalised as the offline front end does."""
    probe = transcriber(tmp_path, lang, speech)
    frames = torch.cat([probe.features((s, 16000)).reshape(-1, BINS) for s in speech])  # stacked rows: 3 frames
    (tmp_path / "cmvn.json").write_text(json.dumps({"mean": frames.mean(0).tolist(),
                                                    "std": frames.std(0).tolist()}))
    t = transcriber(tmp_path, lang, speech, cmvn=str(tmp_path / "cmvn.json"))
    plain = transcriber(tmp_path, lang, speech)
    plain.model.load_state_dict(t.model.state_dict())  # the same weights, no CMVN
    assert t.cmvn is not None and plain.cmvn is None
    for samples in speech:
        stream = Stream(t)
        feed(stream, samples, [1000] * (len(samples) // 1000))
        final = stream.finish()
        assert final.text == t.transcribe((samples, 16000)).text
        assert final.text != plain.transcribe((samples, 16000)).text


@pytest.mark.parametrize("name", ["stacked", "conv"])
def test_every_remainder_of_the_last_chunk(tmp_path, lang, speech, name):
    """Lengths that leave 0 to 7 fbank frames after the last whole encoder frame: the stream's end is padded
    as the offline front end pads a sequence's end (and a conv front end's too-short end dropped as
    offline drops it)."""
    t = transcriber(tmp_path, lang, speech, name)
    for extra in range(8):
        samples = speech[1][:8000 + 160 * extra + 37]
        stream = Stream(t)
        feed(stream, samples, [800] * 10)
        stream.finish()
        whole, frames = offline(t, samples)
        assert (stream.hypothesis.tokens, stream.hypothesis.frames, stream.encoder_frames) == (
            whole.tokens, whole.frames, frames), extra


def test_the_end_of_a_stream(tmp_path, lang, speech):
    t = transcriber(tmp_path, lang, speech, tail_silence=0.3)
    empty = Stream(t)
    assert empty.sample_rate == 16000
    assert empty.result(final=False) == Partial("", [], False)
    first = empty.finish()  # no speech: the tail silence alone
    assert first.final and first == empty.finish()  # finish() again changes nothing
    with pytest.raises(RuntimeError, match="the stream is finished"):
        empty.accept(speech[0][:1600])

    stream = Stream(t)
    stream.accept(speech[0])
    final = stream.finish()
    frames = stream.encoder_frames
    assert stream.finish() == final and stream.encoder_frames == frames  # the tail is not fed twice


def fed_lines(lang, frames_a_chunk: int, endpoint_seconds: float = 1.2, line_seconds: float = 20.0):
    """StreamLines over a stream of the units 'HI THERE' at frames 0-7, 'YES' at 48-50, then silence to frame 140,
    fed frames_a_chunk encoder frames at a time: (frame, current line, lines ended) after each chunk, and the
    StreamLines."""
    from types import SimpleNamespace

    from rnnt.search import Hypothesis
    from rnnt.streaming import StreamLines

    tokenizer = Tokenizer(str(lang))
    units = [tokenizer.units[c] for c in "HI"] + [tokenizer.units[SPACE]] + [tokenizer.units[c] for c in "THERE"]
    stream = SimpleNamespace(transcriber=SimpleNamespace(tokenizer=tokenizer), encoder_frames=0,
                             hypothesis=Hypothesis([], [], 0.0))
    lines, seen = StreamLines(stream, endpoint_seconds, 0.04, line_seconds), []
    for frame in range(140):
        stream.encoder_frames = frame + 1
        if frame < 8 or 48 <= frame < 51:
            token = units[frame] if frame < 8 else tokenizer.units["YES"[frame - 48]]
            stream.hypothesis = Hypothesis(stream.hypothesis.tokens + [token], stream.hypothesis.frames + [frame], 0.0)
        if (frame + 1) % frames_a_chunk == 0 or frame == 139:
            seen.append((frame, lines.current(), lines.ended()))
    return seen, lines


def test_stream_lines_end_at_pauses_and_decode_only_their_own_units(lang):
    """The units 'HI THERE' then, after a pause of 1.6 s, 'YES': the first line ends once 1.2 s pass without a
    unit (not before), timed by its units; the second holds only its own units; with 0, no line ends."""
    seen, _ = fed_lines(lang, 1)
    ends = [(frame, ended) for frame, _, ended in seen if ended]
    assert ends == [(37, [("HI THERE", 0.0, 0.32)]), (80, [("YES", 1.92, 2.04)])]  # 30 frames of 40 ms after the last
    assert [text for frame, text, _ in seen if frame in (7, 40, 50)] == ["HI THERE", "", "YES"]
    never, lines = fed_lines(lang, 1, endpoint_seconds=0.0)
    assert not any(ended for _, _, ended in never) and lines.current() == "HI THEREYES"  # one line, decoded whole


@pytest.mark.parametrize("frames_a_chunk", [7, 60, 140])
def test_stream_lines_are_the_same_whatever_the_chunk(lang, frames_a_chunk):
    """A pause within one chunk, speech after it (a chunk of 2.4 s or more here, or its boundaries where they fell),
    was never seen: the lines merged, and at most one line ended a chunk."""
    seen, _ = fed_lines(lang, frames_a_chunk)
    assert [line for _, _, ended in seen for line in ended] == [("HI THERE", 0.0, 0.32), ("YES", 1.92, 2.04)]


@pytest.mark.parametrize("frames_a_chunk", [1, 7, 140])
def test_a_line_of_speech_without_a_pause_ends_before_a_word_once_long_enough(lang, frames_a_chunk):
    """Speech going on without a pause (here: a line may hold 80 ms), the line ends before the next word's
    start (the word boundary unit at frame 2), never inside a word (YES has none before it), whatever the chunk:
    a line grew for as long as the speech went on, each partial printing it whole."""
    seen, lines = fed_lines(lang, frames_a_chunk, line_seconds=0.08)
    assert [line for _, _, ended in seen for line in ended] == [("HI", 0.0, 0.08), ("THERE", 0.08, 0.32),
                                                              ("YES", 1.92, 2.04)]
    never, lines = fed_lines(lang, frames_a_chunk, endpoint_seconds=0.0, line_seconds=0.08)
    assert [line for _, _, ended in never for line in ended] == [("HI", 0.0, 0.08)]
    assert lines.current() == "THEREYES"


def test_a_chunk_with_samples_that_are_not_finite_is_refused(tmp_path, lang, speech):
    """A NaN in a chunk (a float file's) is refused by name: fed on, it made every later frame NaN and the final
    transcript empty."""
    from rnnt.data.audio import AudioError

    stream = Stream(transcriber(tmp_path, lang, speech))
    stream.accept(speech[0][:1600])
    chunk = speech[0][1600:3200].clone()
    chunk[10] = float("nan")
    with pytest.raises(AudioError, match="samples are not finite"):
        stream.accept(chunk)


def test_a_stream_takes_integer_pcm_and_numpy_chunks_as_the_transcriber_does(tmp_path, lang, speech):
    """16-bit PCM chunks (a microphone's) went in unscaled, 32768 times too loud: another transcript, no error; a
    numpy chunk raised AttributeError. Two channels are refused, not read as one."""
    t = transcriber(tmp_path, lang, speech)
    pcm = (speech[0] * 32767).round().to(torch.int16)
    as_floats, as_ints, as_numpy = Stream(t), Stream(t), Stream(t)
    feed(as_floats, pcm.float() / 32768, [1600] * 100)
    feed(as_ints, pcm, [1600] * 100)
    for start in range(0, len(pcm), 1600):
        as_numpy.accept(pcm[start:start + 1600].numpy())
    expected = as_floats.finish()
    assert expected.text and as_ints.finish() == expected and as_numpy.finish() == expected
    with pytest.raises(AudioError, match=r"a stream takes mono samples, got shape \(2, 1600\)"):
        Stream(t).accept(torch.stack([speech[0][:1600]] * 2))
    as_blocks = Stream(t)  # sounddevice's mono blocks, (samples, 1): refused as two-dimensional
    for start in range(0, len(pcm), 1600):
        as_blocks.accept(pcm[start:start + 1600, None].numpy())
    assert as_blocks.finish() == expected
    with pytest.raises(AudioError, match="no samples"):  # as a file of none is; it was transcribed as silence
        t.transcribe((np.zeros(0, dtype=np.float32), 16000))


def test_samples_of_a_type_pcm_is_not_are_refused_and_32_bit_pcm_is_scaled():
    """uint16 samples were divided by 0 (NaN: every later frame of a stream NaN, an empty transcript, no error);
    int64 ones, what torch.tensor of a list of ints gives, by 2^63 (16-bit PCM as silence)."""
    pcm = torch.tensor([0, 16384, -32768], dtype=torch.int16)
    torch.testing.assert_close(float_samples(pcm.to(torch.int32) * 65536), torch.tensor([0.0, 0.5, -1.0]))
    torch.testing.assert_close(float_samples(pcm.numpy()), torch.tensor([0.0, 0.5, -1.0]))
    for samples, name in ((pcm.to(torch.int64), "int64"), (np.array([0, 32768], np.uint16), "uint16"),
                          (torch.tensor([True, False]), "bool")):
        with pytest.raises(AudioError, match=f"audio samples of type {name}: want float in"):
            float_samples(samples)
    with pytest.raises(AudioError, match="samples are not finite"):  # finite as float64, not as float32
        float_samples(np.array([0.0, 1e300]))


def test_standard_input_in_another_container_is_named_and_an_rf64_wav_is_read():
    """--stream -: AU (what sox -t au - writes), AIFF, CAF, Wave64 and big-endian WAV streams were decoded as raw
    PCM (a transcript of noise, exit 0); an RF64 WAV (past 4 GB; arecord --use-rf64) too, header and all."""
    import io

    import numpy as np

    from rnnt.audio_chunks import pcm_chunks

    samples = (np.sin(np.arange(4000) / 7) * 8000).astype(np.int16)
    for format, kind in (("AU", "an AU"), ("AIFF", "an AIFF"), ("CAF", "a CAF"), ("W64", "a Wave64")):
        stream = io.BytesIO()
        soundfile.write(stream, samples, 16000, format=format, subtype="PCM_16")
        stream.seek(0)
        with pytest.raises(AudioError, match=f"^stdin holds {kind}.* stream, not raw PCM"):
            list(pcm_chunks(stream, 16000, 1000, "stdin"))
    for format in ("WAV", "RF64"):
        stream = io.BytesIO()
        soundfile.write(stream, samples, 16000, format=format, subtype="PCM_16")
        stream.seek(0)
        read = torch.cat(list(pcm_chunks(stream, 16000, 1000, "stdin")))
        assert torch.equal(read, torch.from_numpy(samples.astype(np.float32) / 32768)), format


def test_a_clip_too_short_for_the_encoder_is_named_not_transcribed_as_nothing(tmp_path, lang, speech):
    """A conv front end takes 7 feature frames for one output frame: 30-70 ms gave feature frames, no encoder
    frame, and an empty transcript with no word of why (decode.py's pipeline names it)."""
    t = transcriber(tmp_path, lang, speech, "conv")
    for milliseconds in (30, 70):
        with pytest.raises(AudioError, match=rf"^{milliseconds}.0 ms of audio, too short for the encoder: no output"):
            t.transcribe((speech[0][:16 * milliseconds], 16000))
    assert t.experiment.model.encoder.output_frames(t.features((speech[0][:1600], 16000)).shape[0]) > 0  # 100 ms


def test_a_long_recordings_last_segment_too_short_for_the_encoder_adds_no_word(tmp_path, lang, speech):
    """Cut into segments, a last piece of 140 ms (a piece under 100 ms joins the one before) gives a conv front end
    of 3 layers no frame: the recording is transcribed, that piece saying nothing, as within the whole recording;
    a recording that short alone is refused, as without segments."""
    from rnnt.segmenting import segments, transcribe_in_segments

    t = transcriber(tmp_path, lang, speech, "conv", conv_layers=3)
    noisy = speech[1][16000:29000] + 1e-3 * torch.randn(13000, generator=torch.Generator().manual_seed(0))
    audio = torch.cat([noisy, torch.zeros(3100)])  # 0.81 s of speech (no digital silence), then silence: cut in it
    soundfile.write(tmp_path / "a.wav", audio.numpy(), 16000)
    (_, first), (_, last) = segments([audio], 16000, 1.0)
    assert last.shape[0] >= 1600  # not joined to the segment before: alone, no encoder frame
    with pytest.raises(AudioError, match="too short for the encoder"):
        t.features((last, 16000))
    cut = first.shape[0]
    assert transcribe_in_segments(t, str(tmp_path / "a.wav"), 1.0).text == t.transcribe((audio[:cut], 16000)).text
    soundfile.write(tmp_path / "short.wav", audio[cut:].numpy(), 16000)
    with pytest.raises(AudioError, match="too short for the encoder"):
        transcribe_in_segments(t, str(tmp_path / "short.wav"), 1.0)


def test_words_of_one_segment_never_end_after_the_next_segments_begin(tmp_path):
    """A word's end, clamped to its segment's length and rounded, was rounded again after the segment's start was
    added: 81.242 before the next segment's first word at 81.241."""
    from rnnt.segmenting import segments, transcribe_in_segments
    from rnnt.transcriber import Transcript

    class WholeSegmentWords:  # each segment one word from its start to its end, rounded as words_with_times does
        def prepared(self, audio):
            return None, audio[0].shape[0] / audio[1]

        def transcribe_prepared(self, prepared, *args, **kwargs):
            return [Transcript("A", [{"word": "A", "start": 0.0, "end": round(seconds, 3)}], 0.0)
                    for _, seconds in prepared]

    audio = torch.randn(8000 * 30, generator=torch.Generator().manual_seed(0)) * 0.1
    soundfile.write(tmp_path / "a.wav", audio.numpy(), 8000)
    words = transcribe_in_segments(WholeSegmentWords(), str(tmp_path / "a.wav"), 7.3).words
    starts = [start for start, _ in segments([audio], 8000, 7.3)]
    assert [w["start"] for w in words] == [round(start, 3) for start in starts] and len(words) > 3
    assert all(word["end"] <= after["start"] for word, after in zip(words, words[1:])), words


def test_a_word_on_the_last_frame_starting_just_inside_the_audio_lasts_a_millisecond(lang):
    """6.960125 s of audio, 60 ms frames: a word emitted in the silence after it starts on the frame at 6.96 s and
    ends at the audio's end, both 6.96 rounded: a word of no time (and a CTM line ending past the audio)."""
    from rnnt.search import Hypothesis
    from rnnt.transcriber import words_with_times

    tokenizer = Tokenizer(str(lang))
    hyp = Hypothesis([tokenizer.units["A"]], [120], 0.0)  # emitted at 7.2 s, in the silence appended
    assert words_with_times(tokenizer, hyp, 0.06, 6.960125) == [{"word": "A", "start": 6.959, "end": 6.96}]
    assert words_with_times(tokenizer, hyp, 0.06, 6.99) == [{"word": "A", "start": 6.96, "end": 6.99}]
    # sherpa-onnx's words (decode_sherpa_onnx.py's ctm) as ours: its token on that frame (7.2 s, scaled by 4 frames)
    from rnnt.export.runtime import Recognised, words_with_times as sherpa_onnx_words

    for duration, span in ((6.960125, {"start": 6.959, "end": 6.96}), (6.99, {"start": 6.96, "end": 6.99})):
        assert sherpa_onnx_words(Recognised(" A", [" A"], [4.8]), 0.06, duration) == [{"word": "A", **span}]
