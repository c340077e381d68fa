"""gzip (id 1): a standard gzip stream (Java's GZIPOutputStream); concatenated members are read
one after another, as GZIPInputStream does."""
from __future__ import annotations

import gzip
import zlib

from . import too_large

_GZIP_WBITS = 16 + zlib.MAX_WBITS


def decompress(data: bytes, limit: int, magic: int) -> bytes:
    members, size = [], 0
    remaining = data
    while remaining:
        member = zlib.decompressobj(_GZIP_WBITS)
        members.append(member.decompress(remaining, limit + 1 - size))
        size += len(members[-1])
        if size > limit:
            raise too_large("gzip", limit)
        if not member.eof:
            if member.unconsumed_tail:
                raise too_large("gzip", limit)
            raise zlib.error("gzip stream ends before its end-of-stream marker")
        remaining = member.unused_data
        if remaining and remaining[:2] != b"\x1f\x8b":
            break  # GZIPInputStream ignores trailing bytes that do not start a member
    return members[0] if len(members) == 1 else b"".join(members)  # one member (nearly always): no copy


def compress(data: bytes, magic: int) -> bytes:
    return gzip.compress(data, mtime=0)
