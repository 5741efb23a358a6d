"""`asynctrain bench pipeline`: the whole local pipeline, ours versus stock components, one run.

Both pipelines read the same CSV (rows resampled from the bundled taxi sample) and run under
LocalDagRunner with ML Metadata in SQLite, each in a fresh interpreter so that neither inherits
the other's imports or TensorFlow state:

- `ours`: `create_pipeline(config, dataset.load(config))`, as `asynctrain run` runs it (our
  CsvExampleGen, which also computes the statistics, so no StatisticsGen; ExampleBatcher and
  parameter-server Trainer, an in-process cluster, Transform without its own statistics).
- `stock`: the same graph built here from the same pieces (schema, preprocessing_fn, split and
  eval configs), with stock `CsvExampleGen` and `StatisticsGen`, Transform with its statistics
  (the component's default), and the stock `Trainer` running `asynctrain.benchmarks.reference_trainer.run_fn`
  (`tf_dataset_factory` + `model.fit`, default strategy), without the ExampleBatcher and the two
  resolvers (they resolve to nothing on a first run).

Per-component wall time is read from ML Metadata (an execution's creation to its last update:
driver, executor and publisher); the total is the runner's wall time. Peak memory per component
is the largest resident set of the variant's process tree (its Trainer cluster and Beam workers
included) sampled within that same interval (`asynctrain.testing.child_runs`). Both train the same
number of steps with the same batch size.

Beam arguments after `--` replace the pipeline config's (none: the DirectRunner in memory, one
worker) in both pipelines. `--spark-workers N` (with `--stock-from`) starts a Spark standalone
cluster of N Workers on this machine with Beam's Spark job server (`asynctrain.testing.spark`) and
runs ours' Beam stages on it; its memory is then the whole tree of this process, the cluster's
JVMs and Python SDK workers included.

At sizes where stock would take hours, `--stock-from RESULT.json` runs ours alone and takes
stock's times from an earlier run of this bench, scaled by the rows (its measured cost per row,
each component's: `extrapolated_stock`); the result says so (`stock_extrapolated_from`) and has
no stock memory or metric.

    asynctrain bench pipeline [--rows N] [--train-steps N] [--output DIR]
                              [--stock-from RESULT.json] [-- BEAM_ARGS...]

The two pipelines, the config and dataset they share and each run live in `pipeline_variants`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys

from asynctrain.benchmarks import pipeline_variants, report
from asynctrain.components.shared import tf_environment
from asynctrain.testing import child_runs

DEFAULT_OUTPUT = os.path.join('bench_out', 'pipeline')
DEFAULT_ROWS = 15000
DEFAULT_TRAIN_STEPS = 500
VARIANTS = ('stock', 'ours')
# Components in pipeline order; both pipelines give them these ids.
COMPONENTS = (
    'CsvExampleGen',
    'StatisticsGen',
    'ImportSchemaGen',
    'ExampleValidator',
    'Transform',
    'Trainer',
    'Evaluator',
    'Pusher',
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--rows',
        type=int,
        default=DEFAULT_ROWS,
        help=f'CSV rows to generate (default {DEFAULT_ROWS:,})',
    )
    parser.add_argument(
        '--train-steps',
        type=int,
        default=DEFAULT_TRAIN_STEPS,
        help=f'training steps of both Trainers (default {DEFAULT_TRAIN_STEPS})',
    )
    parser.add_argument(
        '--output',
        default=DEFAULT_OUTPUT,
        help=f'directory for the CSV, both runs, result.json and pipeline.png '
        f'(default {DEFAULT_OUTPUT}); emptied first',
    )
    parser.add_argument(
        '--features',
        metavar='NAME[,NAME]',
        default=None,
        help='both pipelines preprocess and train on these features of the taxi feature config '
        'only (default: all 16); a quick check of the bench itself needs no more than one per '
        'kind of transform',
    )
    parser.add_argument(
        '--stock-from',
        metavar='RESULT.json',
        default=None,
        help="run ours only; stock's times are those of this earlier result of the bench, "
        'scaled by the rows (said so in the result)',
    )
    parser.add_argument(
        '--spark-workers',
        type=int,
        default=0,
        metavar='N',
        help="run ours' Beam stages on a local Spark standalone cluster of N Workers, one core "
        'each (needs --stock-from)',
    )
    parser.add_argument(
        '--spark-worker-memory-mb',
        type=int,
        default=4096,
        help='memory each Spark Worker gives its executor (default 4096)',
    )
    parser.add_argument('--variant', choices=VARIANTS, help=argparse.SUPPRESS)
    # The child process's copy of the Beam arguments given after `--`.
    parser.add_argument(
        '--beam-arg', action='append', default=[], dest='beam_args', help=argparse.SUPPRESS
    )


_log = report.progress('pipeline')


def _run_in_child(variant: str, args: argparse.Namespace, output: str) -> dict | None:
    """One pipeline run by this bench in a fresh interpreter: its figures, or None if it failed."""
    argv = [
        '--variant',
        variant,
        '--rows',
        str(args.rows),
        '--train-steps',
        str(args.train_steps),
        '--output',
        output,
        *(f'--beam-arg={a}' for a in args.beam_args),
        *(['--features', args.features] if args.features else []),
    ]
    env = tf_environment.configure(dict(os.environ))
    env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    done = child_runs.run_module('asynctrain.benchmarks.pipeline', argv, env=env)
    for line in done.stderr.splitlines():
        if line.startswith('['):  # The component progress lines.
            _log(f'{variant} {line}')
    if done.result is None:
        _log(f'{variant} failed:\n{done.stderr[-3000:]}')
    return done.result


def _with_cluster_memory(
    ours: dict, samples: child_runs.Samples, args: argparse.Namespace, output: str, dataset
) -> None:
    """Replaces ours' memory figures, sampled in the pipeline's process tree, by those of this
    process's tree: the pipeline's process and the Spark cluster's (Master, Workers and their
    executors, job server, SDK workers), where the Beam stages' work happens."""
    config = pipeline_variants.bench_config(
        os.path.join(output, 'input'),
        os.path.join(output, 'ours'),
        args.train_steps,
        'bench-ours',
        args.beam_args,
        dataset,
    )
    intervals = pipeline_variants.component_intervals(config)
    ours['component_peak_mb'] = child_runs.component_peaks_mb(samples, intervals)
    ours['baseline_mb'] = round(samples.rss[0] / (1 << 20), 1)
    ours['peak_mb'] = round(max(samples.rss) / (1 << 20), 1)
    ours['memory_of'] = 'the pipeline and the Spark cluster'


