"""Stage 2, a partition: its segments in order, over the facts stage 1 hands on: offset order,
leader epochs (and the leader-epoch-checkpoint), producer state and its snapshots, and each
segment's transaction index against the ABORT markers."""
from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..errors import CorruptDataError, InputError, KafkaLogError
from ..formats import checkpoint, producer_snapshot, txn_index
from ..formats.batch import Batch
from ..formats.logdir import PartitionDir, Segment
from ..formats.txn_index import AbortedTxn, AbortedTxns
from ..native.columns import (BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, PRODUCER_ID, RO_ASCENDING, RO_EPOCH_CHANGES,
                              RO_EPOCHS_RISE, RO_LARGEST_LAST, RO_LARGEST_PRODUCER)
from ..payloads.versions import newer_versions
from ..recovery import ProducerState, ProducerStateError, starting_producer_state
from .findings import (ERROR, INFO, RANK_EPOCH, RANK_ORDER, RANK_PRODUCER, WARNING, Finding, Summary, from_error,
                       position_key)
from .indexes import index_path
from .segment import (TRUNCATE_HINT, BatchConsumer, BatchFacts, FactsRun, RangeReport, SegmentReport, Stretch,
                      check_segment)


@dataclass
class PartitionFacts:
    first_segment_offset: int | None = None
    log_end_offset: int | None = None
    """Where Kafka would resume appending: after the last intact batch."""


SegmentChecker = Callable[[Segment, bool, "BatchConsumer"], "SegmentReport"]
"""Stage 1 of (segment, is_active): run here, handing each batch's facts to the consumer as it
reads them (memory flat in the batch count), or looked up from an executor's result, whose report
carries the facts."""


