"""Whether an audio file holds the audio its header promises: a copy or download cut short keeps its header, and
libsndfile reads what is there in silence. soundfile alone, as audio_header."""

from __future__ import annotations

import io
import os

import soundfile


def riff_chunks(stream):
    """(name, size, body) of each chunk of a WAV (RIFF) stream read past its 12-byte header, up to its data chunk,
    whose body is None (the stream then at its first sample); a stream that ends first ends them."""
    while len(header := stream.read(8)) == 8:
        name, size = header[:4], int.from_bytes(header[4:], "little")
        if name == b"data":
            yield name, size, None
            return
        yield name, size, stream.read(size + (size & 1))


def cut_short(audio, info) -> str | None:
    """Why a file holds less audio than its header says (a copy or download cut short: libsndfile reads what is
    there in silence, and a transcript of 8 words went with 2 s of them), or None: a WAV's data chunk or a SPHERE
    file's sample count longer than the file, an AIFF's sound chunk or an AU's data size longer than the file, a
    FLAC whose last frame does not decode, an Ogg stream (Opus, Vorbis) without its last page; an RF64's data size
    (its ds64 chunk's) or a Sony Wave64's data chunk longer than the file; an MP3 whose count is more than its
    size can hold (_mp3_overcounted). audio: bytes or a path; info: it opened. (An MP3 is checked for being cut
    short where it is decoded, rnnt.data.audio.read_whole: its header's count is its Xing frame's.)"""
    check = {"WAV": _wav_cut, "WAVEX": _wav_cut, "RF64": _wav_cut, "W64": _w64_cut, "NIST": _sphere_cut,
             "FLAC": _flac_cut, "OGG": _ogg_cut, "AIFF": _aiff_cut, "AU": _au_cut, "MP3": _mp3_overcounted}
    return check[info.format](audio, info) if info.format in check else None


