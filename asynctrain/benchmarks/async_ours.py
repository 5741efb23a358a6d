"""Our side of `asynctrain bench async`: the Trainer's loop on one scenario's emulated cluster, in
a process of its own.

    bench process (async_training)          ours process (this module's `main`)
    write the run's spec  ─── spec.json ──▶  build the EmulatedCluster, train the rounds,
    wait for the process                     score each, run the scenario's disruption
    read its figures      ◀── ours.json ───  write the figures, stop the cluster, exit

Why a process per scenario: a `ClusterCoordinator` cannot be shut down (TensorFlow keeps its
threads and the eager context's connection to the cluster for the life of the process). When
every scenario's coordinator stayed in the bench process, scenario after scenario ran slower from
the lost worker's on (1,889 threads in the bench process by the end; a remedy variant at 8,052
examples/s against its own baseline's 13,198 earlier in the same run). Each scenario now starts
from a fresh process, as the synchronous references (`sync_reference`) always have.

A cut parameter-server link ends a run (TensorFlow's coordinator treats a parameter server's
error as fatal). The Trainer's answer is its supervisor's (`cluster.recovery`): a new cluster and
the last checkpoint restored. So in that scenario every round ends with a checkpoint, and the
bench runs a second process that restarts from it, its training clock going on from the failure:
the cut's rest, the new cluster's start, the restore and the round redone all count as time lost.

    python -m asynctrain.benchmarks.async_ours --spec FILE
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from asynctrain.benchmarks import async_disruptions, async_figures, async_scenarios

# A server under a small budget imports TensorFlow slowly (a quarter of 0.35 CPU: about 50 s).
STARTUP_TIMEOUT_S = 300.0


@dataclasses.dataclass(frozen=True)
class OursRun:
    """What one ours process runs: the scenario, the cluster's size and budgets, the rounds, the
    data (a `TransformedExamples` as a dict) and where its run directory and figures go."""

    scenario: str
    workers: int
    steps: int
    rounds: int
    batch_size: int
    steps_per_execution: int
    host_cpus: float
    ps_cpus: float
    data: dict
    held_out_split: str
    run_dir: str
    log_dir: str
    # A restart's: the first attempt's curve, events, host counters and untrained scores, the
    # training second it failed at and the one its cut link is back at (`_ParameterServerLost`).
    resume: dict | None = None

    @property
    def figures_path(self) -> str:
        return os.path.join(self.run_dir, 'ours.json')

    @property
    def log_path(self) -> str:
        """Where the process's output goes (TensorFlow's logs, the Trainer's progress)."""
        return os.path.join(self.log_dir, f'{self.scenario}-ours.log')


def run_in_process(run: OursRun) -> dict:
    """Runs `run` in a child process (`main`) and returns the figures it wrote. A run that lost
    its parameter server is restarted once, as the Trainer's supervisor restarts it
    (`cluster.recovery`: a new cluster, the last checkpoint restored), in a new process: one
    cannot reconnect its eager context to a new cluster.

    Raises:
      RuntimeError: a process exited with an error (the message ends with its log's tail).
    """
    figures = _run_attempt(run)
    if figures['completed'] or 'resume' not in figures:
        return figures
    restarted = _run_attempt(dataclasses.replace(run, resume=figures.pop('resume')))
    restarted.pop('resume', None)
    return restarted


def _run_attempt(run: OursRun) -> dict:
    from asynctrain.components.trainer.cluster import servers

    os.makedirs(run.run_dir, exist_ok=True)
    os.makedirs(run.log_dir, exist_ok=True)
    spec_path = os.path.join(run.run_dir, 'ours_spec.json')
    with open(spec_path, 'w', encoding='utf-8') as f:
        json.dump(dataclasses.asdict(run), f)
    command = [sys.executable, '-m', 'asynctrain.benchmarks.async_ours', '--spec', spec_path]
    process = servers.spawn(command, servers.child_env())
    code = process.wait()
    if code != 0:
        with open(run.log_path, encoding='utf-8', errors='replace') as f:
            tail = ''.join(f.readlines()[-20:])
        raise RuntimeError(
            f'{run.scenario}: our run exited with {code}; its log, {run.log_path}, ends:\n{tail}'
        )
    with open(run.figures_path, encoding='utf-8') as f:
        return json.load(f)