class PartitionCheck:
    def __init__(self, partition: PartitionDir, named: list[Segment] | None, deep: bool, summary: Summary,
                 check_segment: SegmentChecker):
        self.partition = partition
        self.topic_partition = partition.topic_partition
        self.whole = named is None
        self.segments = [s for s in (partition.segments if named is None else named) if s.log is not None]
        self.deep = deep
        self.summary = summary
        self.check_segment = check_segment
        self.facts = PartitionFacts()
        self.last_offset: int | None = None
        """Last offset of the last intact batch so far (offsets must keep increasing)."""
        self.epochs: list[tuple[int, int, int | None]] = []  # (epoch, first offset in the log, last offset before it)
        """(leader epoch, first offset) as the batches assign them, like the leader epoch cache."""
        self.exact_state = True
        self.state = ProducerState()
        self.pending_snapshots: list[tuple[int, producer_snapshot.ProducerSnapshot]] = []
        self.version_signatures: dict[Path, frozenset[int]] = {}
        """The segments whose stage 1 took the signatures of their records (`SegmentReport`)."""
        self.sink: list[Finding] = []

    def run(self) -> Iterator[Finding]:
        self.summary.partitions += 1
        yield from self._check_partition_files()
        if not self.segments:
            return
        yield from self._start_producer_state()
        last_base = self.partition.segments[-1].base_offset
        previous_last: int | None = None
        for segment in self.segments:
            replay = _SegmentReplay(self)
            report = self.check_segment(segment, segment.base_offset == last_base, replay.batch)
            if report.version_signatures is not None:
                self.version_signatures[segment.log] = report.version_signatures
            for facts in report.batches:  # a report made elsewhere; one made here has streamed them
                replay.batch(facts)
            replay.finish()
            yield from self._segment_findings(segment, report, replay)
            first = replay.first_base_offset
            if previous_last is not None and first is not None and first <= previous_last:
                yield Finding(ERROR, "segment-overlap", str(segment.log), 0,
                              f"the segment starts at offset {first}, not after the previous "
                              f"segment's last offset {previous_last}", {"previous_last_offset": previous_last})
            previous_last = replay.last_offset
        self.facts.first_segment_offset = self.partition.segments[0].base_offset
        # where Kafka's loader ends the log, LogSegment.readNextOffset of the last segment: its last
        # batch's next offset (not the largest offset's: a last delta below 0 ends lower), else its base offset
        last_batch = replay.last_offset
        self.facts.log_end_offset = self.segments[-1].base_offset if last_batch is None else last_batch + 1
        if self.whole:
            yield from self._finish_snapshots()
            yield from self._check_leader_epoch_checkpoint()
        if self.deep:
            yield from self._newer_record_versions()

    def _newer_record_versions(self) -> Iterator[Finding]:
        """One info finding per kind and version of internal-topic records a newer Kafka wrote."""
        logs = [segment.log for segment in self.segments if isinstance(segment.log, Path)]
        try:
            found = newer_versions(self.partition.topic, logs, signed=self.version_signatures)
        except (OSError, KafkaLogError):
            return  # the segment checks report what cannot be read
        for entry in found:
            yield Finding(INFO, "newer-record-version", entry.file, entry.position,
                          f"{entry.count} {entry.kind} record(s) of value version {entry.version}, newer than "
                          f"any known (newest: {entry.read_as}), first at offset {entry.offset}; decoded as far "
                          f"as the v{entry.read_as} layout goes (dump's decode_warning says whether Kafka "
                          "reads them)",
                          {"kind": entry.kind, "version": entry.version, "read_as_version": entry.read_as,
                           "count": entry.count, "offset": entry.offset})

    # -- partition files ---------------------------------------------------------------------

    def _check_partition_files(self) -> Iterator[Finding]:
        for path in self.partition.leftovers:
            yield Finding(WARNING, "leftover-file", str(path), None,
                          "left by an interrupted operation; Kafka completes or deletes it on load")
        for path, reason in self.partition.unknown:
            yield Finding(INFO, "unknown-file", str(path), None, f"ignored: {reason}")
        for segment in self.partition.segments:
            if segment.log is None:
                for orphan in (segment.index, segment.timeindex, segment.txnindex):
                    if orphan is not None:
                        yield Finding(WARNING, "orphan-index", str(orphan), None,
                                      "an index without its .log: Kafka deletes it on load")

    def _start_producer_state(self) -> Iterator[Finding]:
        first = self.segments[0].base_offset
        try:
            start = starting_producer_state(self.partition, first)  # not in the progress total
        except KafkaLogError as exc:
            yield from_error(exc, "io-error" if isinstance(exc, InputError) else "producer-state-unavailable",
                             str(self.partition.path))
            self.exact_state = False
            return
        self.state, self.exact_state = start.state, start.exact
        self.state.on_anomaly = self._producer_anomaly
        if self.whole:
            for path in self.partition.snapshots:
                yield from self._read_snapshot_for_later(path)

    def _producer_anomaly(self, kind: str, message: str, batch: Batch) -> None:
        self.sink.append(Finding(WARNING, kind, batch.path, batch.position, message,
                                 {"producer_id": batch.producer_id}))

    # -- snapshots -----------------------------------------------------------------------------

    def _read_snapshot_for_later(self, path: Path) -> Iterator[Finding]:
        try:
            snapshot = producer_snapshot.read(path)
        except KafkaLogError as exc:
            yield from_error(exc, "snapshot-corrupt", str(path))
            return
        if snapshot.offset is not None:
            self.pending_snapshots.append((snapshot.offset, snapshot))
            self.pending_snapshots.sort(key=lambda item: item[0])

    def compare_snapshots_before(self, offset: int) -> None:
        """Compare the snapshots taken at or before `offset` with the replayed state."""
        while self.pending_snapshots and self.pending_snapshots[0][0] <= offset:
            _, snapshot = self.pending_snapshots.pop(0)
            if self.exact_state:
                self.sink.extend(_compare_snapshot(snapshot, self.state))

    def _finish_snapshots(self) -> Iterator[Finding]:
        end = self.facts.log_end_offset
        self.sink = []
        self.compare_snapshots_before(end)
        yield from self.sink
        for offset, snapshot in self.pending_snapshots:
            yield Finding(WARNING, "snapshot-beyond-log-end", snapshot.path, None,
                          f"snapshot at offset {offset} is past the log end offset {end}: Kafka deletes it on load",
                          {"log_end_offset": end})

    # -- leader epochs -------------------------------------------------------------------------

    def _check_leader_epoch_checkpoint(self) -> Iterator[Finding]:
        path = self.partition.files.get(checkpoint.LEADER_EPOCH_CHECKPOINT)
        if path is None:
            if self.epochs:
                yield Finding(WARNING, "leader-epoch-checkpoint-missing", str(self.partition.path), None,
                              "no leader-epoch-checkpoint although batches carry leader epochs; Kafka rebuilds it")
            return
        try:
            entries = checkpoint.read_leader_epochs(path)
        except KafkaLogError as exc:
            yield from_error(exc, "checkpoint-corrupt", str(path))
            return
        file = str(path)
        for (epoch_a, start_a), (epoch_b, start_b) in zip(entries, entries[1:]):
            if epoch_b <= epoch_a or start_b < start_a:
                yield Finding(ERROR, "leader-epoch-checkpoint-order", file, None,
                              f"entry ({epoch_b}, {start_b}) does not follow ({epoch_a}, {start_a}): epochs must "
                              f"increase and start offsets must not decrease")
        recorded = dict(entries)
        for epoch, start, previous_last_offset in self.epochs:
            if epoch not in recorded:
                yield Finding(ERROR, "leader-epoch-not-in-checkpoint", file, None,
                              f"batches of leader epoch {epoch} start at offset {start}, but the checkpoint has "
                              f"no entry for epoch {epoch}", {"epoch": epoch, "log_start_offset": start})
            elif recorded[epoch] != start and not _epoch_start_compacted(recorded[epoch], start, previous_last_offset):
                yield Finding(ERROR, "leader-epoch-start-mismatch", file, None,
                              f"leader epoch {epoch} starts at offset {start} in the log but at "
                              f"{recorded[epoch]} in the checkpoint",
                              {"epoch": epoch, "log_start_offset": start, "checkpoint_start_offset": recorded[epoch]})
        in_log = {epoch for epoch, _, _ in self.epochs}
        end = self.facts.log_end_offset
        for epoch, start in entries:
            if epoch in in_log:
                continue
            if start > end:
                yield Finding(WARNING, "leader-epoch-beyond-log-end", file, None,
                              f"leader epoch {epoch} starts at {start}, past the log end offset {end}: the data "
                              f"it saw is gone (Kafka truncates the entry on load)", {"epoch": epoch})
            elif start < end:
                yield Finding(WARNING, "leader-epoch-without-batches", file, None,
                              f"leader epoch {epoch} (from offset {start}) has no batch in the log "
                              f"(compacted away, or never written)", {"epoch": epoch})

    # -- one segment's facts, in order -----------------------------------------------------------

    def _segment_findings(self, segment: Segment, report: SegmentReport, replay: "_SegmentReplay") -> Iterator[Finding]:
        """Merge stage 1's findings of a segment with what its batches mean for the partition, in
        the order one pass over the segment finds them (by position, then batch, then check)."""
        if not report.opened:
            yield from (finding for _, finding in report.log_findings)
            return
        self.summary.add(report.counts)
        if report.tail is not None:
            self._transactions_cut(report)
        ordered = report.log_findings + replay.found
        ordered.sort(key=itemgetter(0))
        yield from (finding for _, finding in ordered)
        yield from report.index_findings
        yield from check_txn_index(segment, report, replay.aborted, replay.abort_markers, self.exact_state)

    def _transactions_cut(self, report: SegmentReport) -> None:
        """Add to a segment's `truncated-tail` what the cut does to transactions: the producer state
        replayed up to it says which of the dropped batches' transactions were already open."""
        notes, still_open, seen = [], [], set()
        for producer_id, base_offset, is_marker in report.tail.transactional:
            if producer_id in seen:
                continue
            seen.add(producer_id)
            status = self.state.producers.get(producer_id)
            first = None if status is None else status.current_txn_first_offset
            if first is not None:
                still_open.append({"producer_id": producer_id, "first_offset": first})
            if is_marker:
                notes.append(f"the transaction marker of producer {producer_id} at offset {base_offset} is lost"
                             + ("" if first is None else f": its transaction from offset {first} is open again"))
            elif first is not None:
                notes.append(f"the open transaction of producer {producer_id} (from offset {first}) loses its "
                             f"batches from offset {base_offset} and stays open")
            else:
                notes.append(f"the transaction producer {producer_id} began at offset {base_offset} is lost")
        for _, finding in report.log_findings:
            if finding.code == "truncated-tail":
                finding.extra["recovery_drops"]["open_transactions"] = still_open
                finding.message += "".join("; " + note for note in notes) + TRUNCATE_HINT

    def _replay(self, batch: BatchFacts, ordinal: int, ordered: list, aborted: AbortedTxns,
                abort_markers: AbortMarkers) -> None:
        last_offset = self.last_offset
        if last_offset is not None and batch.base_offset <= last_offset:
            finding = Finding(ERROR, "offset-not-increasing", batch.path, batch.position,
                              f"batch offsets {batch.base_offset}..{batch.last_offset} do not follow the previous "
                              f"last offset {last_offset}", {"previous_last_offset": last_offset})
            ordered.append(((batch.position, ordinal, RANK_ORDER), finding))
        if batch.magic >= 2 and batch.partition_leader_epoch >= 0:
            self._check_leader_epoch(batch, ordinal, ordered)
        if self.pending_snapshots or (batch.magic >= 2 and batch.producer_id >= 0):  # else no producer state moves
            sink = self.sink = []
            self._apply_producer_state(batch, aborted, abort_markers)
            if sink:
                ordered.extend(((position_key(finding), ordinal, RANK_PRODUCER), finding) for finding in sink)
        if last_offset is None or batch.last_offset > last_offset:
            self.last_offset = batch.last_offset

    def _check_leader_epoch(self, batch: BatchFacts, ordinal: int, ordered: list) -> None:
        """A V2 batch with a leader epoch (>= 0)."""
        epochs = self.epochs
        epoch = batch.partition_leader_epoch
        if epochs and epoch < epochs[-1][0]:
            finding = Finding(
                ERROR, "leader-epoch-decreased", batch.path, batch.position,
                f"leader epoch {epoch} at offset {batch.base_offset} is lower than epoch {epochs[-1][0]} which "
                f"started at offset {epochs[-1][1]}", {"epoch": epoch, "previous_epoch": epochs[-1][0]})
            ordered.append(((batch.position, ordinal, RANK_EPOCH), finding))
        elif not epochs or epoch > epochs[-1][0]:
            epochs.append((epoch, batch.base_offset, self.last_offset))

    def _apply_producer_state(self, batch: BatchFacts, aborted: AbortedTxns | list[AbortedTxn],
                              abort_markers: AbortMarkers) -> None:
        if self.whole:
            self.compare_snapshots_before(batch.base_offset if batch.magic >= 2 else batch.last_offset)
        try:
            txn = self.state.apply(batch)
        except ProducerStateError as exc:
            self.sink.append(from_error(exc, "transaction-state-invalid", batch.path))
            return
        except CorruptDataError as exc:
            if not self.deep:  # a deep check has reported the unreadable marker already
                self.sink.append(from_error(exc, "record-corrupt", batch.path))
            return
        if txn is not None:
            aborted.append(txn)
        if batch.is_control and batch.producer_id >= 0:
            records = batch.records_reading_controls()
            if records and records[0].control is not None and records[0].control.name == "ABORT":
                abort_markers.add((batch.producer_id, batch.base_offset))