def extrapolated_stock(reference: dict, rows: int) -> dict:
    """Stock's variant of an earlier result (`reference`, with the same training steps), its
    total and every component's seconds scaled by `rows` over the rows it measured: its measured
    cost per row. Memory and the metric are not extrapolated (left out)."""
    scale = rows / reference['rows']
    stock = reference['variants']['stock']
    return {
        'total_seconds': stock['total_seconds'] * scale,
        'component_seconds': {
            name: seconds * scale for name, seconds in stock['component_seconds'].items()
        },
        'component_order': list(stock.get('component_order', ())),
        'extrapolated_from': {
            'rows': reference['rows'],
            'train_steps': reference['train_steps'],
            'finished_at': reference.get('finished_at'),
        },
    }


def component_names(result: dict) -> list[str]:
    """Components of either pipeline, in the order ours ran them (stock's extra ones last)."""
    names = list(result['variants']['ours'].get('component_order') or COMPONENTS)
    for variant in result['variants'].values():
        names += [c for c in variant.get('component_order', ()) if c not in names]
    return names


def _beam_label(result: dict) -> str:
    """The chart title's note of the Beam arguments, if any."""
    return f', Beam {" ".join(result["beam_args"])}' if result.get('beam_args') else ''


def write_chart(result: dict, path: str) -> None:
    """Each component's wall time and peak memory, stock beside ours, and the totals."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    variants = result['variants']
    figure, (time_axes, memory_axes) = plt.subplots(2, 1, figsize=(11, 8))
    width = 0.4
    names = component_names(result)
    for i, (variant, color) in enumerate((('stock', '#9e9e9e'), ('ours', '#1f77b4'))):
        measured = variants[variant]
        offsets = [x + (i - 0.5) * width for x in range(len(names) + 1)]
        seconds = [measured['component_seconds'].get(c, 0.0) for c in names]
        label = f'{variant} (extrapolated)' if 'extrapolated_from' in measured else variant
        bars = time_axes.bar(
            offsets, seconds + [measured['total_seconds']], width, color=color, label=label
        )
        time_axes.bar_label(bars, fmt='%.0f', fontsize=7)
        peaks = [measured.get('component_peak_mb', {}).get(c, 0.0) for c in names]
        bars = memory_axes.bar(
            offsets, peaks + [measured.get('peak_mb', 0.0)], width, color=color, label=variant
        )
        memory_axes.bar_label(bars, fmt='%.0f', fontsize=7)
    for axes in (time_axes, memory_axes):
        axes.set_xticks(range(len(names) + 1))
        axes.set_xticklabels(names + ['total'], fontsize=8)
        axes.legend()
    time_axes.set_ylabel('wall time (s)')
    time_axes.set_title(
        f'Local pipeline, {result["rows"]:,} CSV rows, {result["train_steps"]} '
        f'train steps{_beam_label(result)}: total stock/ours = '
        f'{result["total_stock_over_ours"]:.2f}'
    )
    memory_axes.set_ylabel('peak RSS, process tree (MiB)')
    memory_axes.set_title('Peak memory while each component ran (the run\'s peak at "total")')
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


class UsageError(Exception):
    """A command-line mistake found once the bench has begun: printed, and exit status 2."""


def prepare_input(
    args: argparse.Namespace, output: str, features: list[str], dataset: str | None
) -> dict | None:
    """Empties `output`, writes the dataset and the CSV; returns `--stock-from`'s result, if any.

    Raises:
      UsageError: an unknown feature, a reference of other train steps, or Spark without one.
    """
    from asynctrain.testing import taxi_data

    shutil.rmtree(output, ignore_errors=True)
    if features:
        try:
            pipeline_variants.write_dataset(dataset, features)
        except ValueError as e:
            raise UsageError(str(e)) from e
    _log(f'generating {args.rows:,} taxi-like CSV rows')
    taxi_data.generate_csv(args.rows, os.path.join(output, 'input', 'data.csv'))
    reference = None
    if args.stock_from:
        with open(args.stock_from, encoding='utf-8') as f:
            reference = json.load(f)
        if reference['train_steps'] != args.train_steps:
            raise UsageError(
                f'--stock-from: {args.stock_from} trained {reference["train_steps"]} steps, '
                f'not --train-steps {args.train_steps}'
            )
    if args.spark_workers and reference is None:
        raise UsageError('--spark-workers: needs --stock-from (stock is not run on the cluster)')
    return reference


def start_spark_cluster(
    stack: contextlib.ExitStack, args: argparse.Namespace, output: str
) -> child_runs.TreeRssSampler:
    """Starts the Spark cluster ours runs on (in `stack`) and a sampler of this process tree."""
    from asynctrain.testing.spark.cluster import SparkCluster

    _log(f'starting a Spark cluster of {args.spark_workers} Workers')
    cluster = stack.enter_context(
        SparkCluster(
            os.path.join(output, 'spark'),
            num_workers=args.spark_workers,
            memory_per_worker_mb=args.spark_worker_memory_mb,
            # The JVMs' own defaults (full JIT, their collector): a bench of throughput.
            jvm_options=(),
        )
    )
    args.beam_args = cluster.beam_pipeline_args
    return child_runs.TreeRssSampler().start()


def run_variants(
    args: argparse.Namespace, output: str, dataset: str | None, reference: dict | None
) -> dict | None:
    """Stock (or its extrapolation from `reference`) and ours, each run in a fresh interpreter;
    None when one failed."""
    variants = {}
    if reference is not None:
        variants['stock'] = extrapolated_stock(reference, args.rows)
        _log(
            f'stock: {variants["stock"]["total_seconds"]:.1f} s, extrapolated from '
            f'{reference["rows"]:,} rows ({args.stock_from})'
        )
    with contextlib.ExitStack() as stack:
        cluster_sampler = start_spark_cluster(stack, args, output) if args.spark_workers else None
        for variant in VARIANTS:
            if variant in variants:
                continue
            _log(f'running the {variant} pipeline')
            measured = _run_in_child(variant, args, output)
            if measured is None:
                return None
            variants[variant] = measured
            _log(f'{variant}: {measured["total_seconds"]:.1f} s')
        if cluster_sampler is not None:
            _with_cluster_memory(variants['ours'], cluster_sampler.stop(), args, output, dataset)
    return variants


def build_result(args: argparse.Namespace, features: list[str], variants: dict) -> dict:
    """The result JSON: the run's settings, both variants' figures and their ratios."""
    stock_metric, ours_metric = (variants[v].get('eval_metric') for v in VARIANTS)
    return {
        'benchmark': 'pipeline',
        'rows': args.rows,
        'train_steps': args.train_steps,
        'beam_args': list(args.beam_args),
        **({'spark_workers': args.spark_workers} if args.spark_workers else {}),
        'features': features or 'all',
        'variants': variants,
        **(
            {'stock_extrapolated_from': os.path.basename(args.stock_from)}
            if args.stock_from
            else {}
        ),
        'total_stock_over_ours': (
            variants['stock']['total_seconds'] / variants['ours']['total_seconds']
        ),
        # The two Trainers differ (parameter servers vs model.fit), so their models agree only
        # within training noise: the gated metric's difference, on the same eval split.
        'eval_metric_difference': (
            ours_metric[1] - stock_metric[1]
            if stock_metric and ours_metric and stock_metric[0] == ours_metric[0]
            else None
        ),
        'machine': report.machine(),
        'finished_at': report.finished_at(),
    }


def print_summary(result: dict, stock_from: str | None, result_path: str, chart_path: str) -> None:
    """Prints each component's times and memory side by side, the eval metrics and the files."""
    print(
        f'\n{"component":<18}{"stock":>9}{"ours":>9}{"stock/ours":>12}'
        f'{"stock MiB":>11}{"ours MiB":>10}'
    )
    nan = float('nan')
    stock, ours = result['variants']['stock'], result['variants']['ours']
    for name in component_names(result) + ['total']:
        if name == 'total':
            times = stock['total_seconds'], ours['total_seconds']
            peaks = stock.get('peak_mb', nan), ours['peak_mb']
        else:
            times = (
                stock['component_seconds'].get(name, nan),
                ours['component_seconds'].get(name, nan),
            )
            peaks = (
                stock.get('component_peak_mb', {}).get(name, nan),
                ours['component_peak_mb'].get(name, nan),
            )
        ratio = times[0] / times[1] if times[1] else nan
        print(
            f'{name:<18}{times[0]:>8.1f}s{times[1]:>8.1f}s{ratio:>12.2f}'
            f'{peaks[0]:>11.0f}{peaks[1]:>10.0f}'
        )
    stock_metric, ours_metric = stock.get('eval_metric'), ours.get('eval_metric')
    if stock_from:
        rows = stock['extrapolated_from']['rows']
        print(f'stock: extrapolated from {rows:,} rows ({stock_from})')
    elif result['eval_metric_difference'] is None:
        print(f'eval metrics not comparable: stock {stock_metric}, ours {ours_metric}')
    else:
        print(
            f'eval {ours_metric[0]}: stock {stock_metric[1]:.4f}, ours {ours_metric[1]:.4f} '
            f'(ours - stock = {result["eval_metric_difference"]:+.4f})'
        )
    print(f'wrote {result_path} and {chart_path}')


def run(args: argparse.Namespace) -> int:
    """The bench: write the input, run both pipelines (or ours and a reference), and report."""
    if args.rows < 10 or args.train_steps < 1:
        print('--rows: at least 10; --train-steps: at least 1', file=sys.stderr)
        return 2
    output = os.path.abspath(args.output)
    features = [name.strip() for name in (args.features or '').split(',') if name.strip()]
    dataset = os.path.join(output, 'dataset') if features else None
    if args.variant:  # Child process: one pipeline, the result as JSON on stdout.
        result = pipeline_variants.run_variant(
            args.variant,
            os.path.join(output, 'input'),
            os.path.join(output, args.variant),
            args.train_steps,
            args.beam_args,
            dataset,
        )
        print(json.dumps(result))
        return 0
    try:
        reference = prepare_input(args, output, features, dataset)
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    variants = run_variants(args, output, dataset, reference)
    if variants is None:
        return 1
    result = build_result(args, features, variants)
    result_path, chart_path = report.write_result(output, result, 'pipeline.png', write_chart)
    print_summary(result, args.stock_from, result_path, chart_path)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog='bench pipeline', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == '__main__':
    tf_environment.configure()
    sys.exit(main())
