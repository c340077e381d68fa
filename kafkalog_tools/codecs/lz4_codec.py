"""lz4 (id 3): the LZ4 frame format as Kafka's Lz4BlockOutputStream / Lz4BlockInputStream use it.

Kafka writes FLG 0x60 (version 1, independent blocks, no checksums, no content size), BD 0x40
(64 KiB blocks), a header-checksum byte, blocks of [uint32 LE size, high bit = stored][data], and a
zero end mark. For magic 0 Kafka computes the header checksum over the frame magic too (the
"broken flag descriptor checksum"), and its reader skips the check for magic 0 - so must we;
`lz4.frame` rejects such frames, so the frame is parsed here and each block handed to
`lz4.block`. For magic >= 1 the header checksum is verified, as Kafka does.
"""
from __future__ import annotations

import functools
import struct

import lz4.block

from . import too_large

FRAME_MAGIC = 0x184D2204
_FLG_WRITTEN = 0x60
_BD_64K = 0x40
BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, for the few-byte frame descriptor and optional block checksums."""
    n = len(data)
    i = 0
    if n >= 16:
        lanes = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i <= n - 16:
            for lane, word in enumerate(struct.unpack_from("<4I", data, i)):
                lanes[lane] = (_rotl((lanes[lane] + word * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (word,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def header_checksum(frame_start: bytes, descriptor_end: int, magic: int) -> int:
    """The HC byte Kafka writes: over FLG..BD per the spec, over magic..BD for magic 0."""
    start = 0 if magic == 0 else 4
    return _descriptor_checksum(bytes(frame_start[start:descriptor_end]))


@functools.lru_cache(maxsize=64)
def _descriptor_checksum(descriptor: bytes) -> int:
    """Kafka writes the same few descriptors in every batch: xxh32 in Python once each, not per batch."""
    return (xxh32(descriptor) >> 8) & 0xFF


def check_stream_header(data: bytes, magic: int) -> None:
    """KafkaLZ4BlockInputStream's constructor reads the frame header (readHeader), no block."""
    _frame_start(bytes(data), magic)


def _frame_start(data: bytes, magic: int) -> tuple[int, int, int, int]:
    """The frame header checked as Kafka's reader checks it: (where the first block starts, the
    largest block, whether blocks carry a checksum, whether a content checksum follows the end mark)."""
    if len(data) < 7:
        raise ValueError("Stream ended prematurely")
    if struct.unpack_from("<I", data)[0] != FRAME_MAGIC:
        raise ValueError("Stream unsupported (invalid magic bytes)")
    flg, bd = data[4], data[5]
    if flg >> 6 != 1 or flg & 0x03 or not flg & 0x20:
        raise ValueError(f"Stream unsupported (frame flags 0x{flg:02x}: need version 1, independent blocks)")
    block_checksum, content_size = flg & 0x10, flg & 0x08
    block_max = BLOCK_MAX.get((bd >> 4) & 0x07)
    if block_max is None or bd & 0x8F:
        raise ValueError(f"Stream unsupported (block descriptor 0x{bd:02x})")
    pos = 6 + (8 if content_size else 0)
    if pos >= len(data):
        raise ValueError("Stream ended prematurely")
    if magic != 0 and data[pos] != header_checksum(data, pos, magic):
        raise ValueError("Stream frame descriptor corrupted")
    return pos + 1, block_max, block_checksum, flg & 0x04


def decompress(data: bytes, limit: int, magic: int) -> bytes:
    data = bytes(data)
    pos, block_max, block_checksum, content_checksum = _frame_start(data, magic)
    out = bytearray()
    while True:
        if pos + 4 > len(data):
            raise ValueError("Stream ended prematurely")
        (word,) = struct.unpack_from("<I", data, pos)
        pos += 4
        stored, size = word & 0x80000000, word & 0x7FFFFFFF
        if size == 0:  # the end mark, whatever its "stored" bit says: Kafka masks the bit off first
            if content_checksum and len(data) - pos < 4:  # Kafka reads it with ByteBuffer.getInt
                raise ValueError("BufferUnderflowException: the frame flags a content checksum, but fewer than 4 "
                                 "bytes follow its end mark")
            break  # a content checksum is skipped unverified, as Kafka does
        if size > block_max:
            raise ValueError(f"Block size {size} exceeded max: {block_max}")
        if pos + size + (4 if block_checksum else 0) > len(data):
            raise ValueError("Stream ended prematurely")
        block = data[pos : pos + size]
        pos += size
        if block_checksum:
            if struct.unpack_from("<I", data, pos)[0] != xxh32(block):
                raise ValueError("Block checksum mismatch")
            pos += 4
        budget = limit - len(out)
        if stored:
            if size > budget:
                raise too_large("lz4", limit)
            out += block
        else:
            if budget <= 0:
                raise too_large("lz4", limit)
            try:
                out += lz4.block.decompress(block, uncompressed_size=min(block_max, budget))
            except lz4.block.LZ4BlockError:
                # a block that fits its frame's maximum but not what is left of the limit is a bomb
                if budget < block_max and len(lz4.block.decompress(block, uncompressed_size=block_max)) > budget:
                    raise too_large("lz4", limit) from None
                raise
    return bytes(out)


def compress(data: bytes, magic: int) -> bytes:
    frame = bytearray(struct.pack("<IBB", FRAME_MAGIC, _FLG_WRITTEN, _BD_64K))
    frame.append(header_checksum(bytes(frame), 6, magic))
    block_max = BLOCK_MAX[4]
    for start in range(0, len(data), block_max):
        chunk = data[start : start + block_max]
        block = lz4.block.compress(chunk, store_size=False)
        if len(block) >= len(chunk):
            frame += struct.pack("<I", len(chunk) | 0x80000000) + chunk
        else:
            frame += struct.pack("<I", len(block)) + block
    frame += b"\x00\x00\x00\x00"
    return bytes(frame)
