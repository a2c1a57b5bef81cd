"""Using a trained model: load it from an experiment dir, decode batches, transcribe audio files.

An experiment dir holds config.yaml (with the lang dir it was trained with) and checkpoints; the
default checkpoint is model.pt's, the model a recipe's result lines name, else the newest avg-N.pt, else the
newest epoch or step checkpoint (rnnt.training.checkpoint.for_decoding). EMA weights are
used where the checkpoint keeps them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch.nn.utils.rnn import pad_sequence

from rnnt.confidence import CALIBRATION_FILE, Calibration, add_unit_posteriors, experiment_calibration, \
    word_confidence
from rnnt.ctm import start_within, word_span
from rnnt.data import stages
from rnnt.data.audio import AudioError, float_samples, load_audio, to_mono
from rnnt.data.config import BatchConfig, FilterConfig
from rnnt.data.fbank_presets import PRESETS, frame_samples
from rnnt.data.pipeline import Pipeline
from rnnt.data.resample import resample
from rnnt.data.tokenizer import SPACE, Tokenizer
from rnnt.model.transducer import Transducer
from rnnt.devices import checked_device
from rnnt.lm.fusion import fusion_config_path
from rnnt.search import Hypothesis
from rnnt.lm.hotwords import HotwordGraph, hotword_graph
from rnnt.search_methods import METHODS, SearchOptions, lm_options, search, with_hotwords
from rnnt.training import checkpoint
from rnnt.training.trained_under import check_trained_under
from rnnt.training.experiment import Experiment, load_trained


def load_model(exp_dir: str, checkpoint_path: str | None = None, use_ema: bool = True,
               device: str = "cpu") -> tuple[Experiment, Transducer, Tokenizer, str]:
    device = checked_device(device)
    experiment = load_trained(exp_dir)
    tokenizer = Tokenizer(experiment.paths.lang_dir)
    model = Transducer(experiment.model, tokenizer.vocab_size)
    path = checkpoint_path or checkpoint.for_decoding(exp_dir)
    state = checkpoint.load(path)
    check_trained_under(path, state.get("meta") or {}, experiment, exp_dir)
    if not use_ema and state["meta"].get("averaged_weights") == "ema":  # it holds them as its only weights
        raise ValueError(f"{path}: an average of EMA weights; for the raw weights' average, write one with "
                         "steps/average_checkpoints.py --no-ema --output FILE and decode that")
    try:
        model.load_state_dict(state["ema"] if use_ema and state.get("ema") is not None else state["model"])
    except RuntimeError as error:  # another experiment's checkpoint: torch's list of every tensor that differs
        first = [line.strip() for line in str(error).splitlines()][1:2] or [str(error)]
        raise ValueError(f"{path}: not weights of the model {exp_dir}/config.yaml describes (with "
                         f"{tokenizer.vocab_size} units): {first[0]} ...") from None
    return experiment, model.to(device).eval(), tokenizer, path


def decoding_pipeline(experiment: Experiment, tokenizer: Tokenizer, data_list: str, batch_size: int) -> Pipeline:
    """The training front end without augmentation (train=False), filtering or reordering: every utterance of a
    test set is decoded, but one too short to give the encoder a frame (named in the data report; scored as
    all deletions). Each utterance's audio is read once: no audio cache (it filled data.cache_audio_mb)."""
    data = dataclasses.replace(experiment.data, filter=FilterConfig(), shuffle_buffer=0, sort_buffer=0, buckets=0,
                               num_workers=0, batch=BatchConfig(type="static", batch_size=batch_size), cache_audio_mb=0)
    return Pipeline(data_list, data, tokenizer, train=False, output_frames=experiment.model.encoder.output_frames)


def decode_batch_nbest(model, feats, feat_lens, method: str = "greedy",
                       options: SearchOptions = SearchOptions()) -> list[list[Hypothesis]]:
    """For each utterance of a padded batch, its best hypotheses, best first (rnnt.search_methods); the best one's
    unit posteriors set (rnnt.confidence; not pooled_beam_lm's)."""
    with torch.no_grad():
        enc, enc_lens = model.encode(feats, feat_lens)
    nbests = search(model, enc, enc_lens, method, options)
    # greedy search keeps them as it goes; pooled_beam_lm's best may be its CTC search's, whose frames are not where
    # the joint network would emit its units: none
    if any(nbest[0].unit_posteriors is None for nbest in nbests) and not METHODS[method].needs_ctc:
        add_unit_posteriors(model, enc, [nbest[0] for nbest in nbests], METHODS[method].head)
    return nbests


