"""Byte-level mutations of one Kafka file, aimed at its structure.

A file's structural boundaries - every batch, every header field, every record of a segment; every
entry of an index; every field of a snapshot header; every line of a text file - are found by
parsing the seed with the library itself. Mutations then land on those boundaries far more often
than chance would: truncations exactly at (and one byte either side of) a field, absurd values in
length and count fields, zeroed ranges and garbage starting at a batch. For V2 batches and legacy
messages the CRC is often recomputed after the damage, so the parse gets past the CRC check and
into the record decoder.
"""
from __future__ import annotations

import random
import struct
import zlib

from ..crc import crc32c
from ..errors import KafkaLogError
from ..formats import legacy
from ..formats.segment import BadEntry, SegmentFile

# V2 header fields: (offset, size) - baseOffset, batchLength, partitionLeaderEpoch, magic, crc,
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordsCount
V2_FIELDS = ((0, 8), (8, 4), (12, 4), (16, 1), (17, 4), (21, 2), (23, 4), (27, 8), (35, 8), (43, 8), (51, 2),
             (53, 4), (57, 4))
V2_HEADER = 61
# Legacy entry: offset, message size, crc, magic, attributes, then (V1) timestamp, key length
LEGACY_FIELDS = ((0, 8), (8, 4), (12, 4), (16, 1), (17, 1), (18, 8), (18, 4), (26, 4))
INDEX_ENTRY_SIZES = {"index": 8, "timeindex": 12, "txnindex": 34}
SNAPSHOT_FIELDS = ((0, 2), (2, 4), (6, 4))  # version, crc, entry count; entries of 46 bytes follow

ABSURD = {
    1: (0, 1, 2, 3, 0x7F, 0x80, 0xFF),
    2: (0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x0007, 0x0027),
    4: (0, 1, 13, 14, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0x00100000),
    8: (0, 1, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFF, 0x000000007FFFFFFF),
}
ABSURD_VARINTS = (
    b"\xff\xff\xff\xff\x0f",  # zigzag -2^31
    b"\xfe\xff\xff\xff\x0f",  # zigzag 2^31 - 1
    b"\x01",  # -1
    b"\x03",  # -2
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # ten bytes
    b"\x80\x80\x80\x80\x80\x80",  # six bytes, too long for an int
    b"\x80",  # cut short
    b"\x00",
)


class Layout:
    """Where a file's structures start and which spans hold fixed-width fields."""

    def __init__(self):
        self.boundaries: set[int] = {0}
        self.fields: list[tuple[int, int]] = []
        """(position, width) of integer fields."""
        self.varints: list[int] = []
        """Positions where a record (and so its length varint) starts."""
        self.batches: list[tuple[int, int, int]] = []
        """(position, size, magic) of every readable batch."""


def layout_of(kind: str, path: str, data: bytes) -> Layout:
    layout = Layout()
    layout.boundaries.add(len(data))
    if kind in ("log", "checkpoint"):
        _log_layout(path, layout)
    elif kind in INDEX_ENTRY_SIZES:
        size = INDEX_ENTRY_SIZES[kind]
        for position in range(0, len(data), size):
            layout.boundaries.add(position)
            widths = (4, 4) if kind == "index" else (8, 4) if kind == "timeindex" else (2, 8, 8, 8, 8)
            at = position
            for width in widths:
                layout.fields.append((at, width))
                at += width
    elif kind == "snapshot":
        layout.fields.extend(SNAPSHOT_FIELDS)
        for position in range(10, len(data), 46):
            layout.boundaries.add(position)
            layout.fields.extend((position + at, width) for at, width in
                                 ((0, 8), (8, 2), (10, 4), (14, 8), (22, 4), (26, 8), (34, 4), (38, 8)))
    else:  # text files: every line
        position = 0
        for line in data.splitlines(keepends=True):
            position += len(line)
            layout.boundaries.add(position)
    return layout


def _log_layout(path: str, layout: Layout) -> None:
    try:
        with SegmentFile(path) as segment:
            for entry in segment.entries():
                layout.boundaries.update((entry.position, entry.end))
                if isinstance(entry, BadEntry):
                    continue
                fields = V2_FIELDS if entry.magic >= 2 else LEGACY_FIELDS
                layout.fields.extend((entry.position + at, width) for at, width in fields)
                layout.boundaries.update(entry.position + at for at, _ in fields)
                layout.batches.append((entry.position, entry.size, entry.magic))
                try:
                    records = entry.records()
                except KafkaLogError:
                    continue
                for record in records:
                    if record.position is not None:
                        layout.boundaries.add(record.position)
                        layout.varints.append(record.position)
    except KafkaLogError:
        pass


# ---------------------------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------------------------


def _near(rng: random.Random, layout: Layout, size: int) -> int:
    """A boundary (or one byte either side of it) most of the time, else anywhere."""
    if size == 0:
        return 0
    if rng.random() < 0.8:
        position = rng.choice(sorted(layout.boundaries)) + rng.choice((0, 0, 0, -1, 1))
    else:
        position = rng.randrange(size + 1)
    return max(0, min(size, position))


