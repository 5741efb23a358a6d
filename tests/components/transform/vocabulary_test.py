"""The vocabulary analyzer our preprocessing used before its shared one
(`tft.experimental.approximate_vocabulary`, a combiner) gives `tft.vocabulary`'s vocabulary, token
for token and in the same order, ties included, while the distinct values fit in `top_k`: the same
files in the same graph, so the shared analyzer's exact counts changed no file of that range
(shared_vocabularies_test.py compares it with `tft.vocabulary`). With a
`frequency_threshold` (or a top_k beyond the combiner's), our preprocessing's vocabulary and ids
are stock `tft.vocabulary`'s with the same arguments."""

from __future__ import annotations

import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from asynctrain.components.transform import feature_config as fc
from asynctrain.components.transform import preprocessing


def _vocabularies(rows: list[dict], top_k: int, temp_dir: str) -> tuple[list[bytes], list[bytes]]:
    """(tft.vocabulary's tokens, approximate_vocabulary's tokens) over `rows`' `token`."""

    def preprocessing_fn(inputs):
        exact = tft.vocabulary(inputs['token'], top_k=top_k, vocab_filename='exact')
        combined = tft.experimental.approximate_vocabulary(
            inputs['token'], top_k=top_k, vocab_filename='combined'
        )
        return {
            'exact': tft.apply_vocabulary(inputs['token'], exact),
            'combined': tft.apply_vocabulary(inputs['token'], combined),
        }

    metadata = dataset_metadata.DatasetMetadata(
        schema_utils.schema_from_feature_spec({'token': tf.io.FixedLenFeature([], tf.string)})
    )
    with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
        transform_fn = (rows, metadata) | tft_beam.AnalyzeDataset(preprocessing_fn)
        output = f'{temp_dir}/transform_fn'
        _ = transform_fn | tft_beam.WriteTransformFn(output)
    graph = tft.TFTransformOutput(output)
    return graph.vocabulary_by_name('exact'), graph.vocabulary_by_name('combined')


