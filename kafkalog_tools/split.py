"""Kafka's split of a segment whose offsets overflow its indexes (KAFKA-6264).

Old brokers' cleaners could leave a segment whose last offset lies more than Int.MaxValue past its
base offset, which its indexes cannot address as 4-byte relative offsets; a damaged base offset field
makes one too. When a recovery in Kafka's loader meets such a batch (LogSegmentOffsetOverflowException),
the loader splits the segment into pieces that each fit, swaps them in for it and loads the log again.

Kafka 4.0 sources: storage/.../log/LogLoader.java (retryOnOffsetOverflow), LocalLog.java
(splitOverflowedSegment, replaceSegments), LogSegment.java (hasOverflow, readNextOffset,
appendFromFile, appendChunkFromFile, append, onBecomeInactiveSegment).

- The split only runs when the segment's last batch overflows (hasOverflow: its next offset, read
  from the offset index's last entry as the failed recovery left it); else it refuses and the loader
  cannot open the log.
- A piece starts at a batch and is named after its base offset. It takes the batches that follow in
  chunks (appendChunkFromFile): while each batch's last offset fits the piece, and the chunk stays
  below its read buffer's capacity (1 MiB, or the first batch of a chunk that is larger, from then on
  in this piece). The first batch that does not fit starts the next piece. No CRC is checked; an
  entry that cannot be read before the end of the file fails the split.
- Each chunk is one LogSegment.append: an offset and a time index entry when more than
  index.interval.bytes were appended since the last entry (so never for the first chunk); closing the
  piece appends its largest timestamp to the time index. The index files are as full as
  segment.index.bytes allows (10 MiB: a million entries), which a piece of at most 2 GiB, one entry a
  chunk, cannot reach: no full-index check is modelled.
- The pieces' files get the segment's .log mtime; they have no .txnindex.
- The first append to an empty segment sets its rollingBasedTimestamp: a piece's is its first
  chunk's largest timestamp, not its first batch's (what a segment opened from disk reads).
- replaceSegments removes the split segment only from the loader's segment map. Where the split
  comes from a segment loadSegmentFiles recovers (no .index, say), that segment is not in the map
  yet: its files stay, with the indexes the failed recovery left (`left_by_failed_recovery`), and the
  next pass loads it too; a piece at its base offset is renamed onto its .log, .index and .timeindex,
  and takes the .txnindex that recovery wrote.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from .errors import KafkaLogError
from .formats import offset_index, time_index
from .formats.batch import INT32_MAX, NO_TIMESTAMP
from .formats.logdir import Segment
from .formats.segment import LOG_OVERHEAD, SegmentFile, filename_prefix
from .recovery import (EntryColumns, append_offset_entry, entry_last_offset, entry_magic, first_offset,
                       maybe_append_time_entry, shallow_entries)

CHUNK_CAPACITY = 1024 * 1024
"""appendChunkFromFile's first read buffer; a larger first batch grows it for the rest of the piece."""
_MAX_TIMESTAMP_AT = 35
"""A V2 header's max timestamp (`record_batch.BATCH_HEADER`)."""
_LEGACY_TIMESTAMP_AT = LOG_OVERHEAD + 6
"""A V1 message's timestamp, after its CRC, magic and attributes."""
_INT64 = struct.Struct(">q")


@dataclass
class Piece:
    """One segment of a split: bytes [start, end) of the overflowed segment, and its indexes."""

    base_offset: int
    start: int
    end: int = 0
    offset_entries: EntryColumns = field(default_factory=EntryColumns)
    """(absolute offset, position in the piece)"""
    time_entries: EntryColumns = field(default_factory=EntryColumns)
    """(timestamp, absolute offset)"""
    max_timestamp: int = NO_TIMESTAMP
    offset_of_max_timestamp: int = 0
    rolling_timestamp: int | None = None
    """LogSegment.rollingBasedTimestamp: the largest timestamp of the piece's first chunk (its first
    append). While the loader holds this piece's object, getFirstBatchTimestamp answers it."""

    def __post_init__(self):
        self.offset_of_max_timestamp = self.base_offset  # an empty time index's last entry: (-1, base offset)


def has_overflow(base_offset: int, next_offset: int) -> bool:
    """LogSegment.hasOverflow, from the segment's readNextOffset."""
    return next_offset > base_offset and not 0 <= next_offset - 1 - base_offset <= INT32_MAX


def split_segment(log: SegmentFile, index_interval_bytes: int) -> list[Piece]:
    """LocalLog.splitOverflowedSegment's pieces of `log`; raises KafkaLogError where Kafka's split
    throws (the loader then cannot open the log)."""
    pieces: list[Piece] = []
    position = 0
    while position < log.end:
        if next(shallow_entries(log, position, log.end), None) is None:
            raise KafkaLogError(f"splitting the overflowed segment: no batch can be read at {position} "
                                f"(NoSuchElementException), {log.end - position} bytes before the end",
                                path=log.path, position=position)
        piece = Piece(first_offset(log, position, "splitting the overflowed segment"), position)
        piece.end = _append_from_file(log, piece, index_interval_bytes)
        if piece.end == position:
            raise KafkaLogError(f"splitting the overflowed segment: failed to append records from position "
                                f"{position} (IllegalStateException): the batch's last offset "
                                f"{entry_last_offset(log, position)} does not fit its own base offset "
                                f"{piece.base_offset}", path=log.path, position=position)
        maybe_append_time_entry(piece, log.path, piece.end)  # onBecomeInactiveSegment
        pieces.append(piece)
        position = piece.end
    bases = [piece.base_offset for piece in pieces]
    if len(set(bases)) < len(bases):
        # createNewCleanedSegment deletes an earlier piece's files of the same name, and the swap's
        # rename of that piece then fails
        raise KafkaLogError(f"splitting the overflowed segment: two pieces would start at the same offset "
                            f"({', '.join(map(str, bases))}): Kafka's split fails renaming the first",
                            path=log.path)
    return pieces


