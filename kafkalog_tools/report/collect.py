"""What the report shows, gathered from the commands' own library calls: `verify.Verification` (its
scan also feeds each partition's `Timeline`, so the log is read once), `retention.analyze_partition`,
`txns.analyze_partition` (only for partitions whose batches are transactional) and `diverge.analyze`
(for partitions that several of the paths given hold a copy of).

Everything kept is bounded whatever the input's size: a timeline keeps at most `TIMELINE_POINTS`
batches (every k-th, k doubling as the log grows), and the first `MARKS` gaps, timestamp steps back
and leader epoch changes with a count of the rest.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import diverge, retention, txns, verify
from ..errors import KafkaLogError
from ..formats.logdir import PartitionDir, Segment
from ..formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
from ..native.columns import ATTRIBUTES, BASE_OFFSET, LAST_OFFSET_DELTA, LEADER_EPOCH, MAX_TIMESTAMP, PRODUCER_ID

TIMELINE_POINTS = 1024
"""Batches a timeline keeps: beyond a few per pixel a plot shows nothing more."""
MARKS = 200
"""Gaps, timestamp steps back and epoch changes kept per partition (the rest are counted)."""
TOP_PRODUCERS = 12


# ---------------------------------------------------------------------------------------------
# A partition's batches over time, downsampled as they stream past
# ---------------------------------------------------------------------------------------------


@dataclass
class Marks:
    """The first `MARKS` places of one kind, and how many there were in all."""

    kept: list[tuple[int, ...]] = field(default_factory=list)
    count: int = 0

    def add(self, rows: np.ndarray) -> None:
        """`rows`: one tuple per place, as a 2-D array."""
        self.count += len(rows)
        room = MARKS - len(self.kept)
        if room > 0:
            self.kept.extend(tuple(int(v) for v in row) for row in rows[:room].tolist())


@dataclass
class Producer:
    batches: int = 0
    transactional: int = 0
    control: int = 0
    first_offset: int | None = None
    """Of its first batch (a hostile one may be negative: -1 cannot stand for none)."""
    last_offset: int = -1


class Timeline:
    """Every intact batch of a partition in log order, as verify's scan hands them over."""

    def __init__(self):
        self.batches = 0
        self.stride = 1
        self.offsets: list[np.ndarray] = []
        self.timestamps: list[np.ndarray] = []
        self.gaps = Marks()
        """(first missing offset, last missing offset, the next batch's max timestamp)."""
        self.steps_back = Marks()
        """(offset, its max timestamp, the largest timestamp before it)."""
        self.epochs = Marks()
        """(leader epoch, first offset)."""
        self.producers: dict[int, Producer] = {}
        self.transactional = False
        self._last_offset: int | None = None
        self._max_timestamp: int | None = None
        self._epoch: int | None = None
        self._pending: list[tuple[int, int, int, int, int, int]] = []

    def add(self, facts: verify.BatchFacts | verify.FactsRun) -> None:
        if type(facts) is verify.FactsRun:
            self._flush_pending()
            columns = facts.columns
            base = columns[BASE_OFFSET]
            self._chunk(base, base + columns[LAST_OFFSET_DELTA], columns[MAX_TIMESTAMP], columns[LEADER_EPOCH],
                        columns[PRODUCER_ID], columns[ATTRIBUTES])
            return
        attributes = (ATTR_TRANSACTIONAL if facts.is_transactional else 0) | (ATTR_CONTROL if facts.is_control else 0)
        self._pending.append((facts.base_offset, facts.last_offset, facts.max_timestamp,
                              facts.partition_leader_epoch, facts.producer_id, attributes))
        if len(self._pending) >= 4096:
            self._flush_pending()

    def finish(self) -> "Timeline":
        self._flush_pending()
        return self

    def _flush_pending(self) -> None:
        if self._pending:
            columns = np.array(self._pending, dtype=np.int64).T
            self._pending = []
            self._chunk(*columns)

    def _chunk(self, base, last, max_ts, epoch, producer, attributes) -> None:
        n = len(base)
        if not n:
            return
        before = np.empty(n, dtype=np.int64)  # each batch's predecessor's last offset
        before[1:] = last[:-1]
        if self._last_offset is None:
            before[:1] = base[:1] - 1  # (wraps as an array does, where a scalar at Long.MIN would warn)
        else:
            before[0] = self._last_offset
        gap = np.flatnonzero(base > before + 1)
        if len(gap):
            self.gaps.add(np.stack([before[gap] + 1, base[gap] - 1, max_ts[gap]], axis=1))
        running = np.maximum.accumulate(max_ts)
        previous_max = np.empty(n, dtype=np.int64)
        previous_max[1:] = running[:-1]
        previous_max[0] = max_ts[0] if self._max_timestamp is None else self._max_timestamp
        if self._max_timestamp is not None:
            np.maximum(previous_max, self._max_timestamp, out=previous_max)
        back = np.flatnonzero(max_ts < previous_max)
        if len(back):
            self.steps_back.add(np.stack([base[back], max_ts[back], previous_max[back]], axis=1))
        previous_epoch = np.empty(n, dtype=np.int64)
        previous_epoch[1:] = epoch[:-1]
        previous_epoch[0] = -2 if self._epoch is None else self._epoch
        change = np.flatnonzero((epoch != previous_epoch) & (epoch >= 0))
        if len(change):
            self.epochs.add(np.stack([epoch[change], base[change]], axis=1))
        self._producers(base, last, producer, attributes)
        # every stride-th batch of the whole partition, so that the kept points stay evenly spread
        first = (-self.batches) % self.stride
        self.offsets.append(np.array(base[first::self.stride]))
        self.timestamps.append(np.array(max_ts[first::self.stride]))
        self.batches += n
        self._last_offset = int(last[-1])
        self._max_timestamp = int(running[-1]) if self._max_timestamp is None else max(self._max_timestamp,
                                                                                       int(running[-1]))
        self._epoch = int(epoch[-1])
        if sum(map(len, self.offsets)) > 2 * TIMELINE_POINTS:
            self._thin()

    def _thin(self) -> None:
        """Keep every other point, the stride doubling, until at most 2 * TIMELINE_POINTS are left."""
        offsets, timestamps = np.concatenate(self.offsets), np.concatenate(self.timestamps)
        while len(offsets) > 2 * TIMELINE_POINTS:
            offsets, timestamps = offsets[::2], timestamps[::2]
            self.stride *= 2
        self.offsets, self.timestamps = [offsets], [timestamps]

    def _producers(self, base, last, producer, attributes) -> None:
        has = producer >= 0
        if not has.any():
            return
        ids, first_row = np.unique(producer[has], return_index=True)
        rows = np.flatnonzero(has)
        transactional = (attributes & ATTR_TRANSACTIONAL) != 0
        control = (attributes & ATTR_CONTROL) != 0
        self.transactional |= bool(transactional[rows].any())
        order = np.argsort(producer[rows], kind="stable")
        sorted_ids = producer[rows][order]
        bounds = np.searchsorted(sorted_ids, ids, side="left"), np.searchsorted(sorted_ids, ids, side="right")
        for pid, lo, hi in zip(ids.tolist(), *(b.tolist() for b in bounds)):
            mine = rows[order[lo:hi]]
            state = self.producers.setdefault(pid, Producer())
            state.batches += hi - lo
            state.transactional += int(transactional[mine].sum())
            state.control += int(control[mine].sum())
            if state.first_offset is None:
                state.first_offset = int(base[mine[0]])
            state.last_offset = int(last[mine[-1]])

    @property
    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """(base offsets, max timestamps) of the batches kept, in log order."""
        if not self.offsets:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        return np.concatenate(self.offsets), np.concatenate(self.timestamps)

    def top_producers(self) -> list[tuple[int, Producer]]:
        """The busiest first; ties by id (not by first appearance, which the scan's runs do not keep)."""
        return sorted(self.producers.items(), key=lambda item: (-item[1].batches, item[0]))[:TOP_PRODUCERS]