class _SegmentReplay:
    """Stage 2 over one segment's batch facts, one at a time, in file order."""

    def __init__(self, check: PartitionCheck):
        self.check = check
        self.found: list[tuple[tuple[int, int, int], Finding]] = []
        """Stage 2's findings, keyed as stage 1's are."""
        self.aborted = AbortedTxns()
        self.abort_markers = AbortMarkers()
        self.count = 0
        self.gathered = None
        """Where `batch` copies the columns of the batches it gathers (its first `gathered_rows`
        columns, not yet replayed): allocated once, as a run's columns are the scan's buffer,
        which it reuses."""
        self.given: dict[int, BatchFacts] = {}
        self.gathered_rows = 0
        self.path: str | None = None
        """Of the segment whose batches are gathered."""
        self.first_base_offset: int | None = None
        self.last_offset: int | None = None
        """Of the segment's last intact batch."""

    GATHER = 1 << 15
    """Batches gathered into one run at most (the memory it holds is flat in the segment's size)."""
    ALONE = 1 << 10
    """A run of this many batches or more is replayed on its own as it comes, not copied: its
    per-run cost is small beside its batches'."""
    ALONE_WITH_PRODUCERS = GATHER
    """`ALONE` for a run that holds producer ids: moving each producer costs per run (`plan_run`,
    `commit_run`), ~1.5 ms for 300 producers, as much as replaying ~3,000 batches. A scan call
    of 8 MiB holds ~8,000 batches of production data: four of them replay as one."""

    def batch(self, facts: "BatchFacts | FactsRun") -> None:
        """Short runs of V2 batches, and the batches read one by one between them (transaction
        markers, mostly), are gathered and replayed as one run: a run costs the same for 30 batches
        as for 10,000. `finish` replays what is gathered. (A stretch costs nothing however short:
        it is not gathered, which would read its batches again.)"""
        if type(facts) is FactsRun:
            if facts.magic >= 2 and facts.stretch is None and len(facts) < (
                    self.ALONE_WITH_PRODUCERS if _has_producers(facts) else self.ALONE):
                self._gather(facts.path, facts.columns, None)
                return
            self.finish()
            self._run(facts)  # done before the scan reuses the run's buffer
            return
        if self.gathered_rows:
            column = FactsRun.row_of(facts)
            if column is not None:
                self._gather(facts.path, column, facts)
                return
            self.finish()
        self._one(facts)

    def _gather(self, path: str, columns, facts: "BatchFacts | None") -> None:
        self.path = path
        if facts is not None:
            self.given[self.gathered_rows] = facts
        if self.gathered is None:  # below GATHER until one more run comes, shorter than those replayed alone
            import numpy as np

            longest = max(self.ALONE, self.ALONE_WITH_PRODUCERS)
            self.gathered = np.empty((columns.shape[0], self.GATHER + longest), dtype=np.int64)
        end = self.gathered_rows + columns.shape[1]
        self.gathered[:, self.gathered_rows:end] = columns
        self.gathered_rows = end
        if self.gathered_rows >= self.GATHER:
            self.finish()

    def finish(self) -> None:
        """Replay the batches gathered so far."""
        if not self.gathered_rows:
            return
        run = FactsRun(self.path, self.gathered[:, :self.gathered_rows], 2, self.given)
        self.given, self.gathered_rows = {}, 0
        self._run(run)  # done before the buffer is gathered into again

    def _one(self, facts: BatchFacts) -> None:
        if not self.count:
            self.first_base_offset = facts.base_offset
        self.check._replay(facts, self.count, self.found, self.aborted, self.abort_markers)
        self.count += 1
        self.last_offset = facts.last_offset

    def _run(self, run: "FactsRun") -> None:
        """A run of clean V2 batches at once, when `_replay` would find no offset or leader epoch
        problem in it and only note new leader epochs; otherwise batch by batch. The producer state
        moves as `ProducerState.plan_run` says: transactional producers' batches (and those with an
        anomaly to report) replayed one by one, the other producers' last batches put at once."""
        import numpy as np

        if run.stretch is not None and self._stretch(run.stretch):
            return
        check = self.check
        columns = run.columns
        base = columns[BASE_OFFSET]
        last = run.last_offsets
        if check.pending_snapshots:  # compared when the first batch at or past a snapshot's offset replays
            reached = np.flatnonzero((base if run.magic >= 2 else last) >= check.pending_snapshots[0][0])
            if len(reached):
                at = int(reached[0])
                for part in (run.part(0, at), run.part(at, at + 1), run.part(at + 1, len(base))):
                    if part.columns.shape[1]:
                        (self._run if part.columns.shape[1] > 1 else self._one_by_one)(part)
                return
        before = _offsets_before(base, last, columns[LAST_OFFSET_DELTA], check.last_offset, run.outline)
        if before is None:
            return self._one_by_one(run)  # offset-not-increasing
        new_epochs = []
        epochs = columns[LEADER_EPOCH]
        starts = _epoch_starts(epochs, check.epochs[-1][0] if check.epochs else -1, run.outline)
        if starts is None:
            return self._one_by_one(run)  # leader-epoch-decreased
        for row in starts:  # a new epoch starts
            prior = None if row == 0 and check.last_offset is None else int(before[row])
            new_epochs.append((int(epochs[row]), int(base[row]), prior))
        if _has_producers(run):
            self._move_producers(run, last)
        check.epochs.extend(new_epochs)
        # the largest, as `_replay` keeps it: a last row whose delta is below 0 may end the run lower
        largest = int(last.max()) if run.outline is None else run.outline[RO_LARGEST_LAST]
        if check.last_offset is None or largest > check.last_offset:
            check.last_offset = largest
        if not self.count:
            self.first_base_offset = int(base[0])
        self.count += len(base)
        self.last_offset = int(last[-1])

    def _stretch(self, stretch: Stretch) -> bool:
        """`_run` of a stretch, from what the scan says of it, where that is all `_run` would read:
        it follows the offsets before, its epoch does not fall, and no snapshot is compared in it.
        False where `_run` must read its rows."""
        check = self.check
        if check.pending_snapshots and check.pending_snapshots[0][0] <= stretch.last_offset:
            return False
        if check.last_offset is not None and stretch.first_base_offset <= check.last_offset:
            return False  # offset-not-increasing
        previous_epoch = check.epochs[-1][0] if check.epochs else -1
        if stretch.epoch < previous_epoch:
            return False  # leader-epoch-decreased
        if stretch.epoch > previous_epoch:
            check.epochs.append((stretch.epoch, stretch.first_base_offset, check.last_offset))
        if check.last_offset is None or stretch.last_offset > check.last_offset:
            check.last_offset = stretch.last_offset
        if not self.count:
            self.first_base_offset = stretch.first_base_offset
        self.count += stretch.count
        self.last_offset = stretch.last_offset
        return True

    def _move_producers(self, run: "FactsRun", last) -> None:
        """The producer state after a run whose offsets and epochs `_run` found in order."""
        check = self.check
        columns = run.columns
        plan = check.state.plan_run(columns, last)
        if plan.apart:  # a transactional producer's batches, or those with an anomaly to report
            def one(row: int) -> tuple[bool, AbortedTxn | None]:
                sink = check.sink = []
                aborted: list[AbortedTxn] = []
                check._apply_producer_state(next(run.rows([row])), aborted, self.abort_markers)
                self.found.extend(((position_key(finding), self.count + row, RANK_PRODUCER), finding)
                                  for finding in sink)
                return True, aborted[0] if aborted else None

            _, aborted, abort_rows = check.state.replay_rows(columns, last, plan.apart, one)
            self.aborted.extend(aborted)
            self.abort_markers.add_run(columns[PRODUCER_ID, abort_rows], columns[BASE_OFFSET, abort_rows])
        check.state.commit_run(plan, columns, last)

    def _one_by_one(self, run: "FactsRun") -> None:
        for facts in run.rows():
            self._one(facts)