def _append_from_file(log: SegmentFile, piece: Piece, index_interval_bytes: int) -> int:
    """LogSegment.appendFromFile from the piece's start, chunk by chunk; returns where it stopped."""
    capacity, position, since_last_entry = CHUNK_CAPACITY, piece.start, 0
    while True:
        end, chunk_last_offset = position, 0
        chunk_max_timestamp, chunk_offset_of_max = -(1 << 63), 0
        for at, size, _ in shallow_entries(log, position, log.end):
            batch_last_offset = entry_last_offset(log, at)
            if not 0 <= batch_last_offset - piece.base_offset <= INT32_MAX:
                break
            if end > position and end - position + size >= capacity:
                break
            timestamp = _max_timestamp(log, at)
            if timestamp > chunk_max_timestamp:
                chunk_max_timestamp, chunk_offset_of_max = timestamp, batch_last_offset
            chunk_last_offset, end = batch_last_offset, at + size
        if end == position:
            return position
        capacity = max(capacity, end - position)
        # LogSegment.append of the chunk
        if piece.rolling_timestamp is None:
            piece.rolling_timestamp = chunk_max_timestamp
        if chunk_max_timestamp > piece.max_timestamp:
            piece.max_timestamp, piece.offset_of_max_timestamp = chunk_max_timestamp, chunk_offset_of_max
        if since_last_entry > index_interval_bytes:
            append_offset_entry(piece.offset_entries, chunk_last_offset, position - piece.start, log.path, position)
            maybe_append_time_entry(piece, log.path, position)
            since_last_entry = 0
        since_last_entry += end - position
        position = end


def _max_timestamp(log: SegmentFile, position: int) -> int:
    """FileChannelRecordBatch.maxTimestamp from the entry's header: a V2 batch's field; a V0 message
    has none; any other legacy magic reads V1's timestamp field."""
    magic = entry_magic(log.buffer, position)
    if magic == 0:
        return NO_TIMESTAMP
    return _INT64.unpack_from(log.buffer, position + (_MAX_TIMESTAMP_AT if magic >= 2 else _LEGACY_TIMESTAMP_AT))[0]


def write_pieces(pieces: list[Piece], log: SegmentFile, directory: Path) -> list[Segment]:
    """The pieces as segment files in `directory` (the .log, and the .index and .timeindex trimmed
    to their entries), with the split segment's .log mtime (LogSegment.setLastModified)."""
    mtime_ns = log.mtime_ms * 1_000_000
    segments = []
    for piece in pieces:
        stem = directory / filename_prefix(piece.base_offset)
        files = (stem.with_suffix(".log"), stem.with_suffix(".index"), stem.with_suffix(".timeindex"))
        files[0].write_bytes(log.buffer[piece.start:piece.end])
        files[1].write_bytes(offset_index.build(list(piece.offset_entries), piece.base_offset))
        files[2].write_bytes(time_index.build(list(piece.time_entries), piece.base_offset))
        for path in files:
            os.utime(path, ns=(mtime_ns, mtime_ns))
        segments.append(Segment(piece.base_offset, *files))
    return segments


MAX_INDEX_SIZE = 10 << 20
"""segment.index.bytes' default: the size a new index file is created at (AbstractIndex)."""


def left_by_failed_recovery(segment: Segment, index: bytes, timeindex: bytes, txnindex: bytes,
                            directory: Path) -> Segment:
    """The segment with the index files a recovery that threw leaves (`index`, `timeindex`,
    `txnindex`: the entries it appended). The offset and time index were created at MAX_INDEX_SIZE,
    rounded down to whole entries, and are never trimmed, as a segment that is closed would be:
    zero-filled after the entries (the files are sparse). The .txnindex was emptied (reset) and holds
    the aborted transactions the recovery completed."""
    (directory / "left").mkdir(exist_ok=True)
    stem = directory / "left" / filename_prefix(segment.base_offset)
    files = []
    for suffix, data, entry in ((".index", index, offset_index.ENTRY.size), (".timeindex", timeindex,
                                                                            time_index.ENTRY.size)):
        path = stem.with_suffix(suffix)
        with open(path, "wb") as out:
            out.write(data)
            out.truncate(MAX_INDEX_SIZE - MAX_INDEX_SIZE % entry)
        files.append(path)
    aborted = None
    if txnindex:
        aborted = stem.with_suffix(".txnindex")
        aborted.write_bytes(txnindex)
    return Segment(segment.base_offset, segment.log, *files, aborted)