class _TappedVerification(verify.Verification):
    """verify's own run, with each partition's intact batches also handed to a Timeline (`watch`)."""

    def __init__(self, paths, **kwargs):
        self.timelines: dict[tuple[int, str], Timeline] = {}
        """By (path given, partition dir): a partition named twice is scanned, and drawn, twice."""
        super().__init__(paths, watch=self._watch, **kwargs)

    def _watch(self, number: int, partition: PartitionDir) -> verify.BatchConsumer:
        return self.timelines.setdefault((number, str(partition.path)), Timeline()).add


# ---------------------------------------------------------------------------------------------
# The report's content
# ---------------------------------------------------------------------------------------------


@dataclass
class Damage:
    start: int
    end: int
    code: str
    severity: str


@dataclass
class SegmentView:
    segment: Segment
    size: int
    active: bool
    damage: list[Damage] = field(default_factory=list)
    findings: int = 0
    errors: int = 0
    retention: retention.SegmentVerdict | None = None


@dataclass
class PartitionView:
    anchor: str
    partition: PartitionDir
    root: str
    """The path given that holds it (several may hold copies of one partition)."""
    segments: list[SegmentView]
    timeline: Timeline
    findings: list[verify.Finding] = field(default_factory=list)
    retention: retention.RetentionReport | None = None
    transactions: txns.PartitionTransactions | None = None
    problems: list[str] = field(default_factory=list)
    """What could not be analysed (retention or txns raised), said instead of the section."""
    by_stem: dict[str, SegmentView] | None = None

    @property
    def name(self) -> str:
        return self.partition.name

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)