def _has_producers(run: "FactsRun") -> bool:
    """Whether any batch of the run has a producer id."""
    if run.outline is not None:
        return run.outline[RO_LARGEST_PRODUCER] >= 0
    return run.columns[PRODUCER_ID].max(initial=-1) >= 0


def _offsets_before(base, last, deltas, last_offset: int | None, outline: list[int] | None = None):
    """Each batch's previous last offset in a run (the largest before it, the partition's so far
    included; for the first batch of a partition its own), or None where a base offset does not pass
    it. A run whose last offsets strictly increase, the usual one, takes two comparisons; none where
    its `outline` says so."""
    import numpy as np

    before = np.empty_like(last)
    if (outline[RO_ASCENDING] if outline is not None
            else (deltas >= 0).all() and (base[1:] > last[:-1]).all()):  # the largest before each is the one before it
        before[1:] = last[:-1]
        before[0] = last[0] if last_offset is None else last_offset
        return before if last_offset is None or base[0] > last_offset else None
    before[1:] = np.maximum.accumulate(last)[:-1]
    if last_offset is None:
        before[0] = last[0]  # nothing to follow
        return None if (base[1:] <= before[1:]).any() else before
    before[0] = last_offset
    np.maximum(before, last_offset, out=before)
    return None if (base <= before).any() else before


