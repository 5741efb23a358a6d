"""`asynctrain bench evaluator`: our Evaluator against stock TFMA with slices, one run, the same
model and examples.

A taxi model is trained once by the local pipeline (`--train-rows` rows resampled from the
bundled sample, `--train-steps` steps) with the evaluation settings under test: slices on
`payment_type` and on `trip_start_hour`, their feature cross with `trip_start_day`
(`payment_type` x `trip_start_day`), a gate on every slice and TFMA's plots (calibration and
confusion matrices at 1,000 thresholds; `--confidence-intervals` adds the jackknife). The
`eval_config` that pipeline's Evaluator wrote is the one both evaluate with.

Then, for each of `--rows`, that many examples (the bundled sample resampled, as raw
`tf.Example`s in GZIP TFRecords, both splits) are evaluated twice, each in a fresh child process:

- `stock`: `tfma.run_model_analysis`, the engine inside TFX's Evaluator (the test kit's
  `evaluation_outputs.run_stock`, whose slice keys come from the raw features, as ours do: TFMA
  alone would slice the transformed `payment_type`, a vocabulary id);
- `ours`: the Evaluator's Beam pipeline (`executor.add_evaluation`) with the component's batch
  size.

Both on Beam's DirectRunner in memory. Reported per size: wall seconds, the peak resident set of
each child's process tree (sampled from here), the slices evaluated, and every disagreement of
ours with stock (`asynctrain.testing.evaluation_outputs.differences`: slices, metric keys,
values within 1e-6, plots, failed checks); exit status 1 when there is any.

    asynctrain bench evaluator [--rows N,N] [--train-rows N] [--train-steps N]
                               [--confidence-intervals] [--output DIR]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

from asynctrain.benchmarks import report
from asynctrain.testing import child_runs

DEFAULT_OUTPUT = os.path.join('bench_out', 'evaluator')
DEFAULT_ROWS = '100000'
DEFAULT_TRAIN_ROWS = 15_000
DEFAULT_TRAIN_STEPS = 300
VARIANTS = ('stock', 'ours')
SLICES = (('payment_type',), ('trip_start_hour',), ('payment_type', 'trip_start_day'))
# Every slice must reach this AUC: some small slices do not, so the gate's failures are compared.
SLICE_MIN_AUC = 0.8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--rows',
        default=DEFAULT_ROWS,
        help=f'comma-separated numbers of examples to evaluate (default {DEFAULT_ROWS})',
    )
    parser.add_argument(
        '--train-rows',
        type=int,
        default=DEFAULT_TRAIN_ROWS,
        help=f'CSV rows the model is trained on (default {DEFAULT_TRAIN_ROWS:,})',
    )
    parser.add_argument(
        '--train-steps',
        type=int,
        default=DEFAULT_TRAIN_STEPS,
        help=f'training steps (default {DEFAULT_TRAIN_STEPS})',
    )
    parser.add_argument(
        '--confidence-intervals',
        action='store_true',
        help="also TFMA's jackknife confidence intervals (20 partitions)",
    )
    parser.add_argument(
        '--output', default=DEFAULT_OUTPUT, help=f'work folder (default {DEFAULT_OUTPUT})'
    )


_log = report.progress('evaluator', stderr=True)


def _newest(pipeline_root: str, component: str, output: str) -> str:
    """The URI of a component's newest output artifact of that name."""
    uris = glob.glob(os.path.join(pipeline_root, component, output, '*'))
    return max(uris, key=lambda uri: int(os.path.basename(uri)))


