"""Decompression bombs in each codec's Kafka form: megabytes of zeros in a few bytes, built
without compressing all of them. The fuzzer puts them in batches; the codec tests check that each
one stops at the decompression limit quickly and in little memory."""
from __future__ import annotations

import struct
import zlib

import lz4.block
import snappy
import zstandard

from ..codecs import snappy_codec

MIB = 1 << 20
GIB = 1 << 30
CRC32_OF_1_GIB_OF_ZEROS = 0x5B64C2B0  # zlib.crc32(bytes(1 << 30)), computed once (0.5 s)


def gzip_zeros(mib: int, crc: int | None = None) -> bytes:
    """One gzip member of `mib` (>= 2) MiB of zeros: after a full flush the deflater's state is
    reset, so each further MiB of zeros compresses to the same bytes."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = deflater.compress(bytes(MIB)) + deflater.flush(zlib.Z_FULL_FLUSH)
    middle = deflater.compress(bytes(MIB)) + deflater.flush(zlib.Z_FULL_FLUSH)
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    last = raw.compress(bytes(MIB)) + raw.flush()
    crc = zlib.crc32(bytes(mib * MIB)) if crc is None else crc
    return first + middle * (mib - 2) + last + struct.pack("<II", crc, (mib * MIB) & 0xFFFFFFFF)


def lz4_zeros(blocks: int) -> bytes:
    """Kafka's lz4 frame (magic >= 1 header checksum) of `blocks` 64 KiB blocks of zeros."""
    block = lz4.block.compress(bytes(64 * 1024), store_size=False)
    return bytes.fromhex("04224d18604082") + (struct.pack("<I", len(block)) + block) * blocks + b"\x00" * 4


def xerial_zeros(chunks: int) -> bytes:
    """snappy-java's framing of `chunks` 32 KiB chunks of zeros (snappy compresses at most ~21:1,
    so a 1 GiB bomb is itself 48 MiB)."""
    chunk = snappy.compress(bytes(32 * 1024))
    return snappy_codec.XERIAL_HEADER + (struct.pack(">i", len(chunk)) + chunk) * chunks


def raw_snappy_zeros(size: int) -> bytes:
    """A raw snappy block of `size` zeros: a 1-byte literal, then copies of 64 bytes at offset 1."""
    copies, rest = divmod(size - 1, 64)
    out = bytearray()
    n = size
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    out += b"\x00\x00" + b"\xfe\x01\x00" * copies
    if rest:
        out += bytes([(rest - 1) << 2 | 2, 1, 0])
    return bytes(out)


def zstd_zeros(mib: int) -> bytes:
    """A streamed zstd frame (no content size in its header) of `mib` MiB of zeros."""
    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    zeros = bytes(MIB)
    return b"".join(compressor.compress(zeros) for _ in range(mib)) + compressor.flush()