def _rows(seed: int, distinct: int, n: int) -> list[dict]:
    """Tokens with a long tail: many share a count (ties), a few are frequent."""
    rng = random.Random(seed)
    tokens = [f'value-{i:03d}' for i in range(distinct)]
    weights = [1.0 / (1 + i // 7) for i in range(distinct)]  # groups of seven tie by design
    return [{'token': rng.choices(tokens, weights)[0]} for _ in range(n)]


@pytest.mark.parametrize(('distinct', 'top_k'), [(60, 1000), (60, 60), (300, 1000)])
def test_combined_vocabulary_is_the_exact_one_while_the_distinct_values_fit(
    tmp_path, distinct, top_k
):
    rows = _rows(0, distinct, 2000)
    exact, combined = _vocabularies(rows, top_k, str(tmp_path))

    assert combined == exact
    assert len(exact) == len({r['token'] for r in rows})
    counts = {}
    for row in rows:
        counts[row['token'].encode()] = counts.get(row['token'].encode(), 0) + 1
    # Ordered by count, most frequent first; ties occur, so the order among them is tested too.
    assert [counts[t] for t in exact] == sorted(counts.values(), reverse=True)
    assert len(set(counts.values())) < len(counts)


def test_beyond_top_k_the_combined_vocabulary_keeps_every_frequent_token(tmp_path):
    """Where distinct values exceed top_k the combiner's counts are approximate, so its order and
    its rarest tokens may differ from the exact vocabulary's; it still keeps top_k tokens and
    every token more frequent than rows / top_k (the Misra-Gries guarantee)."""
    rows = _rows(1, 300, 2000)
    exact, combined = _vocabularies(rows, 50, str(tmp_path))
    counts = {}
    for row in rows:
        counts[row['token'].encode()] = counts.get(row['token'].encode(), 0) + 1

    assert len(exact) == len(combined) == 50
    frequent = {token for token, count in counts.items() if count > len(rows) / 50}
    assert frequent and frequent <= set(combined) and frequent <= set(exact)


def _thresholded(rows: list[dict], spec: dict, temp_dir: str):
    """Our preprocessing's `token` with `spec`, and stock `tft.vocabulary` with the same top_k,
    frequency_threshold and OOV buckets: (ours, stock) vocabularies, transformed rows, and the
    transformed schema's `token` feature."""
    schema = schema_pb2.Schema()
    for name, kind in (('token', schema_pb2.BYTES), ('click', schema_pb2.INT)):
        feature = schema.feature.add(name=name, type=kind)
        feature.value_count.min = feature.value_count.max = 1
    config = fc.parse_feature_config(
        {
            'label': {'column': 'click', 'task': 'binary'},
            'features': [{'name': 'token', 'transform': 'vocabulary', **spec}],
        },
        schema,
    )
    ours = preprocessing.build_preprocessing_fn(config)

    def preprocessing_fn(inputs):
        outputs = ours(inputs)
        # The stock way, on the present values; a missing one is '' (OOV) on both sides.
        tokens = inputs['token']
        stock = tft.vocabulary(
            tokens.values,
            top_k=spec['top_k'],
            frequency_threshold=spec.get('frequency_threshold'),
            vocab_filename='stock',
        )
        dense = tf.reshape(tf.sparse.to_dense(tokens, default_value=''), [-1])
        outputs['stock'] = tft.apply_vocabulary(dense, stock, num_oov_buckets=spec['oov_buckets'])
        return outputs

    metadata = dataset_metadata.DatasetMetadata(schema)
    with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
        (transformed, _), transform_fn = (
            rows,
            metadata,
        ) | tft_beam.AnalyzeAndTransformDataset(preprocessing_fn)
        output = f'{temp_dir}/transform_fn'
        _ = transform_fn | tft_beam.WriteTransformFn(output)
    graph = tft.TFTransformOutput(output)
    feature = next(f for f in graph.transformed_metadata.schema.feature if f.name == 'token')
    return (
        graph.vocabulary_by_name('token'),
        graph.vocabulary_by_name('stock'),
        transformed,
        feature,
    )


@pytest.mark.parametrize(
    'spec',
    [
        {'top_k': 1000, 'frequency_threshold': 25, 'oov_buckets': 2},
        {'top_k': 5, 'frequency_threshold': 25, 'oov_buckets': 1},
        # Over approximate_vocabulary's largest top_k: counted by tft.vocabulary, no threshold.
        {'top_k': preprocessing.APPROXIMATE_VOCABULARY_MAX_TOP_K + 1, 'oov_buckets': 1},
    ],
)
def test_a_frequency_threshold_gives_stock_tft_vocabulary_and_keeps_the_table_shape(tmp_path, spec):
    rows = [
        {'token': [r['token'].encode()], 'click': [i % 2]} for i, r in enumerate(_rows(2, 60, 2000))
    ]
    rows.append({'token': [], 'click': [0]})
    counts = {}
    for row in rows[:-1]:
        counts[row['token'][0]] = counts.get(row['token'][0], 0) + 1

    ours, stock, transformed, feature = _thresholded(rows, spec, str(tmp_path))

    assert ours == stock
    threshold = spec.get('frequency_threshold', 0)
    kept = [token for token, count in counts.items() if count >= threshold]
    # The threshold cuts some tokens out; top_k may cut more.
    assert len(kept) < len(counts) if threshold else len(kept) == len(counts)
    assert len(ours) == min(spec['top_k'], len(kept))
    assert set(ours) <= set(kept)
    assert [row['token'] for row in transformed] == [row['stock'] for row in transformed]
    ids = np.array([row['token'] for row in transformed])
    expected = [
        ours.index(r['token'][0]) if r['token'] and r['token'][0] in ours else -1 for r in rows
    ]
    # A token outside the vocabulary, rare or missing, lands in an OOV id after the vocabulary's.
    outside = np.array(expected) < 0
    assert outside[-1]
    assert outside[:-1].any() == bool(threshold)
    np.testing.assert_array_equal(ids[~outside], np.array(expected)[~outside])
    assert ((ids[outside] >= len(ours)) & (ids[outside] < len(ours) + spec['oov_buckets'])).all()
    # The table has top_k + oov_buckets rows whatever the threshold kept.
    assert (feature.int_domain.min, feature.int_domain.max) == (
        0,
        spec['top_k'] + spec['oov_buckets'] - 1,
    )