def trainer_config(run: OursRun, scenario: async_scenarios.Scenario):
    """The Trainer's config for a scenario: no periodic checkpoint (a run that may be restarted
    saves one at each round's end, `_Rounds`), the scenario's overrides applied."""
    from asynctrain.components.trainer import config as config_lib

    config = config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=run.steps,
            batch_size=run.batch_size,
            steps_per_execution=run.steps_per_execution,
            checkpoint_interval_steps=0,
            summary_interval_steps=run.steps,
        ),
        distribution=config_lib.DistributionConfig(num_workers=run.workers, num_ps=1),
    )
    return async_scenarios.apply_overrides(config, scenario.overrides)


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


def run_ours(run: OursRun) -> dict:
    """Our loop on an emulated cluster for `run.scenario`: `run.rounds` rounds, each scored on
    the held-out batches, the scenario's disruption started at its round. A restart (`run.resume`)
    goes on from its first attempt's last checkpoint, its clock from where that one stopped."""
    from asynctrain.benchmarks import parameter_server_fit, transformed_examples
    from asynctrain.components.trainer.cluster import servers
    from asynctrain.components.trainer.training import loop as train_lib
    from asynctrain.testing.emulated_cluster.hosts import EmulatedCluster, Machine

    scenario = async_scenarios.SCENARIOS[run.scenario]
    data = transformed_examples.TransformedExamples(**run.data)
    task = transformed_examples.make_task(data, trainer_config=trainer_config(run, scenario))
    held_out = parameter_server_fit.held_out_batches(
        transformed_examples.make_task(data, batch_size=run.batch_size),
        data.examples_dir,
        run.held_out_split,
    )
    resume = run.resume or {}
    untrained = resume.get('untrained') or parameter_server_fit.held_out_scores(
        task, None, held_out
    )
    clock = async_disruptions.TrainingClock(resume.get('training_s', 0.0))
    if resume:
        # The restart's downtime is training time lost: the cut's rest (a new cluster cannot
        # reach the parameter server's host before its link is back), the new cluster's start
        # and the restore all count.
        clock.resume()
        clock.wait_until(resume['cut_ends_at_s'])
    workers = [Machine(cpus=c) for c in scenario.worker_cpus(run.workers, run.host_cpus)]
    ps = [Machine(cpus=run.ps_cpus)]
    with EmulatedCluster(workers, ps, startup_timeout_s=STARTUP_TIMEOUT_S) as emulated:
        if scenario.worker_latency_ms:
            emulated.host(servers.WORKER, run.workers - 1).link.latency(
                scenario.worker_latency_ms, jitter_ms=scenario.worker_latency_ms
            )
        clock.resume()
        trainer = train_lib.Trainer(
            task, servers.attach(emulated.cluster_spec), data.examples_dir, run.run_dir
        )
        rounds = _Rounds(run, scenario, task, trainer, held_out, clock)
        try:
            curve, events = rounds.train(emulated)
        except _ParameterServerLost as lost:
            hosts = _host_counters(emulated)
            return {
                'completed': False,
                **lost.figures,
                'hosts': hosts,
                'held_out_batches': len(held_out),
                'resume': {
                    **lost.resume,
                    'untrained': untrained,
                    'hosts': merged_counters(resume.get('hosts', {}), hosts),
                },
            }
        counters = merged_counters(resume.get('hosts', {}), _host_counters(emulated))
    figures = async_figures.summarize(curve, untrained, counters, run.steps * run.rounds)
    return {
        'completed': True,
        **figures,
        'disruptions': events,
        'held_out_batches': len(held_out),
        **({'restart': rounds.restart} if rounds.restart else {}),
    }


def merged_counters(first: dict, second: dict) -> dict:
    """Two attempts' host counters, summed host by host (periods, throttled periods, bytes)."""
    merged = {}
    for host, counters in second.items():
        before = first.get(host)
        if before is None:
            merged[host] = counters
            continue
        link_bytes = dict(before['link_bytes'])
        for direction, count in counters['link_bytes'].items():
            link_bytes[direction] = link_bytes.get(direction, 0) + count
        merged[host] = {
            **counters,
            'periods': before['periods'] + counters['periods'],
            'throttled_periods': before['throttled_periods'] + counters['throttled_periods'],
            'link_bytes': link_bytes,
        }
    return merged


class _ParameterServerLost(Exception):
    """Our run ended when its parameter server could not be reached: `figures`, how far it got;
    `resume`, what a restart from the last checkpoint needs (`OursRun.resume`). TensorFlow's
    coordinator treats a parameter server's error as fatal; the Trainer's answer is a new cluster
    and the last checkpoint restored (`cluster.recovery`), which `run_in_process` does."""

    def __init__(self, figures: dict, resume: dict):
        super().__init__(figures['outcome'])
        self.figures = figures
        self.resume = resume


