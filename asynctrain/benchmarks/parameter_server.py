"""`asynctrain bench ps`: how asynchronous parameter-server training scales, config by config.

The Trainer's own training loop (`asynctrain.components.trainer.training.loop.Trainer`, in-process cluster)
trains the default model on transformed taxi examples (made as `bench input` makes them, or from
an earlier Transform's output) under ParameterServerStrategy, for every combination of:

- `steps_per_execution` 1, 10, 100 (steps per scheduled `tf.function` call);
- 1 and 2 workers;
- 1 parameter server, or 2 with `fixed_shards` (every variable split in two) versus
  `min_shard_size` (shards of at least 256 KiB: the taxi model's tables are smaller, so each
  variable stays whole on one server, placed round-robin). With 1 server both partitioners
  give one shard per variable, so it runs once.

Each config first runs one closure per worker (tracing, dataset start) untimed, then `--steps`
timed steps; reported are steps/s, examples/s, the mean and max staleness of the updates (steps
other workers applied between a step's read of the weights and its own update), and the share
of loop time workers waited for input, as the Trainer measures them.

Every config also trains with Keras `model.fit` under the same ParameterServerStrategy (same
data, model, cluster, steps and `steps_per_execution`; see `parameter_server_fit`), in
`--repeats` rounds alternating with ours, so both see the same load; each variant's best round
is reported. `vs_fit` is ours / fit in steps/s. Both trained models are then
scored on the same held-out batches (`held_out_loss`): ours must learn what fit learns.

Every server and the coordinator share this machine's cores, so more workers or servers add
contention here rather than capacity; the figures show the per-step overheads (scheduling, RPCs
per shard) that more machines would not remove.

    asynctrain bench ps [--steps N] [--repeats N] [--batch-size N] [--examples N] [--output DIR]
                        [--transformed-examples DIR --transform-graph DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

from asynctrain.benchmarks import parameter_server_report, report, transformed_examples

DEFAULT_OUTPUT = os.path.join('bench_out', 'ps')
DEFAULT_STEPS = 200
DEFAULT_REPEATS = 2
DEFAULT_EXAMPLES = 100_000
DEFAULT_SAMPLE_ROWS = 2000
BATCH_SIZE = 256
# (parameter servers, partitioner); one server holds every variable whole either way.
LAYOUTS = ((1, 'fixed_shards'), (2, 'fixed_shards'), (2, 'min_shard_size'))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--steps',
        type=int,
        default=DEFAULT_STEPS,
        help=f'timed steps per config (default {DEFAULT_STEPS})',
    )
    parser.add_argument(
        '--steps-per-execution',
        type=int,
        nargs='+',
        default=[1, 10, 100],
        metavar='N',
        help='values of steps_per_execution (default 1 10 100)',
    )
    parser.add_argument(
        '--workers',
        type=int,
        nargs='+',
        default=[1, 2],
        metavar='N',
        help='worker counts (default 1 2)',
    )
    parser.add_argument(
        '--repeats',
        type=int,
        default=DEFAULT_REPEATS,
        help=f'timed rounds per variant and config, ours and fit alternating; the best of each '
        f'is reported (default {DEFAULT_REPEATS})',
    )
    transformed_examples.add_data_arguments(
        parser, examples=DEFAULT_EXAMPLES, sample_rows=DEFAULT_SAMPLE_ROWS, batch_size=BATCH_SIZE
    )
    parser.add_argument(
        '--output',
        default=DEFAULT_OUTPUT,
        help=f'directory for the data, result.json and parameter_server.png '
        f'(default {DEFAULT_OUTPUT}); emptied first',
    )


_log = report.progress('ps')


def _variable_shards(keras_model) -> int:
    """Pieces the model's variables are split into on the parameter servers."""
    return sum(len(getattr(v, 'variables', [v])) for v in keras_model.variables)


def _trainer_config(
    cluster,
    warm: int,
    steps: int,
    repeats: int,
    steps_per_execution: int,
    partitioner: str,
    server_threads: int,
    batch_size: int,
):
    """The Trainer's config for one bench config: no checkpoint, one summary at the very end."""
    from asynctrain.components.trainer import config as config_lib

    return config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=warm + steps,
            batch_size=batch_size,
            steps_per_execution=steps_per_execution,
            checkpoint_interval_steps=0,
            summary_interval_steps=warm + repeats * steps,
        ),
        distribution=config_lib.DistributionConfig(
            num_workers=cluster.num_workers,
            num_ps=cluster.num_ps,
            partitioner=partitioner,
            server_threads=server_threads,
        ),
    )