def decode_batch(model, feats, feat_lens, method: str = "greedy",
                 options: SearchOptions = SearchOptions()) -> list[Hypothesis]:
    """The best hypothesis for each utterance of a padded batch."""
    return [nbest[0] for nbest in decode_batch_nbest(model, feats, feat_lens, method, options)]


def seconds_per_input_frame(experiment: Experiment) -> float:
    """Duration of one model input frame (fbank shift x frame subsampling): the shift in whole samples, as
    the features take it (at 22050 Hz 220 samples, 9.977 ms: times at the nominal 10 ms ran 0.23% late)."""
    rate = experiment.data.sample_rate
    return frame_samples(PRESETS[experiment.data.features.preset], rate)[1] / rate * experiment.data.subsample


def seconds_per_encoder_frame(experiment: Experiment) -> float:
    return seconds_per_input_frame(experiment) * experiment.model.encoder.time_reduction


def words_with_times(tokenizer: Tokenizer, hyp: Hypothesis, frame_seconds: float, duration: float = float("inf"),
                     calibration: Calibration | None = None, rounded: bool = True) -> list[dict]:
    """Words with start and end times (seconds) from the frames at which their pieces were emitted, never past
    the audio's duration (a unidirectional model emits a word's end inside the silence appended after it:
    start_within); a word LM's words (hyp.words) name them where the search kept them; with the hypothesis's unit
    posteriors, each word's confidence (rnnt.confidence; calibrated where given, to 4 decimals unless not
    rounded)."""
    groups: list[list[tuple[int, int, float | None]]] = []  # each word's (token, frame, posterior)s
    posteriors = hyp.unit_posteriors if hyp.unit_posteriors is not None else [None] * len(hyp.tokens)
    for token, frame, posterior in zip(hyp.tokens, hyp.frames, posteriors):
        piece = tokenizer.symbols.get(token, "<unk>")
        if piece == SPACE and tokenizer.kind in ("char", "phone"):  # the word boundary as a unit of its own
            groups.append([])
        elif not groups or tokenizer.starts_word(token):
            groups.append([(token, frame, posterior)])
        else:
            groups[-1].append((token, frame, posterior))
    groups = [group for group in groups if group]
    texts = hyp.words if hyp.words is not None and len(hyp.words) == len(groups) else \
        [tokenizer.decode([token for token, _, _ in group]).strip() for group in groups]
    rows = []
    for text, group in zip(texts, groups):
        if not text:  # a lone word-start piece spells no word
            continue
        rows.append({"word": text, **word_span(group[0][1] * frame_seconds, (group[-1][1] + 1) * frame_seconds,
                                               duration, frame_seconds)})
        if hyp.unit_posteriors is not None:
            rows[-1]["confidence"] = word_confidence([posterior for _, _, posterior in group], calibration, rounded)
    return rows


@dataclass
class Transcript:
    text: str
    words: list[dict]
    score: float
    nbest: list[dict] | None = None  # transcribe(nbest=True): every hypothesis the search kept, best first


def nbest_entries(tokenizer: Tokenizer, hyps: list[Hypothesis], frame_seconds: float, duration: float) -> list[dict]:
    """Hypotheses as JSON-ready rows: text, log-probability score (null where it is -inf: a word LM's search
    with every hypothesis inside a word, labels the CTC head cannot align; JSON has no infinity), and each
    unit with its time (seconds), inside the audio of `duration` seconds as the words' times are (a unit emitted
    in the silence appended after it, on its last frame)."""
    return [{"text": tokenizer.text(h), "score": round(h.score, 4) if math.isfinite(h.score) else None,
             "tokens": [{"unit": tokenizer.symbols.get(t, "<unk>"), "id": t,
                         "time": round(start_within(f * frame_seconds, duration, frame_seconds), 3)}
                        for t, f in zip(h.tokens, h.frames)]} for h in hyps]


def batches_by_length(seconds: list[float], batch_size: int, max_seconds: float = math.inf) -> list[list[int]]:
    """The indices of recordings `seconds` long in batches, the longest first: up to batch_size of them, a batch
    of several padded (to its first, its longest) to at most max_seconds of audio in all."""
    batches: list[list[int]] = []
    for i in sorted(range(len(seconds)), key=lambda i: -seconds[i]):
        last = batches[-1] if batches else []
        if last and len(last) < batch_size and (len(last) + 1) * seconds[last[0]] <= max_seconds:
            last.append(i)
        else:
            batches.append([i])
    return batches