def train(output: str, rows: int, steps: int, confidence_intervals: bool) -> tuple[str, str]:
    """(the Trainer's model artifact directory, the eval_config as JSON) of one local pipeline
    run with the slices under test."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format

    from asynctrain.pipelines.config import load_config
    from asynctrain.pipelines.local_runner import run_local
    from asynctrain.testing import taxi_data

    data_dir = os.path.join(output, 'train_data')
    taxi_data.generate_csv(rows, os.path.join(data_dir, 'data.csv'))
    config = load_config(
        data=data_dir,
        work_dir=os.path.join(output, 'work'),
        trainer={'training': {'train_steps': steps}},
        evaluation={
            'slices': [list(s) for s in SLICES],
            'slice_min_value': SLICE_MIN_AUC,
            'plots': True,
            'confidence_intervals': confidence_intervals,
        },
    )
    run_local(config)
    evaluation = _newest(config.pipeline_root, 'Evaluator', 'evaluation')
    eval_config = tfma.load_eval_result(evaluation).config
    return _newest(config.pipeline_root, 'Trainer', 'model'), json_format.MessageToJson(eval_config)


def write_examples(directory: str, rows: int) -> str:
    """`rows` taxi examples resampled from the bundled sample; returns their file pattern."""
    from asynctrain.components.shared.feature_types import load_schema
    from asynctrain.testing import transform_runs as runs

    if not os.path.exists(os.path.join(directory, 'done')):
        table = runs.read_taxi_table(load_schema(str(runs.TAXI_SCHEMA)))
        runs.write_span(directory, 1, runs.resample_span(table, 1, rows))
        open(os.path.join(directory, 'done'), 'w').close()
    return os.path.join(directory, 'Span-1', 'Split-*', '*')


def _evaluate(variant, model_uri, eval_config_json, pattern, output_dir, queue) -> None:
    """In a child process: one evaluation; puts its wall seconds."""
    import apache_beam as beam
    from google.protobuf import json_format
    from tensorflow_model_analysis.proto import config_pb2
    from tfx.types import standard_artifacts

    from asynctrain.components.evaluator import component, executor
    from asynctrain.testing import evaluation_outputs

    eval_config = json_format.Parse(eval_config_json, config_pb2.EvalConfig())
    start = time.perf_counter()
    if variant == 'stock':
        evaluation_outputs.run_stock(
            eval_config, {'': os.path.join(model_uri, 'Format-Serving')}, pattern, output_dir
        )
    else:
        model = standard_artifacts.Model()
        model.uri = model_uri
        models = executor.models_to_score(eval_config, model, None)
        with beam.Pipeline() as pipeline:
            executor.add_evaluation(
                pipeline, [pattern], models, eval_config, output_dir, component.DEFAULT_BATCH_SIZE
            )
    queue.put(time.perf_counter() - start)


def measure(variant: str, model_uri: str, eval_config_json: str, pattern: str, output_dir: str):
    """One evaluation in a fresh child process: {seconds, peak_rss_mb}, or None if it failed."""
    measured = child_runs.run_spawned(
        _evaluate, (variant, model_uri, eval_config_json, pattern, output_dir)
    )
    if measured is None:
        _log(f'{variant}: the child process failed')
        return None
    seconds, peak_mb = measured
    return {'seconds': round(seconds, 1), 'peak_rss_mb': round(peak_mb, 1)}


def write_chart(result: dict, path: str) -> None:
    """Wall time and peak memory of stock and ours at every size."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    runs = result['runs']
    labels = [f'{r["rows"]:,} rows' for r in runs]
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.4
    for i, (variant, color) in enumerate((('stock', '#9e9e9e'), ('ours', '#1f77b4'))):
        offsets = [x + (i - 0.5) * width for x in range(len(runs))]
        name = 'stock TFMA' if variant == 'stock' else 'ours'
        bars = time_axes.bar(offsets, [r[variant]['seconds'] for r in runs], width, color=color)
        time_axes.bar_label(bars, fmt='%.0f', fontsize=8)
        bars = memory_axes.bar(
            offsets, [r[variant]['peak_rss_mb'] for r in runs], width, color=color, label=name
        )
        memory_axes.bar_label(bars, fmt='%.0f', fontsize=8)
    for axes, label in ((time_axes, 'wall time (s)'), (memory_axes, 'peak memory (MiB)')):
        axes.set_xticks(range(len(runs)))
        axes.set_xticklabels(labels)
        axes.set_ylabel(label)
    memory_axes.legend()
    extras = ', jackknife intervals' if result['confidence_intervals'] else ''
    figure.suptitle(
        f'Evaluator with {len(SLICES)} slicing specs and plots{extras}: ours vs stock TFMA'
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def parse_sizes(args: argparse.Namespace) -> list[int] | None:
    """The numbers of examples `--rows` asks for; None when an argument is out of range."""
    try:
        sizes = [int(n) for n in args.rows.split(',') if n.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 100 or args.train_rows < 100 or args.train_steps < 1:
        return None
    return sizes


def evaluate_size(rows: int, output: str, model_uri: str, eval_config_json: str) -> dict | None:
    """Stock and ours on `rows` examples, and how ours differs; None when a child failed."""
    from asynctrain.testing import evaluation_outputs

    _log(f'writing {rows:,} examples')
    pattern = write_examples(os.path.join(output, 'data', f'rows-{rows}'), rows)
    run_result = {'rows': rows}
    dirs = {}
    for variant in VARIANTS:
        dirs[variant] = os.path.join(output, 'evaluations', f'rows-{rows}', variant)
        _log(f'{rows:,} rows: {variant}')
        measured = measure(variant, model_uri, eval_config_json, pattern, dirs[variant])
        if measured is None:
            return None
        run_result[variant] = measured
        _log(f'{rows:,} rows: {variant}: {measured}')
    differences = evaluation_outputs.differences(dirs['stock'], dirs['ours'])
    for line in differences[:20]:
        _log(f'differs: {line}')
    values = evaluation_outputs.values(dirs['ours'])
    run_result.update(
        slices_evaluated=sum(1 for key in values if key),
        speedup=round(run_result['stock']['seconds'] / run_result['ours']['seconds'], 2),
        differences=len(differences),
        failed_slices=len(evaluation_outputs.failures(dirs['ours'])[1]),
    )
    return run_result


def run(args: argparse.Namespace) -> int:
    """The bench: train the model once, then evaluate every size both ways; write the report."""
    sizes = parse_sizes(args)
    if sizes is None:
        print(
            '--rows: comma-separated integers, each at least 100; --train-rows: at least 100; '
            '--train-steps: at least 1',
            file=sys.stderr,
        )
        return 2
    output = os.path.abspath(args.output)
    os.makedirs(output, exist_ok=True)
    _log(f'training a model on {args.train_rows:,} rows ({args.train_steps} steps)')
    model_uri, eval_config_json = train(
        os.path.join(output, 'model'), args.train_rows, args.train_steps, args.confidence_intervals
    )
    result = {
        'benchmark': 'evaluator',
        'slices': [list(s) for s in SLICES],
        'slice_min_auc': SLICE_MIN_AUC,
        'plots': True,
        'confidence_intervals': args.confidence_intervals,
        'train_rows': args.train_rows,
        'train_steps': args.train_steps,
        'runs': [],
    }
    for rows in sizes:
        run_result = evaluate_size(rows, output, model_uri, eval_config_json)
        if run_result is None:
            return 1
        result['runs'].append(run_result)
    agree = all(r['differences'] == 0 for r in result['runs'])
    result.update(agree=agree, machine=report.machine(), finished_at=report.finished_at())
    result_path, chart_path = report.write_result(output, result, 'evaluator.png', write_chart)
    print(json.dumps(result, indent=2))
    _log(f'wrote {result_path} and {chart_path}')
    return 0 if agree else 1
