"""`asynctrain bench preprocess`: preprocessing once into the training records, two ways, one run.

From raw examples to the pre-batched records the Trainer reads, on the same examples (our
ExampleGen's output for a taxi-like CSV of `--rows` rows):

- `materialized`: stock Transform analyzes the train split, then transforms every split and
  materializes it as `tf.Example`s; the ExampleBatcher (`transform=False`) re-encodes those into
  its records. The pipeline's path before the ExampleBatcher applied the graph itself.
- `graph only`: stock Transform analyzes only (`materialize=False`: it writes the graph) the
  ExampleGen's Parquet copy of the examples (`parquet_examples`); the ExampleBatcher
  (`transform=True`) applies that graph to the raw examples in large batches while writing its
  records. The pipeline's path now. Writing the Parquet copy is this path's cost too: the
  ExampleGen runs twice, without it (for `materialized`) and with it, and the difference is
  counted in this path's total (`parquet_seconds`).

Both use the pipeline's settings (no analyzer cache, no Transform statistics, Beam in memory)
and run in this process, `graph only` first (so it, not the other, pays the first imports and
traces). The two sets of records must hold the same rows, feature by feature, split by split (the
record order differs: each is shuffled with the same seed, from a different input order): equal
to float32 rounding (`records_equal`: each Transform run analyzes afresh, in batches of its own,
so a mean or a variance is summed in another order), and the result says whether they are
bit-equal too. Exit status 1 when they differ.
(With one graph for both paths, the records are exactly equal:
tests/components/transform/transform_component_test.py.)

    asynctrain bench preprocess [--rows N] [--output DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

import numpy as np

from asynctrain.benchmarks import report
from asynctrain.testing import executor_inputs, taxi_data

DEFAULT_ROWS = 100_000
DEFAULT_OUTPUT = os.path.join('bench_out', 'preprocess')
PATHS = ('graph_only', 'materialized')
# Each path's Transform analyzes afresh, in batches of its own (Beam's, sized by timing, of the
# examples; a chunk's row group of the Parquet copy), so a mean or a variance can be summed in
# another order: the same to float32's rounding, not always bit-equal. A z-score near zero is
# the difference of two close numbers, so its rounding is relative to the column's scale, not to
# the value itself: each value must agree within RTOL of its own magnitude plus RTOL of its
# column's largest magnitude.
RTOL = 1e-6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--rows', type=int, default=DEFAULT_ROWS, help=f'CSV rows (default {DEFAULT_ROWS:,})'
    )
    parser.add_argument(
        '--output',
        default=DEFAULT_OUTPUT,
        help=f'directory for the CSV, both runs, result.json and the chart '
        f'(default {DEFAULT_OUTPUT}); emptied first',
    )


_log = report.progress('preprocess')


def _example_gen(input_dir: str, output_dir: str, parquet: bool):
    """Our ExampleGen's examples (and with `parquet` its Parquet copy), and its seconds."""
    from tfx.types import standard_artifacts

    from asynctrain.components.example_gen import executor, spec
    from asynctrain.testing import transform_runs as runs

    outputs = {spec.EXAMPLES_KEY: [standard_artifacts.Examples()]}
    if parquet:
        outputs[spec.PARQUET_EXAMPLES_KEY] = [standard_artifacts.Examples()]
    for key, (artifact,) in outputs.items():
        artifact.uri = os.path.join(output_dir, key)
    props = executor_inputs.csv_example_gen_properties(input_dir, str(runs.TAXI_SCHEMA))
    started = time.perf_counter()
    executor.Executor().Do({}, outputs, props)
    seconds = time.perf_counter() - started
    return {key: artifact for key, (artifact,) in outputs.items()}, seconds


def _batch(examples, transform_graph: str, output_dir: str, transform: bool) -> str:
    """The ExampleBatcher's executor on `examples`, applying the graph if `transform`; its URI."""
    from tfx.types import standard_artifacts

    from asynctrain.components.example_batcher import executor, spec
    from asynctrain.components.shared import columnar_records

    graph = standard_artifacts.TransformGraph()
    graph.uri = transform_graph
    batched = standard_artifacts.Examples()
    batched.uri = output_dir
    executor.Executor().Do(
        {spec.EXAMPLES_KEY: [examples], spec.TRANSFORM_GRAPH_KEY: [graph]},
        {spec.BATCHED_EXAMPLES_KEY: [batched]},
        {
            spec.EXAMPLES_PER_RECORD_KEY: columnar_records.DEFAULT_EXAMPLES_PER_RECORD,
            spec.NUM_FILES_KEY: columnar_records.DEFAULT_NUM_FILES,
            spec.SEED_KEY: 0,
            spec.TRANSFORM_KEY: int(transform),
        },
    )
    return batched.uri


