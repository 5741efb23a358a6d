"""Compressed CSV input: a `.gz` (or `.bz2`, `.xz`) file gives exactly the examples, dead letter
lines and init sample of the same file uncompressed, read in several chunks by one reader."""

import bz2
import glob
import gzip
import json
import lzma
import os
import shutil

import pytest
import tensorflow as tf
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.testing import test_pipeline

from asynctrain.components.example_gen import compression, csv_dialect, csv_sample, csv_source
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.components.shared.yaml_config import ConfigError

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'csv')
TYPES = {'id': ColumnType.INT, 'price': ColumnType.FLOAT, 'name': ColumnType.BYTES}
# Quoted cells with newlines, a row of the wrong column count, a type mismatch, an unbalanced
# quote: each a dead-letter line to find again by its number.
FILES = (
    'quoted_delimiters_newlines.csv',
    'wrong_column_count.csv',
    'type_mismatch.csv',
    'unbalanced_quote.csv',
)
COMPRESSORS = {'.gz': gzip.compress, '.bz2': bz2.compress, '.xz': lzma.compress}


def _input_dir(tmp_path, suffix: str) -> str:
    directory = tmp_path / f'in{suffix or "-plain"}'
    directory.mkdir()
    for name in FILES:
        with open(os.path.join(FIXTURES, name), 'rb') as f:
            data = f.read()
        if suffix:
            (directory / (name + suffix)).write_bytes(COMPRESSORS[suffix](data))
        else:
            (directory / name).write_bytes(data)
    return str(directory)


def _convert(tmp_path, input_dir: str, chunk_bytes: int, column_types=TYPES):
    out = tmp_path / f'out-{os.path.basename(input_dir)}'
    config = csv_source.CsvSourceConfig(
        input_splits=(('input', os.path.join(input_dir, '*')),),
        output_splits=(('train', 2), ('eval', 1)),
        examples_dir=str(out),
        dead_letter_dir=str(out / 'dead_letter'),
        summary_path=str(out / 'summary.json'),
        column_types=column_types,
        chunk_bytes=chunk_bytes,
    )
    with test_pipeline.TestPipeline() as pipeline:
        _ = pipeline | csv_source.CsvToExampleFiles(config)
    examples = {}
    for split in ('train', 'eval'):
        paths = sorted(glob.glob(str(out / f'Split-{split}' / '*.gz')))
        records = tf.data.TFRecordDataset(paths, compression_type='GZIP')
        examples[split] = sorted(r.numpy() for r in records)
    rejected = []
    for path in glob.glob(str(out / 'dead_letter' / '*.jsonl')):
        with open(path, encoding='utf-8') as f:
            rejected.extend(json.loads(line) for line in f)
    with open(config.summary_path, encoding='utf-8') as f:
        summary = json.load(f)
    return examples, rejected, summary


def _without_suffix(record: dict, suffix: str) -> tuple:
    name = os.path.basename(record['file'])
    assert name.endswith(suffix), name
    return (name[: -len(suffix)], record['line'], record['reason'], record['raw'])


def test_the_suffixes_are_the_ones_beam_detects():
    for name in (
        'a.csv',
        'a.CSV.GZ',
        *(f'part-0001.csv{suffix}' for suffix in compression.SUFFIXES),
    ):
        assert compression.compression_of(name) == CompressionTypes.detect_compression_type(name)


