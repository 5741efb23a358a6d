"""`asynctrain bench async`: asynchronous parameter servers (the Trainer's loop) on emulated
unequal hosts, scenario by scenario.

Each scenario (`async_scenarios`) runs ours in a process of its own (`async_ours`): an
`EmulatedCluster` (asynctrain.testing) of workers with a CPU budget each (one of them slowed in
some scenarios) and one parameter server, every task behind its own link. The Trainer's loop
trains the default model on transformed taxi examples in `--rounds` rounds of `--steps` steps;
after each round the trained weights are scored on the same held-out batches (loss and AUC), so a
curve of AUC and examples/s against wall time comes out per scenario, with the staleness of each
round's updates, every host's CPU counters (throttled periods) and the bytes that crossed each
link.

The synchronous references (`sync_reference`: MultiWorkerMirroredStrategy trained by Keras `fit`,
`sync_fit`, and by a custom loop, `sync_custom`; one process per worker in the same CPU budgets, as
many examples per round) run after ours in each scenario; in the latency scenario every worker is
behind a proxy, the last one's link as slow as ours'. `async_figures` compares the curves.

    asynctrain bench async [--workers N] [--steps N] [--rounds N] [--scenarios NAME ...]
                           [--batch-size N] [--examples N] [--output DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time

from asynctrain.benchmarks import (
    async_figures,
    async_ours,
    async_scenarios,
    report,
    transformed_examples,
)

DEFAULT_OUTPUT = os.path.join('bench_out', 'async')
DEFAULT_WORKERS = 4
DEFAULT_STEPS = 100
DEFAULT_ROUNDS = 5
DEFAULT_EXAMPLES = 50_000
DEFAULT_SAMPLE_ROWS = 2000
BATCH_SIZE = 256
STEPS_PER_EXECUTION = 10
# Rounds are scored on the first batches of the eval split: rows the training split's resampling
# never drew from (the train split repeats its sample's rows, and a model learns them by heart).
HELD_OUT_SPLIT = 'eval'
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
        '--reference-rounds',
        type=int,
        default=0,
        help='rounds of the synchronous references, each as many examples as one of ours '
        '(default 0: as many as ours); fewer keep a slow reference within the time at hand, '
        'their curve then compared with the start of ours',
    )
    parser.add_argument(
        '--host-cpus',
        type=float,
        default=async_scenarios.FULL_CPUS,
        help=f"every host's CPU budget, in CPUs (default {async_scenarios.FULL_CPUS}); a slow "
        'host gets a quarter of it. Keep workers + 1 parameter server times it under the '
        "machine's cores, or the hosts also compete for them",
    )
    parser.add_argument(
        '--ps-cpus',
        type=float,
        default=0.0,
        help="the parameter server's CPU budget (default 0: --host-cpus)",
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


def run_reference(args, scenario, data, run_dir: str, loop: str) -> dict:
    """A synchronous reference (`sync_reference`, trained by `loop`) for `scenario`: one process
    per worker, each in its CPU budget, as many examples per round as ours. In a scenario with a
    slow link, every worker is behind a proxy and the last one's has the latency ours' last
    worker has (`_reference_links`). A lost worker is SIGKILLed once the run has done the rounds
    ours had done, and started again `worker_lost_s` later (`_lose_reference_worker`)."""

    spec, spec_path = _reference_spec(args, data, run_dir, loop)
    with contextlib.ExitStack() as stack:
        addresses, bind_ports, links = _reference_links(args, scenario, stack)
        return _run_reference_workers(args, scenario, spec, spec_path, addresses, bind_ports, links)


def _reference_links(args, scenario, stack: contextlib.ExitStack) -> tuple[list, list, list]:
    """The workers' addresses in TF_CONFIG, the ports they bind, and their links: each worker on
    its own port and no links, unless the scenario slows a link; then each behind a Toxiproxy
    link (closed with `stack`) on the port its address names, binding one behind it, and the
    last link with `worker_latency_ms` of latency and as much jitter, as `async_ours` sets it."""
    from asynctrain.components.shared import ports as ports_lib
    from asynctrain.testing.emulated_cluster import toxiproxy

    if not scenario.worker_latency_ms:
        ports = ports_lib.free_ports(args.workers)
        return [f'{ports_lib.HOST}:{p}' for p in ports], [0] * args.workers, []
    proxies = stack.enter_context(toxiproxy.ToxiproxyServer())
    # All in one pick, all distinct (as `EmulatedCluster` picks them).
    picked = ports_lib.free_ports(2 * args.workers)
    bind_ports, listen_ports = picked[: args.workers], picked[args.workers :]
    links = [
        proxies.link(f'sync-worker-{i}', f'{ports_lib.HOST}:{bind}', listen_port=listen)
        for i, (bind, listen) in enumerate(zip(bind_ports, listen_ports))
    ]
    links[-1].latency(scenario.worker_latency_ms, jitter_ms=scenario.worker_latency_ms)
    return [link.listen for link in links], bind_ports, links


def _run_reference_workers(args, scenario, spec, spec_path, addresses, bind_ports, links) -> dict:
    from asynctrain.testing.emulated_cluster import cpu_budget

    hierarchy = cpu_budget.find_hierarchy()
    cpus = scenario.worker_cpus(args.workers, args.host_cpus)
    groups = [
        cpu_budget.CpuCgroup.create(cpu_budget.group_name(f'sync-{os.getpid()}-{i}'), c, hierarchy)
        for i, c in enumerate(cpus)
    ]
    processes, lost = [], None
    try:
        for index, group in enumerate(groups):
            processes.append(
                _start_reference_worker(spec_path, addresses, index, group, bind_ports[index])
            )
        if scenario.worker_lost_s:
            lost = _lose_reference_worker(
                scenario,
                spec,
                processes,
                start=lambda: _start_reference_worker(
                    spec_path, addresses, args.workers - 1, groups[-1], bind_ports[-1]
                ),
            )
        else:
            codes = [p.wait() for p in processes]
            if any(codes):
                raise RuntimeError(f'synchronous reference workers exited with {codes}')
        counters = {f'worker-{i}': _group_counters(g) for i, g in enumerate(groups)}
        for i, link in enumerate(links):
            counters[f'worker-{i}']['link_bytes'] = link.bytes_through()
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
        for g in groups:
            g.remove()
    if lost is not None and lost['outcome'] != 'finished':
        return {'completed': False, 'worker_lost': lost, 'hosts': counters}
    figures = async_figures.summarize(
        _reference_curve(spec), {'loss': None}, counters, spec['steps'] * spec['rounds']
    )
    return {'completed': True, **figures, 'worker_lost': lost}


def _reference_spec(args, data, run_dir: str, loop: str) -> tuple[dict, str]:
    """What every `sync_reference` worker of one run reads, and the file it is written to."""
    import dataclasses
    import json

    os.makedirs(run_dir, exist_ok=True)
    spec = {
        'data': dataclasses.asdict(data),
        'batch_size': args.batch_size,
        'workers': args.workers,
        # Each synchronous step takes a batch on every worker: as many examples per round as ours.
        'steps': max(1, args.steps // args.workers),
        'rounds': args.reference_rounds or args.rounds,
        'loop': loop,
        'steps_per_execution': STEPS_PER_EXECUTION,
        'held_out_split': HELD_OUT_SPLIT,
        'output': os.path.join(run_dir, 'curve.json'),
        'progress': os.path.join(run_dir, 'progress.jsonl'),
    }
    spec_path = os.path.join(run_dir, 'spec.json')
    with open(spec_path, 'w', encoding='utf-8') as f:
        json.dump(spec, f)
    return spec, spec_path


def _group_counters(group) -> dict:
    """A synchronous worker's CPU counters, as `_host_counters` gives ours (its link's bytes are
    added when it has one)."""
    stats = group.stats()
    return {
        'cpus': group.cpus,
        'periods': stats.periods,
        'throttled_periods': stats.throttled_periods,
        'link_bytes': {},
    }


def _reference_curve(spec: dict) -> list[dict]:
    """The chief's curve, with each round's examples/s as ours reports it (the first round's
    includes starting)."""
    import json

    with open(spec['output'], encoding='utf-8') as f:
        curve = json.load(f)
    previous = {'examples': 0, 'wall_s': 0.0}
    for point in curve:
        point['examples_per_sec'] = (point['examples'] - previous['examples']) / (
            point['wall_s'] - previous['wall_s']
        )
        previous = point
    return curve


def _start_reference_worker(
    spec_path: str, addresses: list[str], index: int, group, bind_port: int = 0
):
    """Synchronous reference worker `index` as a process in its CPU group (binding `bind_port`
    when it is behind a proxy)."""
    from asynctrain.components.trainer.cluster import servers

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
    if bind_port:
        command += ['--bind-port', str(bind_port)]
    return servers.spawn(command, env)


# How long a synchronous run may go without finishing a round after its lost worker is back
# before the bench calls it stalled and stops it.
STALL_LIMIT_S = 120.0


def _rounds_reported(progress_path: str) -> int:
    """How many rounds the chief has reported (`sync_reference` appends a line per round)."""
    if not os.path.exists(progress_path):
        return 0
    with open(progress_path, encoding='utf-8') as f:
        return sum(1 for line in f if line.strip())


def _lose_reference_worker(scenario, spec, processes, start) -> dict:
    """Kills the last worker once the chief has reported `disruption_round` rounds, starts it
    again (`start`) `worker_lost_s` later, and waits for the run to end: `outcome` is
    `finished`, the workers' exit codes, or a stall (no round for `STALL_LIMIT_S` after the
    last progress), with the seconds from the kill to the first round after it and to the end."""
    wanted = async_scenarios.disruption_round(spec['rounds'])
    while _rounds_reported(spec['progress']) < wanted:
        if any(p.poll() is not None for p in processes):
            raise RuntimeError(
                f'a synchronous reference worker exited before round {wanted}: '
                f'{[p.poll() for p in processes]}'
            )
        time.sleep(0.2)
    progress = _rounds_reported(spec['progress'])
    processes[-1].kill()
    killed = time.monotonic()
    time.sleep(scenario.worker_lost_s)  # the host is down this long: the scenario's own length
    processes[-1].wait()
    processes[-1] = start()
    event = {'killed_after_rounds': progress, 'first_round_after_kill_s': None}
    last_progress = time.monotonic()
    while True:
        rounds = _rounds_reported(spec['progress'])
        if rounds > progress:
            progress, last_progress = rounds, time.monotonic()
            if event['first_round_after_kill_s'] is None:
                event['first_round_after_kill_s'] = last_progress - killed
        codes = [p.poll() for p in processes]
        if all(c is not None for c in codes) or time.monotonic() - last_progress > STALL_LIMIT_S:
            break
        time.sleep(0.5)
    if all(c == 0 for c in codes):
        outcome = 'finished'
    elif all(c is not None for c in codes):
        outcome = f'workers exited with {codes}'
    else:
        outcome = f'stalled: no round in {STALL_LIMIT_S:.0f} s (exit codes so far {codes})'
    return {
        **event,
        'outcome': outcome,
        'rounds_done': progress,
        'seconds_after_kill': time.monotonic() - killed,
    }


def scenario_line(name: str, figures: dict) -> str:
    """One scenario's figures as the progress line says them."""
    throttled = {h: c['throttled_periods'] for h, c in figures['hosts'].items()}
    return (
        f'{name}: ours {figures["examples_per_sec"]:,.0f} examples/s, held-out AUC '
        f'{figures["held_out_auc"]:.4f}, loss {figures["held_out_loss"]:.4f} (untrained '
        f'{figures["untrained_held_out_loss"]:.4f}), staleness mean '
        f'{figures["curve"][-1]["staleness_mean"]:.2f}, link bytes/step '
        f'{figures["link_bytes_per_step"]:,.0f}, throttled periods {throttled}'
    )