def _run_path(path: str, examples, analyzed, schema, config, output: str) -> dict:
    """One path from raw examples to records (Transform analyzing `analyzed`, the examples or
    their Parquet copy); its seconds per stage and its records' URI."""
    from asynctrain.testing import transform_runs as runs

    started = time.perf_counter()
    transformed = runs.run_transform(
        [analyzed],
        schema,
        os.path.join(output, path, 'transform'),
        config,
        disable_analyzer_cache=True,
        disable_statistics=True,
        materialize=path == 'materialized',
    )
    transform_seconds = time.perf_counter() - started
    source = examples
    if path == 'materialized':
        source = runs.examples_artifact(transformed.transformed_examples[0], 0, ['train', 'eval'])
    started = time.perf_counter()
    records = _batch(
        source,
        transformed.transform_graph,
        os.path.join(output, path, 'records'),
        transform=path == 'graph_only',
    )
    batcher_seconds = time.perf_counter() - started
    return {
        'transform_seconds': transform_seconds,
        'batcher_seconds': batcher_seconds,
        'seconds': transform_seconds + batcher_seconds,
        'records': records,
        'transform_graph': transformed.transform_graph,
    }


def sorted_rows(columns: dict[str, np.ndarray]) -> np.ndarray:
    """The rows of `columns` (numeric, one value per row each) as a float64 matrix, sorted."""
    names = sorted(columns)
    matrix = np.stack([np.asarray(columns[n], np.float64).reshape(-1) for n in names], axis=1)
    return matrix[np.lexsort(matrix.T[::-1])]