def _head_and_size(audio, size: int = 65536, tail: bool = False) -> tuple[bytes, int]:
    """The file's first (or last) size bytes, and its length."""
    if isinstance(audio, (bytes, bytearray)):
        total = len(audio)
        return bytes(audio[max(0, total - size):] if tail else audio[:size]), total
    with open(audio, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        if tail:
            f.seek(max(0, total - size))
        return f.read(size), total


def _holds(header_seconds: float, held_fraction: float) -> str:
    return (f"cut short: its header gives {header_seconds:.2f} s of audio, the file holds "
            f"{header_seconds * held_fraction:.2f} s")


def _short_of(size: int, held: int, info) -> str | None:
    """Why a header's `size` bytes of samples are cut short where the file holds `held` after the header, or None;
    libsndfile's count (info.frames) is what the file holds."""
    if not 0 < held < size or not info.frames:
        return None
    return _holds(info.frames / info.samplerate * size / held, held / size)


def _wav_cut(audio, info) -> str | None:
    """A WAV's (or RF64's) data chunk longer than what follows it; an RF64's data size, all ones in the chunk, is
    its ds64 chunk's second 64-bit word."""
    head, total = _head_and_size(audio)
    stream = io.BytesIO(head)
    stream.seek(12)  # after RIFF <size> WAVE (RF64 <all ones> WAVE)
    long_size = None
    for name, size, body in riff_chunks(stream):
        if name == b"ds64" and len(body) >= 16:
            long_size = int.from_bytes(body[8:16], "little")
        if name == b"data":
            if size == 0xFFFFFFFF and long_size is not None:
                size, streamed = long_size, long_size == 0
            else:  # a writer to a pipe's placeholder (0, 2^31 - 1, 2^32 - 1)
                streamed = size == 0 or size >= 0x7FFF0000
            return None if streamed else _short_of(size, total - stream.tell(), info)
    return None


def _w64_cut(audio, info) -> str | None:
    """A Sony Wave64's data chunk longer than what follows it: after its 40-byte header, chunks of a 16-byte GUID
    (the data chunk's starts b"data") and a 64-bit little-endian size that counts those 24 bytes, each padded to 8."""
    head, total = _head_and_size(audio)
    at = 40
    while at + 24 <= len(head):
        name, size = head[at:at + 4], int.from_bytes(head[at + 16:at + 24], "little")
        if name == b"data":
            return _short_of(size - 24, total - at - 24, info)
        if size < 24:  # no chunk: not a header to go by
            return None
        at += size + (-size % 8)
    return None


def _aiff_cut(audio, info) -> str | None:
    """An AIFF's SSND chunk (big-endian sizes, after FORM <size> AIFF/AIFC) longer than what follows it."""
    head, total = _head_and_size(audio)
    at = 12
    while at + 8 <= len(head):
        name, size = head[at:at + 4], int.from_bytes(head[at + 4:at + 8], "big")
        if name == b"SSND":
            return _short_of(size, total - at - 8, info)
        at += 8 + size + (size & 1)
    return None


def _au_cut(audio, info) -> str | None:
    """An AU (.snd) file's data size (its header's third big-endian word; all ones: unknown) against what follows
    its header (whose size is the second)."""
    head, total = _head_and_size(audio, 24)
    offset, size = int.from_bytes(head[4:8], "big"), int.from_bytes(head[8:12], "big")
    return None if size == 0xFFFFFFFF else _short_of(size, total - offset, info)


def _sphere_cut(audio, info) -> str | None:
    """A SPHERE (NIST) file's samples (sample_count x sample_n_bytes x channel_count after its header) against its
    size, where they are stored plain (pcm, ulaw); libsndfile counts what the file holds."""
    head, total = _head_and_size(audio)
    lines = head.split(b"\n")
    fields = {words[0]: words[-1] for words in map(bytes.split, lines[2:]) if len(words) == 3}
    try:
        header, count = int(lines[1]), int(fields[b"sample_count"])
        width = int(fields.get(b"sample_n_bytes", b"2")) * int(fields.get(b"channel_count", b"1"))
    except (IndexError, KeyError, ValueError):
        return None
    if fields.get(b"sample_coding", b"pcm").split(b",")[0] not in (b"pcm", b"ulaw", b"mu-law") or not count:
        return None
    held = total - header
    return _holds(count / info.samplerate, held / (count * width)) if 0 < held < count * width else None


def _flac_cut(audio, info) -> str | None:
    """A FLAC's last sample decoded (its header counts what it was written with; a cut file fails there)."""
    try:
        info.seek(info.frames - 1)
        last = info.read(1).shape[0]
        info.seek(0)
    except (RuntimeError, soundfile.LibsndfileError):
        last = 0
    return None if last == 1 or not info.frames else \
        f"cut short: its header gives {info.frames / info.samplerate:.2f} s of audio, its end does not decode"


def _ogg_cut(audio, info) -> str | None:
    """An Ogg stream's last page, which marks the end of the stream (header type 4), where the file ends."""
    tail, _ = _head_and_size(audio, tail=True)
    page = tail.rfind(b"OggS")
    if page < 0 or page + 5 >= len(tail) or tail[page + 5] & 4:
        return None
    return f"cut short: its Ogg stream ends without its last page ({info.frames / info.samplerate:.2f} s of audio " \
        "in the file)"


MP3_FRAME_SAMPLES = 1152  # an MPEG-1 Layer III frame's (MPEG-2's: 576)
MP3_MOST_SAMPLES_PER_BYTE = 24  # MPEG-2's lowest rate, 8 kbit/s at 24 kHz: 576 samples in a frame of 24 bytes


def _mp3_overcounted(audio, info) -> str | None:
    """An MP3 whose Xing or Info frame counts more samples than its bytes hold at the lowest bit rate there is (a
    damaged count: decoding asked numpy for that many, 6 TiB for one flipped byte, and the MemoryError ended the
    run)."""
    _, size = _head_and_size(audio, 0)
    if info.frames <= size * MP3_MOST_SAMPLES_PER_BYTE:
        return None
    return f"its header gives {info.frames / info.samplerate:.0f} s of audio, more than its {size} bytes hold at " \
        "any MP3 bit rate (a damaged Xing or Info frame?)"


def mp3_counts_its_samples(audio) -> bool:
    """Whether an MP3's first frame (after an ID3v2 tag) is a Xing or Info frame (LAME and most encoders write
    one), which counts its frames: libsndfile's length is then the encoder's, not a guess from the file's size
    and bit rate, and a file that decodes to less is cut short."""
    head, _ = _head_and_size(audio, 10)
    start = 0
    if head[:3] == b"ID3" and len(head) == 10:  # its size: 4 bytes of 7 bits, after 10 bytes (20 with a footer)
        start = 10 + sum((head[6 + i] & 0x7F) << (21 - 7 * i) for i in range(4)) + (10 if head[5] & 0x10 else 0)
    head, _ = _head_and_size(audio, start + 4096)
    frame = head[start:].lstrip(b"\0")[:200]  # (padding after the tag)
    return frame[:1] == b"\xff" and (b"Xing" in frame or b"Info" in frame)