def _epoch_starts(epochs, previous_epoch: int, outline: list[int] | None = None) -> list[int] | None:
    """Rows of a run where a new leader epoch starts (above every epoch before it, `previous_epoch`
    the partition's so far; -1: no epoch, which batches without one keep), or None where an epoch
    decreases. A run whose epochs are all set and never decrease, the usual one, takes three passes;
    none where its `outline` says they are one epoch."""
    import numpy as np

    if outline is not None and outline[RO_EPOCHS_RISE] and not outline[RO_EPOCH_CHANGES] and len(epochs):
        first = int(epochs[0])
        if first >= max(previous_epoch, 0):
            return [0] if first > previous_epoch else []
    if len(epochs) and epochs[0] >= max(previous_epoch, 0) and (epochs[1:] >= epochs[:-1]).all():
        rows = (np.flatnonzero(epochs[1:] != epochs[:-1]) + 1).tolist()
        return [0] + rows if epochs[0] > previous_epoch else rows
    has_epoch = np.flatnonzero(epochs >= 0)
    if not len(has_epoch):
        return []
    ordered = epochs[has_epoch]
    highest = np.maximum.accumulate(ordered)
    previous = np.empty_like(highest)
    previous[1:] = highest[:-1]
    previous[0] = previous_epoch
    if (ordered < previous).any():
        return None
    return has_epoch[ordered > previous].tolist()


