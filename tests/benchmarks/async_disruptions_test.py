"""The bench's disruptions, with fake hosts: timed on the training clock (which stops while the
bench scores), the lost worker started again on the same host, the cut link restored, and what
a disruption cost computed from the curves. No TensorFlow server runs here."""

import threading

import pytest

from asynctrain.benchmarks import (
    async_disruptions,
    async_figures,
    async_ours,
    async_scenarios,
    async_training,
)


def _in_thread(fn) -> tuple[threading.Thread, list]:
    result = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    return thread, result


def test_a_paused_clock_holds_its_waiters_until_it_runs_again():
    clock = async_disruptions.TrainingClock()
    waiter, result = _in_thread(lambda: clock.wait_until(0.05))
    # Paused from the start: no training time passes, however long the waiter waits.
    waiter.join(timeout=0.3)
    assert waiter.is_alive() and result == []
    assert clock.seconds() == 0.0

    clock.resume()
    waiter.join(timeout=30)
    assert result == [True]
    assert clock.seconds() >= 0.05
    clock.pause()
    paused_at = clock.seconds()
    assert clock.seconds() == paused_at


def test_a_restarted_runs_clock_goes_on_from_where_the_first_attempt_stopped():
    clock = async_disruptions.TrainingClock(start_s=42.5)
    assert clock.seconds() == 42.5
    # Already past: a wait for an earlier second returns at once, even paused.
    assert clock.wait_until(40.0) is True
    clock.resume()
    clock.pause()
    assert clock.seconds() >= 42.5


def test_cancelling_the_clock_releases_its_waiters():
    clock = async_disruptions.TrainingClock()
    clock.resume()
    waiter, result = _in_thread(lambda: clock.wait_until(3600))
    clock.cancel()
    waiter.join(timeout=30)
    assert result == [False]


class FakeLink:
    def __init__(self, calls):
        self.calls = calls

    def cut(self):
        self.calls.append('cut')

    def restore(self):
        self.calls.append('restore')


class FakeHost:
    def __init__(self, index, calls):
        self.index = index
        self.calls = calls
        self.link = FakeLink(calls)

    def kill(self):
        self.calls.append(f'kill {self.index}')

    def restart(self):
        self.calls.append(f'restart {self.index}')


class FakeCluster:
    """Two workers and a parameter server, as `EmulatedCluster` names them."""

    def __init__(self):
        self.calls = []
        self.cluster_spec = {'worker': ['w0', 'w1'], 'ps': ['p0']}
        self.hosts = {
            ('worker', 0): FakeHost(0, self.calls),
            ('worker', 1): FakeHost(1, self.calls),
            ('ps', 0): FakeHost(0, self.calls),
        }

    def host(self, task_type, index):
        return self.hosts[(task_type, index)]


def _disrupt(scenario, events: int) -> tuple[FakeCluster, async_disruptions.Disruption]:
    """`scenario`'s disruption of a fake cluster on a running clock, joined (which cancels what
    is left) once it has recorded `events` events."""
    cluster, clock = FakeCluster(), async_disruptions.TrainingClock()
    clock.resume()
    disruption = async_disruptions.Disruption(scenario, cluster, clock)
    disruption.start()
    while len(disruption.events) < events:
        clock.wait_until(clock.seconds() + 0.01)
    disruption.join()
    return cluster, disruption


def test_a_lost_worker_is_the_last_one_and_comes_back_after_its_seconds_of_training():
    # Joined after the restart, as a run long enough would be.
    cluster, disruption = _disrupt(async_scenarios.Scenario('lost', worker_lost_s=0.05), 2)

    assert cluster.calls == ['kill 1', 'restart 1']
    assert [e['event'] for e in disruption.events] == [
        'worker-1 killed',
        'worker-1 listening again',
    ]
    killed, back = (e['training_s'] for e in disruption.events)
    assert back - killed >= 0.05


def test_a_run_that_ends_while_the_worker_is_down_does_not_restart_it():
    cluster, _ = _disrupt(async_scenarios.Scenario('lost', worker_lost_s=3600), 1)
    assert cluster.calls == ['kill 1']


