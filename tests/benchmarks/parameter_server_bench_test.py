"""`asynctrain bench ps` at a tiny size: the report it writes, not the speed it measures."""

import json

import pytest

from asynctrain import cli

pytestmark = pytest.mark.integration


@pytest.mark.fresh_process
def test_bench_reports_every_config_with_staleness_and_model_fit(
    tmp_path, capsys, transformed_taxi
):
    output = tmp_path / 'bench'
    code = cli.main(
        [
            'bench',
            'ps',
            '--steps',
            '8',
            '--steps-per-execution',
            '4',
            '--repeats',
            '1',
            '--workers',
            '1',
            '--examples',
            '2000',
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
    configs = result['configs']
    # 3 layouts (1 ps; 2 ps fixed_shards; 2 ps min_shard_size) of one worker: with one, staleness
    # is exactly 0 (nobody else updates between a read and its apply), a value the test can hold.
    assert len(configs) == 3
    assert (result['batch_size'], result['repeats'], result['held_out_batches']) == (256, 1, 8)
    assert len(result['load_average_start']) == len(result['load_average_end']) == 3
    # Resampled from the Transform output it was given; no Transform of its own.
    assert result['transformed_examples'] == transformed_taxi.examples
    assert result['sample_rows_transformed'] is None and result['examples'] == 2000
    assert {
        (c['num_workers'], c['num_ps'], c['partitioner'], c['steps_per_execution']) for c in configs
    } == {
        (w, ps, p, spe)
        for w in (1,)
        for spe in (4,)
        for ps, p in ((1, 'fixed_shards'), (2, 'fixed_shards'), (2, 'min_shard_size'))
    }
    for c in configs:
        assert c['steps'] == 8
        assert c['steps_per_sec'] > 0 and c['examples_per_sec'] > 0 and c['seconds'] > 0
        assert c['examples_per_sec'] == pytest.approx(c['steps_per_sec'] * 256)
        assert c['staleness_mean'] == c['staleness_max'] == 0
        assert 0 <= c['input_wait_fraction'] <= 1
        # model.fit under the same strategy, the same steps: its rate and ours / its rate.
        fit = c['fit']
        assert fit['steps'] == 8 and fit['seconds'] > 0
        assert fit['examples_per_sec'] == pytest.approx(fit['steps_per_sec'] * 256)
        assert c['vs_fit'] == pytest.approx(c['steps_per_sec'] / fit['steps_per_sec'])
        assert c['rounds_steps_per_sec'] == {
            'ours': [c['steps_per_sec']],
            'fit': [fit['steps_per_sec']],
        }
        assert c['wall_seconds']['ours'] > c['seconds'] and c['wall_seconds']['fit'] > 0
        # Both learned: after the same number of updates from the same start, their losses on
        # the same held-out batches are below the untrained model's (about ln 2 for a balanced
        # label, less here: about a fifth of the taxi trips are big tips) and close together.
        assert 0 < c['held_out_loss'] < 0.69 and 0 < c['fit_held_out_loss'] < 0.69
        assert c['held_out_loss'] == pytest.approx(c['fit_held_out_loss'], rel=0.05)
    shards = {(c['num_ps'], c['partitioner']): c['variable_shards'] for c in configs}
    # Two servers with fixed_shards split every variable; the taxi model's variables are all
    # under min_shard_size's 256 KiB, so they stay whole.
    assert (
        shards[(2, 'fixed_shards')] > shards[(2, 'min_shard_size')] == shards[(1, 'fixed_shards')]
    )
    png = (output / 'parameter_server.png').read_bytes()
    assert png.startswith(b'\x89PNG\r\n\x1a\n') and len(png) > 5000
    assert '[bench ps' in capsys.readouterr().out


def test_bench_wants_both_or_neither_of_an_earlier_transforms_outputs(tmp_path, capsys):
    only_graph = ['--transform-graph', str(tmp_path)]
    missing = ['--transformed-examples', str(tmp_path / 'none'), '--transform-graph', str(tmp_path)]
    output = ['--output', str(tmp_path / 'bench')]

    assert cli.main(['bench', 'ps', *only_graph, *output]) == 2
    assert 'give both or neither' in capsys.readouterr().err
    assert cli.main(['bench', 'input', *missing, *output]) == 2
    assert f'--transformed-examples: no directory at {tmp_path / "none"}' in capsys.readouterr().err
    assert not (tmp_path / 'bench').exists()
