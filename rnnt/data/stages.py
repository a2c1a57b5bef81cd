"""Per-utterance stages of the pipeline, each a generator over record dicts.

Before batching (cheap, lengths only): audio header (its length at the pipeline's rate; audio kept across
epochs by an AudioCache as it is) -> speed perturbation drawn -> tokenise -> filter.
After batching (per kept batch): decode -> mono -> resample -> speed perturb -> reverberation and noise ->
features -> CMVN -> SpecAugment -> frame stacking. So a resumed epoch decodes no audio of the batches it skips.
Randomness comes from a generator seeded by (seed, epoch, key), so an utterance is augmented the same
way whichever rank or worker reads it, and a resumed epoch repeats the interrupted one exactly.
"""

from __future__ import annotations

import fractions
import functools
import logging
import math
import zlib
from typing import Callable, Iterable, Iterator

import torch

from rnnt.data.audio import AudioError, audio_length, load_audio, to_mono
from rnnt.data.audio_cache import AudioCache
from rnnt.data.cmvn_file import read_cmvn
from rnnt.data.config import DataConfig
from rnnt.data.features import fbanks, num_frames
from rnnt.data.report import DataReport
from rnnt.data.resample import resample, resampled_length
from rnnt.data.specaugment import spec_augment
from rnnt.data.stacking import stack_frames, stacked_length
from rnnt.data.tokenizer import UNK

log = logging.getLogger(__name__)


def utterance_generator(seed: int, epoch: int, record: dict) -> torch.Generator:
    """The generator of one utterance's augmentation in one epoch: the same on every rank and worker, and another
    for each copy of an utterance a list repeats (upsampling)."""
    copy = record.get("copy", 0)
    key = record["key"] if not copy else f"{record['key']}#{copy}"
    return torch.Generator().manual_seed(zlib.crc32(f"{seed}:{epoch}:{key}".encode()))


def _skipped(record: dict, error: Exception, report: DataReport | None) -> None:
    log.warning("skipped %s from %s: cannot decode audio (%s)", record["key"], record["source"], error)
    if report is not None:
        report.undecodable += 1


def _decoded_at_rate(record: dict, rate: int, cache: AudioCache | None) -> tuple[torch.Tensor, int, int]:
    """(mono waveform at rate, the file's rate, its channels), put in the cache; raises AudioError, OSError."""
    waveform, file_rate = load_audio(record["audio"], record.get("start"), record.get("end"))
    mono = resample(to_mono(waveform), file_rate, rate)
    if cache is not None:
        cache.put(record, mono, file_rate, waveform.shape[0])
    return mono, file_rate, waveform.shape[0]


def audio_lengths(records: Iterable[dict], rate: int, report: DataReport | None = None,
                  cache: AudioCache | None = None) -> Iterator[dict]:
    """Adds what batching needs of the audio, read from its header without decoding it: 'samples' (its length
    at `rate`), 'sample_rate' (rate), 'file_rate' and 'channels'; with_waveforms decodes it once its batch is
    kept. An utterance kept in the cache, and one whose header cannot count it (rnnt.data.audio.audio_length:
    Ogg Vorbis, MP3), comes with its 'decoded' waveform at rate. An unreadable one is logged and skipped."""
    for record in records:
        decoded = cache.get(record) if cache is not None else None
        from_memory = decoded is not None
        try:
            header = None if decoded else audio_length(record["audio"], record.get("start"), record.get("end"))
            if not (decoded or header):
                decoded = _decoded_at_rate(record, rate, cache)
        except (AudioError, OSError) as error:
            _skipped(record, error, report)
            continue
        if decoded:
            waveform, file_rate, channels = decoded
            record = {**record, "audio": None, "decoded": waveform, "samples": waveform.shape[0]}
        else:
            samples, file_rate, channels = header
            record = {**record, "samples": resampled_length(samples, file_rate, rate)}
        if report is not None:
            report.audio_read(file_rate, channels, from_memory)
        yield {**record, "sample_rate": rate, "file_rate": file_rate, "channels": channels}


def first_of_each_key(records: Iterable[dict], list_name: str, report: DataReport | None = None) -> Iterator[dict]:
    """Decoding's and validation's (and sherpa-onnx's: decode_sherpa_onnx.py): each key once, its first record (a
    list's line repeated, training's upsampling, or two shards of one key gave one hypothesis scored against one
    reference, the other utterance lost unnamed); a repeat is named and counted as dropped. A list's repeated
    lines are left out before it is split across ranks (rnnt.data.sources.each_listed_once); a key in two other
    shards that fall to two ranks is still read by both."""
    seen = set()
    for record in records:
        if record["key"] in seen:
            log.warning("%s: %s is an utterance read before; left out", list_name, record["key"])
            if report is not None:
                report.drop("a key read before")
        else:
            seen.add(record["key"])
            yield record