def bit_flips(rng, data: bytearray, layout: Layout) -> str:
    if not data:
        return "bit flips (empty)"
    count = rng.choice((1, 1, 2, 3, 8, 32))
    for _ in range(count):
        if layout.fields and rng.random() < 0.6:
            at, width = rng.choice(layout.fields)
            position = min(len(data) - 1, at + rng.randrange(width))
        else:
            position = rng.randrange(len(data))
        data[position] ^= 1 << rng.randrange(8)
    return f"{count} bit flips"


def truncate(rng, data: bytearray, layout: Layout) -> str:
    position = _near(rng, layout, len(data))
    del data[position:]
    return f"truncated at {position}"


def zero_range(rng, data: bytearray, layout: Layout) -> str:
    start = _near(rng, layout, len(data))
    length = rng.choice((1, 4, 8, 61, 512, 4096, len(data)))
    data[start : start + length] = bytes(len(data[start : start + length]))
    return f"zeroed {length} bytes at {start}"


def insert_garbage(rng, data: bytearray, layout: Layout) -> str:
    position = _near(rng, layout, len(data))
    length = rng.choice((1, 3, 12, 17, 61, 300))
    pattern = rng.choice(("random", "ff", "00", "repeat"))
    if pattern == "random":
        garbage = rng.randbytes(length)
    elif pattern == "repeat" and data:
        start = rng.randrange(len(data))
        garbage = bytes(data[start : start + length])
    else:
        garbage = bytes([0xFF if pattern == "ff" else 0]) * length
    data[position:position] = garbage
    return f"inserted {len(garbage)} {pattern} bytes at {position}"


def delete_range(rng, data: bytearray, layout: Layout) -> str:
    start = _near(rng, layout, len(data))
    length = rng.choice((1, 2, 4, 12, 61))
    del data[start : start + length]
    return f"deleted {length} bytes at {start}"


def absurd_field(rng, data: bytearray, layout: Layout) -> str:
    fields = [(at, width) for at, width in layout.fields if at + width <= len(data)]
    if not fields:
        return bit_flips(rng, data, layout)
    at, width = rng.choice(fields)
    value = rng.choice(ABSURD[width])
    data[at : at + width] = value.to_bytes(width, "big")
    return f"field at {at} ({width} bytes) set to {value:#x}"


def absurd_varint(rng, data: bytearray, layout: Layout) -> str:
    starts = [position for position in layout.varints if position < len(data)]
    if not starts:
        return absurd_field(rng, data, layout)
    position = rng.choice(starts)
    skip = rng.choice((0, 0, 1, 2, 3, 5))  # the length, or a field near the record's start
    varint = rng.choice(ABSURD_VARINTS)
    data[position + skip : position + skip + len(varint)] = varint
    return f"varint {varint.hex()} at {position + skip}"


def duplicate_batch(rng, data: bytearray, layout: Layout) -> str:
    if not layout.batches:
        return insert_garbage(rng, data, layout)
    position, size, _ = rng.choice(layout.batches)
    copy = bytes(data[position : position + size])
    times = rng.choice((1, 2, 50 if size < 4096 else 3))  # not 50 decompression bombs: 1 s each
    at = rng.choice((position, len(data), 0))
    data[at:at] = copy * times
    return f"batch at {position} repeated {times} times at {at}"


MUTATIONS = (bit_flips, truncate, zero_range, insert_garbage, delete_range, absurd_field, absurd_field,
             absurd_varint, duplicate_batch)


def mutate(rng: random.Random, kind: str, data: bytes, layout: Layout) -> tuple[bytes, str]:
    """One to three mutations; for segments, CRCs recomputed half of the time."""
    out = bytearray(data)
    steps = [rng.choice(MUTATIONS)(rng, out, layout) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
    if kind in ("log", "checkpoint") and rng.random() < 0.5:
        fix_crcs(out, layout)
        steps.append("CRCs recomputed")
    return bytes(out), "; ".join(steps)


def fix_crcs(data: bytearray, layout: Layout) -> None:
    """Recompute the CRC of every batch of the original layout that still lies within the data."""
    for position, _, magic in layout.batches:
        if position + 17 > len(data):
            continue
        (size,) = struct.unpack_from(">i", data, position + 8)
        end = min(len(data), position + 12 + max(size, 0))
        if magic >= 2 and end >= position + 21:
            struct.pack_into(">I", data, position + 17, crc32c(bytes(data[position + 21 : end])))
        elif magic < 2 and end >= position + 16:
            struct.pack_into(">I", data, position + 12, zlib.crc32(bytes(data[position + 16 : end])))


def legacy_wrapper(inner: bytes, offset: int, magic: int, codec: int) -> bytes:
    """A legacy compressed wrapper around `inner` (which may itself be a wrapper: nesting, which no
    Kafka version writes)."""
    from .. import codecs

    return legacy.build_entry(offset, magic, None, codecs.compress(codec, inner, magic=magic), attributes=codec)
