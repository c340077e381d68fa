"""BatchTable: batches added one by one and in numpy columns, in any mix, read back in order (the
bulk scan extends, the per-batch path adds, alternately on logs with markers), also after a
pickle (Spark sends byte ranges' tables) and when ranges are appended."""
import pickle
import random
from types import SimpleNamespace

import numpy as np

from kafkalog_tools.verify.indexes import BatchTable


def _batches(rng: random.Random, n: int) -> list[SimpleNamespace]:
    position, offset, batches = 0, 0, []
    for _ in range(n):
        size, records = rng.randrange(61, 400), rng.randrange(1, 5)
        batches.append(SimpleNamespace(position=position, size=size, base_offset=offset,
                                       last_offset=offset + records - 1, max_timestamp=rng.randrange(-1, 1000)))
        position, offset = position + size, offset + records
    return batches


def _filled(batches, rng: random.Random, reads: bool = True) -> BatchTable:
    """A table of `batches`, added one by one or a numpy run at a time at random, read mid-way now and then."""
    table, i = BatchTable(), 0
    while i < len(batches):
        if rng.random() < 0.5:
            table.add(batches[i], batches[i].base_offset)
            i += 1
            continue
        run = batches[i:i + rng.randrange(1, 30)]
        columns = [np.array([getattr(b, name) for b in run], dtype=np.int64)
                   for name in ("position", "size", "base_offset", "last_offset", "max_timestamp")]
        table.extend(*columns)
        for column in columns:
            column[:] = 0  # the scan reuses its buffers: the table keeps its own copy
        i += len(run)
        if reads and rng.random() < 0.1:
            assert table.positions.tolist() == [b.position for b in batches[:i]]
    return table


def _expected(batches) -> dict:
    prefix, largest = [], -1
    for b in batches:
        largest = max(largest, b.max_timestamp)
        prefix.append(largest)
    return {"positions": [b.position for b in batches], "base_offsets": [b.base_offset for b in batches],
            "last_offsets": [b.last_offset for b in batches], "prefix_max_timestamps": prefix}


def _columns(table: BatchTable) -> dict:
    return {name: getattr(table, name).tolist() for name in ("positions", "base_offsets", "last_offsets",
                                                             "prefix_max_timestamps")}


def test_batches_added_one_by_one_and_in_columns_read_back_in_order():
    rng = random.Random(7)
    batches = _batches(rng, 600)
    table = _filled(batches, rng)
    assert _columns(table) == _expected(batches)
    assert (len(table), table.first_base_offset, table.end) == (600, 0, batches[-1].position + batches[-1].size)
    assert table.max_timestamp == max(b.max_timestamp for b in batches)
    assert table.at_position(batches[300].position) == 300
    assert table.holding(batches[450].last_offset) == 450


def test_a_pickled_table_and_appended_ranges_hold_the_same_batches():
    rng = random.Random(11)
    batches = _batches(rng, 500)
    first, second = (_filled(part, rng, reads=False) for part in (batches[:200], batches[200:]))
    copy = pickle.loads(pickle.dumps(second))
    first.append(copy)
    first.add(SimpleNamespace(position=10**6, size=100, last_offset=10**6, max_timestamp=-1), 10**6)
    assert _columns(first) == _expected(batches + [SimpleNamespace(position=10**6, base_offset=10**6,
                                                                   last_offset=10**6, max_timestamp=-1)])
