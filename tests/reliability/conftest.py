"""Fixtures of the reliability tests: the bad-CSV corpus, a runner of the Beam transform, and
readers of what it wrote (examples by value, dead-letter records, the summary)."""

import glob
import json
import os
import shutil

import pytest

CORPUS = os.path.join(os.path.dirname(__file__), '..', 'data', 'bad_csv')
SCHEMA = os.path.join(CORPUS, 'schema.pbtxt')


@pytest.fixture
def corpus_input(tmp_path):
    """Copies corpus files (or a corpus folder's files) into one fresh input directory."""

    def make(*names: str) -> str:
        directory = tmp_path / 'input'
        directory.mkdir(exist_ok=True)
        for name in names:
            source = os.path.join(CORPUS, name)
            sources = (
                sorted(glob.glob(os.path.join(source, '*'))) if os.path.isdir(source) else [source]
            )
            for path in sources:
                shutil.copy(path, directory / os.path.basename(path))
        return str(directory)

    return make


def _read_examples(examples_dir: str) -> list[tuple]:
    import tensorflow as tf  # Loaded only by the tests that read examples.

    rows = []
    for path in sorted(glob.glob(os.path.join(examples_dir, 'Split-*', '*.gz'))):
        for record in tf.data.TFRecordDataset(path, compression_type='GZIP').as_numpy_iterator():
            feature = tf.train.Example.FromString(record).features.feature
            rows.append(
                (
                    tuple(feature['id'].int64_list.value),
                    tuple(round(v, 4) for v in feature['price'].float_list.value),
                    tuple(feature['name'].bytes_list.value),
                )
            )
    return sorted(rows)


def _read_rejected(dead_letter_dir: str) -> list[dict]:
    records = []
    for path in sorted(glob.glob(os.path.join(dead_letter_dir, 'rejected-*.jsonl'))):
        with open(path, encoding='utf-8') as f:
            records += [json.loads(line) for line in f]
    return sorted(records, key=lambda r: (r['file'], r['line']))


@pytest.fixture
def read_examples():
    """Every example under `<dir>/Split-*/` as sorted (ids, prices, names) tuples."""
    return _read_examples


@pytest.fixture
def read_rejected():
    """Every dead-letter record under a directory, sorted by file and line."""
    return _read_rejected


@pytest.fixture
def convert(tmp_path):
    """Runs `CsvToExampleFiles` on an input directory with the corpus schema; returns the
    output directory and the summary JSON."""

    def run(input_dir: str, chunk_bytes: int = 64, name: str = 'out') -> tuple[str, dict]:
        import apache_beam as beam

        from asynctrain.components.example_gen import csv_source
        from asynctrain.components.shared import feature_types

        out = tmp_path / name
        config = csv_source.CsvSourceConfig(
            input_splits=(('all', os.path.join(input_dir, '*')),),
            output_splits=(),
            examples_dir=str(out),
            dead_letter_dir=str(out / 'dead_letter'),
            summary_path=str(out / 'summary.json'),
            column_types=feature_types.column_types_from_schema(feature_types.load_schema(SCHEMA)),
            chunk_bytes=chunk_bytes,
        )
        with beam.Pipeline() as pipeline:
            _ = pipeline | 'CsvToExampleFiles' >> csv_source.CsvToExampleFiles(config)
        with open(config.summary_path, encoding='utf-8') as f:
            return str(out), json.load(f)

    return run
