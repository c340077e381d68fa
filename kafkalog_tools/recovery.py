"""Rebuilding a segment's `.index`, `.timeindex` and `.txnindex` exactly as Kafka's recovery does.

Sources: storage/.../log/LogSegment.java (recover), ProducerStateManager.java, ProducerAppendInfo.java,
ProducerStateEntry.java [3.8]; FORMAT.md section 4.2.

`LogSegment.recover` walks the shallow batches of a segment (each uncompressed V0/V1 message is its
own batch) and stops at the first one whose CRC or structure is bad. At the start of every batch
that lies more than `index.interval.bytes` past the last indexed one it appends
(batch last offset, position) to the offset index and the running (max timestamp, its batch's last
offset) to the time index; after the walk it appends the final (max timestamp, offset) entry.
Aborted transactions come from the producer state, which is carried through the partition from its
first segment (or from a `.snapshot`): an ABORT marker that ends a non-empty transaction is indexed
with the last stable offset of that moment.

Writing is atomic: a temp file in the target directory, fsync, rename, fsync of the directory, so a
crash leaves the old file or the new one. A replaced file is kept as a hard-linked backup.
"""
from __future__ import annotations

import os
from array import array
import shutil
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from . import codecs
from .errors import CorruptDataError, DecompressionError, InputError, KafkaLogError
from .formats import checkpoint, offset_index, producer_snapshot, time_index, txn_index
from .formats.index_file import read_index_bytes
from .schema import derive_struct, struct_fields
from .formats.batch import INT32_MAX, Batch, java_int, java_long
from .formats.control import NullControlFieldError
from .formats.logdir import LOCAL, LocalFiles, LogDir, PartitionDir, Segment, classify, read_partition_dir
from .native import bulk_scan
from .formats.record_batch import (ATTR_CONTROL, ATTR_TRANSACTIONAL, HEADER, HEADER_SIZE, RecordBatchV2,
                                   VarintTooLongError, parse_batch)
from .formats.segment import HEADER_SIZE_UP_TO_MAGIC as SEGMENT_HEADER_UP_TO_MAGIC, LOG_OVERHEAD, MIN_ENTRY_SIZE
from .formats.segment import BadEntry, SegmentFile, Stop, offset_from_name
from .formats.txn_index import AbortedTxn, AbortedTxns

DEFAULT_INDEX_INTERVAL_BYTES = 4096  # log.index.interval.bytes
PROGRESS_STEP = 8 << 20
_ATTRIBUTES, _LAST_OFFSET_DELTA, _PRODUCER_ID, _RECORDS_COUNT = 5, 6, 9, 12
"""Fields of `record_batch.HEADER`."""

ProgressCallback = Callable[[int], None]


# ---------------------------------------------------------------------------------------------
# Producer state: the part of ProducerStateManager that recovery and verification need
# ---------------------------------------------------------------------------------------------


class ProducerStateError(CorruptDataError):
    """The log breaks a producer-state rule that makes Kafka's loading throw (not truncate)."""


class InvalidOffsetError(KafkaLogError):
    """Kafka's InvalidOffsetException from an index append during recovery: the loader's recovery
    after an unclean shutdown (LogLoader.recoverLog) catches it and empties the segment; recovering
    a segment without its .index does not."""


def marker_records(batch: Batch) -> list:
    """A control batch's records as ProducerAppendInfo reads its marker. DefaultRecordBatch.iterator
    asks for the codec before it reads a record, and CompressionType.forId's IllegalArgumentException
    is not caught by LogSegment.recover: an unknown codec fails the recovery, as a marker without a
    key or value (a NullPointerException) or with a varint too long (an IllegalArgumentException) does, where
    an unreadable record cuts the log after the marker. Only the first record is read: what follows
    it, however damaged, is Kafka's concern only when something reads the batch's records, unless
    the count says 1, when bytes after the record are an InvalidRecordException too (all found by the
    differential run against Kafka)."""
    if isinstance(batch, RecordBatchV2) and batch.count != 0 and batch.compression_id not in codecs.NAMES:
        raise ProducerStateError(f"Unknown compression type id: {batch.compression_id}", path=batch.path,
                                 position=batch.position + 21, expected="0-4", actual=batch.compression_id)
    try:
        if isinstance(batch, RecordBatchV2) and batch.count < 0 and batch.compression_id:
            # the iterator opens the decompressing stream (which reads its header) before it checks the count
            try:
                codecs.open_stream(batch.compression_id, batch.source[batch.position + HEADER_SIZE:batch.end])
            except DecompressionError as exc:
                raise exc.located(batch.path, batch.position + HEADER_SIZE) from None
        return batch.records_reading_controls()
    except DecompressionError as exc:  # a KafkaException ("Failed to decompress record stream", ...)
        raise ProducerStateError(f"KafkaException reading the marker: {exc.message}", path=exc.path,
                                 position=exc.position) from None
    except CorruptDataError as exc:
        if getattr(exc, "records_before", None) and batch.count != 1:
            # ProducerAppendInfo reads the marker, the first record, and no more; but where it is the only
            # one declared, the iterator checks on reading it that nothing follows (ensureNoneRemaining)
            return exc.records_before[:1]
        if isinstance(exc, NullControlFieldError):  # a NullPointerException
            raise ProducerStateError(f"NullPointerException reading the marker: {exc.message}", path=exc.path,
                                     position=exc.position, expected="a control key and marker value", actual="null") from None
        if isinstance(exc, VarintTooLongError):
            raise ProducerStateError(f"IllegalArgumentException reading the marker: {exc.message}", path=exc.path,
                                     position=exc.position) from None
        raise


@dataclass(slots=True)
class ProducerStatus:
    """ProducerStateEntry: a producer's epoch, its last batch and its open transaction, if any."""

    producer_id: int
    epoch: int = -1
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    last_sequence: int = -1
    last_offset: int = -1
    """Last offset of the producer's last data batch (-1: no batch metadata, e.g. after a new epoch)."""
    offset_delta: int = 0

    def copy(self) -> "ProducerStatus":
        """(dataclasses.replace costs ~15 times as much: `apply` copies one per batch)"""
        return ProducerStatus(self.producer_id, self.epoch, self.coordinator_epoch, self.last_timestamp,
                              self.current_txn_first_offset, self.last_sequence, self.last_offset, self.offset_delta)

    def set_epoch(self, epoch: int) -> None:
        """maybeUpdateProducerEpoch: a new epoch forgets the batch metadata of the old one."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.last_sequence, self.last_offset, self.offset_delta = -1, -1, 0

    def as_snapshot_entry(self) -> producer_snapshot.ProducerEntry:
        return producer_snapshot.ProducerEntry(
            self.producer_id, self.epoch, self.last_sequence, self.last_offset, self.offset_delta,
            self.last_timestamp, self.coordinator_epoch,
            -1 if self.current_txn_first_offset is None else self.current_txn_first_offset,
        )


class ProducerTable:
    """Producers as columns, `bulk_scan.PRODUCER_FIELDS` (`replayed` kept 0), sorted by producer id:
    what the bulk runs read and move (`plan_run`, `replay_rows`, `commit_run`) without making a
    ProducerStatus per producer per run, which cost ~1.5 ms a run for 300 producers."""

    def __init__(self, fields):
        self.fields = fields

    @staticmethod
    def row(status: ProducerStatus) -> tuple:
        return (status.producer_id, status.epoch, status.coordinator_epoch, status.last_timestamp,
                status.current_txn_first_offset is not None, status.current_txn_first_offset or 0,
                status.last_sequence, status.last_offset, status.offset_delta, 0)

    @staticmethod
    def status_of(row: list[int]) -> ProducerStatus:
        producer_id, epoch, coordinator_epoch, timestamp, in_transaction, first_offset, sequence, offset, delta, _ = row
        return ProducerStatus(producer_id, epoch, coordinator_epoch, timestamp,
                              first_offset if in_transaction else None, sequence, offset, delta)

    @classmethod
    def of(cls, statuses: Iterable[ProducerStatus]) -> "ProducerTable":
        import numpy as np

        rows = sorted(cls.row(status) for status in statuses)
        return cls(np.array(rows, dtype=np.int64).reshape(-1, len(bulk_scan.PRODUCER_FIELDS)).T.copy())

    def statuses(self) -> dict[int, ProducerStatus]:
        return {row[0]: self.status_of(row) for row in self.fields.T.tolist()}

    def status(self, producer_id: int) -> ProducerStatus | None:
        import numpy as np

        at, found = self._find(np.array([producer_id], dtype=np.int64))
        return self.status_of(self.fields[:, at[0]].tolist()) if found[0] else None

    def _find(self, producer_ids):
        """Where each of `producer_ids` is or would go, and whether it is there."""
        import numpy as np

        ids = self.fields[bulk_scan.P_PRODUCER_ID]
        at = np.searchsorted(ids, producer_ids)
        if not len(ids):
            return at, np.zeros(len(producer_ids), dtype=bool)
        return at, ids[np.minimum(at, len(ids) - 1)] == producer_ids

    def get(self, producer_ids):
        """These producers' columns (a copy), as `ProducerStatus(producer_id)` where unknown."""
        import numpy as np

        at, found = self._find(producer_ids)
        if not self.fields.shape[1]:
            columns = np.empty((len(bulk_scan.PRODUCER_FIELDS), len(producer_ids)), dtype=np.int64)
        else:
            columns = self.fields.take(np.minimum(at, self.fields.shape[1] - 1), axis=1)
        if not found.all():
            unknown = ~found
            columns[:, unknown] = np.array(self.row(ProducerStatus(0)), dtype=np.int64)[:, None]
            columns[bulk_scan.P_PRODUCER_ID, unknown] = producer_ids[unknown]
        return columns

    def put(self, columns) -> None:
        """Set these producers (distinct ids), adding those not known yet."""
        import numpy as np

        at, found = self._find(columns[bulk_scan.P_PRODUCER_ID])
        self.fields[:, at[found]] = columns[:, found]
        self.fields[bulk_scan.P_REPLAYED, at[found]] = 0
        if not found.all():
            merged = np.concatenate([self.fields, columns[:, ~found]], axis=1)
            merged[bulk_scan.P_REPLAYED] = 0
            self.fields = merged.take(np.argsort(merged[bulk_scan.P_PRODUCER_ID]), axis=1)

    def copy(self) -> "ProducerTable":
        return ProducerTable(self.fields.copy())


