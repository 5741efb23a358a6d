"""`asynctrain bench input` at a tiny size: the report it writes, not the speed it measures."""

import json

import pytest

from asynctrain import cli

pytestmark = pytest.mark.integration


def test_bench_reports_every_pipeline_against_the_upper_bound(tmp_path, capsys, transformed_taxi):
    output = tmp_path / 'bench'
    code = cli.main(
        [
            'bench',
            'input',
            '--examples',
            '3000',
            '--steps',
            '8',
            '--batch-size',
            '256',
            '--naive-steps',
            '2',
            '--rounds',
            '2',
            '--transformed-examples',
            transformed_taxi.examples,
            '--transform-graph',
            transformed_taxi.transform_graph,
            '--sweep',
            '16',
            '32,16',
            '--output',
            str(output),
        ]
    )

    assert code == 0
    result = json.loads((output / 'result.json').read_text())
    assert result['data']['examples'] == 3000 and result['data']['files'] == 8
    assert result['batch_size'] == 256
    assert result['data']['bytes'] > 0
    # Resampled from the Transform output it was given; no Transform of its own.
    assert result['data']['transformed_examples'] == transformed_taxi.examples
    assert result['data']['sample_rows_transformed'] is None
    # The pre-batched copy of the train split: 3000 examples in records of 256, read back equal;
    # 8 files (the floor), each ending with a partial record: 12 full-split records at least,
    # at most 3000 / 256 + 8.
    batched = result['batched']
    assert batched['examples_per_record'] == 256 and 12 <= batched['records'] <= 19
    assert batched['same_examples_as_source'] is True
    assert batched['bytes'] > 0 and batched['write_seconds'] > 0
    assert batched['bytes_vs_source'] == pytest.approx(batched['bytes'] / result['data']['bytes'])
    assert batched['write_examples_per_sec'] == pytest.approx(3000 / batched['write_seconds'])
    variants = result['variants']
    names = ('upper_bound', 'ours', 'ours_cached', 'per_example', 'tfx', 'naive')
    assert set(variants) == set(names)
    assert [variants[v]['steps'] for v in names] == [8, 8, 8, 8, 8, 2]
    for name in ('ours', 'ours_cached', 'per_example'):
        assert 0 < variants[name]['eval_auc'] < 1, name
    # Alternating rounds: the best counts.
    for name in ('upper_bound', 'ours', 'per_example'):
        assert len(variants[name]['rounds_examples_per_sec']) == 2, name
        assert variants[name]['examples_per_sec'] == max(variants[name]['rounds_examples_per_sec'])
    assert result['eval_auc_ours_minus_per_example'] == pytest.approx(
        variants['ours']['eval_auc'] - variants['per_example']['eval_auc']
    )
    # The cached pipeline is timed after one whole epoch: 3000 examples in batches of 256.
    assert variants['ours_cached']['first_epoch_steps'] == 12
    assert variants['ours_cached']['first_epoch_examples_per_sec'] > 0
    for name, measured in variants.items():
        assert measured['examples_per_sec'] > 0, name
        assert 0 <= measured['input_stall_fraction'] <= 1, name
        assert measured['ratio_to_upper_bound'] == pytest.approx(
            measured['examples_per_sec'] / variants['upper_bound']['examples_per_sec']
        )
    assert variants['upper_bound']['ratio_to_upper_bound'] == 1
    assert variants['tfx']['fit_in_memory_examples_per_sec'] > 0
    assert result['ours_vs_tfx'] == pytest.approx(
        variants['ours']['examples_per_sec'] / variants['tfx']['examples_per_sec']
    )
    assert result['ours_cached_vs_tfx'] == pytest.approx(
        variants['ours_cached']['examples_per_sec'] / variants['tfx']['examples_per_sec']
    )
    assert result['ours_vs_per_example'] == pytest.approx(
        variants['ours']['examples_per_sec'] / variants['per_example']['examples_per_sec']
    )
    assert result['ours_cached_vs_ours'] == pytest.approx(
        variants['ours_cached']['examples_per_sec'] / variants['ours']['examples_per_sec']
    )
    assert set(result['input_only_examples_per_sec']) == {'ours', 'per_example', 'tfx', 'naive'}
    assert all(v > 0 for v in result['input_only_examples_per_sec'].values())
    points = result['model_sweep']['points']
    assert [p['hidden_units'] for p in points] == [[16], [32, 16]]
    assert points[0]['parameters'] < points[1]['parameters']
    assert all(
        p['upper_bound_examples_per_sec'] > 0 and p['ours_examples_per_sec'] > 0 for p in points
    )
    png = (output / 'input_pipeline.png').read_bytes()
    assert png.startswith(b'\x89PNG\r\n\x1a\n') and len(png) > 5000
    assert not (output / 'data').exists()
    printed = capsys.readouterr().out
    assert '[bench input' in printed and 'ours / tfx = ' in printed
    assert 'same examples as the source: True' in printed