def write_chart(result: dict, path: str) -> None:
    """Held-out AUC and examples/s against wall time, one line per scenario and strategy (the
    remedies' variants left out), and each remedy's final AUC beside its plain run's, to
    `path`."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    figure, (auc, speed, remedies) = plt.subplots(1, 3, figsize=(18, 4.8))
    for name, strategies in result['scenarios'].items():
        for strategy, figures in strategies.items():
            if '+' in name or not figures.get('curve'):  # a remedy, or a run that did not finish
                continue
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
    _remedy_bars(remedies, result['scenarios'])
    for axes in (auc, speed):
        axes.legend(fontsize='small')
        axes.grid(alpha=0.3)
    figure.suptitle(f'bench async: {result["workers"]} workers + 1 PS, emulated hosts')
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _remedy_bars(axes, scenarios: dict) -> None:
    """Each remedy variant's final held-out AUC (ours), its baseline's beside it."""
    names = [n for n in scenarios if '+' in n and scenarios[n]['ours'].get('completed')]
    values = [scenarios[n]['ours']['held_out_auc'] for n in names]
    baselines = [async_scenarios.SCENARIOS[n].baseline for n in names]
    bases = [scenarios.get(b, {}).get('ours', {}).get('held_out_auc') for b in baselines]
    positions = range(len(names))
    axes.barh([p + 0.2 for p in positions], values, height=0.4, label='with the remedy')
    axes.barh(
        [p - 0.2 for p in positions],
        [b or 0 for b in bases],
        height=0.4,
        label='plain (its baseline)',
    )
    axes.set_yticks(list(positions), names, fontsize='small')
    if values:
        low = min(v for v in values + bases if v)
        axes.set_xlim(max(0.0, low - 0.02), 1.0)
    axes.set(xlabel='held-out AUC (last round)', title='Stale-gradient remedies (ours)')
    axes.legend(fontsize='small')


def ours_run(args, scenario, data, output: str) -> async_ours.OursRun:
    """What our process runs for `scenario` (`async_ours`), from the bench's arguments."""
    import dataclasses

    return async_ours.OursRun(
        scenario=scenario.name,
        workers=args.workers,
        steps=args.steps,
        rounds=args.rounds,
        batch_size=args.batch_size,
        steps_per_execution=STEPS_PER_EXECUTION,
        host_cpus=args.host_cpus,
        ps_cpus=args.ps_cpus or args.host_cpus,
        data=dataclasses.asdict(data),
        held_out_split=HELD_OUT_SPLIT,
        run_dir=os.path.join(output, 'runs', scenario.name),
        log_dir=os.path.join(output, 'logs'),
    )


