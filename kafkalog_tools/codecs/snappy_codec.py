"""snappy (id 2): Java Kafka writes snappy-java's xerial framing; a raw snappy block is accepted too.

xerial framing (SnappyOutputStream): a 16-byte header (magic 0x82 'SNAPPY' 0x00, int32 version,
int32 min-compatible version), then chunks of [int32 BE compressed length][raw snappy block],
each block at most 32 KiB uncompressed. A chunk length equal to the first four magic bytes starts
a concatenated stream. Like SnappyInputStream, a payload that does not start with the magic is
decoded as one raw block.
"""
from __future__ import annotations

import struct

import snappy

from . import DEFAULT_LIMIT, too_large

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_MAGIC_AS_LENGTH = struct.unpack(">i", XERIAL_MAGIC[:4])[0]
_BLOCK_SIZE = 32 * 1024


def _raw_length(block: bytes) -> int:
    """The uncompressed length a raw snappy block declares (its leading unsigned varint)."""
    value = shift = 0
    for byte in block[:5]:
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise ValueError("snappy block has no valid length header")


def _raw(block: bytes, budget: int, limit: int) -> bytes:
    if _raw_length(block) > budget:
        raise too_large("snappy", limit)
    return snappy.uncompress(block)


def check_stream_header(data: bytes, magic: int) -> None:
    """SnappyInputStream's constructor reads the xerial header; a payload without it is read and
    decoded whole there, as one raw block."""
    data = bytes(data)
    if len(data) < len(XERIAL_HEADER) or not data.startswith(XERIAL_MAGIC):
        _raw(data, DEFAULT_LIMIT, DEFAULT_LIMIT)


def decompress(data: bytes, limit: int, magic: int) -> bytes:
    data = bytes(data)
    if len(data) < len(XERIAL_HEADER) or not data.startswith(XERIAL_MAGIC):
        return _raw(data, limit, limit)
    out = bytearray()
    pos = len(XERIAL_HEADER)
    while pos < len(data):
        if len(data) - pos < 4:
            break  # SnappyInputStream.hasNextChunk: fewer than 4 bytes left is the end of the stream
        (length,) = struct.unpack_from(">i", data, pos)
        if length == _MAGIC_AS_LENGTH and data.startswith(XERIAL_MAGIC, pos):
            pos += len(XERIAL_HEADER)
            continue
        pos += 4
        if length < 0 or pos + length > len(data):
            raise ValueError(f"xerial chunk of {length} bytes overruns the payload at byte {pos}")
        out += _raw(data[pos : pos + length], limit - len(out), limit)
        pos += length
    return bytes(out)


def compress(data: bytes, magic: int) -> bytes:
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(data), _BLOCK_SIZE):
        block = snappy.compress(data[start : start + _BLOCK_SIZE])
        out += struct.pack(">i", len(block)) + block
    return bytes(out)