Anomaly = Callable[[str, str, Batch], None]
"""Called with (kind, message, batch) for what Kafka's replication path only logs."""

EPOCH_DECREASED = "producer-epoch-decreased"
COORDINATOR_EPOCH_DECREASED = "coordinator-epoch-decreased"
SEQUENCE_GAP = "producer-sequence-gap"


class ProducerState:
    """Producers and open transactions, replayed batch by batch as recovery replays them
    (AppendOrigin.REPLICATION: epoch problems are logged, not rejected)."""

    def __init__(self, on_anomaly: Anomaly | None = None):
        self._table: ProducerTable | None = None
        """The producers the bulk runs moved last (None: `_statuses` holds every producer)."""
        self._statuses: dict[int, ProducerStatus] = {}
        """Every producer, or with a `_table`, those `apply` moved since, over the table's."""
        self.ongoing: dict[int, int] = {}
        """first offset of each open transaction -> producer id (Kafka's ongoingTxns TreeMap)."""
        self.completed: list[tuple[int, int]] = []
        """(first offset, marker offset) of each transaction a marker closed since this state was
        loaded: Kafka's unreplicatedTxns, until the high watermark passes the marker."""
        self.on_anomaly = on_anomaly

    @classmethod
    def from_snapshot(cls, snapshot: producer_snapshot.ProducerSnapshot,
                      on_anomaly: Anomaly | None = None) -> "ProducerState":
        """ProducerStateManager.loadFromSnapshot (expiry aside: it never drops an open transaction)."""
        state = cls(on_anomaly)
        for entry in snapshot.entries:
            status = ProducerStatus(entry.producer_id, entry.epoch, entry.coordinator_epoch, entry.timestamp,
                                    entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None)
            if entry.has_batch_metadata:
                status.last_sequence, status.last_offset, status.offset_delta = (
                    entry.last_sequence, entry.last_offset, entry.offset_delta)
            state.producers[entry.producer_id] = status
            if status.current_txn_first_offset is not None:
                state.ongoing[status.current_txn_first_offset] = entry.producer_id
        return state

    @property
    def producers(self) -> dict[int, ProducerStatus]:
        """Each producer's status, by producer id (the bulk runs' table turned into them first)."""
        if self._table is not None:
            statuses = self._table.statuses()
            statuses.update(self._statuses)
            self._statuses, self._table = statuses, None
        return self._statuses

    def _bulk_table(self) -> ProducerTable:
        """The producers as a table, with those `apply` moved since folded in."""
        if self._table is None:
            self._table, self._statuses = ProducerTable.of(self._statuses.values()), {}
        elif self._statuses:
            self._table.put(ProducerTable.of(self._statuses.values()).fields)
            self._statuses = {}
        return self._table

    def apply(self, batch: Batch) -> AbortedTxn | None:
        """Replay one batch; return the aborted transaction it ends, if any, for the txn index.

        Raises ProducerStateError where Kafka throws, CorruptDataError when a control record
        cannot be read (Kafka's recovery stops there), and leaves the state unchanged then.
        """
        if batch.magic < 2 or batch.producer_id < 0:
            return None
        current = self._statuses.get(batch.producer_id)
        if current is None and self._table is not None:
            current = self._table.status(batch.producer_id)
        status = ProducerStatus(batch.producer_id) if current is None else current.copy()
        if batch.is_control:
            aborted = self._apply_marker(batch, status)
        else:
            self._apply_data(batch, status)
            aborted = None
        self._statuses[batch.producer_id] = status  # over the table's, if any
        return aborted

    def plan_run(self, columns, last) -> "RunPlan":
        """How a run of clean V2 batches read by the bulk scan (`bulk_scan.COLUMNS`; `last`: their
        last offsets) moves the producers: the rows that `apply` must replay one at a time, in file
        order, and the others, whose producers just end as their last batch in the run leaves them.

        Producers are independent but for the open transactions (`ongoing`), which only
        transactional batches and markers touch. So a producer goes apart, all its batches in the
        run, when one of them is transactional or a marker, when its transaction is open (its next
        batch must belong to it, or Kafka throws), or, where anomalies are reported, when
        `_apply_data`'s rules would report one. The compiled `producer_slots` and `plan_producers`
        decide it in one pass each; without the kernels, `_plan_in_numpy` (the reference)."""
        import numpy as np

        kernel = bulk_scan.kernel()
        if kernel is None:
            return self._plan_in_numpy(columns)
        if columns[bulk_scan.PRODUCER_ID].max(initial=-1) < 0:  # (a KRaft log's runs: no producer at all)
            none = np.zeros(0, dtype=np.int64)
            return RunPlan([], np.full(columns.shape[1], -1, dtype=np.int64), none.astype(bool), none)
        plan = np.ascontiguousarray(columns[[bulk_scan.PRODUCER_ID, bulk_scan.ATTRIBUTES, bulk_scan.PRODUCER_EPOCH,
                                             bulk_scan.BASE_SEQUENCE, bulk_scan.LAST_OFFSET_DELTA]])
        n = plan.shape[1]
        slots, ids, last_rows = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        count = kernel.producer_slots(plan, _slot_table(max(2, 1 << (2 * n - 1).bit_length())), slots, ids, last_rows)
        known = self._bulk_table().get(ids[:count])
        epochs, sequences, apart = (np.ascontiguousarray(known[field]) for field in (
            bulk_scan.P_EPOCH, bulk_scan.P_LAST_SEQUENCE, bulk_scan.P_IN_TRANSACTION))
        kernel.plan_producers(plan, slots, epochs, sequences, apart, self.on_anomaly is not None)
        return RunPlan.of(slots, apart != 0, last_rows[:count])

    def _plan_in_numpy(self, columns) -> "RunPlan":
        """`plan_run` in numpy: each producer's batches together (a stable sort), their flags per producer."""
        import numpy as np

        producer_ids = columns[bulk_scan.PRODUCER_ID]
        slots = np.full(len(producer_ids), -1, dtype=np.int64)
        rows = np.flatnonzero(producer_ids >= 0)
        if not len(rows):
            return RunPlan.of(slots, np.zeros(0, dtype=bool), rows)
        order = rows[np.argsort(producer_ids[rows], kind="stable")]  # each producer's batches, in file order
        grouped = producer_ids[order]
        firsts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
        slots[order] = np.repeat(np.arange(len(firsts)), np.diff(np.r_[firsts, len(order)]))
        known = self._bulk_table().get(grouped[firsts])
        apart = columns[bulk_scan.ATTRIBUTES, order] & (ATTR_TRANSACTIONAL | ATTR_CONTROL) != 0
        if self.on_anomaly is not None:
            apart |= self._anomalous(columns, order, firsts, known)
        apart_producer = np.logical_or.reduceat(apart, firsts)
        apart_producer |= known[bulk_scan.P_IN_TRANSACTION] != 0
        return RunPlan.of(slots, apart_producer, order[np.r_[firsts[1:], len(order)] - 1])

    def _anomalous(self, columns, order, firsts, known):
        """Per row of `order` (each producer's batches in file order, `firsts` where each starts,
        `known` their producers as the table holds them): whether `_apply_data` after the rows before
        it would report EPOCH_DECREASED or SEQUENCE_GAP."""
        import numpy as np

        epoch, base_sequence = columns[bulk_scan.PRODUCER_EPOCH, order], columns[bulk_scan.BASE_SEQUENCE, order]
        last_sequence = bulk_scan.last_sequences(base_sequence, columns[bulk_scan.LAST_OFFSET_DELTA, order])
        previous_epoch, previous_sequence = np.empty_like(epoch), np.empty_like(last_sequence)
        previous_epoch[1:], previous_sequence[1:] = epoch[:-1], last_sequence[:-1]
        previous_epoch[firsts] = known[bulk_scan.P_EPOCH]
        previous_sequence[firsts] = known[bulk_scan.P_LAST_SEQUENCE]
        checked = (previous_epoch >= 0) & (base_sequence >= 0)
        expected = np.where(previous_sequence == INT32_MAX, 0, previous_sequence + 1)
        gap = np.where(epoch != previous_epoch, base_sequence != 0, (previous_sequence >= 0) & (base_sequence != expected))
        return (epoch < previous_epoch) | (checked & gap)

    def commit_run(self, plan: "RunPlan", columns, last, stop: int | None = None) -> None:
        """Move the producers `plan` does not keep apart as their rows before `stop` (all: None)
        leave them: each ends as its last such batch (a data batch outside any transaction)."""
        import numpy as np

        if stop is None:
            rows = plan.last_rows[~plan.slot_apart]
        else:
            plain = plan.plain[plan.plain < stop]
            last_rows = np.full(len(plan.last_rows), -1, dtype=np.int64)
            np.maximum.at(last_rows, plan.slots[plain], plain)
            rows = last_rows[last_rows >= 0]
        if not len(rows):
            return
        k = bulk_scan
        base_offset, epoch, max_timestamp, producer_ids = columns[np.ix_(
            [k.BASE_OFFSET, k.PRODUCER_EPOCH, k.MAX_TIMESTAMP, k.PRODUCER_ID], rows)]
        table = self._bulk_table()
        moved = table.get(producer_ids)  # (a coordinator epoch stays)
        moved[k.P_EPOCH], moved[k.P_LAST_TIMESTAMP], moved[k.P_IN_TRANSACTION] = epoch, max_timestamp, 0
        moved[k.P_TRANSACTION_FIRST_OFFSET] = 0
        moved[k.P_LAST_SEQUENCE] = k.last_sequences(columns[k.BASE_SEQUENCE, rows], columns[k.LAST_OFFSET_DELTA, rows])
        moved[k.P_LAST_OFFSET] = last[rows]
        moved[k.P_OFFSET_DELTA] = moved[k.P_LAST_OFFSET] - base_offset
        table.put(moved)

    def replay_rows(self, columns, last, rows: list[int],
                    slow: Callable[[int], tuple[bool, "AbortedTxn | None"]]) -> tuple[int | None, AbortedTxns, object]:
        """`apply` on these rows of a run (`plan_run`'s `apart`), in order, read from the columns:
        transactional data batches and the markers the kernel read (`MARKER`), replayed by the
        compiled `replay_transactional`. A row that `apply` could report or raise on (an epoch or
        sequence out of order, a coordinator epoch that decreased, a non-transactional batch in an
        open transaction), or that is some other control batch, goes to `slow(row)`, which replays it
        as a batch and says whether to go on, and what transaction it aborted; so does every row where
        the kernels are not loaded (a Spark driver replaying its executors' runs). Returns the row
        `slow` stopped at (None: all done), the aborted transactions in order, and the rows of the
        ABORT markers replayed here (an int64 array)."""
        import numpy as np

        k = bulk_scan
        kernel = k.kernel()
        rows = np.asarray(rows, dtype=np.int64)
        picked = columns[np.ix_([k.BASE_OFFSET, k.PRODUCER_EPOCH, k.BASE_SEQUENCE, k.LAST_OFFSET_DELTA, k.ATTRIBUTES,
                                 k.MAX_TIMESTAMP, k.BASE_TIMESTAMP, k.MARKER, k.COORDINATOR_EPOCH, k.PRODUCER_ID], rows)]
        batches = np.empty((len(k.REPLAY_FIELDS), len(rows)), dtype=np.int64)
        batches[[k.RP_BASE_OFFSET, k.RP_EPOCH, k.RP_BASE_SEQUENCE]] = picked[:3]
        batches[k.RP_LAST_OFFSET] = last[rows]
        batches[k.RP_LAST_SEQUENCE] = k.last_sequences(picked[2], picked[3])
        batches[[k.RP_ATTRIBUTES, k.RP_MAX_TIMESTAMP, k.RP_BASE_TIMESTAMP, k.RP_MARKER,
                 k.RP_COORDINATOR_EPOCH]] = picked[4:9]
        producer_ids, batches[k.RP_PRODUCER] = np.unique(picked[9], return_inverse=True)
        aborted, abort_rows, start = AbortedTxns(), [], 0
        while start < len(rows):
            stop = start if kernel is None else self._replay_compiled(kernel, batches, start, producer_ids, aborted,
                                                                       abort_rows, rows)
            if stop == len(rows):
                break
            go_on, txn = slow(int(rows[stop]))
            if not go_on:
                return int(rows[stop]), aborted, np.concatenate(abort_rows or [rows[:0]])
            if txn is not None:
                aborted.append(txn)
            start = stop + 1
        return None, aborted, np.concatenate(abort_rows or [rows[:0]])

    def _replay_compiled(self, kernel, batches, start: int, producer_ids, aborted: AbortedTxns, abort_rows: list,
                         rows) -> int:
        """`replay_transactional` from batch `start` up to the first it leaves to `apply` (returned),
        with this state's producers and open transactions, which it then moves as it moved them."""
        import numpy as np

        k = bulk_scan
        table = self._bulk_table()
        producers = table.get(producer_ids)
        count = len(rows) - start
        ongoing = np.empty((len(k.ONGOING_FIELDS), len(self.ongoing) + count), dtype=np.int64)
        ongoing[:, :len(self.ongoing)] = (list(self.ongoing), list(self.ongoing.values()), [1] * len(self.ongoing),
                                          [-1] * len(self.ongoing))
        found = np.empty((len(k.ABORTED_FIELDS), len(rows)), dtype=np.int64)
        abort_markers = np.empty(len(rows), dtype=np.int64)
        state = np.zeros(k.REPLAY_STATE, dtype=np.int64)
        state[k.REPLAY_ONGOING] = len(self.ongoing)
        stop = kernel.replay_transactional(batches, start, producers, ongoing, found, abort_markers, state)
        table.put(producers[:, producers[k.P_REPLAYED] == 1])
        used = ongoing[:, :state[k.REPLAY_ONGOING]]
        self.ongoing.clear()
        self.ongoing.update(zip(*used[:2, used[k.O_OPEN] == 1].tolist()))
        closed = used[np.ix_([k.O_FIRST_OFFSET, k.O_CLOSED_AT], np.flatnonzero(used[k.O_OPEN] == 0))]
        self.completed.extend(zip(*closed[:, np.argsort(closed[1])].tolist()))  # in the markers' order
        aborted.extend_columns(found[:, :state[k.REPLAY_ABORTED]])
        abort_rows.append(rows[abort_markers[:state[k.REPLAY_ABORT_MARKERS]]])
        return stop

    def saved(self) -> tuple:
        """What `restore` needs to undo `apply` and the bulk runs (`apply` changes no ProducerStatus
        in place: it puts a new one)."""
        table = None if self._table is None else self._table.copy()
        return table, dict(self._statuses), dict(self.ongoing), len(self.completed)

    def restore(self, saved: tuple) -> None:
        """Back to `saved`; a fresh state restored from a snapshot's has completed no transaction."""
        table, statuses, ongoing, completed = saved
        self._table = None if table is None else table.copy()
        self._statuses = dict(statuses)
        self.ongoing.clear()
        self.ongoing.update(ongoing)
        del self.completed[completed:]

    def _apply_data(self, batch: Batch, status: ProducerStatus) -> None:
        self._check_epoch(batch, status)
        self._check_sequence(batch, status)
        status.set_epoch(batch.producer_epoch)
        status.last_sequence, status.last_offset = batch.last_sequence, batch.last_offset
        status.offset_delta = java_int(batch.last_offset - batch.base_offset)  # Kafka's (int) of the long difference
        status.last_timestamp = batch.max_timestamp
        if status.current_txn_first_offset is not None and not batch.is_transactional:
            raise ProducerStateError(
                f"Expected transactional write from producer {batch.producer_id} at offset {batch.base_offset}: "
                f"its transaction opened at offset {status.current_txn_first_offset} has no marker yet",
                path=batch.path, position=batch.position, expected="a transactional batch or a marker",
                actual="a non-transactional batch",
            )
        if status.current_txn_first_offset is None and batch.is_transactional:
            status.current_txn_first_offset = batch.base_offset
            self.ongoing[batch.base_offset] = batch.producer_id

    def _apply_marker(self, batch: Batch, status: ProducerStatus) -> AbortedTxn | None:
        records = marker_records(batch)
        if not records:
            return None  # the cleaner emptied it: the whole transaction is gone
        marker = records[0].control
        if marker is None or marker.name not in ("ABORT", "COMMIT"):
            raise ProducerStateError(
                f"Invalid control record type for end transaction marker: {marker.name if marker else None}",
                path=batch.path, position=batch.position, expected="ABORT or COMMIT",
                actual=marker.name if marker else None,
            )
        self._check_epoch(batch, status)
        if status.coordinator_epoch > marker.coordinator_epoch:
            self._anomaly(COORDINATOR_EPOCH_DECREASED,
                          f"marker of producer {batch.producer_id} at offset {batch.base_offset} has coordinator "
                          f"epoch {marker.coordinator_epoch}, older than {status.coordinator_epoch}", batch)
        first_offset = status.current_txn_first_offset
        status.set_epoch(batch.producer_epoch)
        status.coordinator_epoch = marker.coordinator_epoch
        status.current_txn_first_offset = None
        status.last_timestamp = records[0].timestamp
        if first_offset is None:
            return None  # a marker without data changes neither the LSO nor the index
        last_stable_offset = self.last_stable_offset(batch.producer_id, batch.base_offset)
        self.ongoing.pop(first_offset, None)
        self.completed.append((first_offset, batch.base_offset))
        if marker.name != "ABORT":
            return None
        return AbortedTxn(txn_index.CURRENT_VERSION, batch.producer_id, first_offset, batch.base_offset,
                          last_stable_offset)

    def last_stable_offset(self, producer_id: int, marker_offset: int) -> int:
        """The first offset of the earliest transaction another producer still has open, else the
        offset after the marker (ProducerStateManager.lastStableOffset)."""
        others = [first for first, owner in self.ongoing.items() if owner != producer_id]
        return min(others) if others else marker_offset + 1

    def _check_epoch(self, batch: Batch, status: ProducerStatus) -> None:
        if batch.producer_epoch < status.epoch:
            self._anomaly(EPOCH_DECREASED,
                          f"producer {batch.producer_id} at offset {batch.base_offset} has epoch "
                          f"{batch.producer_epoch}, lower than its last epoch {status.epoch}", batch)

    def _check_sequence(self, batch: Batch, status: ProducerStatus) -> None:
        """ProducerAppendInfo.checkSequence (enforced for clients only; replication just trusts it)."""
        if _in_sequence(status, batch.producer_epoch, batch.base_sequence):
            return
        if batch.producer_epoch != status.epoch:
            self._anomaly(SEQUENCE_GAP, f"producer {batch.producer_id} starts epoch {batch.producer_epoch} at offset "
                          f"{batch.base_offset} with sequence {batch.base_sequence}, not 0", batch)
        else:
            self._anomaly(SEQUENCE_GAP, f"producer {batch.producer_id} epoch {batch.producer_epoch} at offset "
                          f"{batch.base_offset} has sequence {batch.base_sequence}, expected "
                          f"{_next_sequence(status.last_sequence)}", batch)

    def _anomaly(self, kind: str, message: str, batch: Batch) -> None:
        if self.on_anomaly is not None:
            self.on_anomaly(kind, message, batch)

    def expire(self, now: int, expiration_ms: int) -> None:
        """ProducerStateManager.loadFromSnapshot's filter (isProducerExpired): a producer without an
        open transaction whose last write is `expiration_ms` or more before `now` is dropped."""
        for pid in [pid for pid, status in self.producers.items()
                    if status.current_txn_first_offset is None and now - status.last_timestamp >= expiration_ms]:
            del self.producers[pid]

    def snapshot_entries(self) -> dict[int, producer_snapshot.ProducerEntry]:
        return {pid: status.as_snapshot_entry() for pid, status in self.producers.items()}