def test_a_cut_parameter_server_link_is_restored_even_when_the_run_ends_first():
    cluster, disruption = _disrupt(async_scenarios.Scenario('cut', ps_link_cut_s=3600), 1)
    assert cluster.calls == ['cut', 'restore']
    assert [e['event'] for e in disruption.events] == ['ps-0 link cut', 'ps-0 link restored']


def test_a_disruptions_error_reaches_the_bench():
    class Broken(FakeCluster):
        def host(self, task_type, index):
            raise LookupError(f'no {task_type} {index}')

    clock = async_disruptions.TrainingClock()
    disruption = async_disruptions.Disruption(
        async_scenarios.Scenario('lost', worker_lost_s=1), Broken(), clock
    )
    disruption.start()
    with pytest.raises(LookupError, match='no worker 1'):
        disruption.join()


def test_disruptions_start_at_thirty_percent_of_the_run_and_never_in_its_first_round():
    assert async_scenarios.disruption_round(10) == 3
    assert async_scenarios.disruption_round(20) == 6
    assert async_scenarios.disruption_round(3) == 1
    assert async_scenarios.disruption_round(2) == 1


def test_every_scenarios_overrides_make_a_valid_trainer_config():
    from asynctrain.components.trainer import config as config_lib

    for name, scenario in async_scenarios.SCENARIOS.items():
        config = async_scenarios.apply_overrides(config_lib.TrainerConfig(), scenario.overrides)
        config.__post_init__()  # the whole config's checks, Top-K's optimizer among them
        if 'topk' in name:
            assert config.training.optimizer == 'sgd', name
            assert config.stale_gradients.top_k_fraction in (0.01, 0.1), name
    remedies = [n for n, s in async_scenarios.SCENARIOS.items() if s.overrides]
    # Each remedy under the straggler and the jittery link, without the synchronous runs.
    assert len(remedies) == 12
    assert not any(async_scenarios.SCENARIOS[n].references for n in remedies)


def _curve(points):
    return [{'examples': e, 'wall_s': w, 'held_out_auc': 0.9} for e, w in points]


def test_what_a_lost_worker_cost_is_its_rate_against_equal_hosts():
    rounds = [(100 * (i + 1), float(i + 1)) for i in range(10)]  # 100 examples/s throughout
    equal = {'completed': True, 'examples_per_sec': 100.0, 'held_out_auc': 0.95}
    equal['curve'] = _curve(rounds)
    # From round 3 on (30% of 10), the disrupted run takes 2 s a round: 50 examples/s.
    slowed = rounds[:3] + [(100 * (i + 1), 3.0 + 2 * (i - 2)) for i in range(3, 10)]
    lost = {'completed': True, 'examples_per_sec': 1000 / 17.0, 'held_out_auc': 0.94}
    lost['curve'] = _curve(slowed)

    cost = async_figures.lost_throughput(lost, equal)

    assert cost['examples_per_sec_ratio'] == pytest.approx(100 / 170)
    assert cost['from_disruption_ratio'] == pytest.approx(0.5)
    assert cost['held_out_auc_minus_equal'] == pytest.approx(-0.01)
    assert async_figures.lost_throughput(
        {'completed': False, 'outcome': 'training failed'}, equal
    ) == {'outcome': 'training failed'}


class FakeProcess:
    """A synchronous reference worker: `code` is its exit status once it ends."""

    def __init__(self, code=None):
        self.code = code
        self.killed = False

    def poll(self):
        return self.code

    def kill(self):
        self.killed, self.code = True, -9

    def wait(self):
        return self.code


def _lose(tmp_path, processes, start):
    progress = tmp_path / 'progress.jsonl'
    progress.write_text('{"round": 1, "training_s": 1.0}\n')
    spec = {'rounds': 3, 'progress': str(progress)}
    scenario = async_scenarios.Scenario('lost', worker_lost_s=0.01)
    return async_training._lose_reference_worker(scenario, spec, processes, start)


