"""`asynctrain bench evaluator` end to end at a small size: a model trained by the pipeline with
the bench's slices, then ours and stock TFMA on the same examples. The bench's own comparison
(`evaluation_outputs.differences`) must find nothing, its result must hold what the docs table
reads, and a planted disagreement must be found."""

import json
import shutil

import pytest
import tensorflow as tf

from asynctrain import cli
from asynctrain.testing import evaluation_outputs

pytestmark = pytest.mark.integration


def test_ours_and_stock_tfma_agree_on_every_slice_and_plot(tmp_path):
    output = tmp_path / 'bench'
    status = cli.main(
        [
            'bench',
            'evaluator',
            '--rows',
            '600',
            '--train-rows',
            '1000',
            '--train-steps',
            '20',
            '--output',
            str(output),
        ]
    )

    assert status == 0
    result = json.loads((output / 'result.json').read_text())
    assert result['agree'] is True
    (run,) = result['runs']
    assert run['rows'] == 600 and run['differences'] == 0
    # Every payment type, hour and (payment type, day) pair present in 600 rows.
    assert run['slices_evaluated'] > 30
    for variant in ('stock', 'ours'):
        assert run[variant]['seconds'] > 0 and run[variant]['peak_rss_mb'] > 100
    assert run['speedup'] == pytest.approx(
        run['stock']['seconds'] / run['ours']['seconds'], abs=0.01
    )
    assert (output / 'evaluator.png').stat().st_size > 10_000

    # The comparison does see a difference: one of ours' values moved by 0.5.
    evaluations = output / 'evaluations' / 'rows-600'
    planted = tmp_path / 'planted'
    shutil.copytree(evaluations / 'ours', planted)
    (metrics_file,) = planted.glob('metrics-*')
    records = list(evaluation_outputs.tfma_writer.load_and_deserialize_metrics(str(planted)))
    records[0].metric_keys_and_values[0].value.double_value.value += 0.5
    with tf.io.TFRecordWriter(str(metrics_file)) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    found = evaluation_outputs.differences(str(evaluations / 'stock'), str(planted))
    assert len(found) == 1 and 'against' in found[0]
