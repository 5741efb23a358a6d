"""`asynctrain examplegen`: runs the CSV ExampleGen Beam transform outside a TFX pipeline.

Writes the same layout as the component (`Split-<name>/`, `dead_letter/`, the summary file) and
prints the JSON summary. Beam options after `--` pass through untouched, e.g.
`-- --runner=DirectRunner --direct_running_mode=multi_processing --direct_num_workers=2`.
"""

import argparse
import json
import os
import shutil
import sys
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from asynctrain.components.example_gen import csv_dialect, csv_source, dead_letter
from asynctrain.components.shared import feature_types


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--input', required=True, help='Directory (or glob) of CSV files.')
    parser.add_argument('--output', required=True, help='Directory to write the splits to.')
    parser.add_argument('--schema', help='Text-proto schema typing the columns; infer if unset.')
    parser.add_argument('--delimiter', default=',', help='Cell delimiter (default ",").')
    parser.add_argument('--quote-char', default='"', help='Quote character; "" for none.')
    parser.add_argument('--column-names', help='Comma-separated names when files have no header.')
    parser.add_argument(
        '--null-marker',
        action='append',
        default=[],
        dest='null_markers',
        help='Cell text meaning missing (repeatable), e.g. NA.',
    )
    parser.add_argument(
        '--label-column',
        default='',
        help="The label's column: rows whose label is missing or unparsable are rejected.",
    )
    parser.add_argument(
        '--max-bad-fraction',
        type=float,
        default=0.0,
        help='Fail when more than this fraction of rows is rejected (default 0).',
    )
    parser.add_argument(
        '--split',
        action='append',
        default=[],
        dest='splits',
        metavar='NAME:BUCKETS',
        help='Output split and its hash buckets '
        '(repeatable; default train:2 and eval:1, as stock).',
    )
    parser.add_argument(
        '--chunk-mb',
        type=float,
        default=csv_source.DEFAULT_CHUNK_BYTES / 2**20,
        help='Target size of the byte ranges parsed in parallel.',
    )
    parser.add_argument(
        'beam_args',
        nargs=argparse.REMAINDER,
        help='After --: Beam pipeline options, passed through.',
    )


def _parse_splits(values) -> tuple:
    if not values:
        return (('train', 2), ('eval', 1))
    splits = []
    for value in values:
        name, _, buckets = value.partition(':')
        if not name or not buckets.isdigit() or int(buckets) <= 0:
            raise ValueError(f'--split must be NAME:BUCKETS with BUCKETS > 0, got {value!r}')
        splits.append((name, int(buckets)))
    return tuple(splits)


def config_from_args(args: argparse.Namespace) -> csv_source.CsvSourceConfig:
    """Validates the flags once, with errors naming the flag."""
    if not 0.0 <= args.max_bad_fraction <= 1.0:
        raise ValueError(f'--max-bad-fraction must be in [0, 1], got {args.max_bad_fraction}')
    delimiter = '\t' if args.delimiter == '\\t' else args.delimiter
    try:
        dialect = csv_dialect.CsvDialect(
            delimiter=delimiter,
            quote_char=args.quote_char or None,
            column_names=tuple(args.column_names.split(',')) if args.column_names else (),
            null_markers=tuple(args.null_markers),
        )
    except ValueError as e:
        raise ValueError(f'--{str(e).split()[0].replace("_", "-")}: {e}') from e
    pattern = args.input
    if not any(c in pattern for c in '*?['):
        if not os.path.isdir(pattern) and '://' not in pattern:
            raise FileNotFoundError(f'--input {pattern} does not exist')
        pattern = os.path.join(pattern, '*')
    column_types = (
        feature_types.column_types_from_schema(feature_types.load_schema(args.schema))
        if args.schema
        else None
    )
    return csv_source.CsvSourceConfig(
        input_splits=(('input', pattern),),
        output_splits=_parse_splits(args.splits),
        examples_dir=args.output,
        dead_letter_dir=os.path.join(args.output, dead_letter.DEAD_LETTER_DIR_NAME),
        summary_path=os.path.join(args.output, dead_letter.SUMMARY_FILE_NAME),
        dialect=dialect,
        column_types=column_types,
        label_column=args.label_column,
        chunk_bytes=max(1, int(args.chunk_mb * 2**20)),
    )


def convert(config: csv_source.CsvSourceConfig, beam_args: list) -> dict:
    """Runs the conversion; returns the summary (with seconds)."""
    start = time.monotonic()
    with beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
        _ = pipeline | 'CsvToExampleFiles' >> csv_source.CsvToExampleFiles(config)
    with open(config.summary_path, encoding='utf-8') as f:
        summary = json.load(f)
    summary['seconds'] = round(time.monotonic() - start, 3)
    return summary


def run(args: argparse.Namespace) -> int:
    beam_args = [a for a in (args.beam_args or []) if a != '--']
    try:
        config = config_from_args(args)
        summary = convert(config, beam_args)
    except (ValueError, FileNotFoundError) as e:
        print(f'examplegen: error: {e}', file=sys.stderr)
        return 1
    error = (
        'input is empty: no data rows'
        if summary['rows_read'] == 0
        else dead_letter.bad_fraction_error(summary, args.max_bad_fraction, config.dead_letter_dir)
    )
    summary['status'] = 'failed' if error else 'ok'
    if error:
        # Nothing half-good is left for a consumer to pick up; the dead letter stays for diagnosis.
        for split in config.split_names:
            shutil.rmtree(os.path.join(config.examples_dir, f'Split-{split}'), ignore_errors=True)
    with open(config.summary_path, 'w', encoding='utf-8') as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    print(json.dumps(summary, sort_keys=True))
    if error:
        print(f'examplegen: error: {error}', file=sys.stderr)
        return 2
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog='examplegen', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == '__main__':
    sys.exit(main())