@dataclass
class PartitionOutcome:
    """Stage 2 of a partition finished elsewhere (on a Spark executor, or in a worker process of
    `verify.parallel`), replayed where the findings are reported."""

    topic_partition: tuple[str, int]
    findings: list[Finding]
    facts: PartitionFacts
    summary: Summary

    def run(self) -> Iterator[Finding]:
        return iter(self.findings)


def check_partition(partition: PartitionDir, named: list[Segment] | None, deep: bool,
                    reports: Iterable[SegmentReport | RangeReport]) -> PartitionOutcome:
    """Stage 2 of one partition over stage 1 reports made elsewhere: a segment's own, or those of
    its byte ranges, put together here (reading the segment where they could not tell)."""
    by_log: dict[str, SegmentReport | list[RangeReport]] = {}
    for report in reports:
        if isinstance(report, RangeReport):
            by_log.setdefault(report.log, []).append(report)
        else:
            by_log[report.log] = report

    def stage_1(segment: Segment, is_active: bool, consumer: BatchConsumer) -> SegmentReport:
        found = by_log[str(segment.log)]
        if isinstance(found, SegmentReport):
            return found
        return check_segment(segment, is_active, deep, on_batch=consumer, live=found[0].live, ranges=found)

    return partition_outcome(partition, named, deep, stage_1)


