"""`asynctrain bench input`: does training wait for input? Five input pipelines, one model.

Data: a sample of the bundled taxi CSV is transformed by the stock Transform executor running our
`preprocessing_fn` (as the pipeline does; `--transformed-examples` and `--transform-graph` give an
earlier Transform's output instead), and its transformed train split is resampled, with
replacement and whole rows at a time, to `--examples` transformed tf.Examples written as sharded
GZIP TFRecords: real transformed values, the pipeline's record layout, at any size in seconds.
The pipeline's ExampleBatcher writer then rewrites them once, shuffled and pre-batched (each
record a `tf.Example` holding 256 examples column by column); its disk size and write time are
reported, and it is checked to read back as the same examples, every value equal.

The same model (`asynctrain.components.trainer.training.model`, the Trainer's default widths) trains the same number
of steps at the same batch size (`--batch-size`, by default the Trainer's default, 2048), fed by:

1. `upper_bound`: one parsed batch held in memory, fed to every step: no I/O, no parsing, no
   iterator, no indexing. Our step in a `tf.function` running `steps_per_execution` steps per
   call.
2. `ours`: the Trainer's per-worker dataset (`asynctrain.components.trainer.training.data.make_dataset`, defaults of
   `InputConfig`, no cache) over the pre-batched examples, as the pipeline feeds it, timed from
   the first batch of the first epoch, feeding that same step function.
2b. `ours_cached`: the same with `input.cache: memory`, timed after one full epoch (which parses
   and fills the cache, and is reported on its own as `first_epoch_examples_per_sec`): what the
   cache still adds when the split fits in memory.
2c. `per_example`: the Trainer's dataset over Transform's own output (one `tf.Example` per
   record: a batch is one proto parsed per example), the pipeline's input before the
   ExampleBatcher.
3. `tfx`: what TFX's examples do: `data_accessor.tf_dataset_factory` (the factory stock Trainer
   hands to `run_fn`, built here from the artifact exactly as stock Trainer builds it) feeding
   `model.fit` with Keras's defaults; the model compiled with the same optimizer and loss.
4. `naive`: records read one at a time, parsed one at a time (`parse_single_example`), stacked into
   a batch in Python, no prefetch, and an eager (not `tf.function`) train step.

Ours, ours_cached and per_example also report the trained model's AUC on the eval split
(`eval_auc`): the shuffle of the pre-batched records must not cost accuracy.

The input stall is the share of step time spent waiting for the next batch. For 1, 2 and 4 it is
measured in the loop (timestamps around `next(iterator)`, as the Trainer reports it). `model.fit`
gives no such hook, so for 3 it is derived: 1 - rate(fit on the dataset) / rate(the same fit on
the in-memory batches), i.e. the time per step that the dataset adds.

A sweep over hidden widths (upper bound and ours only) shows where the model stops being
input-bound; the input pipelines' rates alone (no model) say where the crossover should be.

Compare ratios, not absolute rates: the machine may be shared, and here input and compute share
the same CPU cores, so they can overlap only as far as cores are idle.

    asynctrain bench input [--examples N] [--steps N] [--batch-size N] [--output DIR]
                           [--transformed-examples DIR --transform-graph DIR]

The data lives in `transformed_examples`; the batched writer, its check and the variants' runners
in `input_variants`; the result, the chart and the printed summary in `input_report`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from asynctrain.benchmarks import input_report, report
from asynctrain.benchmarks.input_variants import (
    BenchData,
    cached_dataset,
    in_memory_batches,
    in_memory_dataset,
    input_only_rate,
    model_parameters,
    naive_input_only_rate,
    same_examples,
    tfx_dataset,
    train_in_loop,
    train_naive,
    train_with_fit,
    write_batched_examples,
)
from asynctrain.benchmarks.transformed_examples import (
    BATCH_SIZE,
    DEFAULT_SAMPLE_ROWS,
    TransformedExamples,
    TransformOutput,
    add_data_arguments,
    describe_source,
    make_task,
    make_transformed_examples,
    transform_output_from_args,
)

DEFAULT_OUTPUT = os.path.join('bench_out', 'input')
DEFAULT_EXAMPLES = 1_000_000
# One epoch of the default examples at the default batch.
DEFAULT_STEPS = 500
# The naive pipeline runs about 1,000 examples/s here; its rate is steady after a few steps, so
# it runs fewer (reported as its own `steps`) to keep the bench within minutes.
DEFAULT_NAIVE_STEPS = 5  # 10,240 examples at the default batch
DEFAULT_ROUNDS = 3
# Hidden layers of the sweep, small (input-bound) to large (compute-bound). The first is the
# Trainer's default model.
SWEEP = ((64, 32), (256, 128), (1024, 512), (2048, 1024))
# Ours counts as "not input-bound" at this stall, the profiler's threshold.
NOT_INPUT_BOUND_STALL = 0.05


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--steps',
        type=int,
        default=DEFAULT_STEPS,
        help=f'timed train steps per variant (default {DEFAULT_STEPS}); the '
        'model sweep runs an eighth of them per width',
    )
    parser.add_argument(
        '--rounds',
        type=int,
        default=DEFAULT_ROUNDS,
        help='alternating rounds of the upper bound, ours and per_example; the best of each '
        f'counts, as noise on a shared machine only slows a round (default {DEFAULT_ROUNDS})',
    )
    parser.add_argument(
        '--naive-steps',
        type=int,
        default=DEFAULT_NAIVE_STEPS,
        help=f'timed steps of the naive pipeline (default {DEFAULT_NAIVE_STEPS})',
    )
    parser.add_argument(
        '--sweep',
        nargs='+',
        default=[','.join(map(str, w)) for w in SWEEP],
        metavar='UNITS',
        help='hidden layers of each model in the sweep, e.g. 64,32 2048,1024 '
        f'(default {" ".join(",".join(map(str, w)) for w in SWEEP)})',
    )
    add_data_arguments(
        parser, examples=DEFAULT_EXAMPLES, sample_rows=DEFAULT_SAMPLE_ROWS, batch_size=BATCH_SIZE
    )
    parser.add_argument(
        '--output',
        default=DEFAULT_OUTPUT,
        help=f'directory for the data, result.json and input_pipeline.png '
        f'(default {DEFAULT_OUTPUT}); emptied first',
    )


_log = report.progress('input')


def parse_arguments(
    args: argparse.Namespace,
) -> tuple[list[tuple[int, ...]], TransformOutput | None]:
    """The sweep's hidden widths and the earlier Transform output to resample, once checked.

    Raises:
      ValueError: an argument is out of range or malformed; the message names it.
    """
    if (
        min(args.steps, args.rounds, args.batch_size) < 1
        or args.examples < args.batch_size
        or args.sample_rows < 10
    ):
        raise ValueError(
            '--batch-size, --steps, --rounds: at least 1; --examples: at least --batch-size; '
            '--sample-rows: at least 10'
        )
    try:
        widths = [tuple(int(u) for u in w.split(',')) for w in args.sweep]
    except ValueError:
        raise ValueError(
            f'--sweep: expected comma-separated integers per model, got {args.sweep}'
        ) from None
    return widths, transform_output_from_args(args)


def prepare_data(
    args: argparse.Namespace, transform_output: TransformOutput | None, output: str
) -> BenchData:
    """Empties `output`, makes the examples and their pre-batched copy, and checks the copy."""
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    _log(describe_source(transform_output, args.examples, args.sample_rows))
    from asynctrain.components.shared import tf_environment

    # As the Trainer traces its step: AutoGraph leaves tf-keras' own code unconverted, for every
    # variant alike (`model.fit` too). Tracing is outside the timed steps either way.
    tf_environment.configure_autograph()

    data = make_transformed_examples(
        os.path.join(output, 'data'),
        args.examples,
        args.sample_rows,
        transform_output=transform_output,
    )
    _log(
        f'data: {data.num_examples:,} examples, {data.bytes / 2**20:.0f} MiB in '
        f'{data.num_files} GZIP files, {data.seconds:.1f} s'
    )
    task = make_task(data, batch_size=args.batch_size)
    batched = write_batched_examples(data, os.path.join(output, 'data', 'batched'), task)
    batched_same = same_examples(data, batched, task)
    _log(
        f'pre-batched: {batched.records:,} records of {batched.examples_per_record}, '
        f'{batched.bytes / 2**20:.0f} MiB, written in {batched.write_seconds:.1f} s; same '
        f'examples as the source: {batched_same}'
    )
    return BenchData(data, batched, task, batched_same)


def run_rounds(bench: BenchData, steps: int, rounds: int) -> dict:
    """Upper bound, ours and per_example in alternating rounds; the best round of each counts."""
    from asynctrain.components.trainer.training import data as data_lib

    task, data, batched = bench.task, bench.data, bench.batched
    # (inputs, eval split's examples) of each variant, each round from a fresh dataset (the
    # first epoch).
    sources = {
        'upper_bound': lambda: (in_memory_batches(task, data), None),
        'ours': lambda: (
            task.build_inputs(batched.examples_dir, data_lib.TRAIN_SPLIT, training=True),
            batched.examples_dir,
        ),
        'per_example': lambda: (
            task.build_inputs(data.examples_dir, data_lib.TRAIN_SPLIT, training=True),
            data.examples_dir,
        ),
    }
    measured = {name: [] for name in sources}
    for index in range(rounds):
        _log(
            f'round {index + 1}/{rounds}: upper bound (in-memory tensors), ours '
            "(pre-batched examples), per_example (Transform's one tf.Example per record)"
        )
        for name, source in sources.items():
            inputs, eval_dir = source()
            measured[name].append(train_in_loop(task, inputs, steps, eval_examples_dir=eval_dir))
    return {
        name: dict(
            max(runs, key=lambda m: m['examples_per_sec']),
            rounds_examples_per_sec=[m['examples_per_sec'] for m in runs],
        )
        for name, runs in measured.items()
    }


def run_ours_cached(bench: BenchData, steps: int, batch_size: int) -> dict:
    """Ours with `input.cache: memory`, timed after the first epoch, which fills the cache."""
    _log('ours, input.cache: memory (one epoch to fill the cache, then timed)')
    epoch_steps = -(-bench.data.num_examples // batch_size)
    measured = train_in_loop(
        bench.task,
        cached_dataset(bench.task, bench.batched.examples_dir),
        steps,
        warmup_steps=epoch_steps,
        eval_examples_dir=bench.batched.examples_dir,
    )
    measured['first_epoch_examples_per_sec'] = measured.pop('warmup_examples_per_sec')
    measured['first_epoch_steps'] = measured.pop('warmup_steps')
    return measured


def run_tfx(bench: BenchData, steps: int) -> dict:
    """`model.fit` on stock's dataset; its stall derived from the same fit on in-memory batches."""
    _log('tfx: tf_dataset_factory + model.fit')
    fit = train_with_fit(bench.task, tfx_dataset(bench.task, bench.data), steps)
    fit_in_memory = train_with_fit(bench.task, in_memory_dataset(bench.task, bench.data), steps)
    fit['input_stall_fraction'] = max(
        0.0, 1 - fit['examples_per_sec'] / fit_in_memory['examples_per_sec']
    )
    fit['stall_method'] = 'derived from model.fit on the in-memory batches'
    fit['fit_in_memory_examples_per_sec'] = fit_in_memory['examples_per_sec']
    return fit


