"""`asynctrain bench async` at a tiny size (2 workers, equal hosts and one quarter-CPU host, a few
steps): the report it writes and the values that must hold in it, not the speed it measures."""

import json
import os

import pytest

from asynctrain import cli
from asynctrain.benchmarks import async_scenarios

pytestmark = pytest.mark.integration


def test_overrides_replace_the_named_fields_and_reject_unknown_ones():
    from asynctrain.components.trainer import config as config_lib

    config = async_scenarios.apply_overrides(
        config_lib.TrainerConfig(), (('training.batch_size', 64), ('distribution.num_ps', 2))
    )
    assert (config.training.batch_size, config.distribution.num_ps) == (64, 2)
    with pytest.raises(ValueError, match='training.no_such_field'):
        async_scenarios.apply_overrides(config, (('training.no_such_field', 1),))


def test_a_quarter_cpu_scenario_slows_only_the_last_worker():
    assert async_scenarios.SCENARIOS['quarter_cpu'].worker_cpus(3) == [1.0, 1.0, 0.25]
    assert async_scenarios.SCENARIOS['equal'].worker_cpus(2) == [1.0, 1.0]


def _bench(output, transformed_taxi, *args: str) -> dict:
    """`bench async` with 2 workers, 2 rounds of 20 steps on 2,000 examples, and `args`; its
    result."""
    code = cli.main(
        ['bench', 'async', '--workers', '2', '--steps', '20', '--rounds', '2']
        + ['--examples', '2000', *args, '--output', str(output)]
        + ['--transformed-examples', transformed_taxi.examples]
        + ['--transform-graph', transformed_taxi.transform_graph]
    )
    assert code == 0
    return json.loads((output / 'result.json').read_text())


@pytest.mark.fresh_process
def test_bench_trains_every_scenario_and_the_slow_host_is_throttled(tmp_path, transformed_taxi):
    output = tmp_path / 'bench'
    args = ['--scenarios', 'equal', 'quarter_cpu', 'ps_link_cut', '--strategies', 'ours']
    result = _bench(output, transformed_taxi, *args)

    assert (output / 'async_training.png').stat().st_size > 0
    assert set(result['scenarios']) == {'equal', 'quarter_cpu', 'ps_link_cut'}
    # Ours only (--strategies ours): nothing to compare with.
    assert result['comparisons'] == {}
    for name, strategies in result['scenarios'].items():
        ours = strategies['ours']
        assert len(ours['curve']) == 2
        assert [p['examples'] for p in ours['curve']] == [20 * 256, 40 * 256]
        # Trained: the held-out loss fell below the untrained model's.
        assert ours['held_out_loss'] < ours['untrained_held_out_loss'], name
        assert 0.5 < ours['held_out_auc'] <= 1.0, name
        assert ours['examples_per_sec'] > 0
        # The ratios are the quotients of their parts.
        assert ours['examples_per_sec'] == pytest.approx(40 * 256 / ours['wall_s'])
        # Every step's variables and gradients crossed the proxied links, counted while open.
        assert ours['link_bytes'] > 0, name
        assert ours['link_bytes_per_step'] == pytest.approx(ours['link_bytes'] / 40)
        assert set(ours['hosts']) == {'worker-0', 'worker-1', 'ps-0'}
        assert all(p['staleness_max'] >= 0 for p in ours['curve'])
    # Each scenario's ours ran in a process of its own, not in the bench's.
    processes = {s['ours']['process_id'] for s in result['scenarios'].values()}
    assert len(processes) == 3 and os.getpid() not in processes
    # Every run scored the same held-out batches.
    assert {s['ours']['held_out_batches'] for s in result['scenarios'].values()} == {
        result['held_out_batches']
    }
    assert result['held_out_batches'] > 0
    # The console has the bench's lines; each run's own output is in its log.
    log = (output / 'logs' / 'ps_link_cut-ours.log').read_text()
    assert 'ps_link_cut: starting' in log and 'ps_link_cut: restarting after' in log
    slow = result['scenarios']['quarter_cpu']['ours']['hosts']
    assert slow['worker-1']['cpus'] == 0.25
    # The slow host ran out of its quota: its CPU counters show throttling.
    assert slow['worker-1']['throttled_periods'] > 0
    # The cut link ended the first attempt in round 2; a second, on a new cluster, restored the
    # checkpoint of round 1's end and trained round 2 again, its clock going on from the failure
    # through the cut's 10 s.
    cut = result['scenarios']['ps_link_cut']['ours']
    events = {e['event']: e['training_s'] for e in cut['disruptions']}
    assert cut['restart']['restored_step'] == 20
    assert cut['restart']['failed_at_training_s'] >= events['ps-0 link cut']
    assert events['restarted from step 20'] >= events['ps-0 link cut'] + 10
    assert cut['curve'][1]['wall_s'] > events['restarted from step 20']
    assert result['disruption_costs']['ps_link_cut']['examples_per_sec_ratio'] > 0


