"""A segment file (`<20-digit base offset>.log`, also KRaft `.checkpoint` snapshots) and the
iteration over its shallow entries.

Source: clients/.../record/FileLogInputStream.java (nextBatch). At each position: fewer than 17
bytes left ends the file silently; a size below 14 is a CorruptRecordException; an entry running
past the end ends the file silently (a partial trailing batch); the magic byte at offset 16 picks
V2 (>= 2) or legacy (< 2). We follow those rules, record why the scan stopped, and keep going past
an entry whose own contents are bad (it is reported as a `BadEntry`), since its size still tells
where the next one starts.
"""
from __future__ import annotations

import enum
import mmap
import os
import stat
from dataclasses import dataclass
from typing import Iterator

from .. import codecs
from ..errors import CorruptDataError, InputError
from . import legacy, record_batch
from .batch import Batch

HEADER_SIZE_UP_TO_MAGIC = 17
LOG_OVERHEAD = 12
MIN_ENTRY_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0
SIZE_FIELD = legacy.SIZE
MAGIC_OFFSET = 16
RELEASE_STEP = 8 << 20
"""The scan hands the pages behind it back to the kernel every this many bytes, so a process's
RSS stays flat in the file's size. Safe for a read-only file map: touching a released page again
faults it back in from the page cache, so batches and records already yielded stay readable."""


class Stop(enum.Enum):
    END = "end"
    """Every byte belongs to an entry."""
    SHORT_TAIL = "short-tail"
    """Fewer than 17 bytes remain: too short for an entry header, ignored by Kafka's reader."""
    PARTIAL_ENTRY = "partial-entry"
    """The last entry's declared size runs past the end of the file (a truncated write)."""
    CORRUPT_SIZE = "corrupt-size"
    """An entry declares a size below 14: Kafka's reader throws; a zero-filled tail looks so."""


@dataclass(slots=True)
class BadEntry:
    """An entry whose size is plausible but whose contents cannot be read."""

    position: int
    size: int
    magic: int
    error: CorruptDataError

    @property
    def end(self) -> int:
        return self.position + self.size


def offset_from_name(path: str | os.PathLike) -> int | None:
    """LogFileUtils.offsetFromFileName: the digits before the first dot, if they are digits (after a
    minus sign: Kafka names the segment of a negative base offset so, see `filename_prefix`)."""
    stem = os.path.basename(os.fspath(path)).split(".", 1)[0]
    digits = stem[1:] if stem.startswith("-") else stem
    return (-int(digits) if stem.startswith("-") else int(digits)) if digits.isdigit() else None


def filename_prefix(offset: int) -> str:
    """LogFileUtils.filenamePrefixFromOffset: 20 digits at least, no grouping, a minus sign before a
    negative offset's (the loader's split names a piece after its first batch's base offset, whatever
    it is: -5 gives -00000000000000000005.log)."""
    return f"{offset:020d}" if offset >= 0 else f"-{-offset:020d}"


def open_readonly(path: str | os.PathLike):
    """Open a regular file for reading only; anything else is an InputError. O_NONBLOCK: opening a
    FIFO named like a segment must not wait for a writer (it has no effect on regular files)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path=path) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise InputError("not a regular file", path=path)
    return fd, info


class SegmentFile:
    """A segment opened read-only and memory-mapped (nothing is loaded up front)."""

    def __init__(self, path: str | os.PathLike, *, max_bytes: int | None = None,
                 decompress_limit: int = codecs.DEFAULT_LIMIT):
        self.path = os.fspath(path)
        self.base_offset = offset_from_name(self.path)
        self.decompress_limit = decompress_limit
        fd, info = open_readonly(self.path)
        try:
            self.file_size = info.st_size
            self.mtime_ms = info.st_mtime_ns // 1_000_000
            # mapping a size fixed now: a file still being written is read as a consistent prefix
            self.buffer = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if info.st_size else b""
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot map: {exc}", path=self.path) from None
        finally:
            os.close(fd)
        self.end = self.file_size if max_bytes is None else min(self.file_size, max(0, max_bytes))
        self.stop: Stop | None = None
        self.stop_position: int | None = None
        self.stop_error: CorruptDataError | None = None
        self.released = 0
        """Pages before this were handed back to the kernel (`release_before`)."""

    def __enter__(self) -> "SegmentFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if isinstance(self.buffer, mmap.mmap):
            try:
                self.buffer.close()
            except BufferError:
                pass  # a record still holds a view; the map goes when it does

    def entries(self, start: int = 0) -> Iterator[Batch | BadEntry]:
        """Every shallow entry from `start`, as Kafka's FileLogInputStream walks them.

        When the iterator is exhausted, `stop`, `stop_position` (and for CORRUPT_SIZE,
        `stop_error`) say why and where it ended.
        """
        buf, end, path = self.buffer, self.end, self.path
        position = start
        self.released = max(self.released, start - start % mmap.PAGESIZE)
        self.stop = self.stop_position = self.stop_error = None
        while True:
            if position >= end - HEADER_SIZE_UP_TO_MAGIC:
                self.stop = Stop.END if position == end else Stop.SHORT_TAIL
                break
            (size,) = SIZE_FIELD.unpack_from(buf, position + 8)
            if size < MIN_ENTRY_SIZE:
                self.stop = Stop.CORRUPT_SIZE
                self.stop_error = CorruptDataError(
                    f"Found record size {size} smaller than minimum record overhead ({MIN_ENTRY_SIZE})",
                    path=path, position=position, expected=f">= {MIN_ENTRY_SIZE}", actual=size,
                )
                break
            if position > end - LOG_OVERHEAD - size:
                self.stop = Stop.PARTIAL_ENTRY
                break
            magic = buf[position + MAGIC_OFFSET]
            magic = magic - 256 if magic > 127 else magic
            try:
                if magic >= 2:
                    yield record_batch.parse_batch(buf, position, path, self.decompress_limit)
                else:
                    yield legacy.parse_batch(buf, position, position + LOG_OVERHEAD + size, path,
                                             self.decompress_limit)
            except CorruptDataError as exc:
                yield BadEntry(position, LOG_OVERHEAD + size, magic, exc)
            position += LOG_OVERHEAD + size
            if position - self.released >= RELEASE_STEP:
                self.release_before(position)
        self.stop_position = position

    def release_before(self, position: int) -> None:
        """Hand the pages before `position` back to the kernel (see RELEASE_STEP)."""
        behind = position - position % mmap.PAGESIZE
        if behind > self.released and isinstance(self.buffer, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            self.buffer.madvise(mmap.MADV_DONTNEED, self.released, behind - self.released)
        self.released = max(self.released, behind)

    def batches(self, start: int = 0) -> Iterator[Batch]:
        """Only the readable batches; a bad entry raises its error."""
        for entry in self.entries(start):
            if isinstance(entry, BadEntry):
                raise entry.error
            yield entry


_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)


def next_non_zero(buf, start: int, end: int) -> int | None:
    """Position of the first non-zero byte in [start, end), or None. Whole chunks are compared
    with zeros (memcmp speed); only the chunk that differs is searched byte by byte."""
    for chunk_start in range(start, end, _CHUNK):
        chunk = buf[chunk_start : min(end, chunk_start + _CHUNK)]
        if chunk != _ZEROS[: len(chunk)]:
            return chunk_start + len(chunk) - len(chunk.lstrip(b"\x00"))
    return None


def all_zero(buf, start: int, end: int) -> bool:
    return end > start and next_non_zero(buf, start, end) is None
