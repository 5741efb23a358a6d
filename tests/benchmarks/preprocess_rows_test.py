"""`bench preprocess` compares two sets of records as sorted rows: order-free, value-exact."""

import numpy as np

from benchmarks import preprocess


def test_rows_in_any_order_sort_the_same_and_a_changed_value_does_not():
    columns = {
        'b': np.array([3, 1, 3, 2], np.int64),
        'a': np.array([0.5, 0.25, -1.0, 0.25], np.float32),
    }
    order = np.array([2, 0, 3, 1])
    shuffled = {name: values[order] for name, values in columns.items()}
    rows = preprocess.sorted_rows(columns)
    # Columns by name ('a', 'b'); rows by the first column, ties by the next.
    np.testing.assert_array_equal(rows, [[-1.0, 3], [0.25, 1], [0.25, 2], [0.5, 3]])
    np.testing.assert_array_equal(preprocess.sorted_rows(shuffled), rows)
    changed = dict(columns, b=np.array([3, 1, 3, 3], np.int64))
    assert not np.array_equal(preprocess.sorted_rows(changed), rows)