def _in_sequence(status: ProducerStatus, epoch: int, base_sequence: int) -> bool:
    """Whether a data batch of `epoch` starting at `base_sequence` follows the producer's last one
    (`_check_sequence` reports a SEQUENCE_GAP where not)."""
    if status.epoch < 0 or base_sequence < 0:
        return True
    if epoch != status.epoch:
        return base_sequence == 0
    return status.last_sequence < 0 or base_sequence == _next_sequence(status.last_sequence)


def _next_sequence(last_sequence: int) -> int:
    return 0 if last_sequence == INT32_MAX else last_sequence + 1


_TABLES = threading.local()


def _slot_table(size: int):
    """`producer_slots`' hash table of `size` slots, cleared, this thread's, kept from run to run: a
    fresh one (512 KiB for a run of 32,768 batches) cost its page faults every run."""
    import numpy as np

    table = getattr(_TABLES, "table", None)
    if table is None or table.size < size:
        table = _TABLES.table = np.empty(size, dtype=np.int64)
    table = table[:size]
    table.fill(0)
    return table


@dataclass
class RunPlan:
    """`ProducerState.plan_run`'s answer for a run of batches (rows of its columns)."""

    apart: list[int]
    """Rows `apply` replays one at a time, in file order: every batch of those producers in the run."""
    slots: object
    """Each row's producer's slot (numpy; -1: no producer id)."""
    slot_apart: object
    """Per slot: whether that producer's rows are `apart` (numpy bool)."""
    last_rows: object
    """Per slot: its producer's last row in the run (numpy)."""

    @classmethod
    def of(cls, slots, slot_apart, last_rows) -> "RunPlan":
        import numpy as np

        return cls(np.flatnonzero(np.append(slot_apart, False)[slots]).tolist(), slots, slot_apart, last_rows)

    @property
    def plain(self):
        """The rows of the producers not kept apart, in file order (numpy)."""
        import numpy as np

        return np.flatnonzero((self.slots >= 0) & ~np.append(self.slot_apart, True)[self.slots])


