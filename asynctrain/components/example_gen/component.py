"""asynctrain's CSV ExampleGen component: schema-typed, parallel CSV to tf.Example conversion.

The work happens in `csv_source.CsvToExampleFiles`; this module holds the constructor, its
validation and defaults.
"""

import json
from collections.abc import Sequence

from tfx import types
from tfx.components.example_gen import driver, utils
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.orchestration import data_types
from tfx.proto import example_gen_pb2, range_config_pb2
from tfx.types import standard_artifacts

from asynctrain.components.example_gen import csv_dialect, executor, spec


class CsvExampleGen(base_beam_component.BaseBeamComponent):
    """Converts CSV files to GZIP TFRecord `tf.Example` splits that lose no row.

    A drop-in replacement for stock `tfx.components.CsvExampleGen`: same `examples` output
    (`Split-<name>/data_tfrecord-*.gz`, payload format FORMAT_TF_EXAMPLE, span/version/fingerprint
    properties set by TFX's FileBasedDriver from `{SPAN}`, `{VERSION}`, `{YYYY}{MM}{DD}` patterns),
    the same examples, and by default the same split for every row (hash of the example's
    deterministic serialization, or of `partition_feature_name`).

    Differences from stock:

    - Column types come from `schema_path` (INT -> int64_list, FLOAT -> float_list, BYTES ->
      bytes_list); without a schema they are inferred from the data as stock infers them.
    - The dialect is configurable (delimiter, quote character, header or given column names, null
      markers); quoted cells may hold delimiters and newlines; CRLF and a UTF-8 BOM are accepted.
    - A row that cannot be converted (wrong column count, unbalanced quote, a cell that does not
      parse as its type, invalid UTF-8 in text) does not fail the run: it goes to
      `<examples uri>/dead_letter/rejected-*.jsonl` with file, line, reason and raw text. Above
      `max_bad_fraction` rejected rows the component fails, naming the first bad rows
      (file:line: reason), and publishes nothing.
    - Row counts are custom properties of the examples artifact: `rows_read`, `rows_rejected`,
      `rows_written`, `rows_written_<split>`; rows_read == rows_written + rows_rejected. The same
      counts are in `<examples uri>/examplegen_summary.json`.
    - With `label_column`, a row whose label is missing (empty cell or null marker) or does not
      parse as its type is rejected the same way, with the reason `label 'NAME' is missing`: no
      example reaches training without its label.
    - Blank lines are skipped and are not rows (as stock skips them).
    - Every column must be in the schema when one is given (an unknown column is an error at
      the start of the run, naming it).
    - Files are parsed in parallel byte-range chunks with pyarrow and encoded with numpy; memory
      is bounded by the chunk size, not the file size.
    - Each split's TFDV statistics are computed from the columns as they are encoded and
      published as `statistics`, StatisticsGen's artifact (`Split-<name>/FeatureStats.pb`, TFDV's
      default options): a pipeline needs no StatisticsGen reading every example back.
    - With `parquet_copy`, the same rows are written once more as Parquet (`parquet_examples`: an
      Examples artifact of TFX's FORMAT_PARQUET payload, the columns as TFXIO decodes the
      examples, one row group per chunk, with the span, version and row counts of `examples`),
      for Transform to analyze without decoding every example in Python.

    Component `outputs` contains:
     - `examples`: Channel of type `standard_artifacts.Examples`.
     - `statistics`: Channel of type `standard_artifacts.ExampleStatistics`.
     - `parquet_examples` (with `parquet_copy`): Channel of type `standard_artifacts.Examples`.
    """

    SPEC_CLASS = spec.CsvExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
    DRIVER_CLASS = driver.FileBasedDriver

    def __init__(
        self,
        input_base: str,
        schema_path: str | None = None,
        input_config: example_gen_pb2.Input | data_types.RuntimeParameter | None = None,
        output_config: example_gen_pb2.Output | data_types.RuntimeParameter | None = None,
        range_config: range_config_pb2.RangeConfig | data_types.RuntimeParameter | None = None,
        delimiter: str = ',',
        quote_char: str | None = '"',
        column_names: Sequence[str] | None = None,
        null_markers: Sequence[str] | None = None,
        max_bad_fraction: float = 0.0,
        label_column: str | None = None,
        parquet_copy: bool = False,
        chunk_bytes: int | None = None,
    ):
        """Constructs a CsvExampleGen.

        Args:
          input_base: Directory holding the CSV files (local or any Beam filesystem).
          schema_path: Text-proto `tensorflow.metadata.v0.Schema` typing every CSV column, e.g.
            `asynctrain/schemas/taxi/schema.pbtxt`. None to infer types from the data, as stock does.
          input_config: `example_gen_pb2.Input`; unset treats all files under input_base as one
            split.
          output_config: `example_gen_pb2.Output`; unset gives 'train' and 'eval' hash splits 2:1.
          range_config: `range_config_pb2.RangeConfig` selecting spans, as stock.
          delimiter: One ASCII character between cells.
          quote_char: One ASCII character quoting cells, or None when cells are never quoted.
          column_names: Column names in file order when files have no header row; None when the
            first row of every file is the header.
          null_markers: Cell texts meaning "missing" besides the empty cell, e.g. ['NA'].
          max_bad_fraction: Largest fraction of rows that may be rejected, in [0, 1]; above it the
            component fails.
          label_column: The label's column (any name, spaces included); rows without a valid
            label go to the dead letter. None when there is no label to check.
          parquet_copy: Also write the rows as Parquet (`parquet_examples`), what the pipeline's
            Transform analyzes.
          chunk_bytes: Bytes of CSV parsed as one unit of work (default 8 MiB). Each chunk writes
            one file per split, so this also sets how many files a split has: what a
            distributed runner can spread the readers of the examples over.

        Raises:
          ValueError: naming the parameter that is invalid.
        """
        dialect = csv_dialect.CsvDialect(
            delimiter=delimiter,
            quote_char=quote_char,
            column_names=tuple(column_names or ()),
            null_markers=tuple(null_markers or ()),
        )
        if not 0.0 <= max_bad_fraction <= 1.0:
            raise ValueError(f'max_bad_fraction must be in [0, 1], got {max_bad_fraction}.')
        if chunk_bytes is not None and chunk_bytes < 1:
            raise ValueError(f'chunk_bytes must be >= 1, got {chunk_bytes}.')
        if not input_base:
            raise ValueError('input_base must name the directory holding the CSV files.')
        input_config = input_config or utils.make_default_input_config()
        output_config = output_config or utils.make_default_output_config(input_config)
        component_spec = spec.CsvExampleGenSpec(
            input_base=input_base,
            input_config=input_config,
            output_config=output_config,
            range_config=range_config,
            output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
            output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
            schema_path=schema_path,
            delimiter=dialect.delimiter,
            quote_char=dialect.quote_char or '',
            column_names=json.dumps(list(dialect.column_names)),
            null_markers=json.dumps(list(dialect.null_markers)),
            max_bad_fraction=float(max_bad_fraction),
            label_column=label_column or None,
            chunk_bytes=chunk_bytes,
            examples=types.Channel(type=standard_artifacts.Examples),
            statistics=types.Channel(type=standard_artifacts.ExampleStatistics),
            parquet_examples=(
                types.Channel(type=standard_artifacts.Examples) if parquet_copy else None
            ),
        )
        super().__init__(spec=component_spec)
