"""`asynctrain bench recsys` at a tiny size: the figures it reports, and that our loop and
`model.fit` learn the same from the same data (not the speed it measures)."""

import json

import pytest

from asynctrain import cli

pytestmark = pytest.mark.integration


@pytest.mark.fresh_process
def test_bench_reports_both_trainers_per_size_and_server_count(tmp_path):
    output = tmp_path / 'bench'
    code = cli.main(
        [
            'bench',
            'recsys',
            '--sizes',
            '1000',
            '20000',
            '--num-ps',
            '2',
            '--rows',
            '12000',
            '--files',
            '3',
            '--steps',
            '30',
            '--repeats',
            '1',
            '--batch-size',
            '256',
            '--output',
            str(output),
        ]
    )

    assert code == 0
    result = json.loads((output / 'result.json').read_text())
    assert (output / 'recsys.png').stat().st_size > 0
    assert result['cluster'] == 'local_processes'
    assert isinstance(result['loopback_isolated'], bool)
    assert [s['table_size'] for s in result['sizes']] == [1000, 20000]
    for size in result['sizes']:
        assert size['train_examples'] == 8000 and size['eval_examples'] == 4000
        assert 0.6 < size['ceiling_auc'] < 1
        assert [c['num_ps'] for c in size['configs']] == [2]
        for config in size['configs']:
            assert config['examples_per_sec'] > 0 and config['fit']['examples_per_sec'] > 0
            assert config['vs_fit'] == pytest.approx(
                config['examples_per_sec'] / config['fit']['examples_per_sec']
            )
            # The default partitioner splits a table of at least 2 x 256 KiB (20,000 rows of 8
            # floats) over both servers, and keeps a 1,000-row one whole.
            expected_shards = 2 if size['table_size'] == 20000 else 1
            assert config['largest_table_shards'] == expected_shards
            assert len(config['variable_bytes_per_ps']) == config['num_ps']
            assert len(config['ps_rss_bytes']) == config['num_ps']
            assert min(config['ps_rss_bytes']) > 0
            # At least the rows a step looks up (256 examples x 26 columns x 8 floats) travel.
            assert config['bytes_per_step'] > 256 * 26 * 8 * 4
            assert config['checkpoint_bytes'] > config['table_bytes']
            assert config['checkpoint_save_seconds'] > 0
            assert config['checkpoint_restore_seconds'] > 0
            # Both trainers learned, and learned alike, below the planted ceiling.
            for auc in (config['eval_auc'], config['fit']['eval_auc']):
                assert 0.52 < auc < size['ceiling_auc'] + 0.02
            assert config['eval_auc'] == pytest.approx(config['fit']['eval_auc'], abs=0.03)
    largest = result['sizes'][-1]['configs'][0]
    # With 20,000-row tables a step moves far less than the tables (sparse updates).
    assert largest['bytes_per_step'] < largest['table_bytes']