# ---------------------------------------------------------------------------------------------
# One segment: LogSegment.recover
# ---------------------------------------------------------------------------------------------


class EntryColumns:
    """Index entries as two int64 columns, (offset, position) or (timestamp, offset): a 1 GiB
    segment of small batches gets ~260k entries, which as tuples cost ~25 MB and a loop to pack."""

    def __init__(self, entries: Iterable[tuple[int, int]] = ()):
        self.first, self.second = array("q"), array("q")
        for entry in entries:
            self.append(entry)

    def append(self, entry: tuple[int, int]) -> None:
        self.first.append(entry[0])
        self.second.append(entry[1])

    def extend_columns(self, first, second) -> None:
        """From int64 numpy columns."""
        self.first.frombytes(first.tobytes())
        self.second.frombytes(second.tobytes())

    def __len__(self) -> int:
        return len(self.first)

    def __getitem__(self, slot: int) -> tuple[int, int]:
        return self.first[slot], self.second[slot]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.first, self.second)

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    def __repr__(self) -> str:
        return f"EntryColumns({list(self)!r})"

    def pack(self, schema, *fields) -> bytes:
        """The index file's bytes: each entry laid out by `schema`, whose two fields take the first
        and the second column; a field given as (name, base) stores the value minus base. numpy
        packs many entries; a few need not import it."""
        bases = {name: base for name, base in (spec if isinstance(spec, tuple) else (spec, 0) for spec in fields)}
        names = [spec[0] if isinstance(spec, tuple) else spec for spec in fields]
        if len(self) < 1000:
            layout = derive_struct(schema)
            order = [name for name, _ in struct_fields(schema)]
            return b"".join(layout.pack(*(values[names.index(name)] - bases[name] for name in order))
                            for values in self)
        import numpy as np

        from .formats.index_file import entry_dtype

        entries = np.empty(len(self), dtype=entry_dtype(schema))
        for column, spec in zip((self.first, self.second), fields):
            name, base = spec if isinstance(spec, tuple) else (spec, 0)
            entries[name] = np.frombuffer(column, dtype=np.int64) - base if len(column) else []
        return entries.tobytes()


@dataclass
class LeaderEpochs:
    """The partition's LeaderEpochFileCache as recovery uses it: its latest epoch (-1: none).
    LogSegment.recover assigns each V2 batch's partition leader epoch above the latest, from the
    batch's base offset, and `assign` throws an IllegalArgumentException, which recovery does not
    catch, for a negative start offset (found by the differential run: seed 19020, case 1011)."""

    latest: int = -1

    @classmethod
    def of(cls, partition: PartitionDir) -> "LeaderEpochs":
        """As the partition's leader-epoch-checkpoint starts it (none where it is absent or unreadable)."""
        path = partition.files.get(checkpoint.LEADER_EPOCH_CHECKPOINT)
        try:
            epochs = [] if path is None else checkpoint.read_leader_epochs(path)
        except (KafkaLogError, OSError):
            epochs = []
        return cls(max((epoch for epoch, _ in epochs), default=-1))

    def assign(self, batch: Batch) -> None:
        epoch = batch.partition_leader_epoch
        if batch.magic < 2 or epoch < 0 or epoch <= self.latest:
            return
        if batch.base_offset < 0:
            raise KafkaLogError(f"IllegalArgumentException: Received invalid partition leader epoch entry "
                                f"EpochEntry(epoch={epoch}, startOffset={batch.base_offset})", path=batch.path,
                                position=batch.position, expected="a start offset >= 0", actual=batch.base_offset)
        self.latest = epoch


@dataclass
class SegmentRecovery:
    """What recovery makes of one segment: its valid prefix and the three indexes over it."""

    log_path: str
    base_offset: int
    file_size: int
    valid_bytes: int = 0
    batches: int = 0
    offset_entries: "EntryColumns" = field(default_factory=lambda: EntryColumns())
    """(absolute offset, position)"""
    time_entries: "EntryColumns" = field(default_factory=lambda: EntryColumns())
    """(timestamp, absolute offset)"""
    aborted_txns: list[AbortedTxn] = field(default_factory=list)
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    invalid: CorruptDataError | None = None
    """Why the valid prefix ends before the end of the file: Kafka truncates there."""
    failure: KafkaLogError | None = None
    """Kafka's recovery would throw here rather than truncate; nothing should be written."""
    next_offset: int | None = None
    """readNextOffset of the recovered segment (its log end offset when it is the last)."""
    map_end_offset: int | None = None
    """The producer state's map end offset after the walk (updateProducerState): past the last V2
    batch whose update completed, None without one. The loader snapshots the state there, which is
    before a marker that made the walk stop."""

    @property
    def truncated_bytes(self) -> int:
        return self.file_size - self.valid_bytes

    def index_bytes(self) -> bytes:
        return self.offset_entries.pack(offset_index.ENTRY_SCHEMA, ("relative_offset", self.base_offset), "position")

    def timeindex_bytes(self) -> bytes:
        return self.time_entries.pack(time_index.ENTRY_SCHEMA, "timestamp", ("relative_offset", self.base_offset))

    def txnindex_bytes(self) -> bytes:
        return txn_index.build(self.aborted_txns)

    def add_aborted(self, txns: list[AbortedTxn], path: str, position: int | None) -> None:
        """TransactionIndex.append: each aborted transaction's last offset above the one before, else
        an IllegalArgumentException that recovery does not catch (found by the differential run:
        a batch repeated later in the log, seed 1648123951, case 11)."""
        refused = self.first_refused(txns)
        self.aborted_txns.extend(txns[:refused])
        if refused is not None:
            raise ProducerStateError(
                "IllegalArgumentException appending to the transaction index: the last offset of appended "
                f"transactions must increase sequentially, but {txns[refused].last_offset} is not greater than "
                f"current last offset {self.aborted_txns[-1].last_offset}", path=path, position=position)

    def first_refused(self, txns: list[AbortedTxn]) -> int | None:
        """Which of `txns`, appended after those so far, TransactionIndex.append would refuse first."""
        before = self.aborted_txns[-1].last_offset if self.aborted_txns else None
        for at, txn in enumerate(txns):
            if before is not None and txn.last_offset <= before:
                return at
            before = txn.last_offset
        return None


