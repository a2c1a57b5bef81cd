"""Writes WeNet-compatible tar shards: for each utterance, <key>.txt then <key>.<audio extension>.

Audio is copied byte for byte when it can be (a file whose format is kept, no resampling, no
segment): copying compressed FLAC is bound by the disk. Otherwise it is decoded, cut to its segment,
resampled, and encoded as WAV (16-bit PCM) or FLAC. A shard is written as <name>.tmp and renamed
when complete, so a shard under its final name is always whole.
"""

from __future__ import annotations

import functools
import io
import os
import subprocess
import tarfile
from dataclasses import dataclass

import soundfile

from rnnt.atomic_write import write_atomically
from rnnt.data.audio_header import AudioError, UnreadableAudio, open_audio, whole, zero_size_filled_in

# copied as they are where the file holds what its extension says: WeNet's reader reads these (not SPHERE: AN4's
# .sph files, and TIMIT's SPHERE files named .WAV, are written as wav)
KEPT_FORMATS = {"wav": ("WAV", "WAVEX"), "flac": ("FLAC",), "ogg": ("OGG",), "opus": ("OGG",), "mp3": ("MP3",)}
FORMATS = ("keep", "wav", "flac")


@dataclass(frozen=True)
class ShardItem:
    key: str
    text: str
    source: str  # a wav.scp value: a path, or a command ending in '|'
    start: float | None = None  # seconds, with segments
    end: float | None = None
    where: str = ""  # its wav.scp entry's file:line, for the message that skips it


@dataclass(frozen=True)
class AudioOptions:
    audio_format: str = "keep"  # keep, wav or flac
    sample_rate: int | None = None  # resample to this rate


class BadAudio(RuntimeError):
    pass


def read_source(source: str) -> tuple[bytes | None, str | None]:
    """(bytes of a piped command, None) or (None, path of a file)."""
    if source.endswith("|"):
        return command_output(source[:-1].strip()), None
    if not os.path.isfile(source):
        raise BadAudio(f"no such file {source}")
    return None, source


@functools.lru_cache(maxsize=1)
def command_output(command: str) -> bytes:
    """What a wav.scp command writes, or BadAudio with the end of what it said (a traceback's last line says why).
    The last recording's is kept: the segments of one recording follow one another in a sorted dir, and its
    command ran again for each (Kaldi's extract-segments runs it once)."""
    result = subprocess.run(command, shell=True, capture_output=True)
    if result.returncode != 0 or not result.stdout:
        said = " ".join(result.stderr.decode(errors="replace").split())
        said = f"...{said[-300:]}" if len(said) > 300 else said
        what = f"failed (exit {result.returncode})" if result.returncode else "wrote no audio"
        raise BadAudio(f"command '{command}' {what}" + (f": {said}" if said else ""))
    return result.stdout


def audio_member(item: ShardItem, options: AudioOptions) -> tuple[bytes, str, float]:
    """(audio bytes, extension, duration in seconds) for one utterance."""
    data, path = read_source(item.source)
    extension = os.path.splitext(path)[1][1:].lower() if path else ""
    if (options.audio_format == "keep" and path and extension in KEPT_FORMATS
            and options.sample_rate is None and item.start is None):
        try:
            with open_audio(path) as info:  # (a WAV's data size left 0 counted as what follows)
                pass
        except UnreadableAudio as error:
            raise BadAudio(f"unreadable audio: {error}") from None
        except AudioError as error:  # the header's length untrue
            raise BadAudio(str(error)) from None
        if info.frames <= 0:
            raise BadAudio("no audio samples")
        if info.format in KEPT_FORMATS[extension]:
            kept = whole(path)  # with a WAV's data size filled in: what any reader of the shard then finds
            return zero_size_filled_in(kept) or kept, extension, info.frames / info.samplerate
    from rnnt.data.audio import load_audio  # torch: imported only where audio is decoded (3 s)
    from rnnt.data.resample import resample

    try:
        waveform, rate = load_audio(data if data is not None else path, item.start, item.end)
    except AudioError as error:
        raise BadAudio(f"unreadable audio: {error}") from None
    if options.sample_rate is not None and options.sample_rate != rate:
        waveform, rate = resample(waveform, rate, options.sample_rate), options.sample_rate
    out_format = "wav" if options.audio_format == "keep" else options.audio_format
    buffer = io.BytesIO()
    soundfile.write(buffer, waveform.clamp(-1.0, 1.0).T.numpy(), rate, format=out_format.upper(), subtype="PCM_16")
    return buffer.getvalue(), out_format, waveform.shape[1] / rate


def _add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(payload), 0, 0o644  # fixed metadata: same input, same shard
    tar.addfile(info, io.BytesIO(payload))


def skipped_path(shard: str) -> str:
    """Beside a shard that left utterances out: their reasons, a line each. A shard with one is not complete:
    a rerun writes it again (the audio may be readable by then: a tool installed, a file restored)."""
    return f"{shard}.skipped"


def write_shard(path: str, items: list[ShardItem], options: AudioOptions) -> tuple[int, float, list[str]]:
    """Writes the shard (and skipped_path's list where it left any out); returns (utterances written, seconds
    of audio, 'key: reason' of skipped ones)."""
    written, seconds, skipped = 0, 0.0, []

    def write(f) -> None:
        nonlocal written, seconds
        with tarfile.open(fileobj=f, mode="w") as tar:
            for item in items:
                try:
                    audio, extension, duration = audio_member(item, options)
                except BadAudio as error:
                    skipped.append(f"{item.where}: {item.key}: {error}" if item.where else f"{item.key}: {error}")
                    continue
                _add(tar, f"{item.key}.txt", item.text.encode("utf-8"))
                _add(tar, f"{item.key}.{extension}", audio)
                written += 1
                seconds += duration
        if skipped:  # before the shard has its name: a shard without the list is a complete one
            with open(skipped_path(path), "w", encoding="utf-8", errors="surrogateescape") as listed:
                listed.writelines(f"{reason}\n" for reason in skipped)

    write_atomically(path, write, "wb")  # on the disk before its name: after a power loss, a shard named is whole
    if not skipped and os.path.exists(skipped_path(path)):
        os.remove(skipped_path(path))
    return written, seconds, skipped
