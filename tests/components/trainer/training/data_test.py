"""One worker's input pipeline: every eval example once, in batches whose last one may be
partial; training batches full across epoch boundaries; the same data with each cache mode."""

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import data
from asynctrain.components.trainer.training import task as task_lib
from tests.components.trainer.trainer_testdata import (
    LABEL_KEY,
    NUM_EVAL_ROWS,
    NUM_TRAIN_ROWS,
    label_of,
    read_taxi_rows,
)


@pytest.fixture(scope='module')
def schema(transformed_data):
    return task_lib.load_transformed_schema(transformed_data.transform_graph, LABEL_KEY)


def _dataset(transformed_data, schema, split, training, batch_size, cache='none', cache_path=None):
    return data.make_dataset(
        data.split_file_pattern(transformed_data.examples, split),
        schema.feature_spec,
        LABEL_KEY,
        batch_size,
        config_lib.InputConfig(cache=cache),
        training=training,
        cache_path=cache_path,
    )


@pytest.mark.parametrize('cache', config_lib.CACHE_MODES)
def test_eval_reads_every_example_once(transformed_data, schema, cache, tmp_path):
    dataset = _dataset(
        transformed_data, schema, data.EVAL_SPLIT, False, 300, cache, str(tmp_path / 'cache')
    )
    features_spec, label_spec = data.element_spec(schema.feature_spec, LABEL_KEY)
    assert dataset.element_spec == (features_spec, label_spec)
    for _ in range(2):  # a second pass reads the cache when there is one
        batches = list(dataset)
        assert [len(labels) for _, labels in batches] == [300, 300, 300, 100]
        labels = np.concatenate([labels.numpy() for _, labels in batches])
        rows = read_taxi_rows(NUM_TRAIN_ROWS + NUM_EVAL_ROWS)[NUM_TRAIN_ROWS:]
        np.testing.assert_array_equal(labels, [label_of(r) for r in rows])
    features = batches[0][0]
    assert LABEL_KEY not in features
    assert features['fare'].dtype == tf.float32 and features['company'].dtype == tf.int64
    assert (
        features['trip_start_hour'].numpy().max() <= schema.categorical_rows['trip_start_hour'] - 1
    )


def test_training_batches_are_full_across_epochs(transformed_data, schema):
    dataset = _dataset(transformed_data, schema, data.TRAIN_SPLIT, True, 700)
    # 4000 train examples: six batches of 700 cross the first epoch boundary.
    sizes = [len(labels) for _, labels in dataset.take(6)]
    assert sizes == [700] * 6


@pytest.mark.parametrize('cache', ['memory', 'file'])
def test_cached_training_replays_every_example_each_epoch_in_a_new_batch_order(
    transformed_data, schema, cache, tmp_path
):
    batch_size = 100
    dataset = _dataset(
        transformed_data, schema, data.TRAIN_SPLIT, True, batch_size, cache, str(tmp_path / 'cache')
    )
    batches_per_epoch = NUM_TRAIN_ROWS // batch_size  # 4000 examples: 40 full batches
    epochs = list(dataset.take(2 * batches_per_epoch))
    first, second = epochs[:batches_per_epoch], epochs[batches_per_epoch:]

    def fares(batches):
        return np.sort(np.concatenate([f['fare'].numpy() for f, _ in batches]))

    def labels(batches):
        return np.concatenate([lab.numpy() for _, lab in batches])

    # Every training example once per epoch, whether parsed (epoch 1) or replayed (epoch 2).
    every_example = list(_dataset(transformed_data, schema, data.TRAIN_SPLIT, False, 1000))
    expected_labels = sorted(labels(every_example))
    assert len(expected_labels) == NUM_TRAIN_ROWS
    for epoch in (first, second):
        assert [len(lab) for _, lab in epoch] == [batch_size] * batches_per_epoch
        assert sorted(labels(epoch)) == expected_labels
    np.testing.assert_array_equal(fares(first), fares(every_example))
    np.testing.assert_array_equal(fares(second), fares(every_example))
    # Replayed batches hold the same examples as in epoch 1, in a reshuffled order.
    first_keys = [tuple(f['fare'].numpy()) for f, _ in first]
    second_keys = [tuple(f['fare'].numpy()) for f, _ in second]
    assert sorted(first_keys) == sorted(second_keys)
    assert first_keys != second_keys
