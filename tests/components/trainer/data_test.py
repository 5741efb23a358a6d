"""One worker's input pipeline: every eval example once, in batches whose last one may be
partial; training batches full across epoch boundaries; the same data with each cache mode."""

import numpy as np
import pytest
import tensorflow as tf

from components.trainer import config as config_lib
from components.trainer import data
from components.trainer import task as task_lib
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


def _dataset(transformed_data, schema, split, training, batch_size, cache='none',
             cache_path=None):
    return data.make_dataset(
        data.split_file_pattern(transformed_data.examples, split), schema.feature_spec,
        LABEL_KEY, batch_size, config_lib.InputConfig(cache=cache), training=training,
        cache_path=cache_path)


@pytest.mark.parametrize('cache', config_lib.CACHE_MODES)
def test_eval_reads_every_example_once(transformed_data, schema, cache, tmp_path):
    dataset = _dataset(transformed_data, schema, data.EVAL_SPLIT, False, 300, cache,
                       str(tmp_path / 'cache'))
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
    assert features['trip_start_hour'].numpy().max() <= schema.categorical_rows[
        'trip_start_hour'] - 1


def test_training_batches_are_full_across_epochs(transformed_data, schema):
    dataset = _dataset(transformed_data, schema, data.TRAIN_SPLIT, True, 700)
    # 4000 train examples: six batches of 700 cross the first epoch boundary.
    sizes = [len(labels) for _, labels in dataset.take(6)]
    assert sizes == [700] * 6
