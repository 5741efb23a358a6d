"""Many `vocabulary` features' vocabularies from one Transform analyzer.

TFT gives each vocabulary analyzer Beam stages of its own: its counts pack with the other
combiners, but every vocabulary is then ordered and written by a `WriteToText` of its own (a
write, a finalize and their shuffles). With 85 vocabulary columns of 5,822 rows that is about 450
bundles to run, and the pipeline takes longer to build and run than the data takes to count
(docs/benchmarks.md, "Transform, many vocabularies"). Here one analyzer counts every
(feature, value) pair of every vocabulary feature and writes all the files in one step.

The files are the ones `tft.vocabulary(values, top_k=..., vocab_filename=name)` writes: the
top_k values by count, most frequent first, ties by the value's bytes, largest first; an empty
vocabulary holds TFT's dummy token. The counts are exact, so while a feature's distinct values
fit in its top_k the files are also `tft.experimental.approximate_vocabulary`'s
(tests/components/transform/vocabulary_test.py), and beyond it they are `tft.vocabulary`'s.
TFT's analyzer cache does not hold these counts (a cacheable PTransform analyzer must have one
output, and this one has a file per feature): a moved window of spans re-counts every span's
vocabulary values. `preprocessing.SHARED_VOCABULARIES_FROM` says from how many vocabulary features
on our preprocessing uses it.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable, Sequence

import apache_beam as beam
import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform import analyzers as tft_analyzers

Counts = dict[tuple[int, bytes], int]
# What `tft.vocabulary` writes for a feature with no values at all: a lookup table cannot be
# built from an empty file.
EMPTY_VOCABULARY_TOKEN = tft_analyzers.get_empy_vocabulary_dummy_value(tf.string)[1]


def vocabulary_filename(name: str) -> str:
    """The file name `tft.vocabulary(..., vocab_filename=name)` gives its vocabulary."""
    return tft_analyzers.sanitized_vocab_filename(filename=name)


def count_batch(batch: Sequence[np.ndarray]) -> Counts:
    """One batch's (feature index, value) counts; the batch is (feature indices, values)."""
    features, values = batch
    return dict(collections.Counter(zip(features.tolist(), values.tolist())))


def merge_counts(accumulators: Iterable[Counts]) -> Counts:
    merged = collections.Counter()
    for counts in accumulators:
        merged.update(counts)
    return dict(merged)


def ordered_vocabularies(counts: Counts, top_ks: Sequence[int]) -> list[list[bytes]]:
    """Each feature's vocabulary: its top_k values by count, ties by value, largest first."""
    by_feature = [[] for _ in top_ks]
    for (feature, value), count in counts.items():
        by_feature[feature].append((count, value))
    vocabularies = []
    for entries, top_k in zip(by_feature, top_ks):
        entries.sort(reverse=True)
        vocabularies.append([value for _, value in entries[:top_k]] or [EMPTY_VOCABULARY_TOKEN])
    return vocabularies


class _WriteVocabularies(tft_beam.experimental.PTransformAnalyzer):
    """Batches of (feature indices, values) -> one vocabulary file per feature, each path its
    own output."""

    def __init__(self, names: Sequence[str], top_ks: Sequence[int]):
        super().__init__()
        self._names = tuple(names)
        self._top_ks = tuple(top_ks)

    def _write(self, counts: Counts) -> list[bytes]:
        tf.io.gfile.makedirs(self.base_temp_dir)
        paths = []
        for name, vocabulary in zip(
            self._names, ordered_vocabularies(counts, self._top_ks), strict=True
        ):
            path = os.path.join(self.base_temp_dir, vocabulary_filename(name))
            with tf.io.gfile.GFile(path, 'wb') as f:
                f.write(b''.join(value + b'\n' for value in vocabulary))
            paths.append(path.encode())
        return paths

    def expand(self, batches: beam.PCollection) -> tuple[beam.PCollection, ...]:
        paths = (
            batches
            | 'CountBatch' >> beam.Map(count_batch)
            | 'MergeBatches' >> beam.CombineGlobally(merge_counts)
            | 'WriteFiles' >> beam.Map(self._write)
        )
        return tuple(
            paths | f'Path{i}' >> beam.Map(lambda p, i=i: np.array(p[i]))
            for i in range(len(self._names))
        )


def vocabulary_files(
    values: Sequence[tf.Tensor], names: Sequence[str], top_ks: Sequence[int]
) -> list[tf.Tensor]:
    """The vocabulary file of each feature, from one analyzer over all of them.

    Args:
      values: Each feature's present values, a flat tf.string tensor.
      names: Each feature's vocabulary name (`vocab_filename`).
      top_ks: Each feature's top_k.

    Returns:
      Each feature's vocabulary file path, a scalar tf.string tensor for `tft.apply_vocabulary`.
    """
    features = tf.concat(
        [
            tf.fill(tf.shape(v, out_type=tf.int64), tf.constant(i, tf.int64))
            for i, v in enumerate(values)
        ],
        axis=0,
    )
    tokens = tf.concat(list(values), axis=0)
    return tft.experimental.ptransform_analyzer(
        inputs=[features, tokens],
        ptransform=_WriteVocabularies(names, top_ks),
        output_dtypes=[tf.string] * len(names),
        output_shapes=[[]] * len(names),
        output_asset_default_values=[EMPTY_VOCABULARY_TOKEN] * len(names),
        name='vocabularies',
    )
