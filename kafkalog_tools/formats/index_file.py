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
from array import array

from construct import Struct

from ..errors import InputError
from ..schema import struct_fields
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


def entry_dtype(schema: Struct):
    """The numpy dtype with `schema`'s layout and field names (derived, like `derive_struct`)."""
    import numpy as np

    return np.dtype([(name, f"{field.fmtstr[0]}{'u' if field.fmtstr[1].isupper() else 'i'}{field.length}")
                     for name, field in struct_fields(schema)])


class IndexFile:
    """Entries of a fixed-size-entry index, read once into memory."""

    SCHEMA: Struct
    ENTRY: struct.Struct  # derive_struct(SCHEMA)
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

    def columns(self, count: int):
        """The first `count` entries as a numpy structured array over the bytes (no copy)."""
        import numpy as np

        return np.frombuffer(self.data, dtype=entry_dtype(self.SCHEMA), count=count)

    def valid_count(self) -> int:
        """Entries before the zero tail: stop at the first slot > 0 whose relative offset is 0.
        Searched in C over the int32 words of that field (zero in either byte order)."""
        fields = struct_fields(self.SCHEMA)
        start = sum(f.length for _, f in fields[:self.RELATIVE_OFFSET_FIELD])
        words = array("i", self.data[:self.entry_count * self.ENTRY.size])
        relative_offsets = words[start // words.itemsize::self.ENTRY.size // words.itemsize]
        try:
            return relative_offsets.index(0, 1)
        except ValueError:
            return self.entry_count

    def zero_tail(self) -> tuple[int, int] | None:
        """(first slot, byte length) of a zero-filled preallocated tail after the valid entries."""
        valid = self.valid_count()
        start = valid * self.ENTRY.size
        if valid < self.entry_count and not self.data[start:].strip(b"\x00"):
            return valid, len(self.data) - start
        return None
