"""The Beam transforms on tiny fixtures, with TestPipeline and assert_that."""

import json
import os
import shutil

import pytest
import tensorflow as tf
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from asynctrain.components.example_gen import csv_dialect, csv_source, serialized_examples
from asynctrain.components.shared.feature_types import ColumnType

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'csv')
TYPES = {'id': ColumnType.INT, 'price': ColumnType.FLOAT, 'name': ColumnType.BYTES}


def config_for(tmp_path, *names, **kwargs):
    input_dir = tmp_path / 'in'
    input_dir.mkdir()
    for name in names:
        shutil.copy(os.path.join(FIXTURES, name), input_dir / name)
    out = tmp_path / 'out'
    return csv_source.CsvSourceConfig(
        input_splits=(('input', str(input_dir / '*')),),
        output_splits=(('train', 2), ('eval', 1)),
        examples_dir=str(out),
        dead_letter_dir=str(out / 'dead_letter'),
        summary_path=str(out / 'summary.json'),
        **kwargs,
    )


def example(id_, price, name):
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                'id': tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[] if id_ is None else [id_])
                ),
                'price': tf.train.Feature(
                    float_list=tf.train.FloatList(value=[] if price is None else [price])
                ),
                'name': tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[] if name is None else [name])
                ),
            }
        )
    ).SerializeToString(deterministic=True)


def test_serialized_examples_equal_stock_shaped_examples(tmp_path):
    config = config_for(
        tmp_path,
        'null_marker_na.csv',
        'quoted_delimiters_newlines.csv',
        dialect=csv_dialect.CsvDialect(null_markers=('NA',)),
        column_types=TYPES,
    )
    with test_pipeline.TestPipeline() as pipeline:
        examples = pipeline | serialized_examples.CsvToSerializedExamples(config)
        assert_that(
            examples,
            equal_to(
                [
                    example(1, None, b'alpha'),
                    example(None, 3.5, None),
                    example(3, 4.5, b'gamma'),
                    example(1, 2.5, b'Smith, John'),
                    example(2, 3.0, b'line one\nline two'),
                    example(3, 4.25, b'say "hi"'),
                ]
            ),
        )


def test_example_files_report_counts_every_row(tmp_path):
    config = config_for(
        tmp_path,
        'type_mismatch.csv',
        'unbalanced_quote.csv',
        'crlf.csv',
        column_types=TYPES,
        chunk_bytes=16,
    )

    def check(reports):
        assert len(reports) == 1
        report = reports[0]
        assert (report.rows_read, report.rows_rejected) == (10, 3)
        assert sum(report.rows_written.values()) == 7
        assert [entry[2].split('/in/')[1] for entry in report.first_rejected] == [
            "type_mismatch.csv:3: column 'id': 'two' is not INT",
            "type_mismatch.csv:4: column 'price': 'cheap' is not FLOAT",
            'unbalanced_quote.csv:3: unbalanced quote: a quoted cell opened on this line never '
            'closes within a row of the right column count',
        ]

    with test_pipeline.TestPipeline() as pipeline:
        assert_that(pipeline | csv_source.CsvToExampleFiles(config), check)
    with open(config.summary_path) as f:
        summary = json.load(f)
    assert summary['rows_read'] == summary['rows_written'] + summary['rows_rejected'] == 10


def test_inferred_types_follow_stock_lattice(tmp_path):
    # Without a schema: id is INT, price FLOAT, name BYTES (as stock infers them).
    config = config_for(tmp_path, 'empty_cells.csv')
    with test_pipeline.TestPipeline() as pipeline:
        examples = pipeline | serialized_examples.CsvToSerializedExamples(config)
        assert_that(
            examples,
            equal_to([example(1, None, b'alpha'), example(None, 3.5, None), example(3, 4.5, None)]),
        )


def test_missing_files_fail_when_the_transform_is_built(tmp_path):
    with pytest.raises(FileNotFoundError, match='matches no file'):
        csv_source.CsvToExampleFiles(config_for(tmp_path))