def partition_outcome(partition: PartitionDir, named: list[Segment] | None, deep: bool,
                      check_segment: SegmentChecker) -> PartitionOutcome:
    """Both stages of one partition, their findings kept to be replayed where they are reported."""
    summary = Summary(records=0 if deep else None)
    check = PartitionCheck(partition, named, deep, summary, check_segment)
    findings = list(check.run())
    return PartitionOutcome(check.topic_partition, findings, check.facts, summary)


def _epoch_start_compacted(recorded_start: int, first_in_log: int, previous_last_offset: int | None) -> bool:
    """The checkpoint may name an offset the log no longer holds: retention or the cleaner removed
    the epoch's first batches (LeaderEpochFileCache keeps the entry). That is consistent as long as
    no earlier epoch's batch sits at or after the recorded start."""
    return recorded_start <= first_in_log and (previous_last_offset is None or recorded_start > previous_last_offset)


class AbortMarkers:
    """A segment's ABORT markers, as (producer id, offset): added one at a time, or a run's as
    columns, made a set only when asked about (a .txnindex entry that the log does not explain)."""

    def __init__(self):
        self.known: set[tuple[int, int]] = set()
        self.runs: list = []

    def add(self, marker: tuple[int, int]) -> None:
        self.known.add(marker)

    def add_run(self, producer_ids, offsets) -> None:
        self.runs.append((producer_ids, offsets))

    def __contains__(self, marker: tuple[int, int]) -> bool:
        for producer_ids, offsets in self.runs:
            self.known.update(zip(producer_ids.tolist(), offsets.tolist()))
        self.runs.clear()
        return marker in self.known


