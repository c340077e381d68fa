"""verify's index checks two ways: entry by entry (the reference, which writes every finding) and
with the numpy pre-check that picks the entries the loop would report (`_offset_slots_to_check`,
`_time_slots_to_check`). `VECTORISED_INDEX_MIN_ENTRIES` is set to 0 and to infinity so both run on
the same inputs: the corpus, seeded damaged copies of it, and a generated partition whose indexes
are edited into every kind of wrong (and some unusual kinds of right)."""
from __future__ import annotations

import bisect
import importlib.util
import itertools
import math
import random
import shutil
import sys
from pathlib import Path

import pytest

from kafkalog_tools import verify
from kafkalog_tools.native import bulk_scan
from kafkalog_tools.verify import indexes, segment
from kafkalog_tools.formats.index_file import IndexFile
from kafkalog_tools.formats.offset_index import OffsetIndex
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.formats.segment import SegmentFile
from kafkalog_tools.formats.time_index import TimeIndex
from kafkalog_tools.recovery import Rebuild, RebuildOptions
from tests.conftest import ROOT
from tests.damage import corpus_paths, damaged_copies
from tests.test_verify import edit_offset_index, edit_time_index

ACTIVE = 20_000
"""Base offset of the generated partition's second (active) segment; the first ends well before."""


def verify_both_ways(monkeypatch, paths: list[str]) -> tuple[list[dict], list[tuple[int, int]], list[bool]]:
    """Findings (all of them: nothing suppressed) and summary, entry by entry and pre-checked, and
    both again from batch tables that keep only the rows the index entries reach (where the
    kernels are here); they must be equal. Returns the findings, per index the pre-check handled
    (entries, entries it left to the loop), and per table kept so whether it left rows out."""
    picked = []

    def spy(pick):
        def spied(index, count, table):
            slots = pick(index, count, table)
            if not isinstance(slots, range):
                picked.append((count, len(slots)))
            return slots
        return spied

    monkeypatch.setattr(indexes, "_offset_slots_to_check", spy(indexes._offset_slots_to_check))
    monkeypatch.setattr(indexes, "_time_slots_to_check", spy(indexes._time_slots_to_check))
    outcomes = []
    for threshold in (math.inf, 0):
        monkeypatch.setattr(indexes, "VECTORISED_INDEX_MIN_ENTRIES", threshold)
        run = verify.Verification(paths, max_findings_per_code=sys.maxsize)
        outcomes.append(([f.to_json() for f in run], run.summary))
    assert outcomes[1] == outcomes[0]
    pre_checked = picked[:]  # (the spy goes on adding below)
    left_out = []
    if kernels_here():  # the bulk scan's runs, keeping only the rows the index entries reach
        monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
        monkeypatch.setattr(segment, "SPARSE_TABLE_ROWS", 0)
        monkeypatch.setattr(indexes.BatchTable, "release",
                            lambda table: left_out.append(table.left_out) if table.queries is not None else None)
        for threshold in (math.inf, 0):
            monkeypatch.setattr(indexes, "VECTORISED_INDEX_MIN_ENTRIES", threshold)
            run = verify.Verification(paths, max_findings_per_code=sys.maxsize)
            assert ([f.to_json() for f in run], run.summary) == outcomes[0]
        assert left_out
    return outcomes[0][0], pre_checked, left_out


def kernels_here() -> bool:
    return importlib.util.find_spec("numba") is not None and bulk_scan.kernel() is not None


