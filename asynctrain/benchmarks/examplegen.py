"""`asynctrain bench examplegen`: stock CsvExampleGen against ours on the same taxi-like CSV.

Generates a CSV by sampling rows of the taxi sample bundled with TFX, then runs, each in a fresh
process so peak memory is its own: stock `CsvExampleGen`'s executor, ours (the component's
executor `Do`), and the raw limit (pyarrow read + tfx-bsl encode + GZIP TFRecord write in one
process, no Beam). It checks that stock's and our splits hold the same examples, prints rows/s,
the ratios and peak memory, and writes `examplegen.json` and `examplegen.png`.

Timings cover the conversion only (not interpreter start and imports), measured side by side in
one run; compare ratios, not absolute figures, on a shared machine.
"""

import argparse
import collections
import glob
import hashlib
import json
import os
import shutil
import sys
import time

import numpy as np

from asynctrain.benchmarks import report
from asynctrain.components.shared import tf_environment
from asynctrain.pipelines.config import BUNDLED_SCHEMAS
from asynctrain.testing import child_runs, executor_inputs, taxi_data

SCHEMA = str(BUNDLED_SCHEMAS / 'taxi' / 'schema.pbtxt')
VARIANTS = ('stock', 'ours', 'raw')
RAW_COMPRESSION_LEVEL = 1  # The same zlib level our writer uses.


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--rows', type=int, default=300_000, help='Rows to generate (300k).')
    parser.add_argument(
        '--output',
        default='bench_out/examplegen',
        help='Directory for the CSV, the outputs, JSON and PNG.',
    )
    parser.add_argument(
        '--skip-stock',
        action='store_true',
        help='Do not run stock (for sizes where it takes too long).',
    )
    parser.add_argument(
        '--beam-arg',
        action='append',
        default=[],
        dest='beam_args',
        help='Beam option for ours and stock (repeatable), e.g. '
        '--beam-arg=--direct_running_mode=multi_processing.',
    )
    parser.add_argument(
        '--infer-types',
        action='store_true',
        help='Run ours without the schema, inferring types as stock does (on '
        'tiny samples stock may infer, say, INT for a FLOAT column, and the '
        "schema-typed output then differs from stock's by design).",
    )
    parser.add_argument(
        '--in-process',
        action='store_true',
        help='Run the variants in this process (quick checks; peak memory is '
        "then the whole process's).",
    )
    parser.add_argument('--variant', choices=VARIANTS, help=argparse.SUPPRESS)


_log = report.progress('examplegen', stderr=True)


def _run_variant(
    variant: str, input_dir: str, output_dir: str, beam_args, infer_types: bool = False
) -> dict:
    """Runs one variant in this process; returns seconds and peak memory."""
    tf_environment.configure()
    from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top

    examples = standard_artifacts.Examples()
    examples.uri = output_dir
    if variant == 'raw':
        start = time.monotonic()
        _raw_limit(os.path.join(input_dir, 'data.csv'), output_dir)
        return {'seconds': time.monotonic() - start, 'peak_rss_mb': child_runs.own_peak_rss_mb()}
    props = executor_inputs.csv_example_gen_properties(input_dir, None if infer_types else SCHEMA)
    if variant == 'stock':
        from tfx.components.example_gen.csv_example_gen import executor as stock  # pylint: disable=g-import-not-at-top

        executor_class = stock.Executor
    else:
        from asynctrain.components.example_gen import executor as ours  # pylint: disable=g-import-not-at-top

        executor_class = ours.Executor
    from tfx.dsl.components.base import base_beam_executor  # pylint: disable=g-import-not-at-top

    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=list(beam_args), tmp_dir=os.path.join(output_dir, '.tmp')
    )
    start = time.monotonic()
    executor_class(context).Do({}, {'examples': [examples]}, props)
    return {'seconds': time.monotonic() - start, 'peak_rss_mb': child_runs.own_peak_rss_mb()}


def _raw_limit(csv_path: str, output_dir: str) -> None:
    """pyarrow read + tfx-bsl encode + GZIP TFRecord write: one process, no Beam, no splits."""
    import pyarrow as pa  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from pyarrow import csv as pa_csv  # pylint: disable=g-import-not-at-top
    from tfx_bsl.coders import example_coder  # pylint: disable=g-import-not-at-top

    from asynctrain.components.shared import feature_types  # pylint: disable=g-import-not-at-top

    types = feature_types.column_types_from_schema(feature_types.load_schema(SCHEMA))
    arrow_types = {
        feature_types.ColumnType.INT: pa.int64(),
        feature_types.ColumnType.FLOAT: pa.float32(),
        feature_types.ColumnType.BYTES: pa.binary(),
    }
    os.makedirs(output_dir, exist_ok=True)
    options = tf.io.TFRecordOptions(
        compression_type='GZIP', compression_level=RAW_COMPRESSION_LEVEL
    )
    reader = pa_csv.open_csv(
        csv_path,
        convert_options=pa_csv.ConvertOptions(
            column_types={name: arrow_types[t] for name, t in types.items()}
        ),
    )
    with tf.io.TFRecordWriter(os.path.join(output_dir, 'data.gz'), options) as writer:
        for batch in reader:
            lists = [
                pa.ListArray.from_arrays(
                    pa.array(np.arange(len(column) + 1, dtype=np.int32)), column
                )
                for column in batch.columns
            ]
            for record in example_coder.RecordBatchToExamples(
                pa.RecordBatch.from_arrays(lists, batch.schema.names)
            ):
                writer.write(record)


