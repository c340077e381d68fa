"""zstd (id 4, V2 only): standard zstd frames as zstd-jni's streaming writer emits them.

Streamed frames may not declare their content size, so frames are decompressed incrementally,
bounded by the output limit; concatenated frames are read across; a frame cut short is an error.
"""
from __future__ import annotations

import threading

import zstandard

from . import too_large

_local = threading.local()
"""A decompressor per thread: its frames share its context, which two threads must not use at once."""


def _decompressor() -> zstandard.ZstdDecompressor:
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    return decompressor


def check_stream_header(data: bytes, magic: int) -> None:
    """Opening zstd-jni's ZstdInputStream reads nothing: a zstd payload fails at its first read."""


def decompress(data: bytes, limit: int, magic: int) -> bytes:
    # Frame by frame, fed a little input at a time: one step's output is bounded (a 4-byte RLE
    # block yields at most 128 KiB), so a bomb overshoots the limit by a fraction of it at most;
    # and a frame still open when the input ends is an error, as zstd-jni's "truncated source"
    # (zstandard's stream_reader returns what it has, silently).
    view = memoryview(bytes(data))
    out = bytearray()
    pos = 0
    decompressor = _decompressor()
    while pos < len(view):
        frame = decompressor.decompressobj()
        while not frame.eof:
            if pos >= len(view):
                raise ValueError(f"zstd frame cut short: the payload ends inside it ({len(view)} bytes)")
            chunk = view[pos : pos + max(64, (limit - len(out)) >> 17)]
            pos += len(chunk)
            out += frame.decompress(chunk)
            if len(out) > limit:
                raise too_large("zstd", limit)
        pos -= len(frame.unused_data)
    return bytes(out)


def compress(data: bytes, magic: int) -> bytes:
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)
