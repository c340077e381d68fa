"""What the peer scripts share: the segment in batch-aligned chunks, as aiokafka's reader wants
them (`MemoryRecords` takes `bytes`, not an mmap, so a whole 1 GiB file would be a 1 GiB copy)."""
from __future__ import annotations

import mmap
import struct
from typing import Iterator

CHUNK = 8 << 20
OFFSET_AND_SIZE = struct.Struct(">qi")


def chunks(path: str) -> Iterator[tuple[int, bytes]]:
    """(file position, bytes) of runs of whole batches, about CHUNK bytes each."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        size = len(m)
        start = position = 0
        while position + 12 <= size:
            _, length = OFFSET_AND_SIZE.unpack_from(m, position)
            if position + 12 + length > size:
                break
            position += 12 + length
            if position - start >= CHUNK:
                yield start, m[start:position]
                start = position
        if position > start:
            yield start, m[start:position]