def run_config(
    data: transformed_examples.TransformedExamples,
    cluster,
    run_dir: str,
    steps: int,
    steps_per_execution: int,
    partitioner: str,
    server_threads: int = 0,
    batch_size: int = BATCH_SIZE,
    held_out: list | None = None,
    repeats: int = 1,
) -> dict:
    """Our loop and `model.fit` on a running cluster, `repeats` timed rounds of `steps` each,
    alternating (ours, fit, ours, fit...) so that both see the same load; each variant's best
    round is reported. Returns what the Trainer measured, fit's under `fit`, ours / fit under
    `vs_fit`, and with `held_out` batches both trained models' mean loss on them."""
    from asynctrain.benchmarks import parameter_server_fit as fit_lib
    from asynctrain.components.trainer.training import loop as train_lib

    warm = steps_per_execution * cluster.num_workers
    config = _trainer_config(
        cluster, warm, steps, repeats, steps_per_execution, partitioner, server_threads, batch_size
    )
    task = transformed_examples.make_task(data, trainer_config=config)
    started = time.monotonic()
    trainer = train_lib.Trainer(task, cluster, data.examples_dir, run_dir)
    # Untimed: one closure per worker traces the step and starts each worker's dataset.
    fit_lib.train_to(trainer, warm)
    wall_seconds = {'ours': time.monotonic() - started}
    started = time.monotonic()
    keras_model, creator = fit_lib.prepare_fit(task, cluster, data.examples_dir, warm)
    wall_seconds['fit'] = time.monotonic() - started
    rounds, fit_rounds = [], []
    for i in range(repeats):
        started = time.monotonic()
        rounds.append(fit_lib.train_to(trainer, warm + (i + 1) * steps))
        wall_seconds['ours'] += time.monotonic() - started
        started = time.monotonic()
        fit_rounds.append(fit_lib.timed_fit(keras_model, creator, steps, batch_size))
        wall_seconds['fit'] += time.monotonic() - started
    losses = {}
    if held_out is not None:
        losses = {
            'held_out_loss': fit_lib.held_out_loss(task, trainer.model, held_out),
            'fit_held_out_loss': fit_lib.held_out_loss(task, keras_model, held_out),
        }
    figures = {
        'steps_per_execution': steps_per_execution,
        'num_workers': cluster.num_workers,
        'num_ps': cluster.num_ps,
        'partitioner': partitioner,
        'variable_shards': _variable_shards(trainer.model),
    }
    return {**figures, **best_rounds(rounds, fit_rounds, wall_seconds), **losses}


def best_rounds(rounds: list[dict], fit_rounds: list[dict], wall_seconds: dict) -> dict:
    """Each variant's best round of a config, ours / fit, and every round's steps/s."""
    for measured in rounds:
        measured['steps_per_sec'] = measured['steps_this_run'] / measured['seconds']
    measured = max(rounds, key=lambda r: r['steps_per_sec'])
    fit = max(fit_rounds, key=lambda r: r['steps_per_sec'])
    return {
        'steps': measured['steps_this_run'],
        'seconds': measured['seconds'],
        'steps_per_sec': measured['steps_per_sec'],
        'examples_per_sec': measured['examples_per_sec'],
        'train_loss': measured['loss'],
        'staleness_mean': measured['staleness_mean'],
        'staleness_max': measured['staleness_max'],
        'input_wait_fraction': measured['input_wait_fraction'],
        'fit': fit,
        'vs_fit': measured['steps_per_sec'] / fit['steps_per_sec'],
        # Every round's steps/s, in the order run, then each variant's whole run (building,
        # tracing, warm-up and every round), seconds.
        'rounds_steps_per_sec': {
            'ours': [r['steps_per_sec'] for r in rounds],
            'fit': [r['steps_per_sec'] for r in fit_rounds],
        },
        'wall_seconds': wall_seconds,
    }