@dataclass
class Report:
    paths: list[str]
    summary: verify.Summary
    findings: list[verify.Finding]
    partitions: list[PartitionView]
    divergences: list[tuple[str, diverge.Divergence | str]]
    """(partition name, the analysis or why it failed) for partitions held by several paths."""
    retention_settings: retention.RetentionSettings
    anchors: dict[str, str] = field(default_factory=dict)
    """Partition dir path -> its section's anchor."""

    def anchor_of(self, file: str) -> str | None:
        path = Path(file)
        return self.anchors.get(str(path)) or self.anchors.get(str(path.parent))


def damage_range(finding: verify.Finding) -> tuple[int, int] | None:
    """The byte range a finding marks in its file: damage (position..end) or a cut tail (position, length)."""
    if finding.position is None:
        return None
    if isinstance(finding.extra.get("end"), int):
        return finding.position, finding.extra["end"]
    if isinstance(finding.extra.get("length"), int) and finding.file.endswith(".log"):
        return finding.position, finding.position + finding.extra["length"]
    return None


def verification(paths: list[str], deep: bool = True,
                 max_findings_per_code: int = verify.MAX_FINDINGS_PER_CODE) -> verify.Verification:
    """verify's run over `paths` whose scan also fills the timelines `collect` draws on (its
    `total_bytes` and `on_progress` drive a progress bar as verify's do)."""
    return _TappedVerification(paths, deep=deep, max_findings_per_code=max_findings_per_code)


def collect(run: verify.Verification, paths: list[str], settings: retention.RetentionSettings) -> Report:
    """Run `verification(paths)` and the other analyses; the report's content."""
    findings = list(run)
    views: list[PartitionView] = []
    by_path: dict[str, PartitionView] = {}
    for number, (path, target) in enumerate(zip(paths, run.targets)):
        for partition, named in target.partitions:
            key = (number, str(partition.path))
            view = _partition_view(partition, named, path, len(views), run.timelines.get(key, Timeline()))
            views.append(view)
            by_path[str(partition.path)] = view
    report = Report(list(paths), run.summary, findings, views, [], settings,
                    {key: view.anchor for key, view in by_path.items()})
    for finding in findings:
        view = by_path.get(finding.file) or by_path.get(str(Path(finding.file).parent))
        if view is not None:
            view.findings.append(finding)
            _mark_segment(view, finding)
    for view in views:
        _analyse(view, settings)
    report.divergences = _divergences(views)
    return report


def _partition_view(partition: PartitionDir, named, root: str, number: int, timeline: Timeline) -> PartitionView:
    segments = [s for s in (partition.segments if named is None else named) if s.log is not None]
    last = partition.segments[-1].base_offset if partition.segments else None
    views = []
    for segment in segments:
        try:
            size = segment.log.stat().st_size
        except OSError:
            size = 0
        views.append(SegmentView(segment, size, segment.base_offset == last))
    return PartitionView(f"p{number}", partition, root, views, timeline.finish())


def _segment_of(view: PartitionView, file: str) -> SegmentView | None:
    """The segment whose files (.log, indexes, by base offset) a finding is about."""
    if view.by_stem is None:
        view.by_stem = {str(s.segment.log)[:-len(".log")]: s for s in view.segments}
    stem, dot, _ = file.rpartition(".")
    return view.by_stem.get(stem) if dot else None


def _mark_segment(view: PartitionView, finding: verify.Finding) -> None:
    segment = _segment_of(view, finding.file)
    if segment is None:
        return
    segment.findings += 1
    segment.errors += finding.severity == verify.ERROR
    where = damage_range(finding)
    if where is not None and finding.file == str(segment.segment.log):
        segment.damage.append(Damage(*where, finding.code, finding.severity))


def _analyse(view: PartitionView, settings: retention.RetentionSettings) -> None:
    if not view.segments:
        return
    try:
        view.retention = retention.analyze_partition(view.partition, settings)
    except KafkaLogError as exc:
        view.problems.append(f"retention: {exc}")
    else:
        verdicts = {s.base_offset: s for s in view.retention.segments}
        for segment in view.segments:
            segment.retention = verdicts.get(segment.segment.base_offset)
    if view.timeline.transactional:
        try:
            view.transactions = txns.analyze_partition(view.partition)
        except KafkaLogError as exc:
            view.problems.append(f"transactions: {exc}")


def _divergences(views: list[PartitionView]) -> list[tuple[str, diverge.Divergence | str]]:
    copies: dict[tuple[str, int], list[PartitionView]] = {}
    for view in views:
        copies.setdefault(view.partition.topic_partition, []).append(view)
    out: list[tuple[str, diverge.Divergence | str]] = []
    for group in copies.values():
        paths = list(dict.fromkeys(str(v.partition.path) for v in group))
        if len(paths) < 2:
            continue
        try:
            out.append((group[0].name, diverge.analyze(paths)))
        except KafkaLogError as exc:
            out.append((group[0].name, str(exc)))
    return out
