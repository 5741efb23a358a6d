"""The Evaluator's slices as the configuration reference promises them: raw values in the results
and on the console whatever the transform outputs under the same name, an AUC that a one-class
slice leaves undefined (its gate not applied, with a note), `min_slice_size` dropping small
slices as TFMA drops them, and confidence intervals within each metric's range.

The executor case scores taxi-like rows with a model whose `transform_features` outputs
`payment_type` as a vocabulary id (as the taxi transform does): 'No Charge' rows are all
negative, 'Dispute' and 'Unknown' are out of the vocabulary (one id for both in the transform),
and on 'Dispute' the prediction is noise, so that slice fails a gate of 0.7.
"""

import math
import os

import apache_beam as beam
import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from apache_beam.testing import util as beam_util
from google.protobuf import json_format
from tensorflow_model_analysis.slicer import slicer_lib
from tfx.types import standard_artifacts

from asynctrain.components.evaluator import checks, executor, metrics, results, spec
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines import tfma_config
from asynctrain.pipelines.config import load_config
from asynctrain.pipelines.run_summary import RunSummary
from asynctrain.testing import evaluation_outputs
from tests.components.evaluator import evaluator_testdata as data

VOCABULARY = ('Cash', 'Credit Card', 'No Charge')
AUC = tfma.metrics.MetricKey('auc', example_weighted=False)
COUNT = tfma.metrics.MetricKey('example_count', example_weighted=False)


def _eval_config(tmp_path, evaluation):
    config = load_config(work_dir=str(tmp_path / 'work'), evaluation=evaluation)
    raw = tfma_config.eval_config(config, fc.ColumnLabel(data.LABEL, fc.BINARY))
    return tfma.utils.update_eval_config_with_defaults(raw)


def _taxi_like_rows(n=900, seed=5):
    """(serialized examples, payment type per row): 30 all-negative 'No Charge' rows, a tenth
    'Dispute' (scored on noise), a tenth 'Unknown', the rest Cash and Credit Card."""
    rng = np.random.default_rng(seed)
    rows, payments = [], []
    for i, (label, x) in enumerate(data.random_rows(fc.BINARY, n, seed=seed)):
        if label != 'Adelie' and payments.count('No Charge') < 30:
            payment = 'No Charge'
        elif i % 10 == 0:
            payment, x = 'Dispute', float(rng.uniform(0.0, 3.0))
        elif i % 10 == 1:
            payment = 'Unknown'
        else:
            payment = ('Cash', 'Credit Card')[i % 2]
        rows.append((label, x))
        payments.append(payment)
    return data.serialize(rows, payment_types=payments), payments


@pytest.mark.integration
def test_slices_are_raw_values_and_a_one_class_slice_does_not_block_the_model(tmp_path):
    records, payments = _taxi_like_rows()
    data.write_gzip_tfrecords(str(tmp_path / 'examples' / 'Split-eval' / 'data'), records, 2)
    examples = data.artifact(
        standard_artifacts.Examples, tmp_path / 'examples', split_names=['eval']
    )
    model = data.artifact(standard_artifacts.Model, tmp_path / 'model', 21)
    data.save_model(
        fc.BINARY, os.path.join(model.uri, 'Format-Serving'), payment_vocabulary=VOCABULARY
    )
    evaluation = data.artifact(standard_artifacts.ModelEvaluation, tmp_path / 'evaluation')
    blessing = data.artifact(standard_artifacts.ModelBlessing, tmp_path / 'blessing')
    os.makedirs(blessing.uri)
    settings = {'min_value': 0.6, 'slices': [['payment_type']], 'slice_min_value': 0.7}
    executor.Executor().Do(
        {spec.EXAMPLES_KEY: [examples], spec.MODEL_KEY: [model]},
        {spec.EVALUATION_KEY: [evaluation], spec.BLESSING_KEY: [blessing]},
        {
            spec.EVAL_CONFIG_KEY: json_format.MessageToJson(_eval_config(tmp_path, settings)),
            spec.BATCH_SIZE_KEY: 128,
        },
    )

    values = evaluation_outputs.values(evaluation.uri)
    # The raw values, each its own slice: not the transform's ids (0 for Cash), and the two
    # values out of the vocabulary apart, not merged in the one out-of-vocabulary id.
    by_payment = {k[0][1]: v for k, v in values.items() if k}
    assert {name: v[COUNT] for name, v in by_payment.items()} == {
        name: payments.count(name) for name in set(payments)
    }
    assert math.isnan(by_payment['No Charge'][AUC])  # all negative: undefined, not TFMA's 0
    assert by_payment['Dispute'][AUC] < 0.7 < min(by_payment[p][AUC] for p in VOCABULARY[:2])
    assert values[()][AUC] > 0.7
    # Only 'Dispute' fails; the gate on 'No Charge' is not applied, and says so.
    validation = tfma.load_validation_result(evaluation.uri)
    (failure,) = checks.failures(validation)
    assert failure.startswith('slice payment_type:Dispute: auc 0.')
    assert failure.endswith("threshold {'lowerBound': 0.7}")
    unapplied = checks.read_unapplied_checks(evaluation.uri)
    assert unapplied == [
        'slice payment_type:No Charge: auc undefined (one class in the slice), '
        "threshold {'lowerBound': 0.7} not applied"
    ]
    assert os.listdir(blessing.uri) == ['NOT_BLESSED']
    console = RunSummary(
        executed=['Evaluator'],
        cached=[],
        rows={},
        eval_metric=('auc', values[()][AUC]),
        blessed=False,
        training={},
        pushed_model=None,
        failed_checks=[failure],
        unapplied_checks=unapplied,
    ).format()
    assert f'failed check: {failure}' in console
    assert f'check not applied: {unapplied[0]}' in console