def recover_segment(segment: SegmentFile, producer_state: ProducerState,
                    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                    on_progress: ProgressCallback | None = None, epochs: LeaderEpochs | None = None) -> SegmentRecovery:
    """LogSegment.recover over an opened segment; the producer state and leader epochs (None: a
    partition without any yet) are advanced in place."""
    base = segment.base_offset
    if base is None:
        raise InputError("segment file name does not start with a base offset", path=segment.path)
    result = SegmentRecovery(segment.path, base, segment.file_size)
    walk = _RecoveryWalk(segment, result, producer_state, index_interval_bytes, on_progress,
                         LeaderEpochs() if epochs is None else epochs)
    bulk = _RecoveryInBulk(walk) if bulk_scan.wanted(segment.buffer, segment.end, records=False) else None
    try:
        position: int | None = 0
        while position is not None:
            if bulk is not None:
                position = bulk.recover_from(position)
                if position is None:
                    break
            position = walk.one_by_one(position, bulk.then_one_by_one if bulk is not None else None)
            walk.report()
    except KafkaLogError as exc:
        result.failure = exc
        return result
    finally:
        if bulk is not None:
            bulk.close()
        if on_progress is not None:
            on_progress(segment.file_size - walk.reported)
    if result.invalid is None and result.valid_bytes < segment.file_size:
        result.invalid = _tail_problem(segment)
    # the final "max timestamp" entry that closing a segment writes: TimeIndex.maybeAppend checks the
    # offset before it looks at the timestamp, and recovery does not catch what it throws
    try:
        maybe_append_time_entry(result, segment.path, result.valid_bytes)
        _read_next_offset(segment, result)
    except KafkaLogError as exc:
        result.failure = exc
    return result


def _read_next_offset(segment: SegmentFile, result: SegmentRecovery) -> None:
    """LogSegment.readNextOffset, which the loader asks of a segment it recovered, over the recovered
    index and the valid prefix, where a wrapper it cannot read makes the recovery fail."""
    target, position = result.offset_entries[-1] if result.offset_entries else (result.base_offset, 0)
    result.next_offset = read_next_offset(segment, target, position, result.valid_bytes)


_INT32, _INT64 = struct.Struct(">i"), struct.Struct(">q")
_V2_HEADER_SIZE = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD: what FileChannelRecordBatch loads for lastOffset
_LAST_OFFSET_DELTA_AT = 23
_LEGACY_ATTRIBUTES_AT = LOG_OVERHEAD + 5  # after the CRC and the magic byte


def read_next_offset(segment: SegmentFile, target: int, position: int, end: int | None = None) -> int:
    """LogSegment.readNextOffset: read(`target`, the offset index's last offset, from `position`,
    its lookup's position) then the last batch's nextOffset; the base offset when no batch from
    there ends at or after the target. Only the shallow headers are read, as FileLogInputStream
    reads them (no CRC is checked), from the position to `end` (the file's end, or the valid
    prefix of a recovered segment). Raises KafkaLogError where Kafka throws: an entry size below 14,
    a V2 header cut by the end of the file, a V0/V1 wrapper whose first offset cannot be read
    (found by the differential run against Kafka)."""
    end = segment.end if end is None else end
    found = translate_offset(segment, target, position, end)
    if found is None:
        return segment.base_offset if segment.base_offset is not None else 0
    last = found
    for last, _, _ in shallow_entries(segment, found, end):
        pass
    return entry_last_offset(segment, last) + 1


def translate_offset(segment: SegmentFile, target: int, position: int, end: int) -> int | None:
    """LogSegment.translateOffset from `position` (its offset index lookup's): where the first entry
    whose last offset reaches `target` starts (FileRecords.searchForOffsetFromPosition, which also
    asks that entry for its base offset), None when no entry before `end` does."""
    for entry_position, _, _ in shallow_entries(segment, max(position, 0), end):
        if entry_last_offset(segment, entry_position) >= target:
            first_offset(segment, entry_position, "reading the segment's next offset")
            return entry_position
    return None


