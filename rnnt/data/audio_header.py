"""What an audio file's header says, read without decoding it. soundfile alone: the data-preparation tools
import this without torch."""

from __future__ import annotations

import contextlib
import io
import os
import stat

import soundfile

from rnnt.data.cut_short import cut_short, riff_chunks


class AudioError(RuntimeError):
    pass


class UnreadableAudio(AudioError):
    """soundfile could not open or decode it (audio_errors)."""


# Formats whose header counts the samples exactly; others (Ogg Vorbis, MP3: compressed streams) are decoded to
# know. Ogg Opus's last granule position, less its pre-skip, is its exact length (libsndfile's count equalled the
# decoded length for every speechocean762 file checked): its 2500 files sat decoded in the shuffle buffer, 300 MB.
EXACT_LENGTH_FORMATS = frozenset({"WAV", "WAVEX", "W64", "RF64", "FLAC", "NIST", "AIFF", "AU", "CAF"})
EXACT_LENGTH_SUBTYPES = frozenset({("OGG", "OPUS")})


def counts_exactly(info) -> bool:
    """Whether an opened file's header counts its samples as decoding gives them."""
    return info.format in EXACT_LENGTH_FORMATS or (info.format, info.subtype) in EXACT_LENGTH_SUBTYPES
UNKNOWN_LENGTH = 2**62  # libsndfile's count for a stream that does not say (a FLAC written to a pipe)


def no_length(info) -> str | None:
    """Why a header's sample count is no length (soundfile would ask numpy for that many samples), or None."""
    if info.frames >= UNKNOWN_LENGTH:
        return f"its {info.format} header gives no length (written to a pipe?); encode it again to a file"
    return None


def header_problem(audio, info) -> str | None:
    """Why an audio file's header cannot be trusted for its length (no_length, cut_short), or None."""
    return no_length(info) or cut_short(audio, info)


def zero_size_filled_in(audio: bytes) -> bytes | None:
    """A WAV whose data chunk says 0 bytes with samples after it (a writer that never came back to its header: a
    recording killed, one written to a pipe; libsndfile counts it empty) as bytes with the size of what follows put
    in (Kaldi's reader reads to the end where the RIFF size is 0 too, its stream mode); None for any other file, and
    for an empty data chunk that one chunk follows exactly (a LIST of tags)."""
    if audio[:4] != b"RIFF" or audio[8:12] != b"WAVE":
        return None
    stream = io.BytesIO(audio)
    stream.seek(12)  # after RIFF <size> WAVE
    for name, size, _ in riff_chunks(stream):
        if name == b"data":
            at, held = stream.tell(), len(audio) - stream.tell()
            if size or not 0 < held < 2**32 - at or one_chunk(memoryview(audio)[at:]):
                return None
            filled = bytearray(audio)
            filled[4:8], filled[at - 4:at] = (len(audio) - 8).to_bytes(4, "little"), held.to_bytes(4, "little")
            return bytes(filled)
    return None


def whole(audio) -> bytes:
    """Bytes as given, or a path's file read."""
    if isinstance(audio, (bytes, bytearray)):
        return bytes(audio)
    with open(audio, "rb") as f:
        return f.read()


def one_chunk(data: bytes) -> bool:
    """Whether data is one RIFF chunk: a name of four printable characters, then its size, which the rest fills."""
    if len(data) < 8 or not all(32 <= byte < 127 for byte in data[:4]):
        return False
    return len(data) - 8 - int.from_bytes(data[4:8], "little") in (0, 1)  # (1: the pad byte after an odd size)


def readable_once(audio):
    """The bytes of a path that is not a regular file (a pipe, /dev/stdin, a shell's <(...): read once, where the
    header's checks would read it again and lose its first 64 KB); bytes and a regular file's path as given. A
    folder is an AudioError."""
    if isinstance(audio, (bytes, bytearray)):
        return audio
    try:
        mode = os.stat(audio).st_mode
    except OSError:  # missing: opening it names that
        return audio
    if stat.S_ISDIR(mode):
        raise AudioError("a folder, not an audio file: give its files (folder/*.wav)")
    return audio if stat.S_ISREG(mode) else whole(audio)


@contextlib.contextmanager
def audio_errors(audio=None):
    """soundfile's errors as UnreadableAudio, with libsndfile's reason: not soundfile's message, which names the
    file as a Python bytes or BytesIO object ("Error opening b'a.wav': "). audio (bytes or a path), where given,
    tells what libsndfile's reason does not: a missing file ('System error.'), an empty one or no bytes at all
    ('Format not recognised.')."""
    try:
        yield
    except AudioError:
        raise
    except TypeError as error:  # soundfile's for a file it takes as headerless (a .raw path)
        raise UnreadableAudio(f"{error}: a headerless file (raw PCM?): give it a header, as sox -t raw -r RATE "
                              "-e signed -b 16 -c 1 IN.raw OUT.wav does") from None
    except soundfile.LibsndfileError as error:
        reason = error.error_string.rstrip(".")
        if "possibly a pipe" in reason:  # libsndfile's (its mpg123's) for an MP3 whose frames do not decode: the
            reason = "its frames do not decode (damaged, or cut short?)"  # bytes in memory and a file there too
        raise UnreadableAudio(what_is_there(audio) or reason[:1].lower() + reason[1:]) from None
    except RuntimeError as error:
        raise UnreadableAudio(str(error)) from None


def what_is_there(audio) -> str | None:
    """Why bytes or a path hold no audio at all (none, no file, a folder, an empty file); None otherwise."""
    if isinstance(audio, (bytes, bytearray)):
        return "no bytes (an empty output)" if not audio else None
    if not isinstance(audio, (str, bytes, os.PathLike)):
        return None
    try:
        status = os.stat(audio)
    except FileNotFoundError:
        return "no such file"
    except OSError as error:
        return error.strerror
    if stat.S_ISDIR(status.st_mode):
        return "a folder, not an audio file"
    return "an empty file (0 bytes)" if stat.S_ISREG(status.st_mode) and not status.st_size else None


def _source(audio):
    """What soundfile opens for bytes or a path: a path as the file system's bytes (soundfile encodes a str
    as strict UTF-8, and a Latin-1 name would fail)."""
    return io.BytesIO(audio) if isinstance(audio, (bytes, bytearray)) else os.fsencode(audio)


def open_audio(audio) -> soundfile.SoundFile:
    """Bytes or a path opened, its header read (a pipe's path read whole first, readable_once; a WAV's data size
    left 0 filled in, zero_size_filled_in); AudioError where the header gives no length or the file is cut short
    (header_problem), or soundfile cannot open it (audio_errors)."""
    audio = readable_once(audio)
    with audio_errors(audio):
        opened = soundfile.SoundFile(_source(audio))
        if opened.format in ("WAV", "WAVEX") and not opened.frames and \
                (filled := zero_size_filled_in(whole(audio))) is not None:
            opened.close()
            audio = filled
            opened = soundfile.SoundFile(io.BytesIO(audio))
    why = header_problem(audio, opened)
    if why:
        opened.close()
        raise AudioError(why)
    return opened