@dataclasses.dataclass
class _Rounds:
    """The rounds of one run: what trains, what scores, and the clock the disruption reads.
    With a cut parameter-server link each round ends with a checkpoint, which a restart
    restores (`restart`: what it restored, and when)."""

    run: OursRun
    scenario: async_scenarios.Scenario
    task: object
    trainer: object
    held_out: list
    clock: async_disruptions.TrainingClock
    restart: dict = dataclasses.field(default_factory=dict)

    def train(self, emulated) -> tuple[list, list]:
        """The rounds not done yet, each scored with the clock paused; the curve, and the events
        of the scenario's disruption, over by the time this returns.

        Raises:
          _ParameterServerLost: a cut parameter-server link ended the run.
        """
        resume = self.run.resume or {}
        curve, events, disruption = list(resume.get('curve', [])), [], None
        first = 0
        if resume:
            step = self.trainer.restore()
            first = step // self.run.steps
            events = [
                *resume['events'],
                {'event': f'restarted from step {step}', 'training_s': self.clock.seconds()},
            ]
            self.restart = {
                'failed_at_training_s': resume['training_s'],
                'restored_step': step,
                'restored_at_training_s': self.clock.seconds(),
                'rounds_redone': len(curve) - first,
            }
            curve = curve[:first]
        try:
            for i in range(first, self.run.rounds):
                if (
                    not resume
                    and self.scenario.disrupted
                    and i == async_scenarios.disruption_round(self.run.rounds)
                ):
                    disruption = async_disruptions.Disruption(self.scenario, emulated, self.clock)
                    disruption.start()
                curve.append(self._round(i, curve, disruption))
        finally:
            if disruption is not None:
                disruption.join()
        return curve, events + (disruption.events if disruption else [])

    def _round(self, i: int, curve: list, disruption) -> dict:
        """Round `i`: trained to its step, then scored with the clock stopped (wall time is
        building and training); its point of the curve."""
        import tensorflow as tf

        from asynctrain.benchmarks import parameter_server_fit

        try:
            measured = parameter_server_fit.train_to(
                self.trainer, (i + 1) * self.run.steps, save=bool(self.scenario.ps_link_cut_s)
            )
        except tf.errors.UnavailableError as error:
            if not self.scenario.ps_link_cut_s or disruption is None:
                raise
            self.clock.pause()
            disruption.join()
            raise self._lost(error, curve, disruption.events) from error
        self.clock.pause()
        wall_s = self.clock.seconds()
        scores = parameter_server_fit.held_out_scores(self.task, self.trainer.model, self.held_out)
        self.clock.resume()
        return {
            'wall_s': wall_s,
            'examples': (i + 1) * self.run.steps * self.run.batch_size,
            'examples_per_sec': measured['examples_per_sec'],
            'staleness_mean': measured['staleness_mean'],
            'staleness_max': measured['staleness_max'],
            **{f'held_out_{k}': v for k, v in scores.items()},
        }

    def _lost(self, error, curve: list, events: list) -> _ParameterServerLost:
        failed_at = self.clock.seconds()
        cut_at = next(e['training_s'] for e in events if e['event'] == 'ps-0 link cut')
        return _ParameterServerLost(
            {
                'outcome': f'training failed: {type(error).__name__}: {error.message}',
                'curve': curve,
                'failed_at_training_s': failed_at,
                'disruptions': events,
            },
            {
                'curve': curve,
                'events': events,
                'training_s': failed_at,
                'cut_ends_at_s': cut_at + self.scenario.ps_link_cut_s,
            },
        )


def _run_spec(spec_path: str) -> None:
    with open(spec_path, encoding='utf-8') as f:
        run = OursRun(**json.load(f))
    # The console shows the bench's own lines: this process's output goes to its log, appended
    # to by a restart.
    log = os.open(run.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    if run.resume:
        print(f'{run.scenario}: restarting after the failure at {run.resume["training_s"]:.1f} s')
    else:
        print(f'{run.scenario}: starting')
    # The process it ran in, which the bench's own is not: a test checks each scenario had one.
    figures = {**run_ours(run), 'process_id': os.getpid()}
    with open(run.figures_path, 'w', encoding='utf-8') as f:
        json.dump(figures, f)


def main() -> None:
    from asynctrain.components.shared import forked_child

    forked_child.die_with_parent()
    parser = argparse.ArgumentParser(prog='async_ours')
    parser.add_argument('--spec', required=True)
    args = parser.parse_args()
    # Ends at once when done (the cluster has stopped by then), as the Trainer's coordinator
    # child does: nothing of TensorFlow's runtime is left to finalize.
    forked_child.exit_with_status(lambda: _run_spec(args.spec))


if __name__ == '__main__':
    main()