@pytest.mark.parametrize(
    'suffix, column_types',
    [('.gz', TYPES), ('.gz', None), ('.bz2', TYPES), ('.xz', TYPES)],
    ids=['gz-schema', 'gz-inferred', 'bz2-schema', 'xz-schema'],
)
def test_a_compressed_file_gives_the_examples_and_dead_letter_of_the_plain_file(
    tmp_path, suffix, column_types
):
    plain = _convert(tmp_path, _input_dir(tmp_path, ''), 1 << 20, column_types)
    # 16-byte chunks: the compressed files are streamed through many chunks by one reader.
    packed = _convert(tmp_path, _input_dir(tmp_path, suffix), 16, column_types)

    assert packed[0] == plain[0]
    # With the schema, the type mismatches are rejected; inferred, their columns are text.
    assert sum(len(v) for v in plain[0].values()) == (10 if column_types else 12)
    # The same rejected rows, each naming its compressed file and its line in the text.
    plain_rejected = sorted(
        (os.path.basename(r['file']), r['line'], r['reason'], r['raw']) for r in plain[1]
    )
    assert sorted(_without_suffix(r, suffix) for r in packed[1]) == [
        (os.path.basename(f), line, reason, raw) for f, line, reason, raw in plain_rejected
    ]
    assert ('wrong_column_count.csv', 4) in {(f, line) for f, line, _, _ in plain_rejected}
    for key in ('rows_read', 'rows_rejected', 'rows_written', 'rows_written_per_split'):
        assert packed[2][key] == plain[2][key], key


@pytest.mark.parametrize('suffix', sorted(COMPRESSORS))
def test_init_reads_the_sample_of_a_compressed_file_as_of_the_plain_one(tmp_path, suffix):
    plain_dir, packed_dir = _input_dir(tmp_path, ''), _input_dir(tmp_path, suffix)
    dialect = csv_dialect.CsvDialect()
    plain = csv_sample.read_sample(csv_sample.input_files(plain_dir), dialect)
    packed = csv_sample.read_sample(csv_sample.input_files(packed_dir), dialect)
    assert (packed.rows, packed.rejected, packed.types) == (plain.rows, plain.rejected, plain.types)
    assert packed.rows == 12  # read as text: only the unreadable rows are left out
    for name in plain.names:
        assert packed.columns[name].equals(plain.columns[name]), name


def test_a_header_only_compressed_file_is_empty_input(tmp_path):
    (tmp_path / 'in').mkdir()
    with open(os.path.join(FIXTURES, 'header_only.csv'), 'rb') as f:
        (tmp_path / 'in' / 'header_only.csv.gz').write_bytes(gzip.compress(f.read()))
    config = csv_source.CsvSourceConfig(
        input_splits=(('input', str(tmp_path / 'in' / '*')),),
        output_splits=(),
        examples_dir=str(tmp_path / 'out'),
        dead_letter_dir=str(tmp_path / 'out' / 'dead_letter'),
        summary_path=str(tmp_path / 'out' / 'summary.json'),
    )
    with pytest.raises(ValueError, match='input is empty: no data rows in .*header_only.csv.gz'):
        csv_source.CsvToExampleFiles(config)


def test_a_gz_file_that_is_not_gzip_fails_init_naming_the_file(tmp_path):
    shutil.copy(os.path.join(FIXTURES, 'crlf.csv'), tmp_path / 'export.csv.gz')
    with pytest.raises(ConfigError, match=r'export\.csv\.gz: cannot be read as gzip: '):
        csv_sample.read_sample([str(tmp_path / 'export.csv.gz')], csv_dialect.CsvDialect())


def test_a_truncated_gz_file_fails_the_conversion_naming_the_file(tmp_path):
    (tmp_path / 'in').mkdir()
    with open(os.path.join(FIXTURES, 'quoted_delimiters_newlines.csv'), 'rb') as f:
        packed = gzip.compress(f.read() * 50)
    (tmp_path / 'in' / 'part-0001.csv.gz').write_bytes(packed[: len(packed) // 2])
    config = csv_source.CsvSourceConfig(
        input_splits=(('input', str(tmp_path / 'in' / '*')),),
        output_splits=(),
        examples_dir=str(tmp_path / 'out'),
        dead_letter_dir=str(tmp_path / 'out' / 'dead_letter'),
        summary_path=str(tmp_path / 'out' / 'summary.json'),
        column_types=TYPES,
    )
    with pytest.raises(Exception, match=r'part-0001\.csv\.gz: cannot be read as gzip: '):
        with test_pipeline.TestPipeline() as pipeline:
            _ = pipeline | csv_source.CsvToExampleFiles(config)
