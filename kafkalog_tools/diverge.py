"""Replica divergence: copies of one partition from several brokers, where their logs fork, and what
a leader change would truncate on each.

Kafka 3.8 sources: storage/.../epoch/LeaderEpochFileCache.java (assign, endOffsetFor,
truncateFromEnd, truncateFromStart), core/.../server/AbstractFetcherThread.scala
(getOffsetTruncationState, truncateToHighWatermark, fetchTruncatingPartitions), UnifiedLog
(endOffsetForEpoch, latestEpoch), Partition.makeLeader (a new leader epoch starts at the leader's
log end offset), LogSegment.recover (the epoch cache rebuilt from batches), LogSegment.truncateTo
(a truncation removes the whole batch holding the truncation offset); KIP-101 and KIP-279.

A follower asks the leader for the end offset of its latest epoch; the leader answers with the
largest epoch it knows at or below it and where that epoch ends in its log (the start of its next
epoch, or its log end offset). When the follower knows that epoch, it truncates to the smaller of
the two end offsets; when it does not, it truncates to the end of its own epoch below it and asks
again. A replica with no epochs at all truncates to its high watermark.

The leader is the one given, or else the replica with the highest leader epoch (then the longest
log): the one that was leader most recently. Nothing is written.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from .errors import InputError, KafkaLogError
from .formats import checkpoint
from .formats.logdir import PartitionDir, classify
from .formats.segment import BadEntry, SegmentFile
from .retention import checkpointed, initial_log_start_offset

UNDEFINED = -1  # UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET


@dataclass(frozen=True)
class BatchFacts:
    base_offset: int
    last_offset: int
    epoch: int
    crc: int
    records: int


@dataclass
class Replica:
    path: str
    name: str
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int | None = None
    epochs: list[tuple[int, int]] = field(default_factory=list)
    """The leader epoch cache as Kafka loads it: (epoch, start offset), ascending."""
    epoch_source: str = ""
    batch_epochs: list[tuple[int, int]] = field(default_factory=list)
    """The cache rebuilt from the batches (LogSegment.recover's rule)."""
    batches: list[BatchFacts] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # the verdict against the leader
    is_leader: bool = False
    truncation_offset: int | None = None
    truncation_steps: list[str] = field(default_factory=list)
    at_risk: list[BatchFacts] = field(default_factory=list)
    first_difference: int | None = None
    """First offset whose batch differs from the leader's (content or epoch), or that one lacks."""

    @property
    def last_epoch(self) -> int | None:
        return self.epochs[-1][0] if self.epochs else None

    @property
    def records_at_risk(self) -> int:
        return sum(b.records for b in self.at_risk)

    def epoch_ranges(self) -> list[tuple[int, int, int]]:
        """(epoch, first offset, end offset exclusive) held by this replica."""
        ends = [start for _, start in self.epochs[1:]] + [self.log_end_offset]
        return [(epoch, start, end) for (epoch, start), end in zip(self.epochs, ends)]

    def at_risk_by_epoch(self) -> list[tuple[int, int, int, int]]:
        """(epoch, first offset, last offset, records) of the batches a truncation removes."""
        out: list[list[int]] = []
        for b in self.at_risk:
            if out and out[-1][0] == b.epoch and out[-1][2] + 1 == b.base_offset:
                out[-1][2] = b.last_offset
                out[-1][3] += b.records
            else:
                out.append([b.epoch, b.base_offset, b.last_offset, b.records])
        return [tuple(r) for r in out]


@dataclass
class Divergence:
    replicas: list[Replica]
    leader: Replica
    leader_reason: str
    new_epoch: int
    notes: list[str] = field(default_factory=list)

    @property
    def has_problems(self) -> bool:
        return any(r.problems for r in self.replicas)


# ---------------------------------------------------------------------------------------------
# Loading a replica
# ---------------------------------------------------------------------------------------------


def load_replica(path: str | os.PathLike) -> Replica:
    found = classify(path)
    if not isinstance(found, PartitionDir):
        raise InputError("not a partition directory", path=path)
    replica = Replica(os.fspath(path), found.name)
    segments = [s for s in found.segments if s.log is not None]
    for segment in segments:
        _read_batches(segment.log, replica)
    first_base = segments[0].base_offset if segments else 0
    replica.log_end_offset = max([first_base] + [b.last_offset + 1 for b in replica.batches])
    replica.log_start_offset, _ = initial_log_start_offset(found, first_base, replica.problems)
    recorded = checkpointed(found, "replication-offset-checkpoint", replica.problems)
    if recorded is not None:
        replica.high_watermark = min(max(recorded, replica.log_start_offset), replica.log_end_offset)
    replica.batch_epochs = epochs_from_batches(replica.batches)
    _load_epochs(found, replica)
    return replica


def _read_batches(log_path, replica: Replica) -> None:
    with SegmentFile(log_path) as log:
        for entry in log.entries():
            if isinstance(entry, BadEntry) or not entry.crc_valid:
                replica.problems.append(f"{log.path}: byte {entry.position}: unreadable batch; Kafka's recovery "
                                        f"truncates the log here, so the replica is read up to it")
                return
            count = entry.count if entry.count is not None else entry.last_offset - entry.base_offset + 1
            replica.batches.append(BatchFacts(entry.base_offset, entry.last_offset, entry.partition_leader_epoch,
                                              entry.crc, count))


def epochs_from_batches(batches: list[BatchFacts]) -> list[tuple[int, int]]:
    """LogSegment.recover: assign (epoch, base offset) for each batch whose epoch is above the latest."""
    epochs: list[tuple[int, int]] = []
    for b in batches:
        if b.epoch >= 0 and (not epochs or b.epoch > epochs[-1][0]):
            epochs.append((b.epoch, b.base_offset))
    return epochs


def _load_epochs(partition: PartitionDir, replica: Replica) -> None:
    path = partition.files.get(checkpoint.LEADER_EPOCH_CHECKPOINT)
    entries = None
    if path is None:
        replica.notes.append("no leader-epoch-checkpoint: epochs derived from the batches' partition leader epochs; "
                             "Kafka itself would start with an empty epoch cache and truncate this replica to its "
                             f"high watermark ({_text(replica.high_watermark)}) as a follower")
    else:
        try:
            entries = checkpoint.read_leader_epochs(path)
        except KafkaLogError as exc:
            replica.problems.append(f"{exc}; epochs derived from the batches instead")
    if entries is None:
        replica.epochs, replica.epoch_source = list(replica.batch_epochs), "derived from batches"
        return
    replica.epochs = truncate_from_start(truncate_from_end(sorted(entries), replica.log_end_offset),
                                         replica.log_start_offset)
    replica.epoch_source = "leader-epoch-checkpoint"
    if replica.epochs != replica.batch_epochs:
        replica.notes.append(f"leader-epoch-checkpoint {replica.epochs} differs from the epochs in the batches "
                             f"{replica.batch_epochs} (compaction or retention can remove an epoch's first batch); "
                             f"Kafka uses the checkpoint")


def truncate_from_end(epochs: list[tuple[int, int]], end_offset: int) -> list[tuple[int, int]]:
    """LeaderEpochFileCache.truncateFromEnd: drop the epochs starting at or after `end_offset`."""
    return [(e, s) for e, s in epochs if s < end_offset]


def truncate_from_start(epochs: list[tuple[int, int]], start_offset: int) -> list[tuple[int, int]]:
    """LeaderEpochFileCache.truncateFromStart: epochs before the log start offset go, the last of them
    moved up to start there."""
    before = [(e, s) for e, s in epochs if s < start_offset]
    after = [(e, s) for e, s in epochs if s >= start_offset]
    if before and (not after or after[0][1] > start_offset):
        return [(before[-1][0], start_offset)] + after
    return after


def end_offset_for(epochs: list[tuple[int, int]], requested: int, log_end_offset: int) -> tuple[int, int]:
    """LeaderEpochFileCache.endOffsetFor: (the largest epoch <= requested, where it ends)."""
    if requested == UNDEFINED or not epochs:
        return UNDEFINED, UNDEFINED
    if epochs[-1][0] == requested:
        return requested, log_end_offset
    higher = next(((e, s) for e, s in epochs if e > requested), None)
    if higher is None:
        return UNDEFINED, UNDEFINED
    floor = [(e, s) for e, s in epochs if e <= requested]
    return (floor[-1][0] if floor else requested), higher[1]


# ---------------------------------------------------------------------------------------------
# The verdict
# ---------------------------------------------------------------------------------------------


def analyze(paths: list[str | os.PathLike], leader: str | os.PathLike | None = None) -> Divergence:
    replicas = [load_replica(p) for p in paths]
    notes = []
    names = {r.name for r in replicas}
    if len(names) > 1:
        notes.append(f"the directories name different partitions ({', '.join(sorted(names))})")
    if leader is not None:
        wanted = os.path.realpath(leader)  # never raises on a symlink loop (Path.resolve does)
        chosen = next((r for r in replicas if os.path.realpath(r.path) == wanted), None)
        if chosen is None:
            raise InputError("--leader must be one of the replica directories given", path=leader)
        reason = "chosen with --leader"
    else:
        chosen = max(replicas, key=lambda r: (-1 if r.last_epoch is None else r.last_epoch, r.log_end_offset))
        reason = "the highest leader epoch, then the longest log (the most recent leader)"
    chosen.is_leader = True
    new_epoch = max([r.last_epoch for r in replicas if r.last_epoch is not None], default=-1) + 1
    # Partition.makeLeader: the new leader's epoch starts at its log end offset
    leader_epochs = chosen.epochs + [(new_epoch, chosen.log_end_offset)]
    leader_batches = {b.base_offset: b for b in chosen.batches}
    for replica in replicas:
        replica.first_difference = _first_difference(replica, chosen, leader_batches)
        if replica is chosen:
            continue
        replica.truncation_offset, replica.truncation_steps = follower_truncation(
            replica, leader_epochs, chosen.log_end_offset)
        replica.at_risk = [b for b in replica.batches if b.last_offset >= replica.truncation_offset]
    return Divergence(replicas, chosen, reason, new_epoch, notes)


def follower_truncation(follower: Replica, leader_epochs: list[tuple[int, int]],
                        leader_end: int) -> tuple[int, list[str]]:
    """AbstractFetcherThread.getOffsetTruncationState, repeated until the truncation completes."""
    epochs, end = list(follower.epochs), follower.log_end_offset
    steps: list[str] = []
    for _ in range(len(epochs) + 2):
        if not epochs:
            target = follower.high_watermark if follower.high_watermark is not None else follower.log_start_offset
            target = min(target, end)
            steps.append(f"no leader epoch: truncate to the high watermark {target}"
                         + ("" if follower.high_watermark is not None else " (unknown: log start offset used)"))
            return target, steps
        latest = epochs[-1][0]
        leader_epoch, leader_offset = end_offset_for(leader_epochs, latest, leader_end)
        if leader_offset == UNDEFINED:
            target = min(follower.high_watermark if follower.high_watermark is not None else end, end)
            steps.append(f"the leader knows no epoch <= {latest}: truncate to the high watermark {target}")
            return target, steps
        own_epoch, own_offset = end_offset_for(epochs, leader_epoch, end)
        steps.append(f"asked for epoch {latest}: the leader's epoch {leader_epoch} ends at {leader_offset}; "
                     f"here epoch {own_epoch} ends at {own_offset}")
        if own_offset == UNDEFINED:
            return min(leader_offset, end), steps
        if own_epoch != leader_epoch:
            end = min(own_offset, end)
            epochs = truncate_from_end(epochs, end)
            steps.append(f"epoch {leader_epoch} unknown here: truncate to {end} and ask again")
            continue
        return min(own_offset, leader_offset, end), steps
    return end, steps


def _first_difference(replica: Replica, leader: Replica, leader_batches: dict[int, BatchFacts]) -> int | None:
    if replica is leader:
        return None
    common_end = min(replica.log_end_offset, leader.log_end_offset)
    for b in replica.batches:
        if b.base_offset >= common_end:
            break
        theirs = leader_batches.get(b.base_offset)
        if theirs is None or theirs != b:
            return b.base_offset
    if replica.log_end_offset != leader.log_end_offset:
        return common_end
    return None


def _text(value) -> str:
    return "unknown" if value is None else str(value)