class Transcriber:
    """Audio in (any format soundfile reads, any rate, any channels), text out."""

    def __init__(self, experiment: Experiment, model: Transducer, tokenizer: Tokenizer,
                 device: str | torch.device = "cpu", exp_dir: str | None = None, checkpoint: str | None = None,
                 raw_of_ema: bool = False):
        self.experiment, self.model, self.tokenizer, self.device = experiment, model, tokenizer, device
        self.exp_dir = exp_dir  # where the LM-fused methods find their LMs (lm/<method>.yaml)
        self.checkpoint_path = checkpoint  # what their weights were chosen with is checked against (None: not)
        self.lm_options: dict[str, SearchOptions] = {}  # each LM-fused method's, read at its first use
        self.hotwords: HotwordGraph | None = None  # use_hotwords' phrases
        self.cmvn = stages.load_cmvn(experiment.data)
        # words' confidences as the experiment's calibration of this checkpoint maps them, for the searches of its
        # head (steps/calibrate_confidence.py); None: raw. raw_of_ema: the model holds the checkpoint's raw weights
        # where it keeps EMA ones, which the calibration was fitted on
        self.calibration = experiment_calibration(exp_dir) if exp_dir and checkpoint else None
        self.calibration_problem = ""  # why the experiment's calibration is not this model's (calibration_problem_for)
        if self.calibration and (problem := self.calibration.problem(checkpoint, raw_of_ema=raw_of_ema)):
            self.calibration, self.calibration_problem = None, f"{exp_dir}/{CALIBRATION_FILE} was {problem}"

    @classmethod
    def from_exp_dir(cls, exp_dir: str, checkpoint_path: str | None = None, device: str = "cpu",
                     use_ema: bool = True) -> "Transcriber":
        """The experiment's model; the LM-fused methods use its lm/<method>.yaml (steps/tune_lm_fusion.py), words'
        confidences its calibration (steps/calibrate_confidence.py)."""
        experiment, model, tokenizer, path = load_model(exp_dir, checkpoint_path, use_ema, device)
        return cls(experiment, model, tokenizer, next(model.parameters()).device, exp_dir, path,  # 'auto' resolved
                   not use_ema and checkpoint.holds_ema(path))

    def calibration_problem_for(self, head: str) -> str:
        """Why the words of that head's searches are not calibrated ('' where they are, or no calibration is)."""
        if self.calibration and self.calibration.head != head:  # (problem() says so before it reads the checkpoint)
            return f"{self.exp_dir}/{CALIBRATION_FILE} was {self.calibration.problem(self.checkpoint_path, head)}"
        return self.calibration_problem

    def use_lm_fusion(self, method: str, path: str) -> None:
        """The LM and weights an LM-fused method decodes with from now on: a weights file (as tune_lm_fusion.py
        writes lm/<method>.yaml) of another LM, or of an LM for a Transcriber made without an experiment dir."""
        self.lm_options[method] = lm_options(method, self.tokenizer, path, checkpoint=self.checkpoint_path)

    def use_hotwords(self, path: str, score: float = 1.5) -> None:
        """The phrases of a hotwords file favoured from now on by the searches that can (rnnt.lm.hotwords)."""
        self.hotwords = hotword_graph(self.tokenizer, path, score)

    def search_options(self, method: str, beam: int | None = None) -> SearchOptions:
        """The options `method` searches with: beam (default 4); an LM-fused method's LM (use_lm_fusion's, else
        the experiment's lm/<method>.yaml) and, unless beam is given, the beam its weights were chosen with; the
        hotwords of use_hotwords over them."""
        return with_hotwords(self.method_options(method, beam), self.hotwords)

    def method_options(self, method: str, beam: int | None = None) -> SearchOptions:
        if method not in METHODS or not METHODS[method].lm:
            return SearchOptions(beam or 4)
        if method not in self.lm_options:
            if self.exp_dir is None:
                raise ValueError(f"{method} needs an LM: a Transcriber from an experiment dir with lm/{method}.yaml, "
                                 "or use_lm_fusion's")
            self.lm_options[method] = lm_options(method, self.tokenizer, fusion_config_path(self.exp_dir, method),
                                                 checkpoint=self.checkpoint_path)
        tuned = self.lm_options[method]
        return tuned if beam is None else dataclasses.replace(tuned, beam=beam)

    def waveform(self, audio) -> torch.Tensor:
        """Mono float32 samples in [-1, 1] at the model's rate; a tuple's samples as rnnt.data.audio.float_samples
        takes them (integers scaled, a numpy array, soundfile's (samples, channels))."""
        if isinstance(audio, tuple):
            waveform, rate = float_samples(audio[0]), audio[1]
            if not waveform.numel():  # as a file of none is refused (it was transcribed as saying nothing)
                raise AudioError("no samples")
        else:
            waveform, rate = load_audio(audio)
        mono = to_mono(waveform) if waveform.dim() == 2 else waveform
        return resample(mono, rate, self.experiment.data.sample_rate)

    def features(self, audio) -> torch.Tensor:
        return self.features_of(self.waveform(audio))

    def features_of(self, waveform: torch.Tensor) -> torch.Tensor:
        rate = self.experiment.data.sample_rate
        planned = stages.append_silence([{"key": "audio", "decoded": waveform, "samples": waveform.shape[-1],
                                          "sample_rate": rate}], self.experiment.data.tail_silence)
        record = stages.with_waveforms(list(planned))[0]
        feats = stages.features_of(record, self.experiment.data, self.cmvn, train=False, seed=0, epoch=0)
        if self.experiment.model.encoder.output_frames(feats.shape[0]) == 0:  # it said nothing, unnamed
            raise stages.too_short(waveform.shape[-1], rate, window=False)
        return feats

    def prepared(self, audio) -> tuple[torch.Tensor, float]:
        """audio's features and its length in seconds, as transcribe_prepared takes them (AudioError, BadAudio:
        audio that cannot be read or gives no frame)."""
        waveform = self.waveform(audio)
        return self.features_of(waveform), waveform.shape[-1] / self.experiment.data.sample_rate

    def transcribe(self, audio, method: str = "greedy", beam: int | None = None, nbest: bool = False) -> Transcript:
        """audio: a path, bytes of a file, or (waveform (channels, samples) or (samples,), sample rate).
        method: a name of rnnt.search_methods; beam: default 4, for an LM-fused method the beam its LM
        weights were chosen with."""
        return self.transcribe_prepared([self.prepared(audio)], method, beam, nbest)[0]

    def transcribe_prepared(self, prepared: list[tuple[torch.Tensor, float]], method: str = "greedy",
                            beam: int | None = None, nbest: bool = False, batch_size: int = 1,
                            max_seconds: float = math.inf) -> list[Transcript]:
        """The transcripts of prepared's recordings (each (features, seconds)), in their order: up to batch_size of
        them encoded and searched at once, the longest first (a batch of alike lengths, the least padding), a batch
        of several padded to at most max_seconds of audio in all (memory: a batch of hour-long recordings)."""
        options = self.search_options(method, beam)
        frame_seconds = seconds_per_encoder_frame(self.experiment)
        transcripts: list[Transcript] = [None] * len(prepared)  # type: ignore[list-item]
        for chosen in batches_by_length([seconds for _, seconds in prepared], batch_size, max_seconds):
            feats = pad_sequence([prepared[i][0] for i in chosen], batch_first=True).to(self.device)
            lens = torch.tensor([prepared[i][0].shape[0] for i in chosen], device=self.device)
            for i, hyps in zip(chosen, decode_batch_nbest(self.model, feats, lens, method, options)):
                best, seconds = hyps[0], prepared[i][1]
                listed = nbest_entries(self.tokenizer, hyps, frame_seconds, seconds) if nbest else None
                words = self.words(best, seconds, METHODS[method].head)
                transcripts[i] = Transcript(self.tokenizer.text(best), words, best.score, listed)
        return transcripts

    def words(self, hyp: Hypothesis, duration: float = float("inf"), head: str = "transducer") -> list[dict]:
        """hyp's words with their times and confidences (calibrated where the calibration is of that head's)."""
        calibration = self.calibration if self.calibration and self.calibration.head == head else None
        return words_with_times(self.tokenizer, hyp, seconds_per_encoder_frame(self.experiment), duration,
                                calibration)

    def stream(self):
        """A rnnt.streaming.Stream: feed it audio chunks at the model's sample rate, read partial results."""
        from rnnt.streaming import Stream

        return Stream(self)
