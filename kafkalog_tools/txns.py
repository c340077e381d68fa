"""Transaction forensics: every transaction of a partition, per producer, and its last stable offset.

Sources: storage/.../log/ProducerStateManager.java (ongoingTxns, lastStableOffset),
ProducerAppendInfo.java (appendEndTxnMarker), LogSegment.updateTxnIndex; FORMAT.md sections 2.6,
3.4 and 6.2.

A transaction opens with a producer's first transactional data batch and ends with its ABORT or
COMMIT control batch; one still without a marker at the end of the log is open ("hanging") and
holds the last stable offset back. The producer state is the one recovery replays
(`recovery.ProducerState`), started as Kafka's loader starts it (a `.snapshot` at the first segment,
else empty); this module only adds the statistics of each transaction.

Cross-check: every aborted transaction must appear in the `.txnindex` of the segment holding its
ABORT marker with the same first offset and last stable offset, and every `.txnindex` entry must be
such a transaction. Differences are findings, never exceptions; one bad segment does not stop the
walk.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from .errors import CorruptDataError, InputError, KafkaLogError
from .formats import txn_index
from .formats.batch import Batch
from .formats.logdir import LogDir, PartitionDir, classify
from .formats.segment import BadEntry, SegmentFile
from .formats.txn_index import AbortedTxn
from .recovery import ProducerState, ProducerStateError, starting_producer_state

COMMITTED, ABORTED, OPEN = "committed", "aborted", "open"
ERROR, WARNING = "error", "warning"

# ---------------------------------------------------------------------------------------------
# Typed results
# ---------------------------------------------------------------------------------------------


@dataclass
class Transaction:
    """One transaction of one producer in one partition."""

    producer_id: int
    producer_epoch: int
    """The epoch of the transaction's first data batch seen."""
    first_offset: int
    state: str = OPEN
    last_offset: int = -1
    """Offset of the last data record seen (-1 when no data batch was seen)."""
    marker_offset: int | None = None
    marker_epoch: int | None = None
    """The marker's epoch: higher than the data's when the coordinator fenced the producer."""
    coordinator_epoch: int | None = None
    records: int = 0
    batches: int = 0
    bytes: int = 0
    """Bytes of the data batches (headers included), not counting the marker."""
    start_timestamp: int | None = None
    """The first data batch's first timestamp."""
    end_timestamp: int | None = None
    """The marker's timestamp; for an open transaction, the last data batch's max timestamp."""
    last_stable_offset: int | None = None
    """Aborted only: the LSO written to the .txnindex for it."""
    complete: bool = True
    """False when it opened before the first segment read: counts cover only what was seen."""

    @property
    def duration_ms(self) -> int | None:
        if self.start_timestamp is None or self.end_timestamp is None:
            return None
        return self.end_timestamp - self.start_timestamp


@dataclass
class Finding:
    severity: str
    kind: str
    message: str
    path: str | None = None
    position: int | None = None
    producer_id: int | None = None
    offset: int | None = None


@dataclass
class PartitionTransactions:
    path: str
    name: str
    transactions: list[Transaction] = field(default_factory=list)
    """Ordered by producer id, then first offset."""
    findings: list[Finding] = field(default_factory=list)
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    last_stable_offset: int | None = None
    producers: list[int] = field(default_factory=list)
    """Every producer id seen in a V2 batch (transactional or idempotent)."""
    origin: str = ""
    """Where the starting producer state came from."""
    exact: bool = True

    def count(self, state: str) -> int:
        return sum(1 for t in self.transactions if t.state == state)

    @property
    def has_errors(self) -> bool:
        return any(f.severity == ERROR for f in self.findings)


# ---------------------------------------------------------------------------------------------
# Walking a partition
# ---------------------------------------------------------------------------------------------


