"""gzip (id 1): a standard gzip stream (Java's GZIPOutputStream); concatenated members are read
one after another, as GZIPInputStream does."""
from __future__ import annotations

import gzip
import zlib

from . import too_large

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_FHCRC, _RESERVED_FLAGS = 0x02, 0xE0
"""Header flag bits: a header CRC follows (it covers the flags as they are), and bits 5-7, reserved."""


STEP = 16 << 20
"""Most output one zlib call makes: zlib builds it in pieces and then copies them into one, so a
single call up to the limit would hold twice the limit (a bomb's cost); in steps, about the limit."""


_FEXTRA, _FNAME, _FCOMMENT = 0x04, 0x08, 0x10


def check_stream_header(data: bytes, magic: int) -> None:
    """GZIPInputStream's constructor reads the first member's header (readHeader), nothing more."""
    if len(data) < 10:
        raise EOFError("Unexpected end of ZLIB input stream")
    if data[:2] != b"\x1f\x8b":
        raise ValueError("Not in GZIP format")
    if data[2] != 8:
        raise ValueError("Unsupported compression method")
    flags, pos = data[3], 10
    if flags & _FEXTRA:
        pos += 2 + int.from_bytes(data[pos:pos + 2], "little")
    for flag in (_FNAME, _FCOMMENT):
        if flags & flag:
            end = data.find(b"\x00", pos)
            pos = len(data) + 1 if end < 0 else end + 1
    if flags & _FHCRC:
        if pos + 2 <= len(data) and zlib.crc32(data[:pos]) & 0xFFFF != int.from_bytes(data[pos:pos + 2], "little"):
            raise ValueError("Corrupt GZIP header")
        pos += 2
    if pos > len(data):
        raise EOFError("Unexpected end of ZLIB input stream")


def decompress(data: bytes, limit: int, magic: int) -> bytes:
    pieces, size = [], 0
    remaining = data
    while remaining:
        if len(remaining) > 3 and remaining[3] & _RESERVED_FLAGS and not remaining[3] & _FHCRC:
            # GZIPInputStream.readHeader ignores the reserved flag bits, zlib refuses them
            remaining = remaining[:3] + bytes([remaining[3] & ~_RESERVED_FLAGS]) + remaining[4:]
        member = zlib.decompressobj(_GZIP_WBITS)
        tail = remaining
        while True:
            pieces.append(member.decompress(tail, min(limit + 1 - size, STEP)))
            size += len(pieces[-1])
            if size > limit:
                raise too_large("gzip", limit)
            tail = member.unconsumed_tail
            if member.eof or (not tail and len(pieces[-1]) < STEP):  # else zlib holds more output
                break
        if not member.eof:
            raise zlib.error("gzip stream ends before its end-of-stream marker")
        remaining = member.unused_data
        if remaining and remaining[:2] != b"\x1f\x8b":
            break  # GZIPInputStream ignores trailing bytes that do not start a member
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)  # one piece (nearly always): no copy


def compress(data: bytes, magic: int) -> bytes:
    return gzip.compress(data, mtime=0)
