"""`asynctrain bench async`: asynchronous parameter servers (the Trainer's loop) on emulated
unequal hosts, scenario by scenario.

Each scenario (`async_scenarios`) starts an `EmulatedCluster` (asynctrain.testing): workers with a
CPU budget each (one of them slowed in some scenarios), one parameter server, every task behind
its own link. The Trainer's loop trains the default model on transformed taxi examples in
`--rounds` rounds of `--steps` steps; after each round the trained weights are scored on the same
held-out batches (loss and AUC), so a curve of AUC and examples/s against wall time comes out per
scenario, with the staleness of each round's updates, every host's CPU counters (throttled
periods) and the bytes that crossed each link.

The synchronous references (`sync_reference`: MultiWorkerMirroredStrategy trained by Keras `fit`,
`sync_fit`, and by a custom loop, `sync_custom`; one process per worker in the same CPU budgets, as
many examples per round) run after ours in each scenario; their links are not emulated, so the
latency scenario slows only ours.

    asynctrain bench async [--workers N] [--steps N] [--rounds N] [--scenarios NAME ...]
                           [--batch-size N] [--examples N] [--output DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

from asynctrain.benchmarks import async_scenarios, report, transformed_examples

DEFAULT_OUTPUT = os.path.join('bench_out', 'async')
DEFAULT_WORKERS = 4
DEFAULT_STEPS = 100
DEFAULT_ROUNDS = 5
DEFAULT_EXAMPLES = 50_000
DEFAULT_SAMPLE_ROWS = 2000
BATCH_SIZE = 256
STEPS_PER_EXECUTION = 10
# The synchronous references, and the loop each runs (`sync_reference`).
SYNC_LOOPS = {'sync_fit': 'fit', 'sync_custom': 'custom'}
STRATEGIES = ('ours', *SYNC_LOOPS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--workers',
        type=int,
        default=DEFAULT_WORKERS,
        help=f'workers (default {DEFAULT_WORKERS}), plus one parameter server',
    )
    parser.add_argument(
        '--steps',
        type=int,
        default=DEFAULT_STEPS,
        help=f'steps per round (default {DEFAULT_STEPS})',
    )
    parser.add_argument(
        '--rounds',
        type=int,
        default=DEFAULT_ROUNDS,
        help=f'rounds per scenario, each scored on held-out batches (default {DEFAULT_ROUNDS})',
    )
    parser.add_argument(
        '--scenarios',
        nargs='+',
        default=list(async_scenarios.DEFAULT_SCENARIOS),
        choices=sorted(async_scenarios.SCENARIOS),
        metavar='NAME',
        help=f'scenarios, of {sorted(async_scenarios.SCENARIOS)} '
        f'(default {list(async_scenarios.DEFAULT_SCENARIOS)})',
    )
    parser.add_argument(
        '--strategies',
        nargs='+',
        default=list(STRATEGIES),
        choices=STRATEGIES,
        help=f'which to run: our loop, the synchronous MultiWorkerMirroredStrategy references '
        f'with Keras fit and with a custom loop (default all: {list(STRATEGIES)})',
    )
    transformed_examples.add_data_arguments(
        parser, examples=DEFAULT_EXAMPLES, sample_rows=DEFAULT_SAMPLE_ROWS, batch_size=BATCH_SIZE
    )
    parser.add_argument(
        '--output',
        default=DEFAULT_OUTPUT,
        help=f'directory for the data, result.json and async_training.png '
        f'(default {DEFAULT_OUTPUT}); emptied first',
    )


_log = report.progress('async')


def trainer_config(
    scenario: async_scenarios.Scenario, num_workers: int, batch_size: int, steps: int
):
    """The Trainer's config for a scenario: no checkpoint, the scenario's overrides applied."""
    from asynctrain.components.trainer import config as config_lib

    config = config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=steps,
            batch_size=batch_size,
            steps_per_execution=STEPS_PER_EXECUTION,
            checkpoint_interval_steps=0,
            summary_interval_steps=steps,
        ),
        distribution=config_lib.DistributionConfig(num_workers=num_workers, num_ps=1),
    )
    return async_scenarios.apply_overrides(config, scenario.overrides)


def held_out_scores(task, keras_model, batches: list) -> dict:
    """Mean loss and AUC of a plain copy of `keras_model` on the held-out `batches`."""
    import tempfile

    import tensorflow as tf

    from asynctrain.components.trainer.training import checkpoints

    plain = task.build_model()
    if keras_model is not None:
        with tempfile.TemporaryDirectory() as scratch:
            checkpoints.transfer_weights(keras_model, plain, scratch)
    auc = tf.keras.metrics.AUC(from_logits=True)
    losses = []
    for features, labels in batches:
        logits = plain(features)
        losses.append(float(task.loss(labels, logits)))
        auc.update_state(tf.reshape(labels, [-1]), tf.reshape(logits, [-1]))
    return {'loss': sum(losses) / len(losses), 'auc': float(auc.result())}


def _host_counters(emulated) -> dict:
    """Every host's CPU counters (throttled periods) and the bytes that crossed its link."""
    counters = {}
    for (job, index), host in emulated.hosts.items():
        stats = host.cpu_stats()
        counters[f'{job}-{index}'] = {
            'cpus': host.cgroup.cpus if host.cgroup is not None else None,
            'periods': stats.periods if stats else 0,
            'throttled_periods': stats.throttled_periods if stats else 0,
            'link_bytes': host.link.bytes_through(),
        }
    return counters


