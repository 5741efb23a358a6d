"""The bench's categorical encoding: the train split's vocabulary, one id per kept value."""

import numpy as np

from asynctrain.benchmarks import recsys_data
from asynctrain.benchmarks.recsys_examples import vocabulary_ids


def test_ids_follow_the_train_count_with_one_oov_id_for_the_rest():
    train = np.array(['b', 'a', 'b', 'c', '', 'c', 'c', 'd'])
    other = np.array(['c', 'b', 'a', 'z', ''])

    train_ids, other_ids = vocabulary_ids(train, 2, train, other)

    # c (3 rows) then b (2); a and d (1 each) are beyond top_k, z unseen, '' empty: id 2.
    np.testing.assert_array_equal(train_ids, [1, 2, 1, 0, 2, 0, 0, 2])
    np.testing.assert_array_equal(other_ids, [0, 1, 2, 2, 2])
    (ties,) = vocabulary_ids(np.array(['y', 'x', 'x', 'y']), 5, np.array(['x', 'y']))
    np.testing.assert_array_equal(ties, [0, 1])
    (empty,) = vocabulary_ids(np.array(['', '']), 3, np.array(['x', '']))
    np.testing.assert_array_equal(empty, [3, 3])


def test_frequent_ids_keep_ids_of_their_own_where_a_hash_of_the_same_size_merges_them():
    """The planted effects sit on each column's most frequent ids: with the vocabulary no two of
    them share a row; hashing into as many buckets as the column has values merges many."""
    import tensorflow as tf

    size = recsys_data.vocabulary_sizes(100_000)[8]  # C9, an effect column
    probabilities = recsys_data.zipf_probabilities(size, 1.1)
    ranks = np.random.default_rng(0).choice(size, 50_000, p=probabilities)
    tokens = np.array([f'{(2654435761 * r + 17) % (1 << 32):08x}' for r in ranks])
    top = np.unique(tokens[np.isin(ranks, np.arange(100))])

    (ids,) = vocabulary_ids(tokens, size, top)
    assert len(np.unique(ids)) == len(top) == 100 and ids.max() < size

    hashed = tf.strings.to_hash_bucket_fast(tf.constant(top), size).numpy()
    assert len(np.unique(hashed)) < 0.9 * len(top)
