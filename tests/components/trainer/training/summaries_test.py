"""What the coordinator makes of closures' result vectors (`measurements.split`, `Totals`) and
the TensorBoard summaries it writes from them, read back as TensorBoard reads event files."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.trainer.training import gradient_statistics, measurements, summaries

LAYOUT = gradient_statistics.SampleLayout(('dense/kernel', 'emb/embeddings'), histograms=True)


def _result(worker, steps, staleness, norms, histogram):
    """A train function's result vector, as `loop` lays it out."""
    scalars = {
        'steps': steps,
        'loss_sum': 0.5 * steps,
        'staleness_sum': sum(staleness),
        'staleness_max': max(staleness),
        'input_wait_seconds': 0.1,
        'seconds': 1.0,
        'gradient_bytes_sum': 100 * steps,
        'dense_gradient_bytes_sum': 100 * steps,
        'worker': worker,
    }
    counts = np.bincount(
        np.minimum(staleness, measurements.STALENESS_BINS - 1),
        minlength=measurements.STALENESS_BINS,
    )
    global_norm = float(np.linalg.norm(norms))
    low, high, buckets = histogram
    sample = [global_norm, *norms]
    for _ in LAYOUT.variables:
        sample += [low, high, *buckets]
    return [float(scalars[m]) for m in measurements.MEASUREMENTS] + counts.tolist() + sample


def _histogram(counts):
    return (-1.0, 2.0, counts + [0] * (gradient_statistics.HISTOGRAM_BUCKETS - len(counts)))


def test_totals_count_steps_by_worker_and_staleness_and_average_the_sampled_norms():
    interval = measurements.Totals()
    interval.add(measurements.split(_result(0, 3, [0, 1, 40], [3.0, 4.0], _histogram([1])), LAYOUT))
    interval.add(measurements.split(_result(1, 2, [2, 2], [1.0, 0.0], _histogram([2])), LAYOUT))
    assert interval.worker_steps == {0: 3, 1: 2}
    # 40 is past the last bin: counted in it.
    expected = [1, 1, 2] + [0] * (measurements.STALENESS_BINS - 4) + [1]
    assert interval.staleness_counts == expected
    assert interval.staleness_mean == pytest.approx(45 / 5)
    assert interval.gradient_norm_means == {
        'global': pytest.approx((5.0 + 1.0) / 2),
        'dense/kernel': 2.0,
        'emb/embeddings': 2.0,
    }
    # The latest sample's histograms.
    assert interval.gradient_histograms['dense/kernel'][2][:2] == [2, 0]

    run = measurements.Totals()
    run.merge(interval)
    run.merge(interval)
    assert run.worker_steps == {0: 6, 1: 4}
    assert run.staleness_counts == [2 * c for c in expected]
    assert run.gradient_norm_means == interval.gradient_norm_means


def test_a_result_of_the_wrong_length_is_refused():
    vector = _result(0, 1, [0], [1.0, 1.0], _histogram([1]))
    with pytest.raises(ValueError, match=f'expected {len(vector)} values, got {len(vector) - 1}'):
        measurements.split(vector[:-1], LAYOUT)


def _events(directory):
    values = {}
    for path in glob.glob(os.path.join(directory, 'events.out.*')):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                values[(event.step, value.tag)] = value
    return values


def test_written_summaries_hold_each_workers_rate_the_staleness_and_gradient_histograms(tmp_path):
    totals = measurements.Totals()
    totals.add(
        measurements.split(_result(0, 3, [0, 1, 1], [3.0, 4.0], _histogram([1, 0, 5])), LAYOUT)
    )
    totals.add(measurements.split(_result(3, 1, [2], [1.0, 0.0], _histogram([1, 0, 5])), LAYOUT))
    writer = tf.summary.create_file_writer(str(tmp_path))
    summaries.write_interval(writer, 7, totals, examples_per_sec=123.0, interval_seconds=2.0)
    writer.flush()
    events = _events(str(tmp_path))

    def scalar(tag):
        return float(tf.make_ndarray(events[(7, tag)].tensor))

    assert scalar('train/worker_steps_per_sec/worker_0') == 1.5
    assert scalar('train/worker_steps_per_sec/worker_3') == 0.5
    assert scalar('train/examples_per_sec') == 123.0
    assert scalar('train/gradient_norm/global') == pytest.approx(3.0)
    assert scalar('train/gradient_norm/dense/kernel') == 2.0

    staleness = events[(7, 'train/staleness')]
    assert staleness.metadata.plugin_data.plugin_name == 'histograms'
    buckets = tf.make_ndarray(staleness.tensor)
    assert buckets.shape == (measurements.STALENESS_BINS, 3)
    assert buckets[:3].tolist() == [[0, 1, 1], [1, 2, 2], [2, 3, 1]]

    gradients = tf.make_ndarray(events[(7, 'gradients/emb/embeddings')].tensor)
    width = 3.0 / gradient_statistics.HISTOGRAM_BUCKETS
    assert gradients.shape == (gradient_statistics.HISTOGRAM_BUCKETS, 3)
    assert gradients[0].tolist() == pytest.approx([-1.0, -1.0 + width, 1])
    assert gradients[2].tolist() == pytest.approx([-1.0 + 2 * width, -1.0 + 3 * width, 5])
    assert gradients[-1][1] == 2.0


def test_edges_of_a_zero_width_gradient_range_span_one_unit():
    edges = summaries.gradient_edges(0.5, 0.5, 4)
    assert edges == [0.5, 0.75, 1.0, 1.25, 1.5]
    with pytest.raises(ValueError, match='3 buckets need 4 edges'):
        summaries.write_histogram('x', [0.0, 1.0], [1, 2, 3], '')
