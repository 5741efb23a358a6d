"""`asynctrain bench pipeline` at a tiny size: the report it writes, not the speed it measures."""

import json

import pytest
import tensorflow_transform as tft

from asynctrain import cli

pytestmark = pytest.mark.integration

# Both pipelines' components; stock's StatisticsGen reads the examples back, ours' ExampleGen
# computes the statistics as it writes them.
COMPONENTS = {
    'CsvExampleGen',
    'ImportSchemaGen',
    'ExampleValidator',
    'Transform',
    'Trainer',
    'Evaluator',
    'Pusher',
}


def test_bench_times_both_pipelines_component_by_component(tmp_path, capsys):
    output = tmp_path / 'bench'
    # Beam's own defaults, spelled out: the config passes none, so these are told apart from it.
    beam_args = ['--direct_num_workers=1', '--direct_running_mode=in_memory']
    # One feature per kind of transform: the bench's own workings, not the taxi preprocessing.
    features = 'fare,company,trip_start_hour,pickup_latitude'
    code = cli.main(
        ['bench', 'pipeline', '--rows', '300', '--train-steps', '20', '--output', str(output)]
        + ['--features', features, '--', *beam_args]
    )

    assert code == 0
    result = json.loads((output / 'result.json').read_text())
    assert (result['rows'], result['train_steps']) == (300, 20)
    assert result['features'] == features.split(',')
    # Both pipelines transformed those features and no others.
    for variant in ('stock', 'ours'):
        # The variant's work dir holds its pipeline's folder (`work_dir_layout`).
        root = output / variant / f'bench-{variant}' / 'pipeline_root'
        (graph,) = (root / 'Transform' / 'transform_graph').iterdir()
        feature_spec = tft.TFTransformOutput(str(graph)).transformed_feature_spec()
        assert set(feature_spec) == {*features.split(','), 'big_tipper'}, variant
    assert result['beam_args'] == beam_args
    for variant in ('stock', 'ours'):
        measured = result['variants'][variant]
        # Both pipelines ran with the Beam arguments given after `--`.
        assert measured['beam_pipeline_args'] == beam_args, variant
        assert COMPONENTS <= set(measured['component_seconds']), variant
        assert ('StatisticsGen' in measured['component_seconds']) == (variant == 'stock')
        assert all(measured['component_seconds'][c] > 0 for c in COMPONENTS), variant
        assert (
            measured['total_seconds']
            >= sum(measured['component_seconds'][c] for c in COMPONENTS) * 0.9
        )
        # Peak memory per component: every component measured, none above the run's peak, each
        # at least the interpreter with TensorFlow loaded.
        peaks = measured['component_peak_mb']
        assert COMPONENTS <= set(peaks), variant
        assert all(200 < peaks[c] <= measured['peak_mb'] for c in COMPONENTS), (variant, peaks)
        assert 0 < measured['baseline_mb'] <= measured['peak_mb']
        assert measured['component_order'][0] == 'CsvExampleGen'
    assert result['variants']['ours']['executed'] >= len(COMPONENTS)
    # Both models evaluated on the same split with the same gated metric, compared.
    stock_metric, ours_metric = (result['variants'][v]['eval_metric'] for v in ('stock', 'ours'))
    assert stock_metric[0] == ours_metric[0] == 'auc'
    assert 0.0 <= stock_metric[1] <= 1.0 and 0.0 <= ours_metric[1] <= 1.0
    assert result['eval_metric_difference'] == pytest.approx(ours_metric[1] - stock_metric[1])
    assert result['total_stock_over_ours'] == pytest.approx(
        result['variants']['stock']['total_seconds'] / result['variants']['ours']['total_seconds']
    )
    png = (output / 'pipeline.png').read_bytes()
    assert png.startswith(b'\x89PNG\r\n\x1a\n') and len(png) > 5000
    printed = capsys.readouterr().out
    assert 'stock [1/8] CsvExampleGen: done in' in printed
    assert f'ours: {result["variants"]["ours"]["total_seconds"]:.1f} s' in printed
    assert 'stock/ours' in printed and 'ours MiB' in printed
    assert f'eval auc: stock {stock_metric[1]:.4f}, ours {ours_metric[1]:.4f}' in printed