def shallow_entries(segment: SegmentFile, position: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(position, size, magic) of each shallow entry from `position`, as FileLogInputStream.nextBatch
    reads them up to `end`: an entry cut by `end` ends the walk, a size field below 14 raises."""
    buf = segment.buffer
    while position < end - SEGMENT_HEADER_UP_TO_MAGIC:
        (size,) = _INT32.unpack_from(buf, position + 8)
        if size < MIN_ENTRY_SIZE:
            raise CorruptDataError(f"Found record size {size} smaller than minimum record overhead ({MIN_ENTRY_SIZE})",
                                   path=segment.path, position=position, expected=f">= {MIN_ENTRY_SIZE}", actual=size)
        if position > end - LOG_OVERHEAD - size:
            return
        yield position, LOG_OVERHEAD + size, entry_magic(buf, position)
        position += LOG_OVERHEAD + size


def entry_last_offset(segment: SegmentFile, position: int) -> int:
    """FileChannelRecordBatch.lastOffset: a V0/V1 entry's offset field; a V2 batch's base offset plus
    its last offset delta from the 61-byte header, read from the file even past the batch's end."""
    buf = segment.buffer
    (offset,) = _INT64.unpack_from(buf, position)
    if entry_magic(buf, position) < 2:
        return offset
    require_v2_header(segment, position)
    (delta,) = _INT32.unpack_from(buf, position + _LAST_OFFSET_DELTA_AT)
    return java_long(offset + delta)


def require_v2_header(segment: SegmentFile, position: int) -> None:
    """FileChannelRecordBatch.loadBatchHeader reads 61 bytes from the file wherever the entry ends:
    the file's end within them throws."""
    if position + _V2_HEADER_SIZE > segment.file_size:
        raise CorruptDataError(f"Failed to read `record batch header` from file channel: expected to read "
                               f"{_V2_HEADER_SIZE} bytes, but reached end of file after reading "
                               f"{segment.file_size - position} bytes", path=segment.path, position=position)


def entry_magic(buf, position: int) -> int:
    magic = buf[position + 16]
    return magic - 256 if magic > 127 else magic


def first_offset(segment: SegmentFile, position: int, doing: str) -> int:
    """FileChannelRecordBatch.baseOffset of the entry at `position`: a V2 batch's field; a V0/V1
    wrapper's first inner record's offset (an uncompressed message is its own first record), where a
    message set that cannot be read throws (KafkaLogError, saying what Kafka was `doing`)."""
    buf = segment.buffer
    (offset,) = _INT64.unpack_from(buf, position)
    if entry_magic(buf, position) >= 2:
        return offset
    entry = next(segment.entries(position))
    if isinstance(entry, BadEntry):
        if buf[position + _LEGACY_ATTRIBUTES_AT] & 0x07 == 0:
            return offset
        raise KafkaLogError(f"{doing}, the first offset of the V{entry.magic} wrapper at {position}: "
                            f"{entry.error.message}", path=segment.path, position=position)
    if entry.compression_id == 0:
        return offset
    try:
        return entry.base_offset
    except (CorruptDataError, IndexError) as exc:
        raise KafkaLogError(f"{doing}, the first offset of the V{entry.magic} wrapper at {position}: "
                            f"{getattr(exc, 'message', None) or 'its message set is empty'}",
                            path=segment.path, position=position) from None


class _RecoveryWalk:
    """recover_segment's loop body, batch by batch, and where it has got to."""

    def __init__(self, segment: SegmentFile, result: SegmentRecovery, producer_state: ProducerState,
                 index_interval_bytes: int, on_progress: ProgressCallback | None, epochs: LeaderEpochs):
        self.segment = segment
        self.epochs = epochs
        self.on_progress = on_progress
        self.result = result
        self.producer_state = producer_state
        self.index_interval_bytes = index_interval_bytes
        self.last_indexed_position = 0
        self.reported = 0

    def one_by_one(self, position: int, most: int | None) -> int | None:
        """Recover batches from `position`, at most `most` of them; return where to go on, or None
        when recovery has stopped (the end, or `result.invalid` says where and why)."""
        taken = 0
        for entry in self.segment.entries(position):
            if not self.take(entry):
                return None
            taken += 1
            if taken == most:
                return entry.end
            self.report()
        return None

    def take(self, entry: Batch | BadEntry) -> bool:
        result = self.result
        if isinstance(entry, BadEntry):
            result.invalid = entry.error
            return False
        if not entry.crc_valid:
            result.invalid = CorruptDataError("Record is corrupt (stored crc differs from the computed one)",
                                              path=self.segment.path, position=entry.position)
            return False
        _ensure_offset_in_range(entry, result.base_offset)
        if entry.max_timestamp > result.max_timestamp:
            result.max_timestamp, result.offset_of_max_timestamp = entry.max_timestamp, entry.last_offset
        if result.valid_bytes - self.last_indexed_position > self.index_interval_bytes:
            append_offset_entry(result.offset_entries, entry.last_offset, result.valid_bytes, entry.path,
                                entry.position)
            maybe_append_time_entry(result, entry.path, entry.position)
            self.last_indexed_position = result.valid_bytes
        self.epochs.assign(entry)
        try:
            aborted = self.producer_state.apply(entry)
        except ProducerStateError:
            raise  # Kafka throws here: a failed recovery, not a truncation point
        except CorruptDataError as exc:
            # an unreadable marker is an InvalidRecordException, thrown by LogSegment.recover after it
            # counted the batch's bytes as valid: the log is cut after this batch, not before it
            # (found by the differential run against Kafka)
            result.valid_bytes += entry.size
            result.batches += 1
            result.invalid = exc
            return False
        result.valid_bytes += entry.size
        result.batches += 1
        if aborted is not None:
            result.add_aborted([aborted], entry.path, entry.position)
        if entry.magic >= 2:
            result.map_end_offset = entry.last_offset + 1
        return True

    def report(self) -> None:
        if self.on_progress is not None and self.result.valid_bytes - self.reported >= PROGRESS_STEP:
            self.on_progress(self.result.valid_bytes - self.reported)
            self.reported = self.result.valid_bytes


class _RecoveryInBulk:
    """recover_segment over runs of clean V2 batches read by the compiled bulk scan: batches whose
    offsets fit the segment are indexed by the kernel, and the producer state moves a run at a time
    (`ProducerState.plan_run`: the batches of transactional producers replayed one by one, the
    others' last batches put at once); any other batch goes through `_RecoveryWalk.take` in order,
    and the kernel stops before what it cannot vouch for."""

    def __init__(self, walk: _RecoveryWalk):
        self.walk = walk
        self.reader = bulk_scan.Reader(walk.segment)
        self.columns = self.reader.columns
        self.recovery_index = self.reader.kernel.recovery_index

    @property
    def then_one_by_one(self) -> int:
        return self.reader.then_one_by_one

    def close(self) -> None:
        self.columns = None
        self.reader.close()

    def recover_from(self, position: int) -> int | None:
        """Recover what the kernel vouches for from `position`; return where the per-batch path
        goes on, or None when recovery stopped at a batch taken here."""
        import numpy as np

        walk, result = self.walk, self.walk.result
        lowest, highest = result.base_offset, result.base_offset + INT32_MAX
        start = position
        for columns, n, after, _ in self.reader.runs(position, False):
            self.columns = columns
            base, epochs = columns[bulk_scan.BASE_OFFSET, :n], columns[bulk_scan.LEADER_EPOCH, :n]
            last = base + columns[bulk_scan.LAST_OFFSET_DELTA, :n]
            one_by_one = (last < lowest) | (last > highest) | ((base < 0) & (epochs >= 0))  # (`LeaderEpochs.assign`)
            done = 0
            for row in np.flatnonzero(one_by_one).tolist() + [n]:
                stopped_at = self._recover_run(done, row, last)
                if stopped_at > done:
                    walk.epochs.latest = max(walk.epochs.latest, int(epochs[done:stopped_at].max()))
                if stopped_at < row:
                    return int(columns[bulk_scan.POSITION, stopped_at])
                if row == n:
                    break
                if not walk.take(self._batch(row)):
                    return None
                done = row + 1
            walk.report()
            self.reader.release_before(after)
            position = after
        self.reader.read_anything(position != start)
        return position

    def _batch(self, row: int) -> Batch:
        segment, columns = self.walk.segment, self.columns
        batch = parse_batch(segment.buffer, int(columns[bulk_scan.POSITION, row]), segment.path,
                            segment.decompress_limit)
        marker = int(columns[bulk_scan.MARKER, row])
        if marker != bulk_scan.NOT_A_MARKER:  # read by the kernel: its record as decoding would give it
            batch._records = [bulk_scan.marker_record(batch.position, batch.base_offset, batch.base_timestamp,
                                                      batch.base_sequence, marker,
                                                      int(columns[bulk_scan.COORDINATOR_EPOCH, row]))]
        return batch

    def _recover_run(self, start: int, stop: int, last) -> int:
        """Rows start..stop-1 (none needing `take` for its offsets): indexed by the kernel, the
        producer state moved as `plan_run` says. Returns the row it stopped at: before one the
        per-batch path must take (where the kernel refuses an index append, or `apply` raises:
        `take` then does what Kafka does there)."""
        if start == stop:
            return stop
        state = self.walk.producer_state
        columns = self.columns[:, start:stop]
        plan = state.plan_run(columns, last[start:stop])
        saved = state.saved() if plan.apart else None
        replayed, aborted = self._replay_apart(plan.apart, start, stop, last)
        refused = self.walk.result.first_refused(aborted)
        taken = replayed if refused is None else self._marker_row(aborted[refused].last_offset, plan.apart, start,
                                                                   replayed)
        stopped = self._index(start, taken)
        if stopped < replayed and plan.apart:  # stopped first: `take` replays from there
            state.restore(saved)
            _, aborted = self._replay_apart([row for row in plan.apart if start + row < stopped], start, stop, last)
        state.commit_run(plan, columns, last[start:stop], stopped - start)
        self.walk.result.add_aborted(aborted, self.walk.segment.path, None)
        if stopped > start:
            self.walk.result.map_end_offset = int(last[stopped - 1]) + 1
        return stopped

    def _marker_row(self, offset: int, rows: list[int], start: int, replayed: int) -> int:
        """Where the run stops so that `take` meets the ABORT marker at `offset` whose transaction
        `add_aborted` would refuse (Kafka throws at that marker, its bytes counted valid): the first
        replayed control batch at that offset, at or before the marker (the per-batch path redoes the
        rest)."""
        columns = self.columns
        markers = (start + row for row in rows if start + row < replayed
                   and columns[bulk_scan.ATTRIBUTES, start + row] & ATTR_CONTROL
                   and columns[bulk_scan.BASE_OFFSET, start + row] == offset)
        return next(markers, start)

    def _replay_apart(self, rows: list[int], start: int, stop: int, last) -> tuple[int, list[AbortedTxn]]:
        """`apply` on these rows of the run start..stop-1 (counted from `start`), in order, up to
        the first that raises (`ProducerState.replay_rows`). Returns the row the run may go up to
        (`stop`, or the one that raised) and the aborted transactions of those replayed."""
        state = self.walk.producer_state

        def one(row: int) -> tuple[bool, AbortedTxn | None]:
            try:
                return True, state.apply(self._batch(start + row))
            except KafkaLogError:  # `take` meets it again and does what Kafka does there
                return False, None

        if not rows:
            return stop, []
        raised, aborted, _ = state.replay_rows(self.columns[:, start:stop], last[start:stop], rows, one)
        return (stop if raised is None else start + raised), list(aborted)

    def _index(self, start: int, stop: int) -> int:
        """The kernel's index appends for rows start..stop-1; returns the row it stopped at."""
        import numpy as np

        k = bulk_scan

        if start == stop:
            return stop
        walk, result = self.walk, self.walk.result
        offsets, times = result.offset_entries, result.time_entries
        state = np.empty(k.RECOVERY_STATE, dtype=np.int64)
        state[k.VALID_BYTES], state[k.LAST_INDEXED_POSITION] = result.valid_bytes, walk.last_indexed_position
        state[k.MAX_TIMESTAMP_SO_FAR], state[k.OFFSET_OF_MAX_TIMESTAMP] = result.max_timestamp, result.offset_of_max_timestamp
        state[k.INDEX_INTERVAL] = walk.index_interval_bytes
        state[k.OFFSET_ENTRIES], state[k.LAST_INDEXED_OFFSET] = len(offsets), offsets[-1][0] if offsets else 0
        state[k.TIME_ENTRIES] = len(times)
        state[k.LAST_TIME_TIMESTAMP], state[k.LAST_TIME_OFFSET] = times[-1] if times else (-1, result.base_offset)
        new_offsets = np.empty((2, stop - start), dtype=np.int64)
        new_times = np.empty((2, stop - start), dtype=np.int64)
        stopped = self.recovery_index(self.columns, start, stop, state, new_offsets, new_times)
        added = int(state[k.OFFSET_ENTRIES]) - len(offsets)
        offsets.extend_columns(new_offsets[0, :added], new_offsets[1, :added])
        added = int(state[k.TIME_ENTRIES]) - len(times)
        times.extend_columns(new_times[0, :added], new_times[1, :added])
        result.valid_bytes, walk.last_indexed_position = int(state[k.VALID_BYTES]), int(state[k.LAST_INDEXED_POSITION])
        result.max_timestamp, result.offset_of_max_timestamp = (int(state[k.MAX_TIMESTAMP_SO_FAR]),
                                                                int(state[k.OFFSET_OF_MAX_TIMESTAMP]))
        result.batches += stopped - start
        return stopped


class SegmentOffsetOverflowError(KafkaLogError):
    """LogSegmentOffsetOverflowException: a batch's last offset does not fit its segment's indexes.
    The loader catches it and splits the segment (`split`)."""


def _ensure_offset_in_range(batch: Batch, base: int) -> None:
    relative = batch.last_offset - base
    if not 0 <= relative <= INT32_MAX:
        raise SegmentOffsetOverflowError(
            f"Detected offset overflow at offset {batch.last_offset} in segment with base offset {base}",
            path=batch.path, position=batch.position, expected=f"{base}..{base + INT32_MAX}", actual=batch.last_offset)


def append_offset_entry(entries: EntryColumns, offset: int, position: int, path: str, at: int) -> None:
    """OffsetIndex.append of (`offset`, `position`): an offset no larger than the last entry's
    throws. `at`: where in `path` the batch that asks for the entry starts."""
    if entries and offset <= entries[-1][0]:
        raise InvalidOffsetError(
            f"Attempt to append an offset {offset} to position {position} no larger than "
            f"the last offset appended ({entries[-1][0]})", path=path, position=at)
    entries.append((offset, position))


def maybe_append_time_entry(result, path: str, position: int) -> None:
    """TimeIndex.maybeAppend of the largest timestamp so far of `result` (a SegmentRecovery, a split's
    Piece): only a strictly larger timestamp is appended; an offset below the last entry's throws
    first, whatever the timestamp."""
    last_timestamp, last_offset = result.time_entries[-1] if result.time_entries else (-1, result.base_offset)
    if result.time_entries and result.offset_of_max_timestamp < last_offset:
        raise InvalidOffsetError(
            f"Attempt to append an offset ({result.offset_of_max_timestamp}) to slot {len(result.time_entries)} "
            f"no larger than the last offset appended ({last_offset})", path=path, position=position)
    if result.max_timestamp > last_timestamp:
        result.time_entries.append((result.max_timestamp, result.offset_of_max_timestamp))


def _tail_problem(segment: SegmentFile) -> CorruptDataError:
    position, size = segment.stop_position, segment.file_size
    if segment.stop is Stop.CORRUPT_SIZE:
        return segment.stop_error
    if segment.stop is Stop.PARTIAL_ENTRY:
        declared = 12 + int.from_bytes(segment.buffer[position + 8 : position + 12], "big", signed=True)
        return CorruptDataError(f"partial batch: it declares {declared} bytes, {size - position} are present",
                                path=segment.path, position=position, expected=declared, actual=size - position)
    return CorruptDataError(f"{size - position} trailing bytes are too few for a batch header (17)",
                            path=segment.path, position=position)



@dataclass
class RecoveryDrops:
    """What Kafka's recovery truncates from a cut position to the end of a segment, as far as the
    headers there can be read: each entry's own header (base offset, last offset delta, records
    count, producer id) - a truncated batch's header survives when its first 61 bytes do."""

    bytes: int
    first_offset: int | None = None
    last_offset: int | None = None
    """None when the last entry's header is cut before it says."""
    records: int | None = 0
    """None when an entry's count cannot be read (a header cut short, a V0/V1 wrapper)."""
    producer_ids: list[int] = field(default_factory=list)
    transactional: list[tuple[int, int, bool]] = field(default_factory=list)
    """(producer id, base offset, is a transaction marker) of the transactional batches among them."""

    def to_json(self) -> dict:
        return {"bytes": self.bytes, "first_offset": self.first_offset, "last_offset": self.last_offset,
                "records": self.records, "producer_ids": self.producer_ids}


def recovery_drops(buf, start: int, end: int) -> RecoveryDrops:
    """The bytes [start, end) a recovery cut drops, and what their entry headers say. Zeros (a
    preallocated or zero-filled tail) hold no entry: a size below 14 ends the reading."""
    drops = RecoveryDrops(end - start)
    producers: set[int] = set()
    position = start
    while position + SEGMENT_HEADER_UP_TO_MAGIC <= end:
        offset = int.from_bytes(buf[position : position + 8], "big", signed=True)
        size = int.from_bytes(buf[position + 8 : position + 12], "big", signed=True)
        if size < MIN_ENTRY_SIZE:
            break
        magic = buf[position + 16]
        last, count = (offset if magic in (0, 1) else None), None  # a V0/V1 entry's offset is its last
        if magic == 2 and position + HEADER_SIZE <= end:
            header = HEADER.unpack_from(buf, position)
            last, count, producer_id = offset + header[_LAST_OFFSET_DELTA], header[_RECORDS_COUNT], header[_PRODUCER_ID]
            if producer_id >= 0:
                producers.add(producer_id)
                if header[_ATTRIBUTES] & ATTR_TRANSACTIONAL:
                    drops.transactional.append((producer_id, offset, bool(header[_ATTRIBUTES] & ATTR_CONTROL)))
        elif magic in (0, 1) and position + 18 <= end and not buf[position + 17] & 0x07:
            count = 1  # an uncompressed V0/V1 message: its offset is its record's
        if drops.first_offset is None:
            drops.first_offset = offset
        drops.last_offset = last
        drops.records = None if count is None or drops.records is None else drops.records + max(count, 0)
        position += LOG_OVERHEAD + size
    if position < end and any(buf[position:end]):  # the first bytes of one more header: a batch, unknown
        if end - position >= 8 and position + SEGMENT_HEADER_UP_TO_MAGIC > end:
            offset = int.from_bytes(buf[position : position + 8], "big", signed=True)
            drops.first_offset = offset if drops.first_offset is None else drops.first_offset
        drops.last_offset = None
        drops.records = None
    drops.producer_ids = sorted(producers)
    return drops


# ---------------------------------------------------------------------------------------------
# The producer state before a segment: a snapshot, then a replay of what follows it
# ---------------------------------------------------------------------------------------------


@dataclass
class StartingState:
    """The producer state just before a segment, and how it was obtained."""

    state: ProducerState
    origin: str
    exact: bool
    """Kafka's own state (a snapshot) or a replay from offset 0; otherwise transactions opened
    before the first segment are unknown."""


def starting_producer_state(partition: PartitionDir, base_offset: int,
                            on_progress: ProgressCallback | None = None) -> StartingState:
    """The producer state before segment `base_offset`, as Kafka's loader builds it: the latest
    readable snapshot at or before it, else an empty state at the start of the partition, then
    a replay of the earlier segments from there (read only)."""
    snapshot, replay_from, earlier = _starting_point(partition, base_offset)
    if snapshot is not None:
        start = StartingState(ProducerState.from_snapshot(snapshot), f"producer state loaded from "
                              f"{Path(snapshot.path).name}", True)
    else:
        start = StartingState(ProducerState(), f"producer state replayed from offset {replay_from}", replay_from == 0)
    for segment in earlier:
        with SegmentFile(segment.log) as log:
            replay(log, start.state, replay_from, on_progress)
    return start


def replay_bytes(partition: PartitionDir, base_offset: int) -> int:
    """How many bytes `starting_producer_state` reads."""
    return sum(_size(s.log) for s in _starting_point(partition, base_offset)[2])


def _starting_point(partition: PartitionDir, base_offset: int):
    """(snapshot or None, offset the replay starts from, the earlier segments to replay)."""
    snapshot, replay_from = None, partition.segments[0].base_offset if partition.segments else base_offset
    for offset, path in sorted(((offset_from_name(p), p) for p in partition.snapshots), reverse=True):
        if offset is None or offset > base_offset:
            continue
        try:
            snapshot = producer_snapshot.read(path)
        except KafkaLogError:
            continue  # Kafka deletes a corrupt snapshot and falls back to an older one
        replay_from = offset
        break
    bases = [s.base_offset for s in partition.segments]
    earlier = [segment for index, segment in enumerate(partition.segments)
               if segment.log is not None and segment.base_offset < base_offset
               and (index + 1 == len(bases) or bases[index + 1] > replay_from)]
    return snapshot, replay_from, earlier


def replay(log: SegmentFile, state: ProducerState, from_offset: int = 0,
           on_progress: ProgressCallback | None = None) -> None:
    """Advance the producer state through a segment that is not rebuilt (read only)."""
    for entry in log.entries():
        if isinstance(entry, BadEntry) or not entry.crc_valid:
            break
        if entry.magic >= 2 and entry.base_offset >= from_offset:
            try:
                state.apply(entry)
            except CorruptDataError:
                break
    if on_progress is not None:
        on_progress(log.file_size)


# ---------------------------------------------------------------------------------------------
# Rebuilding partitions: the plan, the segments in order, the files written
# ---------------------------------------------------------------------------------------------


@dataclass
class RebuildOptions:
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    truncate: bool = False
    """Cut the invalid tail off the .log, as recovery does."""
    backup: bool = True
    dry_run: bool = False
    output_dir: Path | None = None
    """Write the rebuilt files to <output_dir>/<partition dir name>/ and leave the input alone."""
    strict: bool = False
    """Stop at the first segment recovery would fail on or cut (without `truncate`); write nothing for it."""


@dataclass
class FileChange:
    kind: str
    """"index", "timeindex", "txnindex" or "log"."""
    path: str
    action: str
    """"unchanged", "create" or "replace" (in a dry run: what would be done)."""
    old_size: int | None
    new_size: int
    backup: str | None = None


@dataclass
class SegmentRebuild:
    partition: str
    recovery: SegmentRecovery
    changes: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def tail_left_in_place(self) -> bool:
        """The .log still holds bytes recovery would cut (no --truncate, or a dry run)."""
        return self.recovery.truncated_bytes > 0 and not any(c.kind == "log" and c.action != "unchanged"
                                                              for c in self.changes)


@dataclass
class _Plan:
    partition: PartitionDir
    segments: list[Segment]
    """The segments to rebuild, in offset order (all of the partition's, or those named)."""


class Rebuild:
    """Rebuild the indexes of the given segments, partition dirs or log dirs.

    Resolving the paths happens here (bad paths raise InputError before anything is written);
    iterating performs the rebuild one segment at a time.
    """

    def __init__(self, paths: Iterable[str | os.PathLike], options: RebuildOptions | None = None,
                 on_progress: ProgressCallback | None = None):
        self.options = options or RebuildOptions()
        self.on_progress = on_progress
        self.plans = _plan(paths)
        if self.options.output_dir is not None:
            refuse_output_in_input_tree(self.options.output_dir, [p.partition.path for p in self.plans])
        self.stopped: SegmentRebuild | None = None
        """With `strict`: the segment the run stopped at."""
        self.total_bytes = sum(replay_bytes(plan.partition, plan.segments[0].base_offset)
                               + sum(_size(s.log) for s in plan.segments) for plan in self.plans)

    def __iter__(self) -> Iterator[SegmentRebuild]:
        for plan in self.plans:
            yield from self._rebuild_partition(plan)
            if self.stopped is not None:
                return

    def _rebuild_partition(self, plan: _Plan) -> Iterator[SegmentRebuild]:
        start = starting_producer_state(plan.partition, plan.segments[0].base_offset, self.on_progress)
        state, origin = start.state, start.origin
        epochs = LeaderEpochs.of(plan.partition)
        last_base = plan.partition.segments[-1].base_offset
        for segment in plan.segments:
            with SegmentFile(segment.log) as log:
                recovery = recover_segment(log, state, self.options.index_interval_bytes, self.on_progress, epochs)
            result = SegmentRebuild(str(plan.partition.path), recovery, notes=[origin], dry_run=self.options.dry_run)
            origin = "producer state carried from the previous segment"
            if self.options.strict and (recovery.failure is not None
                                        or recovery.truncated_bytes and not self.options.truncate):
                self.stopped = result
                yield result
                return
            if recovery.failure is None:
                result.changes = self._write(plan.partition, segment, recovery)
                if recovery.truncated_bytes and self.options.truncate and segment.base_offset != last_base:
                    later = [s.base_offset for s in plan.partition.segments if s.base_offset > segment.base_offset]
                    result.notes.append(f"Kafka's recovery would also delete the {len(later)} later segment(s) "
                                        f"starting at {later}; they were left in place")
            yield result

    def _write(self, partition: PartitionDir, segment: Segment, recovery: SegmentRecovery) -> list[FileChange]:
        stem = Path(segment.log).name[: -len(".log")]
        out_dir = Path(segment.log).parent
        if self.options.output_dir is not None:
            out_dir = Path(self.options.output_dir) / partition.path.name
            if not self.options.dry_run:
                out_dir.mkdir(parents=True, exist_ok=True)
        planned = [("index", recovery.index_bytes()), ("timeindex", recovery.timeindex_bytes())]
        txn_target = out_dir / f"{stem}.txnindex"
        # Kafka creates a .txnindex only for an abort, but empties one that exists
        if recovery.aborted_txns or segment.txnindex is not None or txn_target.exists():
            planned.append(("txnindex", recovery.txnindex_bytes()))
        changes = [self._put_bytes(kind, out_dir / f"{stem}.{kind}", data) for kind, data in planned]
        if self.options.truncate and recovery.truncated_bytes:
            changes.append(self._put_log_prefix(Path(segment.log), out_dir / f"{stem}.log", recovery.valid_bytes))
        return changes

    def _put_bytes(self, kind: str, target: Path, data: bytes) -> FileChange:
        old = _read_if_exists(target)
        if old == data:
            return FileChange(kind, str(target), "unchanged", len(old), len(data))
        change = FileChange(kind, str(target), "create" if old is None else "replace",
                            None if old is None else len(old), len(data))
        if not self.options.dry_run:
            change.backup = _replace_atomically(target, lambda out: out.write(data), self.options.backup)
        return change

    def _put_log_prefix(self, source: Path, target: Path, length: int) -> FileChange:
        old_size = _size(target) if target.exists() else None
        change = FileChange("log", str(target), "create" if old_size is None else "replace", old_size, length)
        if not self.options.dry_run:
            change.backup = _replace_atomically(target, lambda out: copy_prefix(source, out, length),
                                                self.options.backup)
        return change


def _plan(paths: Iterable[str | os.PathLike]) -> list[_Plan]:
    """One plan per partition named (directly, through a log dir, or through its segment files)."""
    plans: dict[Path, _Plan] = {}
    for path in paths:
        found = classify(path)
        if isinstance(found, LogDir):
            named = [(p, p.segments) for p in found.partitions]
        elif isinstance(found, PartitionDir):
            named = [(found, found.segments)]
        else:
            partition, segment = segment_of(found)
            named = [(partition, [segment])]
        for partition, segments in named:
            plan = plans.setdefault(Path(os.path.realpath(partition.path)), _Plan(partition, []))
            known = {s.base_offset for s in plan.segments}
            plan.segments.extend(s for s in segments if s.log is not None and s.base_offset not in known)
    for plan in plans.values():
        plan.segments.sort(key=lambda s: s.base_offset)
    return [plan for plan in plans.values() if plan.segments]


def refuse_output_in_input_tree(output_dir: Path, partitions: list[Path]) -> None:
    """The output dir may not lie inside a log dir being read (a partition dir or its parent), nor
    contain one: rebuilt files must never mix with the evidence."""
    out = os.path.realpath(output_dir)
    for partition in partitions:
        for root in (os.path.realpath(partition), os.path.dirname(os.path.realpath(partition))):
            if out == root or out.startswith(root.rstrip(os.sep) + os.sep):
                raise InputError(f"the output dir is inside the input tree ({root}); choose a directory elsewhere",
                                 path=output_dir)
            if root.startswith(out.rstrip(os.sep) + os.sep):
                raise InputError(f"the input tree ({root}) is inside the output dir; choose a directory elsewhere",
                                 path=output_dir)


def segment_of(path: Path, files: LocalFiles = LOCAL) -> tuple[PartitionDir, Segment]:
    """The partition dir holding a segment file (.log/.index/.timeindex/.txnindex) and its segment."""
    path = Path(path)
    base = offset_from_name(path)
    if base is None or path.suffix not in (".log", ".index", ".timeindex", ".txnindex"):
        raise InputError("not a segment file (<20-digit offset>.log/.index/.timeindex/.txnindex), "
                         "a partition directory or a log directory", path=path)
    partition = read_partition_dir(path.parent, files)
    for segment in partition.segments:
        if segment.base_offset == base:
            if segment.log is None:
                raise InputError("the segment has no .log file", path=path)
            return partition, segment
    raise InputError("segment not found in its directory", path=path)


# ---------------------------------------------------------------------------------------------
# Writing files: temp file, fsync, rename; a hard-linked backup of what is replaced
# ---------------------------------------------------------------------------------------------

TEMP_SUFFIX = ".rebuild-tmp"
BACKUP_SUFFIX = ".bak"


def _replace_atomically(target: Path, write: Callable, backup: bool) -> str | None:
    """Write `target` through a temp file renamed over it; return the backup's path, if one was kept."""
    temp = target.with_name(target.name + TEMP_SUFFIX)
    existed = target.exists()
    try:
        with open(temp, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        if existed:
            shutil.copymode(target, temp)
        backup_path = _keep_backup(target) if existed and backup else None
        os.replace(temp, target)
        _fsync_directory(target.parent)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise InputError(f"cannot write: {exc.strerror or exc}", path=target) from None
    return None if backup_path is None else str(backup_path)


def _keep_backup(target: Path) -> Path:
    """A hard link to the current file under a new name: the original stays in place until the rename."""
    candidate = target.with_name(target.name + BACKUP_SUFFIX)
    number = 0
    while candidate.exists():
        number += 1
        candidate = target.with_name(f"{target.name}{BACKUP_SUFFIX}.{number}")
    try:
        os.link(target, candidate)
    except OSError:
        shutil.copy2(target, candidate)  # filesystems without hard links
    return candidate


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_prefix(source: Path, out, length: int, start: int = 0) -> None:
    """`length` bytes of `source` from byte `start` to `out`."""
    with open(source, "rb") as src:
        src.seek(start)
        remaining = length
        while remaining:
            chunk = src.read(min(remaining, 1 << 20))
            if not chunk:
                raise InputError("file shrank while being copied", path=source, expected=length,
                                 actual=length - remaining)
            out.write(chunk)
            remaining -= len(chunk)


def _read_if_exists(path: Path) -> bytes | None:
    """The current file, or None; a FIFO, device or directory in its place is an InputError (never
    waited on, never replaced)."""
    if not os.path.lexists(path):
        return None
    return read_index_bytes(path)


def _size(path: Path | None) -> int:
    try:
        return os.stat(path).st_size if path is not None else 0
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None