def run_ours(args, scenario, data, held_out, run_dir: str) -> dict:
    """Our loop on an emulated cluster for `scenario`: `args.rounds` rounds, each scored."""
    from asynctrain.benchmarks import parameter_server_fit as rounds_lib
    from asynctrain.components.trainer.cluster import servers
    from asynctrain.components.trainer.training import loop as train_lib
    from asynctrain.testing.emulated_cluster.hosts import EmulatedCluster, Machine

    workers = [Machine(cpus=c) for c in scenario.worker_cpus(args.workers)]
    config = trainer_config(scenario, args.workers, args.batch_size, args.steps)
    task = transformed_examples.make_task(data, trainer_config=config)
    untrained = held_out_scores(task, None, held_out)
    with EmulatedCluster(workers=workers, ps=[Machine(cpus=async_scenarios.FULL_CPUS)]) as emulated:
        if scenario.worker_latency_ms:
            emulated.host(servers.WORKER, args.workers - 1).link.latency(
                scenario.worker_latency_ms, jitter_ms=scenario.worker_latency_ms
            )
        cluster = servers.attach(emulated.cluster_spec)
        started = time.monotonic()
        trainer = train_lib.Trainer(task, cluster, data.examples_dir, run_dir)
        curve, training_s = [], 0.0
        for i in range(args.rounds):
            measured = rounds_lib.train_to(trainer, (i + 1) * args.steps, save=False)
            # The clock stops while the round is scored: wall time is building and training.
            training_s += time.monotonic() - started
            scores = held_out_scores(task, trainer.model, held_out)
            started = time.monotonic()
            curve.append(
                {
                    'wall_s': training_s,
                    'examples': (i + 1) * args.steps * args.batch_size,
                    'examples_per_sec': measured['examples_per_sec'],
                    'staleness_mean': measured['staleness_mean'],
                    'staleness_max': measured['staleness_max'],
                    **{f'held_out_{k}': v for k, v in scores.items()},
                }
            )
        counters = _host_counters(emulated)
    return summarize(curve, untrained, counters, args.steps * args.rounds)


