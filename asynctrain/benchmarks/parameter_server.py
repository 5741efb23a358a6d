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
import dataclasses
import os
import shutil
import sys
import time

from asynctrain.benchmarks import input_variants, report

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
    parser.add_argument(
        '--batch-size',
        type=int,
        default=BATCH_SIZE,
        help=f'examples per step on each worker (default {BATCH_SIZE})',
    )
    parser.add_argument(
        '--examples',
        type=int,
        default=DEFAULT_EXAMPLES,
        help=f'transformed examples to generate (default {DEFAULT_EXAMPLES:,})',
    )
    parser.add_argument(
        '--sample-rows',
        type=int,
        default=DEFAULT_SAMPLE_ROWS,
        help=f'taxi rows transformed, then resampled (default {DEFAULT_SAMPLE_ROWS})',
    )
    input_variants.add_transform_output_arguments(parser)
    parser.add_argument(
        '--output',
        default=DEFAULT_OUTPUT,
        help=f'directory for the data, result.json and parameter_server.png '
        f'(default {DEFAULT_OUTPUT}); emptied first',
    )


def _log(message: str) -> None:
    print(f'[bench ps {time.strftime("%H:%M:%S")}] {message}', flush=True)


def layout_name(num_ps: int, partitioner: str) -> str:
    return f'{num_ps} ps' if num_ps == 1 else f'{num_ps} ps {partitioner}'


def _variable_shards(keras_model) -> int:
    """Pieces the model's variables are split into on the parameter servers."""
    return sum(len(getattr(v, 'variables', [v])) for v in keras_model.variables)


