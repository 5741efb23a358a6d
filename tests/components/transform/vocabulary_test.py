"""The vocabulary analyzer our preprocessing uses (`tft.experimental.approximate_vocabulary`, a
combiner) gives `tft.vocabulary`'s vocabulary, token for token and in the same order, ties
included, while the distinct values fit in `top_k`: the same files in the same graph."""

from __future__ import annotations

import random

import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils


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
