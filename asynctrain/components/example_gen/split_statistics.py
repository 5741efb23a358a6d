"""TFDV statistics of each split, computed by the ExampleGen from the columns it encodes.

Stock StatisticsGen reads every example back, decodes it to Arrow and runs TFDV over it: at a
million taxi rows that is a component of its own (its time in `docs/bench_pipeline.json`), most
of it reading and decoding. The ExampleGen already holds each chunk's rows as typed Arrow
columns before encoding them, so it hands those to TFDV's `GenerateStatistics`, in the form the
decoder gives them (`decoded_columns`). The result is StatisticsGen's artifact,
`Split-<name>/FeatureStats.pb`, with the same statistics
(tests/components/example_gen/split_statistics_test.py compares them).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import apache_beam as beam

# StatisticsGen's file name inside each split's folder (tfx.components.statistics_gen.executor).
STATISTICS_FILE_NAME = 'FeatureStats.pb'


def split_path(statistics_dir: str, split: str) -> str:
    return os.path.join(statistics_dir, f'Split-{split}', STATISTICS_FILE_NAME)


class WriteSplitStatistics(beam.PTransform):
    """(split name, RecordBatch) elements in; each split's statistics written as StatisticsGen
    writes them, with TFDV's default options (what StatisticsGen uses unconfigured)."""

    def __init__(self, statistics_dir: str, split_names: Sequence[str]):
        super().__init__()
        self._statistics_dir = statistics_dir
        self._split_names = tuple(split_names)

    def expand(self, batches: beam.PCollection) -> beam.pvalue.PDone:
        import tensorflow_data_validation as tfdv

        for split in self._split_names:
            _ = (
                batches
                | f'Select[{split}]' >> beam.Filter(lambda e, s=split: e[0] == s)
                | f'Batch[{split}]' >> beam.Map(lambda e: e[1])
                | f'GenerateStatistics[{split}]' >> tfdv.GenerateStatistics(tfdv.StatsOptions())
                | f'WriteStatistics[{split}]'
                >> tfdv.WriteStatisticsToBinaryFile(split_path(self._statistics_dir, split))
            )
        return beam.pvalue.PDone(batches.pipeline)