def run_scenario(args, scenario, data, output: str) -> tuple[dict, dict]:
    """Ours (in a process of its own), then each synchronous reference asked for (where the
    scenario has them), on `scenario`; every strategy's figures, and `compare`'s figures per
    finished reference."""
    run = ours_run(args, scenario, data, output)
    _log(f'{scenario.name}: ours training (log: {run.log_path})')
    ours = async_ours.run_in_process(run)
    figures, comparisons = {'ours': ours}, {}
    if not ours['completed']:
        _log(f'{scenario.name}: ours did not finish: {ours["outcome"]}')
        return figures, comparisons
    _log(scenario_line(scenario.name, ours))
    references = [s for s in SYNC_LOOPS if s in args.strategies] if scenario.references else []
    for strategy in references:
        run_dir = os.path.join(output, 'runs', f'{scenario.name}-{strategy}')
        reference = run_reference(args, scenario, data, run_dir, SYNC_LOOPS[strategy])
        reference['untrained_held_out_loss'] = ours['untrained_held_out_loss']
        figures[strategy] = reference
        if not reference['completed']:
            _log(f'{scenario.name}: {strategy} did not finish: {reference["worker_lost"]}')
            continue
        compared = comparisons[strategy] = async_figures.compare(ours, reference, strategy)
        _log(
            f'{scenario.name}: {strategy} {reference["examples_per_sec"]:,.0f} examples/s, '
            f'held-out AUC {reference["held_out_auc"]:.4f}, loss {reference["held_out_loss"]:.4f}; '
            f'ours / {strategy} {compared["examples_per_sec_ratio"]:.2f}x examples/s, to AUC '
            f'{compared["target_auc"]:.4f}: {compared["seconds_to_target"]}'
        )
    return figures, comparisons