def append_silence(records: Iterable[dict], seconds: float) -> Iterator[dict]:
    """Each waveform to be followed by `seconds` of zeros (data.tail_silence; with_waveforms appends them)."""
    for record in records:
        if seconds > 0:
            silence = round(seconds * record["sample_rate"])
            record = {**record, "samples": record["samples"] + silence, "silence": silence}
        yield record


@functools.lru_cache(maxsize=64)  # asked for every utterance of every epoch: a few factors, 7 us each
def speed_ratio(factor: float) -> tuple[int, int]:
    """The resampling (from, to) that plays audio `factor` times as fast, as a fraction of small terms (1.1:
    11/10): rate * f rounded would be nearly prime to rate at some rates (11025 * 1.1: 12128 / 11025), and
    the resampler's kernel would take gigabytes."""
    ratio = fractions.Fraction(factor).limit_denominator(100)
    return ratio.numerator, ratio.denominator


def speed_perturb(records: Iterable[dict], factors: tuple[float, ...], seed: int, epoch: int) -> Iterator[dict]:
    """Kaldi-style speed perturbation: played faster by factor f, tempo and pitch both change.

    Each utterance draws its factor here, which sets its length (f = 1.1 makes it 1/1.1 as long: resampled
    from rate * f to rate and kept at rate); with_waveforms resamples it.
    """
    for record in records:
        if factors:
            g = utterance_generator(seed, epoch, record)
            factor = factors[int(torch.randint(0, len(factors), (1,), generator=g))]
            if factor != 1.0:
                record = {**record, "samples": resampled_length(record["samples"], *speed_ratio(factor)),
                          "speed": factor, "unperturbed": record["samples"]}
        yield record


def with_waveforms(batch: list[dict], report: DataReport | None = None, cache: AudioCache | None = None,
                   augment: Callable[[dict, torch.Tensor], torch.Tensor] | None = None) -> list[dict]:
    """The batch's utterances with their 'waveform': decoded and resampled (or as audio_lengths kept it), then
    speed-perturbed, augmented (training: reverberation and noise, rnnt.data.noise) and followed by silence as
    planned. One that cannot be decoded now, or whose decoding is not as long as its header said, is logged,
    counted as unreadable and left out."""
    kept = []
    for record in batch:
        try:
            waveform, decoded = record.get("decoded"), None
            if waveform is None:  # cached once its length is found right (cached before, it trained from epoch 2)
                decoded = _decoded_at_rate(record, record["sample_rate"], None)
                waveform = decoded[0]
            if "speed" in record:
                waveform = resample(waveform, *speed_ratio(record["speed"]))
            if augment is not None:
                waveform = augment(record, waveform)
            if record.get("silence"):
                waveform = torch.cat([waveform, waveform.new_zeros(record["silence"])])
            if waveform.shape[0] != record["samples"]:
                raise AudioError(f"it decodes to {waveform.shape[0]} samples, its header gave {record['samples']}")
            if decoded is not None and cache is not None:
                cache.put(record, *decoded)
        except (AudioError, OSError) as error:
            _skipped(record, error, report)
            if report is not None:
                report.read_in_vain(record["file_rate"], record["channels"])
            continue
        kept.append({**record, "audio": None, "decoded": None, "waveform": waveform})
    return kept


def waveforms(records: Iterable[dict], rate: int, report: DataReport | None = None) -> Iterator[dict]:
    """Each utterance with its mono 'waveform' at `rate` (audio_lengths, then with_waveforms one at a time):
    for a tool that decodes a whole list in order, without batches."""
    for record in audio_lengths(records, rate, report):
        yield from with_waveforms([record], report)


def tokenize(records: Iterable[dict], tokenizer, report: DataReport | None = None) -> Iterator[dict]:
    """Each record's units; the report counts those holding <unk> (a word or character not in the units: a
    transcript of other case or normalisation than the lang dir's trains on <unk>s)."""
    unk = tokenizer.units[UNK]
    for record in records:
        tokens = tokenizer.encode(record["txt"])
        if report is not None and unk in tokens:
            report.with_unknown += 1
        yield {**record, "tokens": tokens}


