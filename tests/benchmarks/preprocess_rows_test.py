"""`bench preprocess` compares two sets of records as sorted rows: order-free, to float32
rounding at each column's scale."""

import numpy as np

from asynctrain.benchmarks import preprocess


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


def test_records_agree_to_float32_rounding_at_their_columns_scale():
    # A z-score column reaching 50 and one near zero: one float32 step of 50 (3.8e-6) apart.
    theirs = np.array([[0.0351, 1.0], [50.0, 2.0], [-3.0, 3.0]])
    step = np.spacing(np.float32(50.0))
    ours = theirs + np.array([[step, 0.0], [0.0, 0.0], [0.0, 0.0]])
    assert preprocess.records_equal(ours, theirs)
    # A value off by a hundred thousandth of its column's scale is not rounding.
    ours = theirs + np.array([[5e-4, 0.0], [0.0, 0.0], [0.0, 0.0]])
    assert not preprocess.records_equal(ours, theirs)
    # The integer column must match to its own scale (3): one off is a different row.
    ours = theirs + np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    assert not preprocess.records_equal(ours, theirs)
    assert not preprocess.records_equal(theirs[:2], theirs)