def test_a_synchronous_run_that_finishes_after_its_worker_is_back_reports_when(tmp_path):
    processes = [FakeProcess(), FakeProcess()]
    first_last = processes[-1]

    def start():
        # The worker is back and the run goes on: two more rounds, then every worker ends.
        with open(tmp_path / 'progress.jsonl', 'a') as f:
            f.write('{"round": 2}\n{"round": 3}\n')
        processes[0].code = 0
        return FakeProcess(0)

    lost = _lose(tmp_path, processes, start)

    assert first_last.killed and processes[-1] is not first_last
    assert lost['outcome'] == 'finished'
    assert (lost['killed_after_rounds'], lost['rounds_done']) == (1, 3)
    assert 0 < lost['first_round_after_kill_s'] <= lost['seconds_after_kill']


def test_a_synchronous_run_whose_workers_fail_after_the_loss_says_so(tmp_path):
    processes = [FakeProcess(), FakeProcess()]

    def start():
        processes[0].code = 1  # the chief's collective failed: it exits
        return FakeProcess(1)

    lost = _lose(tmp_path, processes, start)

    assert lost['outcome'] == 'workers exited with [1, 1]'
    assert lost['first_round_after_kill_s'] is None
    assert lost['rounds_done'] == 1


def test_the_references_workers_are_proxied_only_where_a_link_is_slow():
    import argparse
    import contextlib

    args = argparse.Namespace(workers=3)
    with contextlib.ExitStack() as stack:
        addresses, bind_ports, links = async_training._reference_links(
            args, async_scenarios.SCENARIOS['equal'], stack
        )
    assert (len(addresses), bind_ports, links) == (3, [0, 0, 0], [])

    with contextlib.ExitStack() as stack:
        addresses, bind_ports, links = async_training._reference_links(
            args, async_scenarios.SCENARIOS['latency_20ms'], stack
        )
        # TF_CONFIG names the proxies; each worker binds the port behind its own.
        assert addresses == [link.listen for link in links]
        assert [link.upstream for link in links] == [f'127.0.0.1:{p}' for p in bind_ports]
        assert len(set(bind_ports) | {a.rsplit(':', 1)[1] for a in addresses}) == 6
        # The last worker's link is as slow as ours' last worker's: 20 ms with 20 ms of jitter.
        assert [len(link.toxics()) for link in links] == [0, 0, 1]
        toxic = links[-1].toxics()[0]
        assert (toxic['type'], toxic['attributes']) == (
            'latency',
            {'latency': 20, 'jitter': 20},
        )


def test_a_reference_worker_binds_the_port_it_is_given_behind_its_proxy(monkeypatch):
    import json

    from asynctrain.benchmarks import sync_reference

    cluster = {'worker': ['127.0.0.1:7001', '127.0.0.1:7002']}
    monkeypatch.setenv(
        'TF_CONFIG', json.dumps({'cluster': cluster, 'task': {'type': 'worker', 'index': 1}})
    )
    resolver = sync_reference.cluster_resolver(bind_port=9123)
    assert resolver.port == 9123
    assert resolver.cluster_spec().as_dict() == cluster
    assert (resolver.task_type, resolver.task_id) == ('worker', 1)
    assert not hasattr(sync_reference.cluster_resolver(), 'port')


def test_a_restarted_runs_host_counters_add_both_attempts():
    first = {
        'ps-0': {'cpus': 0.5, 'periods': 10, 'throttled_periods': 4, 'link_bytes': {'up': 100}},
        'worker-0': {'cpus': 0.3, 'periods': 7, 'throttled_periods': 1, 'link_bytes': {}},
    }
    second = {
        'ps-0': {
            'cpus': 0.5,
            'periods': 5,
            'throttled_periods': 2,
            'link_bytes': {'up': 50, 'down': 8},
        },
        'worker-0': {'cpus': 0.3, 'periods': 3, 'throttled_periods': 0, 'link_bytes': {'up': 1}},
    }
    merged = async_ours.merged_counters(first, second)
    assert merged['ps-0'] == {
        'cpus': 0.5,
        'periods': 15,
        'throttled_periods': 6,
        'link_bytes': {'up': 150, 'down': 8},
    }
    assert merged['worker-0']['periods'] == 10
    assert merged['worker-0']['link_bytes'] == {'up': 1}
    # A first attempt's counters alone (no restart yet) are kept as they are.
    assert async_ours.merged_counters({}, second) == second