def filter_utterances(records: Iterable[dict], config: DataConfig, report: DataReport | None = None,
                      output_frames: Callable[[int], int] = lambda frames: frames,
                      units_per_frame: tuple[float, str, bool] = (math.inf, "", False)) -> Iterator[dict]:
    """Drops utterances outside the duration, token and token-per-frame limits, counting why in the report.
    output_frames: the encoder's output frames for a number of input frames (after data.stack);
    units_per_frame: (the most units an encoder frame carries in the loss's lattice, why: one symbol per frame,
    the pruned loss's band, CTC; whether a repeated unit takes a frame more, as in CTC), a cap whatever the
    filter says (rnnt.model.transducer.LossConfig.units_per_frame)."""
    limits = config.filter
    lattice_cap, why, repeats_take_a_frame = units_per_frame
    before = " (before speed perturbation)" if limits.duration_before_speed else ""
    for record in records:
        samples = record.get("unperturbed", record["samples"]) if limits.duration_before_speed else record["samples"]
        duration = samples / record["sample_rate"]
        input_frames = num_frames(record["samples"], record["sample_rate"], config.features.preset)
        frames = stacked_length(input_frames, config.subsample)
        encoder_frames = output_frames(frames)
        n_tokens = len(record["tokens"])
        tokens = record["tokens"]
        lattice_units = n_tokens + (sum(a == b for a, b in zip(tokens, tokens[1:])) if repeats_take_a_frame else 0)
        over_lattice = lattice_units > lattice_cap * encoder_frames
        reason = None
        if duration < limits.min_duration:
            reason = f"shorter than data.filter.min_duration {limits.min_duration:g} s{before}"
        elif duration > limits.max_duration:
            reason = f"longer than data.filter.max_duration {limits.max_duration:g} s{before}"
        elif n_tokens > limits.max_tokens:
            reason = f"over data.filter.max_tokens {limits.max_tokens} units"
        elif encoder_frames == 0:
            reason = "too short for the encoder: no output frame"
        elif over_lattice and (lattice_cap <= limits.max_tokens_per_frame or n_tokens <= limits.max_tokens_per_frame
                               * encoder_frames):
            reason = f"over {lattice_cap:g} units per encoder frame ({why})"
        elif n_tokens > limits.max_tokens_per_frame * encoder_frames:
            reason = f"over data.filter.max_tokens_per_frame {limits.max_tokens_per_frame:g} units per encoder frame"
        if reason:
            if report is not None:
                report.drop(reason)
            continue
        yield {**record, "input_frames": input_frames, "num_frames": frames}


def load_cmvn(config: DataConfig) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The global mean and standard deviation of data.features.cmvn (rnnt.data.cmvn_file: our JSON, WeNet's or
    a Kaldi stats matrix), which must be of these features: the same preset, sample rate and number of bins
    where the file says (stats of other features would shift every bin silently: the kaldi preset's log-mel
    sits 2 ln 32768 above sherpa_onnx's)."""
    path = config.features.cmvn
    if not path:
        return None
    stats = read_cmvn(path)
    mean, std = torch.tensor(stats["mean"], dtype=torch.float32), torch.tensor(stats["std"], dtype=torch.float32)
    if not bool(torch.isfinite(mean).all() and torch.isfinite(std).all() and (std > 0).all()):
        raise ValueError(f"{path}: CMVN stats with a mean or deviation that is not finite, or a deviation of 0; "
                         "recompute them with steps/compute_cmvn_stats.py")
    wanted = {"preset": config.features.preset, "sample_rate": config.sample_rate}
    differ = [f"{key} {stats[key]} (the config: {value})" for key, value in wanted.items()
              if key in stats and stats[key] != value]
    if len(mean) != config.features.num_mel_bins:
        differ.append(f"{len(mean)} bins (the config: {config.features.num_mel_bins})")
    if differ:
        raise ValueError(f"{path}: CMVN stats of other features: {', '.join(differ)}; recompute them with "
                         "steps/compute_cmvn_stats.py --preset, --sample-rate and --num-mel-bins of the config")
    return mean, std


class TooShort(AudioError):
    """Audio too short to give a frame: a file's is refused; a long recording's last segment adds no word."""


def too_short(samples: int, rate: int, window: bool = True) -> TooShort:
    """The error of audio that gives no feature frame (transcribe.py --stream asks num_frames first), or (window
    False) no encoder frame (filter_utterances' "too short for the encoder")."""
    return TooShort(f"{1000 * samples / rate:.1f} ms of audio, " + (
        "shorter than one analysis window" if window else "too short for the encoder: no output frame"))


def features_of(record: dict, config: DataConfig, cmvn, train: bool, seed: int, epoch: int) -> torch.Tensor:
    """fbank -> CMVN -> SpecAugment (training) -> stacking, for one utterance: (frames, stack * bins)."""
    return features_of_batch([record], config, cmvn, train, seed, epoch)[0]


def features_of_batch(records: list[dict], config: DataConfig, cmvn, train: bool, seed: int,
                      epoch: int) -> list[torch.Tensor]:
    """features_of each utterance (of one sample rate), their fbanks computed together (rnnt.data.features.fbanks);
    each utterance's generator dithers it, then masks it, as alone."""
    generators = [utterance_generator(seed + 1, epoch, record) for record in records]
    features = config.features
    every = fbanks([record["waveform"] for record in records], records[0]["sample_rate"], features.preset,
                   features.num_mel_bins, dither=features.dither if train else 0.0, generators=generators)
    done = []
    for record, feats, generator in zip(records, every, generators):
        if feats.shape[0] == 0:
            raise too_short(record["waveform"].shape[-1], record["sample_rate"])
        if cmvn is not None:
            feats = (feats - cmvn[0]) / cmvn[1]
        if train and config.spec_augment is not None:
            feats = spec_augment(feats, config.spec_augment, generator)
        done.append(stack_frames(feats, config.stack, config.subsample))
    return done