def run_config(
    data,
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
    from asynctrain.components.trainer import config as config_lib
    from asynctrain.components.trainer.training import loop as train_lib

    warm = steps_per_execution * cluster.num_workers
    config = config_lib.TrainerConfig(
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
    task = input_variants.make_task(data, trainer_config=config)
    started = time.monotonic()
    trainer = train_lib.Trainer(task, cluster, data.examples_dir, run_dir)
    # Untimed: one closure per worker traces the step and starts each worker's dataset. The
    # Trainer trains up to its config's train_steps, so each round raises the target.

    def train_to(target: int) -> dict:
        trainer.config = dataclasses.replace(
            config, training=dataclasses.replace(config.training, train_steps=target)
        )
        return trainer.train()

    train_to(warm)
    ours_wall = time.monotonic() - started
    started = time.monotonic()
    keras_model, creator = fit_lib.prepare_fit(task, cluster, data.examples_dir, warm)
    fit_wall = time.monotonic() - started
    rounds, fit_rounds = [], []
    for i in range(repeats):
        started = time.monotonic()
        rounds.append(train_to(warm + (i + 1) * steps))
        ours_wall += time.monotonic() - started
        started = time.monotonic()
        fit_rounds.append(fit_lib.timed_fit(keras_model, creator, steps, batch_size))
        fit_wall += time.monotonic() - started
    for measured in rounds:
        measured['steps_per_sec'] = measured['steps_this_run'] / measured['seconds']
    measured = max(rounds, key=lambda r: r['steps_per_sec'])
    fit = max(fit_rounds, key=lambda r: r['steps_per_sec'])
    losses = {}
    if held_out is not None:
        losses = {
            'held_out_loss': fit_lib.held_out_loss(task, trainer.model, held_out),
            'fit_held_out_loss': fit_lib.held_out_loss(task, keras_model, held_out),
        }
    return {
        'steps_per_execution': steps_per_execution,
        'num_workers': cluster.num_workers,
        'num_ps': cluster.num_ps,
        'partitioner': partitioner,
        'variable_shards': _variable_shards(trainer.model),
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
        'wall_seconds': {'ours': ours_wall, 'fit': fit_wall},
        **losses,
    }


def write_chart(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    configs = result['configs']
    groups = []
    for c in configs:
        key = (c['num_workers'], layout_name(c['num_ps'], c['partitioner']))
        if key not in groups:
            groups.append(key)
    spes = sorted({c['steps_per_execution'] for c in configs})
    figure, (speed, versus, staleness) = plt.subplots(1, 3, figsize=(18, 4.5))
    width = 0.8 / len(spes)
    for i, spe in enumerate(spes):
        rates, fit_rates, ratios, stale = [], [], [], []
        for workers, layout in groups:
            match = [
                c
                for c in configs
                if c['steps_per_execution'] == spe
                and (c['num_workers'], layout_name(c['num_ps'], c['partitioner']))
                == (workers, layout)
            ]
            rates.append(match[0]['steps_per_sec'] if match else 0)
            fit_rates.append(match[0]['fit']['steps_per_sec'] if match else 0)
            ratios.append(match[0]['vs_fit'] if match else 0)
            stale.append(match[0]['staleness_mean'] if match else 0)
        positions = [g + (i - (len(spes) - 1) / 2) * width for g in range(len(groups))]
        speed.bar(positions, rates, width, label=f'steps_per_execution {spe}')
        speed.scatter(positions, fit_rates, marker='_', s=300, color='black', zorder=3)
        versus.bar(positions, ratios, width, label=f'steps_per_execution {spe}')
        staleness.bar(positions, stale, width, label=f'steps_per_execution {spe}')
    labels = [
        f'{w} worker{"s" if w > 1 else ""}\n{layout}'.replace(' fixed_shards', '\nfixed').replace(
            ' min_shard_size', '\nmin size'
        )
        for w, layout in groups
    ]
    versus.axhline(1.0, color='black', linewidth=0.8)
    for axes, title in (
        (speed, f'steps/s (x batch {result["batch_size"]} = examples/s); black: model.fit'),
        (versus, 'ours / model.fit (steps/s)'),
        (staleness, 'mean staleness (updates)'),
    ):
        axes.set_xticks(range(len(groups)))
        axes.set_xticklabels(labels, fontsize=8)
        axes.set_title(title)
        axes.legend(fontsize=8)
    figure.suptitle(
        f'ParameterServerStrategy, in-process cluster on {result["machine"]["cpus"]} '
        f'CPUs, {result["steps"]} timed steps per config'
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def run(args: argparse.Namespace) -> int:
    if (
        min([args.steps, args.repeats, args.batch_size, *args.steps_per_execution, *args.workers])
        < 1
    ):
        print(
            '--steps, --repeats, --batch-size, --steps-per-execution and --workers: positive integers',
            file=sys.stderr,
        )
        return 2
    try:
        transform_output = input_variants.transform_output_from_args(args)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    load_at_start = list(os.getloadavg())
    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    started = time.monotonic()
    _log(
        f'resampling {transform_output.transformed_examples} to {args.examples:,} examples'
        if transform_output
        else f'transforming {args.sample_rows:,} taxi rows, resampling to {args.examples:,} examples'
    )
    from asynctrain.components.trainer import config as config_lib
    from asynctrain.components.trainer.cluster import servers as cluster_lib

    data = input_variants.make_transformed_examples(
        os.path.join(output, 'data'),
        args.examples,
        args.sample_rows,
        transform_output=transform_output,
    )
    _log(f'data: {data.num_examples:,} examples in {data.seconds:.1f} s')
    from asynctrain.benchmarks import parameter_server_fit as fit_lib

    held_out = fit_lib.held_out_batches(
        input_variants.make_task(data, batch_size=args.batch_size), data.examples_dir
    )
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
                        _log(
                            f'{num_workers} worker(s), {layout_name(num_ps, partitioner)} '
                            f'({measured["variable_shards"]} shards), spe {spe}: '
                            f'{measured["steps_per_sec"]:.1f} steps/s, '
                            f'{measured["examples_per_sec"]:,.0f} examples/s, staleness mean '
                            f'{measured["staleness_mean"]:.2f} max {measured["staleness_max"]}, '
                            f'input wait {measured["input_wait_fraction"]:.1%}; model.fit '
                            f'{measured["fit"]["steps_per_sec"]:.1f} steps/s, ours / fit '
                            f'{measured["vs_fit"]:.2f}x; held-out loss ours '
                            f'{measured["held_out_loss"]:.4f}, fit '
                            f'{measured["fit_held_out_loss"]:.4f}; wall ours '
                            f'{measured["wall_seconds"]["ours"]:.1f} s, fit '
                            f'{measured["wall_seconds"]["fit"]:.1f} s'
                        )

    result = {
        'benchmark': 'ps',
        'steps': args.steps,
        'repeats': args.repeats,
        'batch_size': args.batch_size,
        'examples': data.num_examples,
        # Taxi rows this run transformed, or the earlier Transform output it resampled.
        'sample_rows_transformed': None if transform_output else args.sample_rows,
        'transformed_examples': transform_output.transformed_examples if transform_output else None,
        'model_hidden_units': list(config_lib.ModelConfig().hidden_units),
        'configs': configs,
        'held_out_batches': len(held_out),
        # 1, 5 and 15-minute load averages: the machine's other work competes for its cores.
        'load_average_start': load_at_start,
        'load_average_end': list(os.getloadavg()),
        'machine': report.machine(),
        'seconds_total': time.monotonic() - started,
        'finished_at': report.finished_at(),
    }
    result_path, chart_path = report.write_result(
        output, result, 'parameter_server.png', write_chart
    )
    shutil.rmtree(os.path.join(output, 'data'), ignore_errors=True)
    shutil.rmtree(os.path.join(output, 'runs'), ignore_errors=True)

    print(
        f'\n{"workers":>7} {"layout":<22}{"spe":>5}{"steps/s":>9}{"examples/s":>12}'
        f'{"stale mean":>11}{"max":>5}{"input wait":>11}{"fit":>8}{"vs fit":>8}'
    )
    for c in configs:
        print(
            f'{c["num_workers"]:>7} {layout_name(c["num_ps"], c["partitioner"]):<22}'
            f'{c["steps_per_execution"]:>5}{c["steps_per_sec"]:>9.1f}'
            f'{c["examples_per_sec"]:>12,.0f}{c["staleness_mean"]:>11.2f}'
            f'{c["staleness_max"]:>5}{c["input_wait_fraction"]:>11.1%}'
            f'{c["fit"]["steps_per_sec"]:>8.1f}{c["vs_fit"]:>7.2f}x'
        )
    print(f'wrote {result_path} and {chart_path}')
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog='bench ps', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == '__main__':
    sys.exit(main())
