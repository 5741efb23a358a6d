"""The gradient sample a worker reports for TensorBoard: norms and histograms equal NumPy's on
small gradients, an embedding's repeated rows summed first, and the layout reads it back."""

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.trainer.training import gradient_statistics as stats


class _Named:
    def __init__(self, name):
        self.name = name


def _gradients():
    dense = tf.constant([[0.5, -1.5], [2.0, 0.0]])
    # Row 3 twice: the dense gradient's row 3 is their sum.
    rows = tf.IndexedSlices(
        values=tf.constant([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]]),
        indices=tf.constant([3, 0, 3]),
        dense_shape=tf.constant([5, 2]),
    )
    return [dense, rows, None]


def test_norms_and_histograms_equal_numpy_on_the_dense_gradients():
    layout = stats.layout_for([_Named('d/kernel:0'), _Named('e/embeddings:0'), _Named('x')], True)
    sample = stats.sample(_gradients(), histograms=True).numpy()
    assert sample.shape == (layout.size,)
    got = layout.split(sample.tolist())

    dense = np.array([0.5, -1.5, 2.0, 0.0])
    # The embedding's touched rows, repeated ones summed: row 3 = (1.5, 2.5), row 0 = (3, -1).
    rows = np.array([1.5, 2.5, 3.0, -1.0])
    assert got['norms']['d/kernel'] == pytest.approx(np.linalg.norm(dense))
    assert got['norms']['e/embeddings'] == pytest.approx(np.linalg.norm(rows))
    assert got['norms']['x'] == 0.0  # no gradient
    assert got['global_norm'] == pytest.approx(np.linalg.norm(np.concatenate([dense, rows])))

    for name, entries in (('d/kernel', dense), ('e/embeddings', rows)):
        low, high, counts = got['histograms'][name]
        assert (low, high) == (entries.min(), entries.max())
        expected, _ = np.histogram(entries, bins=stats.HISTOGRAM_BUCKETS, range=(low, high))
        assert counts == expected.tolist()
    assert got['histograms']['x'] == (0.0, 0.0, [0] * stats.HISTOGRAM_BUCKETS)


def test_equal_entries_fall_in_one_bucket_and_norms_alone_without_histograms():
    sample = stats.sample([tf.fill([4, 4], 0.25)], histograms=True).numpy().tolist()
    (low, high, counts) = stats.layout_for([_Named('w')], True).split(sample)['histograms']['w']
    assert (low, high) == (0.25, 0.25)
    assert counts == [16] + [0] * (stats.HISTOGRAM_BUCKETS - 1)

    layout = stats.layout_for([_Named('w')], False)
    short = stats.sample([tf.fill([4, 4], 0.25)], histograms=False).numpy().tolist()
    assert len(short) == layout.size == 2
    assert layout.split(short) == {'global_norm': 1.0, 'norms': {'w': 1.0}, 'histograms': {}}


def test_an_embedding_gradient_touching_no_rows_reports_zeros_and_a_wrong_size_is_refused():
    empty = tf.IndexedSlices(
        values=tf.zeros([0, 2]), indices=tf.zeros([0], tf.int32), dense_shape=tf.constant([5, 2])
    )
    layout = stats.layout_for([_Named('e')], True)
    got = layout.split(stats.sample([empty], histograms=True).numpy().tolist())
    assert got['norms'] == {'e': 0.0}
    assert got['histograms']['e'] == (0.0, 0.0, [0] * stats.HISTOGRAM_BUCKETS)
    with pytest.raises(ValueError, match=f'expected {layout.size} values, got 3'):
        layout.split([1.0, 2.0, 3.0])