def records_equal(ours: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether two row matrices (`sorted_rows`) agree to float32 rounding (`RTOL`)."""
    if ours.shape != theirs.shape:
        return False
    scale = np.abs(theirs).max(axis=0, initial=0.0)
    return bool(np.all(np.abs(ours - theirs) <= RTOL * (np.abs(theirs) + scale)))


def split_rows(records_uri: str, split: str, feature_spec) -> np.ndarray:
    """One split of the ExampleBatcher's records as sorted rows (`sorted_rows`)."""
    from asynctrain.components.shared import columnar_records

    label = sorted(feature_spec)[0]
    parts: dict[str, list[np.ndarray]] = {name: [] for name in feature_spec}
    pattern = os.path.join(columnar_records.split_dir(records_uri, split), '*.gz')
    for features, labels in columnar_records.make_batched_dataset(
        pattern, feature_spec, label, batch_size=8192, training=False
    ):
        for name, values in {**features, label: labels}.items():
            parts[name].append(values.numpy())
    return sorted_rows({name: np.concatenate(values) for name, values in parts.items()})


def write_chart(result: dict, path: str) -> None:
    """Each path's seconds, stage by stage, as stacked bars."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 3))
    stages = (
        ('parquet_seconds', "ExampleGen's Parquet copy", 'tab:green'),
        ('transform_seconds', 'Transform', 'tab:blue'),
        ('batcher_seconds', 'ExampleBatcher', 'tab:orange'),
    )
    for i, name in enumerate(PATHS):
        run = result['paths'][name]
        left = 0.0
        for key, label, color in stages:
            seconds = run.get(key, 0.0)
            axes.barh(i, seconds, left=left, color=color, label=label if not i else '')
            left += seconds
    axes.set_yticks(range(len(PATHS)), [p.replace('_', ' ') for p in PATHS])
    axes.set_xlabel('seconds')
    axes.set_title(
        f'Raw examples to training records, {result["rows"]:,} rows: '
        f'{result["materialized_over_graph_only"]:.2f}x'
    )
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run(args: argparse.Namespace) -> int:
    """The bench, with TensorFlow's, TFX's and Beam's logs in `bench.log` under the output."""
    if args.rows < 10:
        print('--rows: at least 10', file=sys.stderr)
        return 2
    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    with report.libraries_to_log(_log, os.path.join(output, 'bench.log')):
        return _run(args, output)


def _run(args: argparse.Namespace, output: str) -> int:
    """The bench, its libraries' logs going to the log file: both paths, compared and reported."""
    _log(f'generating {args.rows:,} taxi-like CSV rows')
    taxi_data.generate_csv(args.rows, os.path.join(output, 'input', 'data.csv'))
    inputs = run_example_gens(output)
    measured = run_paths(inputs, output)
    agree = compare_records(measured)
    result = build_result(args.rows, inputs, measured, agree)
    result_path, chart_path = report.write_result(output, result, 'preprocess.png', write_chart)
    print_summary(result, result_path, chart_path)
    return 0 if all(check['equal'] for check in agree.values()) else 1


def run_example_gens(output: str) -> dict[bool, tuple[dict, float]]:
    """Our ExampleGen on the CSV without and with the Parquet copy: (outputs, seconds) of each."""
    inputs = {}
    for parquet in (False, True):
        _log(f'ExampleGen {"with" if parquet else "without"} the Parquet copy')
        inputs[parquet] = _example_gen(
            os.path.join(output, 'input'),
            os.path.join(output, 'example_gen_' + ('parquet' if parquet else 'examples')),
            parquet,
        )
        _log(f'ExampleGen: {inputs[parquet][1]:.1f} s')
    return inputs


def run_paths(inputs: dict[bool, tuple[dict, float]], output: str) -> dict[str, dict]:
    """Both paths from the same examples to records; each one's seconds per stage and records."""
    from asynctrain.components.example_gen import spec
    from asynctrain.components.transform import feature_config as fc
    from asynctrain.testing import transform_runs as runs

    examples = inputs[False][0][spec.EXAMPLES_KEY]
    parquet_seconds = max(0.0, inputs[True][1] - inputs[False][1])
    config = fc.load_feature_config(str(runs.TAXI_FEATURES), str(runs.TAXI_SCHEMA))
    schema = runs.schema_artifact(runs.TAXI_SCHEMA, os.path.join(output, 'schema'))
    measured = {}
    for path in PATHS:
        _log(f'{path}: Transform, then the ExampleBatcher')
        analyzed = inputs[True][0][spec.PARQUET_EXAMPLES_KEY] if path == 'graph_only' else examples
        measured[path] = _run_path(path, examples, analyzed, schema, config, output)
        if path == 'graph_only':
            measured[path]['parquet_seconds'] = parquet_seconds
            measured[path]['seconds'] += parquet_seconds
        _log(
            f'{path}: {measured[path]["seconds"]:.1f} s (Transform '
            f'{measured[path]["transform_seconds"]:.1f} s, ExampleBatcher '
            f'{measured[path]["batcher_seconds"]:.1f} s, Parquet copy '
            f'{measured[path].get("parquet_seconds", 0.0):.1f} s)'
        )
    return measured


def compare_records(measured: dict[str, dict]) -> dict[str, dict]:
    """Whether the two paths' records hold the same rows, split by split, and how far apart."""
    import tensorflow_transform as tft

    _log('comparing the two sets of records row by row')
    feature_spec = tft.TFTransformOutput(
        measured['graph_only']['transform_graph']
    ).transformed_feature_spec()
    agree = {}
    for split in ('train', 'eval'):
        ours, materialized = (
            split_rows(measured[p]['records'], split, feature_spec) for p in PATHS
        )
        same_shape = ours.shape == materialized.shape
        agree[split] = {
            'rows': len(ours),
            'exactly_equal': bool(same_shape and np.array_equal(ours, materialized)),
            'equal': records_equal(ours, materialized),
            'max_difference': float(np.abs(ours - materialized).max()) if same_shape else None,
        }
    return agree


def build_result(
    rows: int, inputs: dict[bool, tuple[dict, float]], measured: dict[str, dict], agree: dict
) -> dict:
    """The result JSON: each path's seconds per stage, ExampleGen's, the ratio and agreement."""
    return {
        'benchmark': 'preprocess',
        'rows': rows,
        'paths': {
            p: {k: v for k, v in m.items() if k.endswith('seconds')} for p, m in measured.items()
        },
        'examplegen_seconds': {
            'without_parquet': inputs[False][1],
            'with_parquet': inputs[True][1],
        },
        'materialized_over_graph_only': (
            measured['materialized']['seconds'] / measured['graph_only']['seconds']
        ),
        'records_agree': agree,
        'machine': report.machine(),
        'finished_at': report.finished_at(),
    }


def print_summary(result: dict, result_path: str, chart_path: str) -> None:
    """Prints each path's seconds per stage, the ratio, each split's verdict and the files."""
    print(f'\n{"path":<14}{"Parquet":>9}{"Transform":>11}{"Batcher":>10}{"total":>9}')
    for path in PATHS:
        m = result['paths'][path]
        print(
            f'{path:<14}{m.get("parquet_seconds", 0.0):>8.1f}s{m["transform_seconds"]:>10.1f}s'
            f'{m["batcher_seconds"]:>9.1f}s{m["seconds"]:>8.1f}s'
        )
    print(f'materialized / graph only: {result["materialized_over_graph_only"]:.2f}')
    for split, check in result['records_agree'].items():
        verdict = 'bit-equal' if check['exactly_equal'] else 'equal to float32 rounding'
        print(
            f'{split}: {check["rows"]:,} rows, records '
            f'{verdict if check["equal"] else "DIFFER"} (max difference {check["max_difference"]})'
        )
    print(f'wrote {result_path} and {chart_path}')
