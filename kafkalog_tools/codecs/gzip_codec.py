"""gzip (id 1): a standard gzip stream (Java's GZIPOutputStream); concatenated members are read
one after another, as GZIPInputStream does.

Members are inflated by ISA-L (`isal`): twice zlib's speed on the wrappers V0/V1 producers wrote
(~6 KB: 24 us against 47 us), the same on small payloads. Where zlib and GZIPInputStream differ,
ISA-L reads as Java does: it skips the reserved FLG bits, which zlib refuses ('unknown header flags
set'), also when a header CRC covers them. zlib stays the reference the tests compare it with."""
from __future__ import annotations

import gzip
import zlib

from isal import isal_zlib

from . import too_large

_GZIP_WBITS = 16 + zlib.MAX_WBITS
INFLATER = isal_zlib.decompressobj
"""Makes the inflater of one member (zlib's decompressobj's interface); tests put zlib in its place."""

STEP = 16 << 20
"""Most output one inflate call makes: the library builds it in pieces and then copies them into one,
so a single call up to the limit would hold twice the limit (a bomb's cost); in steps, about the limit."""

_FHCRC, _FEXTRA, _FNAME, _FCOMMENT = 0x02, 0x04, 0x08, 0x10
"""Header flag bits: a header CRC follows (it covers the header as it is), extra field, name, comment."""


JAVA_BUFFER = 8 << 10
"""GZIPInputStream's input buffer as Kafka sizes it (GzipCompression.wrapForInput): how far it has
read decides whether bytes after a member are tried as another member (see `decompress`)."""
_TRAILER = 8
_SHORT_TAIL = 26
"""GZIPInputStream.readTrailer tries a next member only where the payload has bytes it has not read
yet, or where more than this many are left in its buffer (the trailer's 8 included)."""


def _header_length(data, pos: int) -> int:
    """The length of the member header at `pos`, read as GZIPInputStream.readHeader reads it
    (reserved FLG bits ignored); raises where readHeader throws."""
    if len(data) - pos < 10:
        raise EOFError("Unexpected end of ZLIB input stream")
    if data[pos:pos + 2] != b"\x1f\x8b":
        raise ValueError("Not in GZIP format")
    if data[pos + 2] != 8:
        raise ValueError("Unsupported compression method")
    flags, end = data[pos + 3], pos + 10
    if flags & _FEXTRA:
        end += 2 + int.from_bytes(data[end:end + 2], "little")
    for flag in (_FNAME, _FCOMMENT):
        if flags & flag:
            zero = data.find(b"\x00", end)
            end = len(data) + 1 if zero < 0 else zero + 1
    if flags & _FHCRC:
        if end + 2 <= len(data) and zlib.crc32(data[pos:end]) & 0xFFFF != int.from_bytes(data[end:end + 2], "little"):
            raise ValueError("Corrupt GZIP header")
        end += 2
    if end > len(data):
        raise EOFError("Unexpected end of ZLIB input stream")
    return end - pos


def check_stream_header(data: bytes, magic: int) -> None:
    """GZIPInputStream's constructor reads the first member's header (readHeader), nothing more."""
    _header_length(data, 0)


def decompress(data: bytes, limit: int, magic: int) -> bytes:
    """The members of `data` one after another, as GZIPInputStream reads them: after a member's
    trailer it tries the bytes that follow as another member only where it has not read the whole
    payload yet or more than 18 bytes follow in its buffer, and ignores them where their header does
    not read (readTrailer); a member it reads must be whole."""
    pieces, size = [], 0
    start = 0
    read_to = _header_length(data, 0)  # what the stream has read: the constructor reads the first header
    while True:
        member = INFLATER(_GZIP_WBITS)
        tail = data[start:] if start else data
        while True:
            pieces.append(member.decompress(tail, min(limit + 1 - size, STEP)))
            size += len(pieces[-1])
            if size > limit:
                raise too_large("gzip", limit)
            tail = member.unconsumed_tail
            if member.eof or (not tail and len(pieces[-1]) < STEP):  # else it holds more output
                break
        if not member.eof:
            raise ValueError("gzip stream ends before its end-of-stream marker")
        after = len(data) - len(member.unused_data)
        deflate_end = after - _TRAILER
        while read_to < deflate_end:  # the buffer is filled a chunk at a time as inflating needs it
            read_to = min(read_to + JAVA_BUFFER, len(data))
        if read_to == len(data) and read_to - deflate_end <= _SHORT_TAIL:
            break
        try:
            header = _header_length(data, after)
        except (ValueError, EOFError):
            break  # "ignore any malformed, do nothing"
        start, read_to = after, max(read_to, after + header)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)  # one piece (nearly always): no copy


def compress(data: bytes, magic: int) -> bytes:
    return gzip.compress(data, mtime=0)