def check_txn_index(segment: Segment, report: SegmentReport, expected: AbortedTxns, abort_markers: AbortMarkers,
                    exact_state: bool) -> Iterator[Finding]:
    """The .txnindex against the aborted transactions that the producer state says this
    segment's ABORT markers end (`abort_markers`: every ABORT marker, as (producer id, offset))."""
    if segment.txnindex is None:
        if expected:
            yield Finding(ERROR, "txnindex-missing", index_path(segment, ".txnindex"), None,
                          f"no transaction index, but {len(expected)} aborted transaction(s) end in this segment: "
                          f"read_committed consumers would see their records",
                          {"aborted": [_txn_json(t) for t in expected]})
        return
    yield from report.txn_findings
    if report.txn_entries is None:
        return
    if _holds_exactly(report.txn_entries, expected):
        return  # (the loops below would find nothing: the same keys, each with the entry expected)
    file = str(segment.txnindex)
    actual = {(e.producer_id, e.last_offset): e for e in txn_index.entries_of(report.txn_entries)}
    wanted = {(e.producer_id, e.last_offset): e for e in expected}
    for key, entry in actual.items():
        known = wanted.get(key)
        # (an entry of an ABORT marker in the segment that ends no transaction of the replay: Kafka's
        # cleaner keeps the entry of an aborted transaction whose batches it removed, marker kept)
        if known is None and key not in abort_markers:
            yield Finding(ERROR, "txnindex-unknown-abort", file, entry.position,
                          f"entry for producer {entry.producer_id} ending at {entry.last_offset} matches no ABORT "
                          f"marker that ends a transaction in this segment", {"entry": _txn_json(entry)})
        # (the cleaner keeps an entry as it was: its transaction's first offset and LSO from before the
        # batches it removed, so a cleaned log's entries may say less than the replay, never more)
        elif known is not None and exact_state and (entry.first_offset > known.first_offset
                                                    or entry.last_stable_offset > known.last_stable_offset):
            yield Finding(ERROR, "txnindex-entry-mismatch", file, entry.position,
                          f"entry for producer {entry.producer_id} ending at {entry.last_offset} says first offset "
                          f"{entry.first_offset}, LSO {entry.last_stable_offset}; the log says "
                          f"{known.first_offset}, LSO {known.last_stable_offset}",
                          {"entry": _txn_json(entry), "expected": _txn_json(known)})
    for key, entry in wanted.items():
        if key not in actual:
            yield Finding(ERROR, "txnindex-missing-abort", file, None,
                          f"the ABORT marker of producer {entry.producer_id} at offset {entry.last_offset} ends a "
                          f"transaction from offset {entry.first_offset}, but the index has no entry for it",
                          {"expected": _txn_json(entry)})


def _holds_exactly(entries, expected: AbortedTxns) -> bool:
    """Whether a .txnindex's entries (`TransactionIndex.columns`) are the expected transactions, in
    order: what a healthy segment has, compared as columns (thousands a segment in busy logs)."""
    import numpy as np

    wanted = expected.columns()
    return len(entries) == wanted.shape[1] and all(np.array_equal(entries[name], wanted[row])
                                                   for row, name in enumerate(txn_index.COLUMNS))


def _txn_json(txn: AbortedTxn) -> dict:
    return {"producer_id": txn.producer_id, "first_offset": txn.first_offset, "last_offset": txn.last_offset,
            "last_stable_offset": txn.last_stable_offset}


def _compare_snapshot(snapshot: producer_snapshot.ProducerSnapshot, state: ProducerState) -> list[Finding]:
    """A snapshot against the state replayed up to its offset (producers expired from the
    snapshot are not differences)."""
    replayed = state.snapshot_entries()
    findings = []
    for entry in snapshot.entries:
        ours = replayed.get(entry.producer_id)
        if ours != entry:
            findings.append(Finding(WARNING, "snapshot-disagrees", snapshot.path, None,
                                    f"producer {entry.producer_id}: the snapshot says {_snapshot_text(entry)}, "
                                    f"the log says {_snapshot_text(ours)}", {"producer_id": entry.producer_id}))
    return findings


def _snapshot_text(entry: producer_snapshot.ProducerEntry | None) -> str:
    if entry is None:
        return "nothing (no batch of this producer)"
    return (f"epoch {entry.epoch}, last sequence {entry.last_sequence}, last offset {entry.last_offset}, "
            f"coordinator epoch {entry.coordinator_epoch}, open transaction from {entry.current_txn_first_offset}")