def partitions_of(paths: Iterable[str | os.PathLike]) -> Iterator[PartitionDir]:
    """The partition dirs named directly or through a log dir; a file is an InputError."""
    for path in paths:
        found = classify(path)
        if isinstance(found, LogDir):
            yield from found.partitions
        elif isinstance(found, PartitionDir):
            yield found
        else:
            raise InputError("not a partition directory or a log directory", path=path)


def analyze_partition(partition: PartitionDir) -> PartitionTransactions:
    """Replay the partition's segments and collect its transactions and findings."""
    result = PartitionTransactions(str(partition.path), partition.name)
    segments = [s for s in partition.segments if s.log is not None]
    if not segments:
        return result
    result.log_start_offset = segments[0].base_offset
    start = starting_producer_state(partition, segments[0].base_offset)
    result.origin, result.exact = start.origin, start.exact
    walk = _Walk(result, start.state)
    for first_offset, producer_id in sorted(start.state.ongoing.items()):
        status = start.state.producers[producer_id]
        walk.open[producer_id] = Transaction(producer_id, status.epoch, first_offset, complete=False)
    end_offset = segments[0].base_offset
    for segment in segments:
        computed: list[AbortedTxn] = []
        with SegmentFile(segment.log) as log:
            for entry in log.entries():
                if isinstance(entry, BadEntry):
                    walk.find(ERROR, "corrupt-batch", f"unreadable batch, the rest of the segment is skipped: "
                              f"{entry.error.message}", path=log.path, position=entry.position)
                    break
                if not entry.crc_valid:
                    walk.find(ERROR, "corrupt-batch", "batch CRC mismatch, the rest of the segment is skipped",
                              path=log.path, position=entry.position)
                    break
                end_offset = max(end_offset, entry.last_offset + 1)
                aborted = walk.apply(entry)
                if aborted is not None:
                    computed.append(aborted)
        _cross_check(result, segment.txnindex, segment.log, computed, result.exact)
    result.log_end_offset = end_offset
    ongoing = walk.state.ongoing
    result.last_stable_offset = min(ongoing) if ongoing else end_offset
    result.transactions = sorted(walk.done + list(walk.open.values()),
                                 key=lambda t: (t.producer_id, t.first_offset))
    result.producers = sorted(walk.state.producers)
    return result


class _Walk:
    """The producer state replayed batch by batch, plus the statistics of each open transaction."""

    def __init__(self, result: PartitionTransactions, state: ProducerState):
        self.result = result
        self.state = state
        state.on_anomaly = self._anomaly
        self.open: dict[int, Transaction] = {}
        self.done: list[Transaction] = []

    def find(self, severity: str, kind: str, message: str, **where) -> None:
        self.result.findings.append(Finding(severity, kind, message, **where))

    def _anomaly(self, kind: str, message: str, batch: Batch) -> None:
        self.find(WARNING, kind, message, path=batch.path, position=batch.position,
                  producer_id=batch.producer_id, offset=batch.base_offset)

    def apply(self, batch: Batch) -> AbortedTxn | None:
        if batch.magic < 2 or batch.producer_id < 0:
            return None
        pid = batch.producer_id
        before = self.state.producers.get(pid)
        first_before = None if before is None else before.current_txn_first_offset
        try:
            aborted = self.state.apply(batch)
        except ProducerStateError as exc:
            self.find(ERROR, "producer-state", exc.message, path=batch.path, position=batch.position,
                      producer_id=pid, offset=batch.base_offset)
            return None
        except CorruptDataError as exc:
            self.find(ERROR, "unreadable-marker", exc.message, path=batch.path, position=batch.position,
                      producer_id=pid, offset=batch.base_offset)
            return None
        status = self.state.producers[pid]
        if batch.is_control:
            if first_before is not None and status.current_txn_first_offset is None:
                self._close(batch, first_before, aborted)
        elif batch.is_transactional and status.current_txn_first_offset is not None:
            self._add_data(batch, status.current_txn_first_offset)
        return aborted

    def _add_data(self, batch: Batch, first_offset: int) -> None:
        txn = self.open.get(batch.producer_id)
        if txn is None or txn.first_offset != first_offset:
            txn = self.open[batch.producer_id] = Transaction(batch.producer_id, batch.producer_epoch, first_offset)
        if txn.batches == 0 and txn.complete:
            txn.start_timestamp = batch.base_timestamp if batch.base_timestamp >= 0 else batch.max_timestamp
        txn.batches += 1
        txn.records += batch.count or 0
        txn.bytes += batch.size
        txn.last_offset = batch.last_offset
        txn.end_timestamp = batch.max_timestamp

    def _close(self, batch: Batch, first_offset: int, aborted: AbortedTxn | None) -> None:
        txn = self.open.pop(batch.producer_id, None)
        if txn is None or txn.first_offset != first_offset:
            txn = Transaction(batch.producer_id, batch.producer_epoch, first_offset, complete=False)
        marker = batch.records_reading_controls()[0]  # the state accepted the marker, so it has a readable record
        txn.state = ABORTED if marker.control.name == "ABORT" else COMMITTED
        txn.marker_offset = batch.base_offset
        txn.marker_epoch = batch.producer_epoch
        txn.coordinator_epoch = marker.control.coordinator_epoch
        txn.end_timestamp = marker.timestamp
        if aborted is not None:
            txn.last_stable_offset = aborted.last_stable_offset
        self.done.append(txn)


