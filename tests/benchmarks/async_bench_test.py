"""`asynctrain bench async` at a tiny size (2 workers, equal hosts and one quarter-CPU host, a few
steps): the report it writes and the values that must hold in it, not the speed it measures."""

import json

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


@pytest.mark.fresh_process
def test_bench_trains_every_scenario_and_the_slow_host_is_throttled(tmp_path, transformed_taxi):
    output = tmp_path / 'bench'
    code = cli.main(
        [
            'bench',
            'async',
            '--workers',
            '2',
            '--steps',
            '20',
            '--rounds',
            '2',
            '--examples',
            '2000',
            '--scenarios',
            'equal',
            'quarter_cpu',
            '--strategies',
            'ours',
            '--transformed-examples',
            transformed_taxi.examples,
            '--transform-graph',
            transformed_taxi.transform_graph,
            '--output',
            str(output),
        ]
    )

    assert code == 0
    result = json.loads((output / 'result.json').read_text())
    assert (output / 'async_training.png').stat().st_size > 0
    assert set(result['scenarios']) == {'equal', 'quarter_cpu'}
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
    slow = result['scenarios']['quarter_cpu']['ours']['hosts']
    assert slow['worker-1']['cpus'] == 0.25
    # The slow host ran out of its quota: its CPU counters show throttling.
    assert slow['worker-1']['throttled_periods'] > 0