def run_variants(bench: BenchData, args: argparse.Namespace) -> dict:
    """Every variant's training figures, each with its ratio to the upper bound."""
    variants = run_rounds(bench, args.steps, args.rounds)
    variants['ours_cached'] = run_ours_cached(bench, args.steps, args.batch_size)
    variants['tfx'] = run_tfx(bench, args.steps)
    _log('naive: per-example parse, no prefetch, eager step')
    variants['naive'] = train_naive(bench.task, bench.data, args.naive_steps)
    upper = variants['upper_bound']['examples_per_sec']
    for name, measured in variants.items():
        measured['ratio_to_upper_bound'] = measured['examples_per_sec'] / upper
        _log(
            f'{name}: {measured["examples_per_sec"]:,.0f} examples/s, '
            f'{measured["ratio_to_upper_bound"]:.2f} of the upper bound, input stall '
            f'{measured["input_stall_fraction"]:.1%}'
        )
    return variants


def measure_input_only(bench: BenchData, steps: int, batch_size: int, naive_steps: int) -> dict:
    """Each input pipeline's examples/s on its own, no model: where the crossover should be."""
    from asynctrain.components.trainer.training import data as data_lib

    _log('input pipelines alone (no model)')
    task = bench.task
    input_steps = max(1, steps // 2)
    input_only = {
        'ours': input_only_rate(
            task.build_inputs(bench.batched.examples_dir, data_lib.TRAIN_SPLIT, training=True),
            input_steps,
            batch_size,
        ),
        'per_example': input_only_rate(
            task.build_inputs(bench.data.examples_dir, data_lib.TRAIN_SPLIT, training=True),
            input_steps,
            batch_size,
        ),
        'tfx': input_only_rate(tfx_dataset(task, bench.data), input_steps, batch_size),
        'naive': naive_input_only_rate(task, bench.data, naive_steps),
    }
    _log('input alone: ' + ', '.join(f'{k} {v:,.0f}/s' for k, v in input_only.items()))
    return input_only


def run_sweep(
    data: TransformedExamples,
    ours_dir: str,
    widths: list[tuple[int, ...]],
    steps: int,
    ours_input_rate: float,
    batch_size: int,
) -> dict:
    """Upper bound and ours (reading `ours_dir`) per hidden width; the crossover is where ours
    stops stalling."""
    from asynctrain.components.trainer.training import data as data_lib

    points = []
    for hidden_units in widths:
        task = make_task(data, hidden_units, batch_size=batch_size)
        upper = train_in_loop(task, in_memory_batches(task, data), steps)
        ours = train_in_loop(
            task, task.build_inputs(ours_dir, data_lib.TRAIN_SPLIT, training=True), steps
        )
        point = {
            'hidden_units': list(hidden_units),
            'parameters': model_parameters(task),
            'upper_bound_examples_per_sec': upper['examples_per_sec'],
            'ours_examples_per_sec': ours['examples_per_sec'],
            'ours_ratio_to_upper_bound': ours['examples_per_sec'] / upper['examples_per_sec'],
            'ours_input_stall_fraction': ours['input_stall_fraction'],
            # The model alone is slower than the input alone: compute-bound.
            'compute_bound': upper['examples_per_sec'] < ours_input_rate,
        }
        points.append(point)
        _log(
            f'sweep {hidden_units}: {point["parameters"]:,} parameters, upper '
            f'{upper["examples_per_sec"]:,.0f}/s, ours {ours["examples_per_sec"]:,.0f}/s '
            f'(ratio {point["ours_ratio_to_upper_bound"]:.2f}, stall '
            f'{ours["input_stall_fraction"]:.1%})'
        )
    first_not_input_bound = next(
        (
            p['hidden_units']
            for p in points
            if p['ours_input_stall_fraction'] < NOT_INPUT_BOUND_STALL
        ),
        None,
    )
    first_compute_bound = next((p['hidden_units'] for p in points if p['compute_bound']), None)
    return {
        'steps': steps,
        'points': points,
        'first_width_with_stall_under_5pct': first_not_input_bound,
        'first_width_slower_than_ours_input_alone': first_compute_bound,
    }


def run(args: argparse.Namespace) -> int:
    """The bench: prepare the data, run every variant, the input alone and the sweep; report."""
    try:
        widths, transform_output = parse_arguments(args)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    output = os.path.abspath(args.output)
    bench = prepare_data(args, transform_output, output)
    if not bench.same_examples:
        print('the pre-batched examples differ from the source examples', file=sys.stderr)
        return 1
    variants = run_variants(bench, args)
    input_only = measure_input_only(bench, args.steps, args.batch_size, args.naive_steps)
    _log(f'model sweep over hidden widths {[list(w) for w in widths]}')
    sweep = run_sweep(
        bench.data,
        bench.batched.examples_dir,
        widths,
        max(1, args.steps // 8),
        input_only['ours'],
        args.batch_size,
    )
    result = input_report.build_result(args, transform_output, bench, variants, input_only, sweep)
    result_path, chart_path = report.write_result(
        output, result, 'input_pipeline.png', input_report.write_chart
    )
    # The data is regenerated on every run; only the report stays.
    shutil.rmtree(os.path.join(output, 'data'), ignore_errors=True)
    input_report.print_summary(result, result_path, chart_path)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog='bench input', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == '__main__':
    sys.exit(main())