# ---------------------------------------------------------------------------------------------
# Cross-check with the .txnindex files
# ---------------------------------------------------------------------------------------------


def _cross_check(result: PartitionTransactions, index_path, log_path, computed: list[AbortedTxn],
                 exact: bool) -> None:
    """Compare the aborted transactions whose ABORT marker is in a segment with its .txnindex."""
    indexed: list[AbortedTxn] = []
    if index_path is not None:
        try:
            index = txn_index.TransactionIndex(index_path)
            indexed = index.entries()
        except KafkaLogError as exc:
            result.findings.append(Finding(ERROR, "txnindex-unreadable", exc.message, path=os.fspath(index_path),
                                           position=exc.position))
            return
        if index.trailing_bytes:
            result.findings.append(Finding(WARNING, "txnindex-partial-entry",
                                           f"{index.trailing_bytes} trailing bytes after the last 34-byte entry",
                                           path=os.fspath(index_path), position=index.entry_count * 34))
    # without an exact starting state, transactions opened before the first segment are unknown
    severity = ERROR if exact else WARNING
    where = os.fspath(index_path if index_path is not None else log_path)
    by_marker = {(e.producer_id, e.last_offset): e for e in indexed}
    for txn in computed:
        entry = by_marker.pop((txn.producer_id, txn.last_offset), None)
        if entry is None:
            result.findings.append(Finding(
                severity, "aborted-txn-not-indexed",
                f"the transaction of producer {txn.producer_id} from offset {txn.first_offset} aborted at "
                f"offset {txn.last_offset} is missing from the .txnindex",
                path=where, producer_id=txn.producer_id, offset=txn.last_offset))
            continue
        for name in ("first_offset", "last_stable_offset"):
            if getattr(entry, name) != getattr(txn, name):
                result.findings.append(Finding(
                    severity, "txnindex-mismatch",
                    f"the .txnindex entry for producer {txn.producer_id}'s abort at offset {txn.last_offset} has "
                    f"{name} {getattr(entry, name)}, the log gives {getattr(txn, name)}",
                    path=where, position=entry.position, producer_id=txn.producer_id, offset=txn.last_offset))
    for entry in by_marker.values():
        result.findings.append(Finding(
            severity, "txnindex-extra-entry",
            f"the .txnindex lists an aborted transaction of producer {entry.producer_id} (offsets "
            f"{entry.first_offset}..{entry.last_offset}) that the log does not abort there",
            path=where, position=entry.position, producer_id=entry.producer_id, offset=entry.last_offset))