def run(args: argparse.Namespace) -> int:
    """The bench, with its libraries' logs in `logs/bench.log` under the output: prepare the data,
    run every scenario, write and print the report."""
    if min(args.workers, args.steps, args.rounds, args.batch_size) < 1:
        print('--workers, --steps, --rounds and --batch-size: positive integers', file=sys.stderr)
        return 2
    transform_output = transformed_examples.transform_output_from_args(args)
    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    # Preparing the data and the synchronous references' processes log here; each ours run has a
    # log of its own.
    with report.libraries_to_log(_log, os.path.join(output, 'logs', 'bench.log')):
        return _run(args, output, transform_output)


def _run(
    args: argparse.Namespace,
    output: str,
    transform_output: transformed_examples.TransformOutput | None,
) -> int:
    """The bench once its output and log are in place: the data, every scenario, the report."""
    started = time.monotonic()
    load_at_start = list(os.getloadavg())
    data = transformed_examples.make_transformed_examples(
        os.path.join(output, 'data'),
        args.examples,
        args.sample_rows,
        transform_output=transform_output,
    )
    scenarios, comparisons = {}, {}
    for name in args.scenarios:
        scenario = async_scenarios.SCENARIOS[name]
        scenarios[name], compared = run_scenario(args, scenario, data, output)
        if compared:
            comparisons[name] = compared
    losses, remedies = async_figures.costs_and_remedies(args.scenarios, scenarios)
    result = {
        'benchmark': 'async',
        'workers': args.workers,
        'steps_per_round': args.steps,
        'rounds': args.rounds,
        'reference_rounds': args.reference_rounds or args.rounds,
        'batch_size': args.batch_size,
        'steps_per_execution': STEPS_PER_EXECUTION,
        'examples': data.num_examples,
        **transformed_examples.source_fields(transform_output, args.sample_rows),
        # As many in every scenario's run: the first batches of the same split.
        'held_out_batches': next(iter(scenarios.values()))['ours']['held_out_batches'],
        'held_out_split': HELD_OUT_SPLIT,
        'scenarios': scenarios,
        # Per scenario, per synchronous reference that ran: `compare`'s figures.
        'comparisons': comparisons,
        # Per disrupted scenario, when `equal` ran: ours' examples/s lost against it.
        'disruption_costs': losses,
        # Per remedy variant, when its baseline ran: `against_baseline`'s figures.
        'remedies': remedies,
        'host_cpus': args.host_cpus,
        'ps_cpus': args.ps_cpus or args.host_cpus,
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
