"""What Kafka's offset and time indexes share (AbstractIndex): fixed-size big-endian entries, no
header and no entry count - a file's entry count is floor(length / entry size) - and, on an active
or crashed segment, a preallocated zero-filled tail.

Source: storage/.../log/AbstractIndex.java. DumpLogSegments stops at the first entry after the
first whose relative offset is 0 ("it is a sparse file ... stop if we see one"); `valid_count`
applies that rule, which is also how we tell real entries from the preallocated tail.
"""
from __future__ import annotations

import os
import struct

from ..errors import InputError
from .segment import offset_from_name, open_readonly


def read_index_bytes(path: str | os.PathLike, limit: int = 1 << 31) -> bytes:
    """The whole index file (indexes are at most segment.index.bytes, 10 MiB by default)."""
    fd, info = open_readonly(path)
    try:
        if info.st_size > limit:
            raise InputError(f"index file of {info.st_size} bytes is larger than any index Kafka writes", path=path)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError as exc:  # e.g. EIO from a failing disk, or a /proc file that stats as regular
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None
    finally:
        os.close(fd)


class IndexFile:
    """Entries of a fixed-size-entry index, read once into memory."""

    ENTRY: struct.Struct
    RELATIVE_OFFSET_FIELD: int  # which field of ENTRY holds the relative offset

    def __init__(self, path: str | os.PathLike, base_offset: int | None = None, data: bytes | None = None):
        self.path = os.fspath(path)
        self.base_offset = offset_from_name(self.path) if base_offset is None else base_offset
        if self.base_offset is None:
            raise InputError("index file name does not start with a base offset", path=self.path)
        self.data = read_index_bytes(self.path) if data is None else data
        self.entry_count = len(self.data) // self.ENTRY.size
        self.trailing_bytes = len(self.data) % self.ENTRY.size

    def raw(self, slot: int) -> tuple:
        return self.ENTRY.unpack_from(self.data, slot * self.ENTRY.size)

    def valid_count(self) -> int:
        """Entries before the zero tail: stop at the first slot > 0 whose relative offset is 0."""
        field = self.RELATIVE_OFFSET_FIELD
        for slot in range(1, self.entry_count):
            if self.raw(slot)[field] == 0:
                return slot
        return self.entry_count

    def zero_tail(self) -> tuple[int, int] | None:
        """(first slot, byte length) of a zero-filled preallocated tail after the valid entries."""
        valid = self.valid_count()
        start = valid * self.ENTRY.size
        if valid < self.entry_count and not self.data[start:].strip(b"\x00"):
            return valid, len(self.data) - start
        return None