# ---------------------------------------------------------------------------------------------
# The bulk reader against the per-entry one
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [OffsetIndex, TimeIndex])
def test_columns_and_valid_count_read_what_the_struct_reads(kind: type[IndexFile], tmp_path):
    rng = random.Random(3)
    size = kind.ENTRY.size
    path = tmp_path / "00000000000000000000.index"
    for _ in range(200):
        data = bytearray(rng.randbytes(size * rng.randrange(0, 40)))
        for _ in range(rng.randrange(3) if data else 0):  # relative offsets of 0 where valid_count must stop
            slot = rng.randrange(len(data) // size)
            start = slot * size + (0 if kind.RELATIVE_OFFSET_FIELD == 0 else size - 4)
            data[start:start + 4] = bytes(4)
        index = kind(path, 0, data=bytes(data) + rng.randbytes(rng.randrange(size)))
        assert index.columns(index.entry_count).dtype.itemsize == size
        assert [tuple(int(v) for v in row) for row in index.columns(index.entry_count)] == \
            [index.raw(slot) for slot in range(index.entry_count)]
        reference = next((slot for slot in range(1, index.entry_count)
                          if index.raw(slot)[kind.RELATIVE_OFFSET_FIELD] == 0), index.entry_count)
        assert index.valid_count() == reference


# ---------------------------------------------------------------------------------------------
# The corpus and damaged copies of it
# ---------------------------------------------------------------------------------------------


def test_both_ways_agree_on_the_corpus(monkeypatch):
    findings, picked, left_out = verify_both_ways(monkeypatch,
                                                  corpus_paths() + [str(ROOT / "fixtures" / "example-logdir")])
    assert len(picked) > 20
    assert any(left_out) or not kernels_here()
    assert {"index-missing", "index-preallocated", "timeindex-no-final-entry"} <= {f["code"] for f in findings}


def test_both_ways_agree_on_damaged_copies(monkeypatch, tmp_path):
    findings, picked, left_out = verify_both_ways(monkeypatch, damaged_copies(tmp_path))
    assert picked
    assert any(left_out) or not kernels_here()
    assert any(f["code"].startswith("index-") for f in findings)


# ---------------------------------------------------------------------------------------------
# A generated partition, its indexes edited
# ---------------------------------------------------------------------------------------------


class Records:
    """Every record's (offset, timestamp) in the generated partition, and what the log says the
    largest timestamp up to an offset is."""

    def __init__(self, records: list[tuple[int, int]]):
        self.offsets = [o for o, _ in records]
        self.largest = list(itertools.accumulate((t for _, t in records), max))

    def largest_up_to(self, offset: int) -> int:
        at = bisect.bisect_right(self.offsets, offset) - 1
        return self.largest[at] if at >= 0 else -1


def _write_partition(directory: Path) -> Records:
    """Two segments (1500 batches, then an active one of 300): 1-4 records a batch, offsets with
    gaps between batches and inside them, timestamps that mostly rise but fall back now and then;
    indexes as rebuild-index writes them with an entry per batch."""
    rng = random.Random(11)
    directory.mkdir()
    records_written = []
    offset, timestamp = 0, 1_700_000_000_000
    for base, batches in ((0, 1500), (ACTIVE, 300)):
        assert offset <= base
        offset = base
        with open(directory / f"{offset:020d}.log", "wb") as out:
            for _ in range(batches):
                deltas = [0] + sorted(rng.sample(range(1, 6), rng.randrange(4)))
                timestamp += rng.randrange(-30, 40)
                stamps = [timestamp + rng.randrange(-20, 20) for _ in deltas]
                records = [build_record(d, s - stamps[0], b"k", b"v" * rng.randrange(60))
                           for d, s in zip(deltas, stamps)]
                out.write(build_batch(offset, records, last_offset_delta=deltas[-1], base_timestamp=stamps[0],
                                      max_timestamp=max(stamps)))
                records_written += [(offset + d, s) for d, s in zip(deltas, stamps)]
                offset += deltas[-1] + 1 + (rng.randrange(1, 4) if rng.random() < 0.2 else 0)
    list(Rebuild([directory], RebuildOptions(backup=False, index_interval_bytes=0)))
    return Records(records_written)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[Path, Records]:
    directory = tmp_path_factory.mktemp("generated") / "topic-0"
    return directory, _write_partition(directory)


def _batches(work: Path, base: int) -> list:
    with SegmentFile(work / f"{base:020d}.log") as log:
        return [(b.position, b.base_offset, b.last_offset) for b in log.entries()]


def _append(path: Path, data: bytes) -> None:
    path.write_bytes(path.read_bytes() + data)


def _offset(change):
    return lambda work, records: edit_offset_index(work, 0, lambda e: change(e, _batches(work, 0)))


def _time(change, base=0):
    return lambda work, records: edit_time_index(work, base, lambda e: change(e, records, _batches(work, base)))


def _swap(entries, first):
    entries[first], entries[first + 1] = entries[first + 1], entries[first]


def _skip(entries, batches):
    """Entry 100 sends the last offset of the batch before to the batch after it."""
    entries[100] = (batches[99][2], batches[100][0])


def _into_a_gap(entries, batches):
    """Entries naming an offset no batch holds, at the batch after the gap."""
    for slot in range(1, len(batches)):
        if batches[slot][1] > batches[slot - 1][2] + 1:
            entries[slot] = (batches[slot - 1][2] + 1, batches[slot][0])


def _inside_batches(entries, records, batches, extra=0):
    """The whole time index rewritten at the first offset of every batch of several records, with the
    largest timestamp up to it (+ `extra`): offsets only the batch's records can settle."""
    entries[:] = []
    for _, first, last in batches:
        largest = records.largest_up_to(first) + extra
        if last > first and (not entries or largest > entries[-1][0]):
            entries.append((largest, first))
    final = records.largest_up_to(batches[-1][2]) + extra
    if final > entries[-1][0]:
        entries.append((final, batches[-1][2]))


def _random_edits(seed):
    def edit(work, records):
        rng = random.Random(seed)
        batches = _batches(work, 0)

        def offsets(entries):
            for _ in range(20):
                slot = rng.randrange(len(entries))
                batch = rng.choice(batches)
                entries[slot] = rng.choice([(batch[1], batch[0]), (batch[2], batch[0]), (batch[2] + 1, batch[0]),
                                            (entries[slot][0], batch[0] + rng.randrange(-2, 3)),
                                            (entries[slot][0] + rng.randrange(-3, 4), entries[slot][1])])

        def times(entries):
            for _ in range(20):
                slot = rng.randrange(len(entries))
                offset = rng.choice(records.offsets) if rng.random() < 0.5 else entries[slot][1] + rng.randrange(-3, 4)
                stamp = entries[slot][0] + rng.randrange(-40, 40) if rng.random() < 0.5 else records.largest_up_to(offset)
                entries[slot] = (stamp, offset)

        edit_offset_index(work, 0, offsets)
        edit_time_index(work, 0, times)
    return edit


def _zero_log(work, records):
    log = work / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    data[30_000:32_000] = bytes(2000)
    log.write_bytes(bytes(data))


def _offsets_go_back(work, records):
    """The log's batch 700 is batch 10 again: last offsets no longer ascend, so no pre-check."""
    log = work / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    batches = _batches(work, 0)
    (start, _, _), (end, _, _) = batches[700], batches[701]
    (copy_start, _, _), (copy_end, _, _) = batches[10], batches[11]
    log.write_bytes(bytes(data[:start] + data[copy_start:copy_end] + data[end:]))


EDITS = {
    "as-rebuilt": lambda work, records: None,
    "index-order": _offset(lambda e, b: _swap(e, 10)),
    "index-position-not-batch-start": _offset(lambda e, b: e.__setitem__(20, (e[20][0], e[20][1] + 1))),
    "index-position-negative": _offset(lambda e, b: e.__setitem__(30, (e[30][0], -5))),
    "index-position-beyond-log": _offset(lambda e, b: e.__setitem__(-1, (e[-1][0], b[-1][0] + 10_000))),
    "index-offset-below-base": _offset(lambda e, b: e.__setitem__(5, (-1, e[5][1]))),
    "index-offset-beyond-log": _offset(lambda e, b: e.__setitem__(-1, (b[-1][2] + 50, e[-1][1]))),
    "index-skips-offset": _offset(_skip),
    "index-offset-not-in-log": _offset(_into_a_gap),
    "index-first-offsets": _offset(lambda e, b: e.__setitem__(slice(None), [(first, p) for p, first, _ in b])),
    "index-every-entry-wrong": _offset(lambda e, b: e.__setitem__(slice(None), [(o + 1, p + 1) for o, p in e])),
    "index-zero-tail": lambda work, records: _append(work / f"{0:020d}.index", bytes(800)),
    "index-active-preallocated": lambda work, records: _append(work / f"{ACTIVE:020d}.index", bytes(800)),
    "index-trailing-bytes": lambda work, records: _append(work / f"{0:020d}.index", bytes(3)),
    "index-all-zero": lambda work, records: (work / f"{0:020d}.index").write_bytes(bytes(8000)),
    "timeindex-order": _time(lambda e, r, b: _swap(e, 4)),
    "timeindex-equal-timestamps": _time(lambda e, r, b: e.__setitem__(5, (e[4][0], e[5][1]))),
    "timeindex-offset-backwards": _time(lambda e, r, b: e.__setitem__(6, (e[6][0], e[5][1] - 1))),
    "timeindex-offset-below-base": _time(lambda e, r, b: e.__setitem__(0, (e[0][0], ACTIVE - 1)), base=ACTIVE),
    "timeindex-offset-beyond-log": _time(lambda e, r, b: e.__setitem__(-1, (e[-1][0], ACTIVE + 10))),
    "timeindex-timestamp-not-in-log": _time(lambda e, r, b: e.__setitem__(3, (e[3][0] + 1, e[3][1]))),
    "timeindex-inside-batches": _time(_inside_batches),
    "timeindex-inside-batches-too-late": _time(lambda e, r, b: _inside_batches(e, r, b, extra=1)),
    "timeindex-no-final-entry": _time(lambda e, r, b: e.pop()),
    "timeindex-zero-tail": lambda work, records: _append(work / f"{0:020d}.timeindex", bytes(1200)),
    "timeindex-active-preallocated": lambda work, records: _append(work / f"{ACTIVE:020d}.timeindex", bytes(1200)),
    "log-zeroed-region": _zero_log,
    "log-offsets-go-back": _offsets_go_back,
    "log-empty": lambda work, records: (work / f"{0:020d}.log").write_bytes(b""),
    **{f"random-{seed}": _random_edits(seed) for seed in range(6)},
}


@pytest.mark.parametrize("name", EDITS)
def test_both_ways_agree_on_edited_indexes(monkeypatch, tmp_path, generated, name):
    source, records = generated
    work = tmp_path / source.name
    shutil.copytree(source, work)
    EDITS[name](work, records)
    findings, picked, _ = verify_both_ways(monkeypatch, [str(work)])
    index_codes = {f["code"] for f in findings if not f["file"].endswith(".log")}
    if name in ("as-rebuilt", "index-first-offsets", "timeindex-inside-batches"):
        assert index_codes == set()
    elif name.startswith(("index-", "timeindex-")) and "preallocated" not in name:
        assert any(code.startswith(name.split("-")[0] + "-") for code in index_codes), index_codes
    # the indexes of both segments were pre-checked, except where segment 0's log forbids it
    assert len(picked) == (2 if name in ("log-offsets-go-back", "log-empty") else 4)
    if name in ("as-rebuilt", "index-first-offsets"):
        assert [left for _, left in picked] == [0, 0, 0, 0]
    if name == "timeindex-inside-batches":  # the batches' records, not the pre-check, clear most of these
        [(_, offsets_left), (times, times_left)] = picked[:2]
        assert offsets_left == 0 and 0 < times_left < times


def test_where_offsets_fall_under_a_sparse_index_the_table_of_every_row_is_read_again(monkeypatch, tmp_path,
                                                                                       generated):
    """Index entries every eighth batch, then batch 700 is batch 10 again: the table that kept the
    rows those entries reach cannot stand in for every row (a search of rows that do not ascend may
    land anywhere), so the segment is read again for them, and the findings are those of one read
    that kept every row."""
    if not kernels_here():
        pytest.skip("no compiled kernels: the bulk scan's runs are what keep fewer rows")
    source, records = generated
    work = tmp_path / source.name
    shutil.copytree(source, work)
    edit_offset_index(work, 0, lambda entries: entries.__setitem__(slice(None), entries[::8]))
    edit_time_index(work, 0, lambda entries: entries.__setitem__(slice(None), entries[::8]))
    _offsets_go_back(work, records)
    read_again = []
    every_batch = segment._every_batch
    monkeypatch.setattr(segment, "_every_batch", lambda *a: read_again.append(a[1].base_offset) or every_batch(*a))
    findings, _, left_out = verify_both_ways(monkeypatch, [str(work)])
    assert read_again == [0, 0] and left_out == [True, False, True, False]  # (both thresholds; segment 0's then 1's)
    assert {"offset-not-increasing", "index-position-not-batch-start"} <= {f["code"] for f in findings}


def test_a_log_a_broker_may_append_to_keeps_every_row(monkeypatch, generated):
    """Read live, a broker may append index entries after the queries were read: no table leaves
    rows out then, and the findings are those of an offline read."""
    if not kernels_here():
        pytest.skip("no compiled kernels: the bulk scan's runs are what keep fewer rows")
    source, _ = generated
    tables = []
    monkeypatch.setenv(bulk_scan.MODE_VARIABLE, "always")
    monkeypatch.setattr(segment, "SPARSE_TABLE_ROWS", 0)
    monkeypatch.setattr(indexes.BatchTable, "release", lambda table: tables.append(table.queries is not None))
    findings = {}
    for read_as in ("offline", "live"):
        tables.clear()
        findings[read_as] = [f.to_json() for f in verify.Verification([str(source)], read_as=read_as)]
        assert tables == ([True, True] if read_as == "offline" else [False, False])
    assert findings["live"] == findings["offline"]


def test_the_default_threshold_pre_checks_a_big_index(generated):
    source, _ = generated
    assert OffsetIndex(source / f"{0:020d}.index").valid_count() >= indexes.VECTORISED_INDEX_MIN_ENTRIES
    assert [f for f in verify.Verification([str(source)]) if not f.file.endswith(".log")] == []


# ---------------------------------------------------------------------------------------------
# The batch table, however its rows arrive
# ---------------------------------------------------------------------------------------------


def _table_rows(seed: int, n: int) -> list[tuple[int, int, int, int, int]]:
    """(position, size, base offset, last offset, max timestamp) of `n` batches end to end."""
    rng = random.Random(seed)
    rows, position, offset = [], 0, 0
    for _ in range(n):
        size, count = rng.randrange(61, 500), rng.randrange(1, 5)
        rows.append((position, size, offset, offset + count - 1, rng.choice((-1, rng.randrange(10**12)))))
        position, offset = position + size, offset + count + rng.randrange(2)
    return rows


def _add(table: indexes.BatchTable, part, way: str, apart_table=indexes.BatchTable, sent=lambda apart: apart) -> None:
    """The rows `part` added to `table` one by one, as a run (the bulk scan's way), or as a table
    read apart (`apart_table()`, sent on as `sent` sends it: ranges)."""
    from types import SimpleNamespace

    import numpy as np

    if way == "one":
        for position, size, base, last, largest in part:
            table.add(SimpleNamespace(position=position, size=size, last_offset=last, max_timestamp=largest), base)
    elif way == "runs":
        table.extend(*np.array(part, dtype=np.int64).T)
    else:
        apart = apart_table()
        apart.extend(*np.array(part, dtype=np.int64).T)
        table.append(sent(apart))


def _filled(rows, how: str, room: int, queries: indexes.IndexQueries | None = None) -> indexes.BatchTable:
    """A table of `rows` added one by one, in runs (the bulk scan's way), or in runs of tables read
    apart and sent through pickle (ranges), mixed as `how` says; with `queries`, tables that keep
    only the rows those reach."""
    import pickle

    table, at = indexes.BatchTable(room=room, queries=queries), 0
    rng = random.Random(how)
    while at < len(rows):
        step = rng.randrange(1, 40)
        part = rows[at:at + step]
        way = how if how != "mixed" else rng.choice(("one", "runs", "ranges"))
        _add(table, part, way, lambda: indexes.BatchTable(room=rng.choice((0, 3)), queries=queries),
             lambda apart: pickle.loads(pickle.dumps(apart)))
        at += step
    return table


@pytest.mark.parametrize("how", ["one", "runs", "ranges", "mixed"])
@pytest.mark.parametrize("room", [0, 7, 10_000])
def test_the_batch_table_holds_the_same_rows_however_they_arrive(how, room):
    """Rows added one by one, a run at a time, as tables read apart, and mixed, into a table with no
    room reserved, too little (it grows) and plenty: the same columns, lookups and totals as the
    rows themselves say."""
    rows = _table_rows(room, 500)
    table = _filled(rows, how, room)
    positions, bases, lasts = ([row[i] for row in rows] for i in (0, 2, 3))
    prefix = list(itertools.accumulate((row[4] for row in rows), max, initial=-1))[1:]
    assert (len(table), table.first_base_offset, table.end, table.max_timestamp) == (
        len(rows), rows[0][2], rows[-1][0] + rows[-1][1], max(prefix))
    assert [list(map(int, column)) for column in (table.positions, table.base_offsets, table.last_offsets,
                                                 table.prefix_max_timestamps)] == [positions, bases, lasts, prefix]
    rng = random.Random(1)
    for position in rng.sample(range(rows[-1][0] + 10), 300):
        assert table.at_position(position) == (positions.index(position) if position in positions else None)
    for offset in range(-1, lasts[-1] + 3):
        holder = bisect.bisect_left(lasts, offset)
        assert table.holding(offset) == (holder if holder < len(rows) and bases[holder] <= offset else None)
        assert table.last_at_or_before(offset) == bisect.bisect_right(lasts, offset) - 1


@pytest.mark.parametrize("how", ["runs", "ranges", "mixed"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "kernel"])
def test_a_table_of_the_rows_index_entries_reach_answers_their_lookups_as_one_of_every_row(monkeypatch, how, seed,
                                                                                          compiled):
    """A table given the index entries' queries (`IndexQueries`) keeps fewer rows; every lookup the
    index checks make for those entries lands on a batch with the same position, offsets and
    largest timestamp so far as in the table of every row, and so does the batch before it. Where
    the offsets fall, it says it lacks rows (its caller reads the segment again). Its runs chosen
    by numpy (`_rows_asked`) and by the kernel (`keep_asked`)."""
    import numpy as np

    if compiled and not kernels_here():
        pytest.skip("no compiled kernels")
    monkeypatch.setattr(indexes, "_loaded_kernel", bulk_scan.kernel if compiled else lambda: None)

    rng = random.Random(seed)
    rows = _table_rows(seed, 3000)
    if seed == 3:  # offsets that fall back once
        rows[1700:] = [(position, size, base - 40, last - 40, largest) for position, size, base, last, largest
                       in rows[1700:]]
    positions = sorted(rng.sample([row[0] for row in rows], 60) + rng.sample(range(rows[-1][0] + 600), 20))
    offsets = sorted(set(rng.sample(range(-2, rows[-1][3] + 5), 150)))
    holding, after = offsets[::2], offsets[1::2]  # (the offset index's and the time index's)
    queries = indexes.IndexQueries(*(np.array(asked, dtype=np.int64) for asked in (positions, holding, after)))
    every, kept = _filled(rows, how, 0), _filled(rows, how, 0, queries)
    assert len(kept) < len(every) and kept.left_out
    assert kept.lacks_rows == (seed == 3) == (not every.in_order) == (not kept.in_order)
    assert (kept.first_base_offset, kept.end, kept.max_timestamp) == (every.first_base_offset, every.end,
                                                                      every.max_timestamp)
    if seed == 3:
        return

    def facts(table, row):
        return None if row is None or not 0 <= row < len(table) else tuple(int(c[row]) for c in (
            table.positions, table.base_offsets, table.last_offsets, table.prefix_max_timestamps))

    def lookups(table):  # the batch each lookup lands on, and where the checks read it, the one before
        def with_before(row):
            return facts(table, row), facts(table, row - 1 if row is not None else None)
        return ([with_before(table.at_position(q)) for q in positions] + [facts(table, table.holding(q)) for q in holding]
                + [with_before(table.last_at_or_before(q) + 1) for q in after])

    assert lookups(kept) == lookups(every)
    for side, column, needles in (("left", "positions", positions), ("left", "last_offsets", holding),
                                  ("right", "last_offsets", after)):
        for table_answers in zip(*([facts(t, int(r)) for r in np.searchsorted(np.asarray(getattr(t, column)),
                                                                                 needles, side)]
                                   for t in (every, kept))):
            assert table_answers[0] == table_answers[1]
    assert facts(kept, len(kept) - 1) == facts(every, len(every) - 1)


@pytest.mark.parametrize("how", ["one", "runs", "ranges"])
@pytest.mark.parametrize("falls", ["offsets", "positions", "neither"])
def test_the_order_is_checked_where_one_addition_meets_the_next(how, falls):
    """Offsets that fall (or positions that do not rise) exactly between two additions: the table
    is not in order, however the rows arrive."""
    rows = _table_rows(5, 80)
    if falls == "offsets":
        rows[40:] = [(position, size, base - 1000, last - 1000, largest)
                     for position, size, base, last, largest in rows[40:]]
    elif falls == "positions":
        rows[40] = (rows[39][0], *rows[40][1:])
    table = indexes.BatchTable()
    for part in (rows[:40], rows[40:]):
        _add(table, part, how)
    assert table.in_order == (falls == "neither")


def test_the_kernel_keeps_the_rows_numpy_keeps():
    """`kernels.keep_asked` against `BatchTable._rows_asked` and `_prefix_max` on runs that ascend,
    with queries below, inside, between and above them, equal to their values or not."""
    import numpy as np

    if not kernels_here():
        pytest.skip("no compiled kernels")
    kernel = bulk_scan.kernel()
    rng = random.Random(8)
    for _ in range(300):
        n = rng.choice((1, 2, 3, rng.randrange(4, 400)))
        rows = _table_rows(rng.randrange(10**6), n)
        positions, _, bases, lasts, largest = (np.array(column, dtype=np.int64) for column in zip(*rows))
        span = rows[-1][0] + 1000
        def asked(values, high):
            picked = rng.sample(values, min(len(values), rng.randrange(6))) + [rng.randrange(-50, high + 50)
                                                                             for _ in range(rng.randrange(8))]
            return np.unique(np.array(picked, dtype=np.int64))
        queries = indexes.IndexQueries(asked(positions.tolist(), span), asked(lasts.tolist(), int(lasts[-1])),
                                       asked(lasts.tolist(), int(lasts[-1])))
        before = rng.choice((-1, 0, int(largest.max()) + 1))
        table = indexes.BatchTable(queries=queries)
        expected_rows = table._rows_asked(positions, lasts)
        prefix = np.empty(n, dtype=np.int64)
        expected_largest = indexes._prefix_max(largest, before, prefix)
        block = np.full((4, n + 5), -7, dtype=np.int64)
        kept, in_order, largest_after = kernel.keep_asked(positions, bases, lasts, largest, queries, before, block, 3)
        assert (kept, in_order, largest_after) == (len(expected_rows), True, expected_largest)
        assert block[:, 3:3 + kept].tolist() == [column[expected_rows].tolist()
                                                 for column in (positions, bases, lasts, prefix)]
        assert (block[:, :3] == -7).all() and (block[:, 3 + kept:] == -7).all()
    falling = np.array([5, 9, 8], dtype=np.int64)
    block = np.empty((4, 3), dtype=np.int64)
    assert kernel.keep_asked(np.arange(3, dtype=np.int64) * 100, falling, falling, falling,
                             indexes.IndexQueries(falling[:0], falling[:0], falling[:0]), -1, block, 0)[1] is False


@pytest.mark.parametrize("how", ["runs", "mixed"])
def test_a_released_block_serves_the_next_table_with_only_its_own_rows(how):
    """`release` hands the block on: the next table's rows land over the last one's, and it reads
    back its own rows only. A block something still holds (a view of a column) is not handed on.
    (Rows added one by one only make no block.)"""
    import weakref

    first = _filled(_table_rows(1, 800), "runs", 10_000)
    block = weakref.ref(first.block)
    first.release()
    assert len(first) == 0
    rows = _table_rows(2, 300)
    second = _filled(rows, how, 10_000)
    assert second.block is block()
    assert [list(map(int, column)) for column in (second.positions, second.base_offsets, second.last_offsets)] == [
        [row[i] for row in rows] for i in (0, 2, 3)]
    held = second.positions
    second.release()
    third = _filled(rows, "runs", 10_000)
    assert third.block is not block() and held.base is block()