def run_reference(args, scenario, data, run_dir: str, loop: str) -> dict:
    """A synchronous reference (`sync_reference`, trained by `loop`) for `scenario`: one process
    per worker, each in its CPU budget, as many examples per round as ours. Links are not
    emulated for it."""
    import dataclasses
    import json
    import sys

    from asynctrain.components.shared import ports as ports_lib
    from asynctrain.components.trainer.cluster import servers
    from asynctrain.testing.emulated_cluster import cpu_budget

    os.makedirs(run_dir, exist_ok=True)
    spec = {
        'data': dataclasses.asdict(data),
        'batch_size': args.batch_size,
        'workers': args.workers,
        # Each synchronous step takes a batch on every worker: as many examples per round as ours.
        'steps': max(1, args.steps // args.workers),
        'rounds': args.rounds,
        'loop': loop,
        'output': os.path.join(run_dir, 'curve.json'),
    }
    spec_path = os.path.join(run_dir, 'spec.json')
    with open(spec_path, 'w', encoding='utf-8') as f:
        json.dump(spec, f)
    addresses = [f'{ports_lib.HOST}:{p}' for p in ports_lib.free_ports(args.workers)]
    hierarchy = cpu_budget.find_hierarchy()
    groups, processes = [], []
    try:
        for index, cpus in enumerate(scenario.worker_cpus(args.workers)):
            group = cpu_budget.CpuCgroup.create(
                cpu_budget.group_name(f'sync-{os.getpid()}-{index}'), cpus, hierarchy
            )
            groups.append(group)
            env = servers.child_env(
                {'cluster': {'worker': addresses}, 'task': {'type': 'worker', 'index': index}}
            )
            command = [
                *group.entering_command(),
                sys.executable,
                '-m',
                'asynctrain.benchmarks.sync_reference',
                '--spec',
                spec_path,
            ]
            processes.append(servers.spawn(command, env))
        codes = [p.wait() for p in processes]
        if any(codes):
            raise RuntimeError(f'synchronous reference workers exited with {codes}')
        with open(spec['output'], encoding='utf-8') as f:
            curve = json.load(f)
        counters = {
            f'worker-{i}': {
                'cpus': g.cpus,
                'periods': g.stats().periods,
                'throttled_periods': g.stats().throttled_periods,
                'link_bytes': {},
            }
            for i, g in enumerate(groups)
        }
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
        for g in groups:
            g.remove()
    previous = {'examples': 0, 'wall_s': 0.0}
    for point in curve:  # each round's rate, as ours reports it (the first includes starting)
        point['examples_per_sec'] = (point['examples'] - previous['examples']) / (
            point['wall_s'] - previous['wall_s']
        )
        previous = point
    return summarize(curve, {'loss': None}, counters, spec['steps'] * args.rounds)


def summarize(curve: list[dict], untrained: dict, counters: dict, steps: int) -> dict:
    """A strategy's figures for one scenario from its curve."""
    final = curve[-1]
    link_bytes = sum(sum(c['link_bytes'].values()) for c in counters.values())
    return {
        'curve': curve,
        'untrained_held_out_loss': untrained['loss'],
        'held_out_loss': final['held_out_loss'],
        'held_out_auc': final['held_out_auc'],
        'examples_per_sec': final['examples'] / final['wall_s'],
        'wall_s': final['wall_s'],
        'hosts': counters,
        'link_bytes': link_bytes,
        'steps': steps,
        # None where no link carried the run (the synchronous reference's hosts are not proxied).
        'link_bytes_per_step': link_bytes / steps if link_bytes else None,
    }


# The target AUC: the synchronous reference's final held-out AUC less this (issue's goal: "wall
# time to a target eval AUC, the synchronous run's final AUC minus 0.005").
TARGET_AUC_MARGIN = 0.005


def time_to_auc(curve: list[dict], target: float) -> float | None:
    """Wall seconds to the first scored round whose held-out AUC reaches `target`; None if none."""
    for point in curve:
        if point['held_out_auc'] >= target:
            return point['wall_s']
    return None


def compare(ours: dict, reference: dict, name: str) -> dict:
    """Ours against the synchronous reference `name` in one scenario: throughput ratio, the wall
    time each took to the target AUC, and the AUC gap at the examples both trained on (their
    rounds see as many examples each)."""
    target = reference['held_out_auc'] - TARGET_AUC_MARGIN
    ours_to, reference_to = (
        time_to_auc(ours['curve'], target),
        time_to_auc(reference['curve'], target),
    )
    at_equal = [
        (mine['examples'], mine['held_out_auc'] - theirs['held_out_auc'])
        for mine, theirs in zip(ours['curve'], reference['curve'])
        if mine['examples'] == theirs['examples']
    ]
    return {
        'examples_per_sec_ratio': ours['examples_per_sec'] / reference['examples_per_sec'],
        'target_auc': target,
        'seconds_to_target': {'ours': ours_to, name: reference_to},
        # Seconds the reference took over ours (> 1: ours got there sooner); None unless both did.
        'to_target_ratio': reference_to / ours_to if ours_to and reference_to else None,
        'auc_gap_at_equal_examples': [
            {'examples': examples, 'ours_minus_sync': gap} for examples, gap in at_equal
        ],
    }


def scenario_line(name: str, figures: dict) -> str:
    """One scenario's figures as the progress line says them."""
    throttled = {h: c['throttled_periods'] for h, c in figures['hosts'].items()}
    return (
        f'{name}: ours {figures["examples_per_sec"]:,.0f} examples/s, held-out AUC '
        f'{figures["held_out_auc"]:.4f}, loss {figures["held_out_loss"]:.4f} (untrained '
        f'{figures["untrained_held_out_loss"]:.4f}), staleness mean '
        f'{figures["curve"][-1]["staleness_mean"]:.2f}, link bytes/step '
        f'{figures["link_bytes_per_step"]}, throttled periods {throttled}'
    )


def write_chart(result: dict, path: str) -> None:
    """Held-out AUC and examples/s against wall time, one line per scenario, to `path`."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    figure, (auc, speed) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, strategies in result['scenarios'].items():
        for strategy, figures in strategies.items():
            wall = [p['wall_s'] for p in figures['curve']]
            label = f'{name} ({strategy})'
            auc.plot(wall, [p['held_out_auc'] for p in figures['curve']], marker='o', label=label)
            speed.plot(
                wall, [p['examples_per_sec'] for p in figures['curve']], marker='o', label=label
            )
    auc.set(xlabel='wall time (s)', ylabel='held-out AUC', title='AUC against wall time')
    speed.set(
        xlabel='wall time (s)', ylabel='examples/s (round)', title='Throughput against wall time'
    )
    for axes in (auc, speed):
        axes.legend(fontsize='small')
        axes.grid(alpha=0.3)
    figure.suptitle(f'bench async: {result["workers"]} workers + 1 PS, emulated hosts')
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def run(args: argparse.Namespace) -> int:
    """The bench: prepare the data, run every scenario, write and print the report."""
    from asynctrain.benchmarks import parameter_server_fit as fit_lib

    if min(args.workers, args.steps, args.rounds, args.batch_size) < 1:
        print('--workers, --steps, --rounds and --batch-size: positive integers', file=sys.stderr)
        return 2
    transform_output = transformed_examples.transform_output_from_args(args)
    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    started = time.monotonic()
    load_at_start = list(os.getloadavg())
    data = transformed_examples.make_transformed_examples(
        os.path.join(output, 'data'),
        args.examples,
        args.sample_rows,
        transform_output=transform_output,
    )
    held_out = fit_lib.held_out_batches(
        transformed_examples.make_task(data, batch_size=args.batch_size), data.examples_dir
    )
    scenarios, comparisons = {}, {}
    for name in args.scenarios:
        scenario = async_scenarios.SCENARIOS[name]
        ours = run_ours(args, scenario, data, held_out, os.path.join(output, 'runs', name))
        _log(scenario_line(name, ours))
        scenarios[name] = {'ours': ours}
        for strategy, loop in SYNC_LOOPS.items():
            if strategy not in args.strategies:
                continue
            reference = run_reference(
                args, scenario, data, os.path.join(output, 'runs', f'{name}-{strategy}'), loop
            )
            reference['untrained_held_out_loss'] = ours['untrained_held_out_loss']
            scenarios[name][strategy] = reference
            compared = compare(ours, reference, strategy)
            comparisons.setdefault(name, {})[strategy] = compared
            _log(
                f'{name}: {strategy} {reference["examples_per_sec"]:,.0f} examples/s, held-out AUC '
                f'{reference["held_out_auc"]:.4f}, loss {reference["held_out_loss"]:.4f}; ours / '
                f'{strategy} {compared["examples_per_sec_ratio"]:.2f}x examples/s, to AUC '
                f'{compared["target_auc"]:.4f}: {compared["seconds_to_target"]}'
            )
    result = {
        'benchmark': 'async',
        'workers': args.workers,
        'steps_per_round': args.steps,
        'rounds': args.rounds,
        'batch_size': args.batch_size,
        'steps_per_execution': STEPS_PER_EXECUTION,
        'examples': data.num_examples,
        **transformed_examples.source_fields(transform_output, args.sample_rows),
        'held_out_batches': len(held_out),
        'scenarios': scenarios,
        # Per scenario, per synchronous reference that ran: `compare`'s figures.
        'comparisons': comparisons,
        'load_average_start': load_at_start,
        'load_average_end': list(os.getloadavg()),
        'machine': report.machine(),
        'seconds_total': time.monotonic() - started,
        'finished_at': report.finished_at(),
    }
    result_path, chart_path = report.write_result(output, result, 'async_training.png', write_chart)
    shutil.rmtree(os.path.join(output, 'data'), ignore_errors=True)
    shutil.rmtree(os.path.join(output, 'runs'), ignore_errors=True)
    _log(f'result: {result_path}; chart: {chart_path}')
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog='bench async', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == '__main__':
    sys.exit(main())
