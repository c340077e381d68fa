"""Transaction index (`.txnindex`): the aborted transactions whose ABORT marker is in the segment.

Source: storage/.../log/TransactionIndex.java, AbortedTxn.java. 34-byte entries
`version:int16, producerId:int64, firstOffset:int64, lastOffset:int64, lastStableOffset:int64`,
where lastOffset is the offset of the ABORT marker. Not preallocated; a trailing partial entry is
ignored. Quirk kept: Kafka reads the version from the first byte only, as a signed byte (so a
first byte of 0x80-0xFF is a negative version, which it accepts).
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from construct import Int16sb, Int64sb, Struct

from ..errors import CorruptDataError
from ..schema import derive_struct
from .index_file import entry_dtype, read_index_bytes
from .segment import offset_from_name

ENTRY_SCHEMA = Struct(
    "version" / Int16sb,
    "producer_id" / Int64sb,
    "first_offset" / Int64sb,
    "last_offset" / Int64sb,
    "last_stable_offset" / Int64sb,
)
ENTRY = derive_struct(ENTRY_SCHEMA)
CURRENT_VERSION = 0
COLUMNS = ("producer_id", "first_offset", "last_offset", "last_stable_offset")
"""What an aborted transaction is, as columns (`AbortedTxns`, the index's `columns()`, the kernels')."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    position: int = 0
    raw: bytes | None = field(default=None, compare=False)
    """The entry's 34 bytes as read from a file (None: built), which Kafka copies as they are: the
    cleaner appends a kept ABORT marker's entry to the cleaned segment's index."""


class TransactionIndex:
    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        self.path = os.fspath(path)
        self.base_offset = offset_from_name(self.path)
        self.data = read_index_bytes(self.path) if data is None else data
        self.entry_count = len(self.data) // ENTRY.size
        self.trailing_bytes = len(self.data) % ENTRY.size

    def entries(self) -> list[AbortedTxn]:
        """All aborted transactions; an unknown version is an error, as in Kafka."""
        return entries_of(self.columns())

    def columns(self):
        """The entries as a numpy structured array over the bytes (`ENTRY_SCHEMA`'s fields, no copy);
        an unknown version is an error, as in Kafka."""
        import numpy as np

        count = self.entry_count
        # AbortedTxn.version() reads buffer.get(0): a signed byte, so 0x80-0xFF read as negative versions pass
        versions = np.frombuffer(self.data, dtype=np.int8, count=count * ENTRY.size)[::ENTRY.size]
        unknown = np.flatnonzero(versions > CURRENT_VERSION)
        if len(unknown):
            position, version = int(unknown[0]) * ENTRY.size, int(versions[unknown[0]])
            raise CorruptDataError(
                f"Unexpected aborted transaction version {version} in transaction index {self.path}, "
                f"current version is {CURRENT_VERSION}",
                path=self.path, position=position, expected=CURRENT_VERSION, actual=version,
            )
        return np.frombuffer(self.data, dtype=entry_dtype(ENTRY_SCHEMA), count=count)


def _kafka_versions(entries):
    """Each entry's version as AbortedTxn.version() reads it: the first byte, signed (the int16's high byte)."""
    return entries["version"].astype("int16") >> 8


def sanity_check(index: TransactionIndex) -> int | None:
    """TransactionIndex.sanityCheck, which Kafka's loader runs on every segment with an offset index:
    the position of the first entry whose transaction ends below the segment's base offset (a
    CorruptIndexException: the loader recovers the segment, rebuilding the index), or None. Raises
    where an unknown version comes first (a KafkaException the loader does not catch)."""
    import numpy as np

    entries = np.frombuffer(index.data, dtype=entry_dtype(ENTRY_SCHEMA), count=index.entry_count)
    versions = _kafka_versions(entries)
    failing = np.flatnonzero((versions > CURRENT_VERSION) | (entries["last_offset"] < index.base_offset))
    if not len(failing):
        return None
    slot = int(failing[0])
    if versions[slot] > CURRENT_VERSION:
        index.columns()  # raises, saying where
    return slot * ENTRY.size


def entries_of(columns) -> list[AbortedTxn]:
    """The `AbortedTxn`s of entries read by `TransactionIndex.columns` (their version checked), each
    version as Kafka reads it: the first byte, signed (the int16's high byte)."""
    versions = _kafka_versions(columns).tolist()
    data = columns.tobytes()
    return [AbortedTxn(version, producer_id, first, last, lso, slot * ENTRY.size,
                       data[slot * ENTRY.size:(slot + 1) * ENTRY.size])
            for slot, (version, producer_id, first, last, lso) in enumerate(
                zip(versions, *(columns[name].tolist() for name in COLUMNS)))]


class AbortedTxns:
    """Aborted transactions in order, as a replay finds them: one at a time (`AbortedTxn`s), or
    thousands at once from the compiled replay, kept as its columns (`COLUMNS`, int64 rows) and made
    into objects only when iterated. A verify compares them with a `.txnindex` as columns."""

    def __init__(self):
        self.chunks: list = []
        """`AbortedTxn`s and int64 arrays of `COLUMNS` × transactions, in order."""
        self.count = 0

    def append(self, txn: AbortedTxn) -> None:
        self.chunks.append(txn)
        self.count += 1

    def extend(self, txns: Iterable[AbortedTxn]) -> None:
        if isinstance(txns, AbortedTxns):
            self.chunks.extend(txns.chunks)
            self.count += txns.count
        else:
            for txn in txns:
                self.append(txn)

    def extend_columns(self, columns) -> None:
        """Transactions as `COLUMNS` × n int64 (kept as given: not to be written to after)."""
        if columns.shape[1]:
            self.chunks.append(columns)
            self.count += columns.shape[1]

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[AbortedTxn]:
        for chunk in self.chunks:
            if isinstance(chunk, AbortedTxn):
                yield chunk
            else:
                yield from (AbortedTxn(CURRENT_VERSION, *txn) for txn in chunk.T.tolist())

    def columns(self):
        """All of them as one int64 array of `COLUMNS` × transactions."""
        import numpy as np

        parts = [chunk if not isinstance(chunk, AbortedTxn) else
                 np.array([[getattr(chunk, name)] for name in COLUMNS], dtype=np.int64) for chunk in self.chunks]
        return np.concatenate(parts, axis=1) if parts else np.empty((len(COLUMNS), 0), dtype=np.int64)


def build(entries: list[AbortedTxn]) -> bytes:
    """The index's bytes: each entry's own as read where its fields still say what they read as
    (`dataclasses.replace` keeps `raw`), else built."""
    return b"".join(map(_entry_bytes, entries))


def _entry_bytes(entry: AbortedTxn) -> bytes:
    fields = (entry.version, entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset)
    if entry.raw is not None:
        version, *rest = ENTRY.unpack(entry.raw)
        if (version >> 8, *rest) == fields:  # (the version as Kafka reads it: the first byte, signed)
            return entry.raw
    return ENTRY.pack(entry.version << 8, *fields[1:])  # (the version in the first byte, where Kafka reads it)