def _canonical_splits(uri: str, already_canonical: bool = False) -> dict:
    """Per split, a multiset of example digests over their deterministic serialization.

    Our records are already deterministic serializations, so they are hashed as they are (if
    they were not, the check would fail, never pass wrongly); stock's are re-serialized.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    result = {}
    for split_dir in sorted(glob.glob(os.path.join(uri, 'Split-*'))):
        counter = collections.Counter()
        for path in glob.glob(os.path.join(split_dir, '*.gz')):
            for record in tf.data.TFRecordDataset(
                path, compression_type='GZIP'
            ).as_numpy_iterator():
                canonical = (
                    record
                    if already_canonical
                    else tf.train.Example.FromString(record).SerializeToString(deterministic=True)
                )
                counter[hashlib.sha1(canonical).digest()] += 1
        result[os.path.basename(split_dir)] = counter
    return result


def _chart(results: dict, path: str) -> None:
    """Rows/s and peak memory of each variant."""
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

    names = [v for v in VARIANTS if v in results['variants']]
    fig, (speed, memory) = plt.subplots(1, 2, figsize=(9, 3.5))
    speed.bar(
        names,
        [results['variants'][n]['rows_per_second'] for n in names],
        color=['#999999', '#1f77b4', '#2ca02c'][: len(names)],
    )
    speed.set_title(f'rows/s, {results["rows"]:,} rows')
    memory.bar(
        names,
        [results['variants'][n]['peak_rss_mb'] for n in names],
        color=['#999999', '#1f77b4', '#2ca02c'][: len(names)],
    )
    memory.set_title('peak memory (MB)')
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """The bench (or, with `--variant`, one variant of it in this child process)."""
    output = os.path.abspath(args.output)
    input_dir = os.path.join(output, 'input')
    if args.variant:  # Child process: one variant, result as JSON on stdout.
        result = _run_variant(
            args.variant,
            input_dir,
            os.path.join(output, args.variant),
            args.beam_args,
            args.infer_types,
        )
        print(json.dumps(result))
        return 0

    _log(f'generating {args.rows:,} taxi-like rows')
    size = taxi_data.generate_csv(args.rows, os.path.join(input_dir, 'data.csv'))
    results = {
        'rows': args.rows,
        'csv_bytes': size,
        'beam_args': args.beam_args,
        'ours_types': 'inferred' if args.infer_types else 'schema',
        'variants': {},
    }
    if not _measure_variants(args, output, results['variants']):
        return 1
    _finish(results, output)
    print(json.dumps(results, sort_keys=True))
    if results.get('outputs_agree') is False:
        _log('stock and ours DISAGREE')
        return 1
    return 0


def _measure_variants(args: argparse.Namespace, output: str, variants: dict) -> bool:
    """Runs each variant (in a child unless `--in-process`) into `variants`; False if one failed."""
    input_dir = os.path.join(output, 'input')
    for variant in [v for v in VARIANTS if not (args.skip_stock and v == 'stock')]:
        _log(f'running {variant}')
        shutil.rmtree(os.path.join(output, variant), ignore_errors=True)
        if args.in_process:
            measured = _run_variant(
                variant, input_dir, os.path.join(output, variant), args.beam_args, args.infer_types
            )
        else:
            measured = _run_in_child(args, variant, output)
            if measured is None:
                return False
        measured['rows_per_second'] = round(args.rows / measured['seconds'])
        measured['seconds'] = round(measured['seconds'], 2)
        variants[variant] = measured
        _log(
            f'{variant}: {measured["seconds"]} s, {measured["rows_per_second"]:,} rows/s, '
            f'peak {measured["peak_rss_mb"]} MB'
        )
    return True


def _run_in_child(args: argparse.Namespace, variant: str, output: str):
    """Runs one variant in a fresh interpreter, so its peak memory is its own."""
    argv = ['--rows', str(args.rows), '--output', output, '--variant', variant]
    argv += [f'--beam-arg={a}' for a in args.beam_args]
    argv += ['--infer-types'] if args.infer_types else []
    done = child_runs.run_module('asynctrain.benchmarks.examplegen', argv)
    if done.result is None:
        _log(f'{variant} failed:\n{done.stderr[-3000:]}')
    return done.result


def _finish(results: dict, output: str) -> None:
    """Adds ratios and the agreement check; writes the JSON and the chart."""
    ours = results['variants']['ours']['rows_per_second']
    results['ours_vs_raw'] = round(ours / results['variants']['raw']['rows_per_second'], 3)
    if 'stock' in results['variants']:
        results['ours_vs_stock'] = round(ours / results['variants']['stock']['rows_per_second'], 2)
        _log('checking that stock and ours wrote the same examples per split')
        tf_environment.configure()
        stock_splits = _canonical_splits(os.path.join(output, 'stock'))
        our_splits = _canonical_splits(os.path.join(output, 'ours'), already_canonical=True)
        results['outputs_agree'] = stock_splits == our_splits
        results['rows_per_split'] = {k: sum(v.values()) for k, v in our_splits.items()}
    with open(os.path.join(output, 'examplegen.json'), 'w') as f:
        json.dump(results, f, indent=2, sort_keys=True)
    _chart(results, os.path.join(output, 'examplegen.png'))


def main() -> int:
    parser = argparse.ArgumentParser(prog='bench examplegen', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == '__main__':
    sys.exit(main())