def parse_arguments(args: argparse.Namespace) -> transformed_examples.TransformOutput | None:
    """The earlier Transform output to resample (None: transform afresh), once checked.

    Raises:
      ValueError: an argument is out of range or a directory missing; the message names it.
    """
    if (
        min([args.steps, args.repeats, args.batch_size, *args.steps_per_execution, *args.workers])
        < 1
    ):
        raise ValueError(
            '--steps, --repeats, --batch-size, --steps-per-execution and --workers: positive integers'
        )
    return transformed_examples.transform_output_from_args(args)


def prepare_data(
    args: argparse.Namespace,
    transform_output: transformed_examples.TransformOutput | None,
    output: str,
) -> tuple[transformed_examples.TransformedExamples, list]:
    """The examples every config trains on, and the held-out batches both variants are scored on."""
    from asynctrain.benchmarks import parameter_server_fit as fit_lib

    _log(transformed_examples.describe_source(transform_output, args.examples, args.sample_rows))
    data = transformed_examples.make_transformed_examples(
        os.path.join(output, 'data'),
        args.examples,
        args.sample_rows,
        transform_output=transform_output,
    )
    _log(f'data: {data.num_examples:,} examples in {data.seconds:.1f} s')
    held_out = fit_lib.held_out_batches(
        transformed_examples.make_task(data, batch_size=args.batch_size), data.examples_dir
    )
    return data, held_out


def run_configs(
    args: argparse.Namespace,
    data: transformed_examples.TransformedExamples,
    held_out: list,
    output: str,
) -> list[dict]:
    """Every config, on one in-process cluster per (workers, servers) shape."""
    from asynctrain.components.trainer import config as config_lib
    from asynctrain.components.trainer.cluster import servers as cluster_lib

    configs = []
    for num_workers in args.workers:
        for num_ps in sorted({n for n, _ in LAYOUTS}):
            # One cluster per shape: in-process servers live as long as the process, so configs
            # that differ only in partitioner or steps_per_execution share one.
            # Every cluster gets the thread count the largest one needs: the first in-process
            # server fixes the process's inter-op pool, and a later, larger cluster with fewer
            # threads than num_workers + 1 deadlocks.
            with cluster_lib.start(
                config_lib.DistributionConfig(
                    num_workers=num_workers, num_ps=num_ps, server_threads=max(args.workers) + 1
                )
            ) as cluster:
                configs += run_cluster_configs(args, data, held_out, cluster, output)
    return configs


def run_cluster_configs(
    args: argparse.Namespace,
    data: transformed_examples.TransformedExamples,
    held_out: list,
    cluster,
    output: str,
) -> list[dict]:
    """Every partitioner and steps_per_execution on one running cluster, each logged."""
    num_workers, num_ps = cluster.num_workers, cluster.num_ps
    configs = []
    for partitioner in [p for n, p in LAYOUTS if n == num_ps]:
        for spe in args.steps_per_execution:
            run_dir = os.path.join(
                output, 'runs', f'{num_workers}w-{num_ps}ps-{partitioner}-spe{spe}'
            )
            measured = run_config(
                data,
                cluster,
                run_dir,
                args.steps,
                spe,
                partitioner,
                max(args.workers) + 1,
                args.batch_size,
                held_out,
                args.repeats,
            )
            configs.append(measured)
            _log(parameter_server_report.config_line(measured))
    return configs


def run(args: argparse.Namespace) -> int:
    """The bench: prepare the data, run every config on its cluster, write and print the report."""
    try:
        transform_output = parse_arguments(args)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    load_at_start = list(os.getloadavg())
    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    started = time.monotonic()
    data, held_out = prepare_data(args, transform_output, output)
    configs = run_configs(args, data, held_out, output)
    result = parameter_server_report.build_result(
        args, transform_output, data, configs, held_out, load_at_start, started
    )
    result_path, chart_path = report.write_result(
        output, result, 'parameter_server.png', parameter_server_report.write_chart
    )
    shutil.rmtree(os.path.join(output, 'data'), ignore_errors=True)
    shutil.rmtree(os.path.join(output, 'runs'), ignore_errors=True)
    parameter_server_report.print_summary(configs, result_path, chart_path)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog='bench ps', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == '__main__':
    sys.exit(main())
