"""What an audio file's header says, read without decoding it. soundfile alone: the data-preparation tools
import this without torch."""

from __future__ import annotations

import io
import os

import soundfile


class AudioError(RuntimeError):
    pass


# Formats whose header counts the samples exactly; others (Ogg, MP3: compressed streams) are decoded to know.
EXACT_LENGTH_FORMATS = frozenset({"WAV", "WAVEX", "W64", "RF64", "FLAC", "NIST", "AIFF", "AU", "CAF"})
UNKNOWN_LENGTH = 2**62  # libsndfile's count for a stream that does not say (a FLAC written to a pipe)


def no_length(info) -> str | None:
    """Why a header's sample count is no length (soundfile would ask numpy for that many samples), or None."""
    if info.frames >= UNKNOWN_LENGTH:
        return f"its {info.format} header gives no length (written to a pipe?); encode it again to a file"
    return None


def _source(audio):
    """What soundfile opens for bytes or a path: a path as the file system's bytes (soundfile encodes a str
    as strict UTF-8, and a Latin-1 name would fail)."""
    return io.BytesIO(audio) if isinstance(audio, (bytes, bytearray)) else os.fsencode(audio)


def open_audio(audio) -> soundfile.SoundFile:
    """Bytes or a path opened, its header read; AudioError where the header gives no length."""
    opened = soundfile.SoundFile(_source(audio))
    why = no_length(opened)
    if why:
        opened.close()
        raise AudioError(why)
    return opened
