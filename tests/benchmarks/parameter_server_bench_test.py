"""`asynctrain bench ps` at a tiny size: the report it writes, not the speed it measures."""

import json

import pytest

from pipelines import cli

pytestmark = pytest.mark.integration


def test_bench_reports_every_config_with_staleness(tmp_path, capsys):
    output = tmp_path / 'bench'
    code = cli.main(
        [
            'bench',
            'ps',
            '--steps',
            '8',
            '--steps-per-execution',
            '4',
            '--workers',
            '1',
            '2',
            '--examples',
            '2000',
            '--sample-rows',
            '120',
            '--output',
            str(output),
        ]
    )

    assert code == 0
    result = json.loads((output / 'result.json').read_text())
    configs = result['configs']
    # 2 worker counts x 3 layouts (1 ps; 2 ps fixed_shards; 2 ps min_shard_size).
    assert len(configs) == 6
    assert {
        (c['num_workers'], c['num_ps'], c['partitioner'], c['steps_per_execution']) for c in configs
    } == {
        (w, ps, p, spe)
        for w in (1, 2)
        for spe in (4,)
        for ps, p in ((1, 'fixed_shards'), (2, 'fixed_shards'), (2, 'min_shard_size'))
    }
    for c in configs:
        assert c['steps'] == 8
        assert c['steps_per_sec'] > 0 and c['examples_per_sec'] > 0 and c['seconds'] > 0
        assert c['examples_per_sec'] == pytest.approx(c['steps_per_sec'] * 256)
        assert 0 <= c['staleness_mean'] <= c['staleness_max']
        assert 0 <= c['input_wait_fraction'] <= 1
        if c['num_workers'] == 1:
            assert c['staleness_max'] == 0  # nobody else updates between a read and its apply
    shards = {(c['num_ps'], c['partitioner']): c['variable_shards'] for c in configs}
    # Two servers with fixed_shards split every variable; the taxi model's variables are all
    # under min_shard_size's 256 KiB, so they stay whole.
    assert (
        shards[(2, 'fixed_shards')] > shards[(2, 'min_shard_size')] == shards[(1, 'fixed_shards')]
    )
    png = (output / 'parameter_server.png').read_bytes()
    assert png.startswith(b'\x89PNG\r\n\x1a\n') and len(png) > 5000
    assert '[bench ps' in capsys.readouterr().out