@pytest.mark.fresh_process
def test_both_synchronous_references_train_as_many_examples_per_round_and_are_compared(
    tmp_path, transformed_taxi, capfd
):
    capfd.readouterr()
    result = _bench(tmp_path / 'bench', transformed_taxi, '--scenarios', 'equal')
    # The console has the bench's own lines only; TensorFlow's and the references' processes'
    # output went to the bench's log (ours' to its own).
    printed = capfd.readouterr()
    assert printed.err == ''
    assert all(line.startswith('[bench async ') for line in printed.out.splitlines()), printed.out
    assert f'log {tmp_path / "bench" / "logs" / "bench.log"}' in printed.out
    assert (tmp_path / 'bench' / 'logs' / 'bench.log').exists()
    strategies = result['scenarios']['equal']
    # Every strategy by default: ours, then MultiWorkerMirroredStrategy by fit and by a custom loop.
    assert set(strategies) == {'ours', 'sync_fit', 'sync_custom'}
    ours = strategies['ours']
    for name in ('sync_fit', 'sync_custom'):
        reference = strategies[name]
        # 10 synchronous steps of 2 x 256 examples a round: the examples of ours' 20 steps of 256.
        assert [p['examples'] for p in reference['curve']] == [20 * 256, 40 * 256], name
        assert [p['examples'] for p in reference['curve']] == [p['examples'] for p in ours['curve']]
        # Trained: the held-out loss fell below the untrained model's.
        assert reference['held_out_loss'] < reference['untrained_held_out_loss'], name
        assert 0.5 < reference['held_out_auc'] <= 1.0, name
        assert reference['hosts']['worker-1']['cpus'] == 1.0
        compared = result['comparisons']['equal'][name]
        assert compared['examples_per_sec_ratio'] == pytest.approx(
            ours['examples_per_sec'] / reference['examples_per_sec']
        )
        assert compared['target_auc'] == pytest.approx(reference['held_out_auc'] - 0.005)
        assert set(compared['seconds_to_target']) == {'ours', name}
        # The reference reached its own final AUC less the margin, at its last round at the latest.
        assert 0 < compared['seconds_to_target'][name] <= reference['curve'][-1]['wall_s']
        assert [g['examples'] for g in compared['auc_gap_at_equal_examples']] == [
            20 * 256,
            40 * 256,
        ]


def _curve(points):
    return [
        {'examples': examples, 'wall_s': wall, 'held_out_auc': auc}
        for examples, wall, auc in points
    ]


def test_the_comparison_times_each_side_to_the_references_final_auc_less_the_margin():
    from asynctrain.benchmarks import async_figures

    ours = {
        'examples_per_sec': 3000.0,
        'curve': _curve([(1000, 2.0, 0.80), (2000, 4.0, 0.896), (3000, 6.0, 0.91)]),
    }
    reference = {
        'examples_per_sec': 1000.0,
        'held_out_auc': 0.90,
        'curve': _curve([(1000, 6.0, 0.85), (2000, 12.0, 0.895), (3000, 18.0, 0.90)]),
    }

    compared = async_figures.compare(ours, reference, 'sync_fit')

    assert compared['examples_per_sec_ratio'] == 3.0
    assert compared['target_auc'] == pytest.approx(0.895)
    # Ours reached 0.895 at its second round (4 s), the reference at its second (12 s).
    assert compared['seconds_to_target'] == {'ours': 4.0, 'sync_fit': 12.0}
    assert compared['to_target_ratio'] == 3.0
    assert [g['examples'] for g in compared['auc_gap_at_equal_examples']] == [1000, 2000, 3000]
    assert [g['ours_minus_sync'] for g in compared['auc_gap_at_equal_examples']] == pytest.approx(
        [-0.05, 0.001, 0.01]
    )


def test_a_side_that_never_reaches_the_target_has_no_time_and_no_ratio():
    from asynctrain.benchmarks import async_figures

    ours = {'examples_per_sec': 500.0, 'curve': _curve([(1000, 5.0, 0.70), (2000, 9.0, 0.80)])}
    reference = {
        'examples_per_sec': 1000.0,
        'held_out_auc': 0.90,
        'curve': _curve([(1000, 3.0, 0.88), (2000, 6.0, 0.90)]),
    }

    compared = async_figures.compare(ours, reference, 'sync_custom')

    assert compared['seconds_to_target'] == {'ours': None, 'sync_custom': 6.0}
    assert compared['to_target_ratio'] is None
    assert compared['examples_per_sec_ratio'] == 0.5


def test_a_remedy_is_compared_with_its_baseline_round_by_round():
    from asynctrain.benchmarks import async_figures

    def run(aucs, rate, bytes_per_step, staleness):
        curve = [
            {'held_out_auc': a, 'staleness_mean': s, 'examples': 100 * (i + 1)}
            for i, (a, s) in enumerate(zip(aucs, staleness))
        ]
        return {
            'curve': curve,
            'held_out_auc': aucs[-1],
            'held_out_loss': 1 - aucs[-1],
            'examples_per_sec': rate,
            'link_bytes_per_step': bytes_per_step,
        }

    remedy = run([0.80, 0.90], 900.0, 25_000.0, [1.0, 3.0])
    baseline = run([0.85, 0.88], 1000.0, 250_000.0, [2.0, 4.0])

    compared = async_figures.against_baseline(remedy, baseline)

    assert compared['held_out_auc_minus_baseline'] == pytest.approx(0.02)
    assert compared['held_out_loss_minus_baseline'] == pytest.approx(-0.02)
    assert compared['auc_minus_baseline_by_round'] == pytest.approx([-0.05, 0.02])
    assert compared['examples_per_sec_ratio'] == pytest.approx(0.9)
    # Top-K's point: a tenth of the bytes on the links.
    assert compared['link_bytes_per_step_ratio'] == pytest.approx(0.1)
    assert compared['staleness_mean'] == {'remedy': 2.0, 'baseline': 3.0}
    # Every remedy's baseline is a scenario of the bench: Top-K's is plain SGD on the same hosts.
    from asynctrain.benchmarks import async_scenarios as scenarios

    assert scenarios.SCENARIOS['quarter_cpu+sgd_topk1'].baseline == 'quarter_cpu+sgd'
    assert scenarios.SCENARIOS['latency_20ms+dc_constant'].baseline == 'latency_20ms'
    for scenario in scenarios.SCENARIOS.values():
        assert scenario.baseline in ('', *scenarios.SCENARIOS), scenario.name
