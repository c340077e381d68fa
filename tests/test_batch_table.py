"""BatchTable's columns: batches added one by one and in numpy columns, in any mix, read back in
order (the bulk scan extends, the per-batch path adds, alternately on logs with markers)."""
import pickle
import random
from array import array

import numpy as np

from kafkalog_tools.verify.indexes import Int64Column


def test_a_column_keeps_single_values_and_columns_in_order():
    rng = random.Random(7)
    column, expected = Int64Column(), []
    for _ in range(200):
        if rng.random() < 0.5:
            value = rng.randrange(-(1 << 63), 1 << 63)
            column.append(value)
            expected.append(value)
        else:
            values = np.array([rng.randrange(-(1 << 40), 1 << 40) for _ in range(rng.randrange(1, 30))])
            column.extend(values)
            expected.extend(values.tolist())
            values[:] = 0  # the caller's buffer is reused: the column holds its own copy
        if rng.random() < 0.1:
            assert column.values.tolist() == expected  # read mid-way, then extended again
    assert type(column.values) is array and column.values.typecode == "q"
    assert column.values.tolist() == expected


def test_a_column_extended_by_columns_reads_as_their_concatenation():
    column = Int64Column()
    column.append(5)
    column.extend(np.array([1, 2, 3], dtype=np.int32))
    column.append(-1)
    column.append(-2)
    column.extend(np.array([9]))
    assert column.values.tolist() == [5, 1, 2, 3, -1, -2, 9]


def test_a_column_pickles_as_its_values():
    column = Int64Column()
    column.extend(np.arange(5))
    column.append(99)
    copy = pickle.loads(pickle.dumps(column))
    assert copy.values.tolist() == [0, 1, 2, 3, 4, 99]
    copy.append(7)
    assert copy.values.tolist() == [0, 1, 2, 3, 4, 99, 7]