def _states(labels_by_slice, specs, weights=None):
    """{(slice key, 0): {'': State}} of hand-made (labels, predictions) per slice."""
    states = {}
    for slice_key, (labels, predictions) in labels_by_slice.items():
        accumulator = metrics.Accumulator(specs)
        accumulator.update(np.asarray(labels, float), np.asarray(predictions, float), weights)
        states[(slice_key, 0)] = {'': accumulator.state()}
    return states


OVERALL, CASH, FREE = (), (('payment_type', 'Cash'),), (('payment_type', 'No Charge'),)


def test_a_one_class_slice_is_undefined_and_its_gate_passes_but_not_the_whole_splits(tmp_path):
    eval_config = _eval_config(
        tmp_path, {'min_value': 0.6, 'slices': [['payment_type']], 'slice_min_value': 0.7}
    )
    specs = metrics.metric_specs(eval_config)
    states = _states(
        {
            OVERALL: ([1, 0, 1, 0, 0], [0.9, 0.2, 0.8, 0.1, 0.3]),
            CASH: ([1, 0, 1], [0.9, 0.2, 0.8]),
            FREE: ([0, 0], [0.1, 0.3]),
        },
        specs,
    )
    values = results.evaluate(specs, states, eval_config, 0)
    assert values[CASH][AUC] == pytest.approx(1.0) and math.isnan(values[FREE][AUC])
    validation = checks.validate(values, eval_config)
    assert validation.validation_ok and not checks.failures(validation)
    assert checks.unapplied_checks(values, eval_config) == [
        'slice payment_type:No Charge: auc undefined (one class in the slice), '
        "threshold {'lowerBound': 0.7} not applied"
    ]
    # The whole split with one class: nothing shows the model is any good, so it fails.
    one_class = _states({OVERALL: ([0, 0], [0.1, 0.3]), FREE: ([0, 0], [0.1, 0.3])}, specs)
    values = results.evaluate(specs, one_class, eval_config, 0)
    validation = checks.validate(values, eval_config)
    assert not validation.validation_ok
    assert checks.failures(validation) == [
        "slice Overall: auc undefined (one class), threshold {'lowerBound': 0.6}"
    ]


def _small_slices_config(tmp_path, size):
    eval_config = _eval_config(
        tmp_path,
        {'min_value': 0.5, 'slices': [['payment_type']], 'slice_min_value': 0.7, 'plots': True},
    )
    eval_config.options.min_slice_size.value = size
    return eval_config


def test_min_slice_size_drops_small_slices_as_tfma_does(tmp_path):
    eval_config = _small_slices_config(tmp_path, 4)
    specs = metrics.metric_specs(eval_config)
    # 'No Charge' has 3 examples and a bad AUC: dropped, it fails no gate; Cash has 4. (The
    # whole split's AUC is 7/12.)
    states = _states(
        {
            OVERALL: ([1, 0, 1, 0, 1, 0, 1], [0.9, 0.2, 0.8, 0.1, 0.1, 0.9, 0.6]),
            CASH: ([1, 0, 1, 0], [0.9, 0.2, 0.8, 0.1]),
            FREE: ([1, 0, 1], [0.1, 0.9, 0.6]),
        },
        specs,
    )
    values = results.evaluate(specs, states, eval_config, 0)
    counts = {OVERALL: 7, CASH: 4, FREE: 3}
    with beam.Pipeline() as pipeline:
        filtered = (
            pipeline | 'Values' >> beam.Create([(k, {COUNT: c}) for k, c in counts.items()])
        ) | 'FilterOutSlices' >> slicer_lib.FilterOutSlices(
            pipeline | 'Counts' >> beam.Create(list(counts.items())), 4
        )
        beam_util.assert_that(
            filtered,
            beam_util.equal_to(
                [
                    (OVERALL, {COUNT: 7}),
                    (CASH, {COUNT: 4}),
                    (FREE, {results.ERROR_METRIC: results.SMALL_SLICE_MESSAGE % 4}),
                ]
            ),
        )
    assert values[FREE] == {results.ERROR_METRIC: results.SMALL_SLICE_MESSAGE % 4}
    assert values[CASH][COUNT] == 4 and values[CASH][AUC] == pytest.approx(1.0)
    validation = checks.validate(values, eval_config)
    assert validation.validation_ok and not checks.failures(validation)
    assert checks.unapplied_checks(values, eval_config) == [
        'slice payment_type:No Charge: auc not evaluated (fewer than min_slice_size, 4, '
        "examples), threshold {'lowerBound': 0.7} not applied"
    ]
    # Written as TFMA writes a dropped slice: its note, no metric, no plot.
    output = str(tmp_path / 'evaluation')
    results.write_evaluation(output, eval_config, values, validation, {'': 'model'}, 'data')
    assert evaluation_outputs.values(output)[FREE] == {}
    assert not [key for key, _ in evaluation_outputs.plots(output) if key == FREE]
    assert checks.read_values(output)[FREE] == {
        results.ERROR_METRIC: results.SMALL_SLICE_MESSAGE % 4
    }
    assert checks.read_unapplied_checks(output) == checks.unapplied_checks(values, eval_config)


