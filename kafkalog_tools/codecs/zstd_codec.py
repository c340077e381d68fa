"""zstd (id 4, V2 only): standard zstd frames as zstd-jni's streaming writer emits them.

Streamed frames may not declare their content size, so a streaming reader is used, bounded by
the output limit; concatenated frames are read across.
"""
from __future__ import annotations

import io

import zstandard

from . import too_large

_decompressor = zstandard.ZstdDecompressor()


def decompress(data: bytes, limit: int, magic: int) -> bytes:
    with _decompressor.stream_reader(io.BytesIO(bytes(data)), read_across_frames=True) as reader:
        out = reader.read(limit + 1)
        # read() may return short before the end; drain until EOF or over the limit
        while True:
            more = reader.read(limit + 1 - len(out))
            if not more:
                break
            out += more
            if len(out) > limit:
                break
    if len(out) > limit:
        raise too_large("zstd", limit)
    return out


def compress(data: bytes, magic: int) -> bytes:
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)