def test_the_whole_split_is_evaluated_and_gated_under_min_slice_size_as_tfma_does(tmp_path):
    # TFMA never drops the overall slice (slicer_lib.FilterOutSlices exempts it), so when every
    # slice is small the whole split's gate still decides: here its AUC, 7/12, is under 0.6.
    eval_config = _eval_config(
        tmp_path,
        {'min_value': 0.6, 'slices': [['payment_type']], 'slice_min_value': 0.7},
    )
    eval_config.options.min_slice_size.value = 8
    specs = metrics.metric_specs(eval_config)
    states = _states(
        {
            OVERALL: ([1, 0, 1, 0, 1, 0, 1], [0.9, 0.2, 0.8, 0.1, 0.1, 0.9, 0.6]),
            CASH: ([1, 0, 1, 0], [0.9, 0.2, 0.8, 0.1]),
        },
        specs,
    )
    values = results.evaluate(specs, states, eval_config, 0)
    counts = {OVERALL: 7, CASH: 4}
    with beam.Pipeline() as pipeline:
        filtered = (
            pipeline | 'Values' >> beam.Create([(k, {COUNT: c}) for k, c in counts.items()])
        ) | 'FilterOutSlices' >> slicer_lib.FilterOutSlices(
            pipeline | 'Counts' >> beam.Create(list(counts.items())), 8
        )
        beam_util.assert_that(
            filtered,
            beam_util.equal_to(
                [
                    (OVERALL, {COUNT: 7}),
                    (CASH, {results.ERROR_METRIC: results.SMALL_SLICE_MESSAGE % 8}),
                ]
            ),
        )
    assert values[OVERALL][COUNT] == 7
    assert values[OVERALL][AUC] == pytest.approx(7 / 12)
    assert values[CASH] == {results.ERROR_METRIC: results.SMALL_SLICE_MESSAGE % 8}

    validation = checks.validate(values, eval_config)

    assert not validation.validation_ok
    assert checks.failures(validation) == [
        "slice Overall: auc 0.583333, threshold {'lowerBound': 0.6}"
    ]
    assert checks.unapplied_checks(values, eval_config) == [
        'slice payment_type:Cash: auc not evaluated (fewer than min_slice_size, 8, '
        "examples), threshold {'lowerBound': 0.7} not applied"
    ]


def test_intervals_are_clipped_to_the_metrics_range(tmp_path):
    eval_config = _eval_config(tmp_path, {'min_value': 0.6, 'confidence_intervals': True})
    specs = metrics.metric_specs(eval_config)
    partitions = results.num_jackknife_partitions(eval_config)
    rng = np.random.default_rng(0)
    # 40 examples, well ranked but for one: the AUC is near 1 and its interval runs past it.
    labels = np.array([1] * 20 + [0] * 20)
    predictions = np.where(labels == 1, rng.uniform(0.6, 1.0, 40), rng.uniform(0.0, 0.4, 40))
    predictions[0] = 0.05
    states = {}
    for p in range(partitions):
        accumulator = metrics.Accumulator(specs)
        rows = np.arange(40) % partitions == p
        accumulator.update(labels[rows].astype(float), predictions[rows])
        states[((), p)] = {'': accumulator.state()}
    values = results.evaluate(specs, states, eval_config, partitions)
    _, lower, upper = tfma.utils.math_util.calculate_confidence_interval(values[()][AUC])
    assert upper > 1.0  # TFMA's t-interval
    output = str(tmp_path / 'evaluation')
    validation = checks.validate(values, eval_config)
    results.write_evaluation(output, eval_config, values, validation, {'': 'model'}, 'data')
    (interval,) = [
        v for (key, metric), v in evaluation_outputs.intervals(output).items() if metric == AUC
    ]
    clipped_lower, point, clipped_upper, _, _ = interval
    assert clipped_upper == 1.0 and clipped_lower == pytest.approx(lower)
    assert point == pytest.approx(values[()][AUC].unsampled_value)
    assert metrics.value_range(metrics.MetricSpec('AUC', 'auc'), difference=True) == (-1.0, 1.0)
