"""How `asynctrain init` trains a regression label, from its skewness."""

from __future__ import annotations

import numpy as np
import pytest

from asynctrain.pipelines.init import label_skew


def test_skewness_is_zero_for_symmetric_values_and_positive_for_a_right_tail():
    assert label_skew.skewness(np.array([1.0, 2.0, 3.0, 4.0, 5.0])) == pytest.approx(0, abs=1e-12)
    # 1, 1, 1, 5: mean 2, std sqrt(3); third moment (3 * -1 + 27) / 4 = 6.
    assert label_skew.skewness(np.array([1.0, 1.0, 1.0, 5.0])) == pytest.approx(6 / 3**1.5)
    assert label_skew.skewness(np.array([2.0, 2.0])) == 0.0


def test_a_non_negative_label_with_a_long_right_tail_is_found():
    waits = np.random.default_rng(0).exponential(1000.0, 5000)
    plan = label_skew.plan_skew(waits)
    assert plan.long_tail
    assert 1.7 < plan.skewness < 2.3  # an exponential distribution's skewness is 2
    assert plan.reason == f'a long right tail (skewness {plan.skewness:.2f} > 0.75)'


@pytest.mark.parametrize(
    'labels',
    [
        np.random.default_rng(1).normal(150.0, 40.0, 5000),  # symmetric
        np.exp(np.random.default_rng(2).normal(3.0, 1.0, 5000)) - 10.0,  # a tail, but negatives
    ],
)
def test_a_symmetric_label_or_one_with_negative_values_has_no_long_tail(labels):
    plan = label_skew.plan_skew(labels)
    assert not plan.long_tail
    assert plan.reason == f'skewness {plan.skewness:.2f}'


def test_a_long_tailed_regression_label_trains_longer(tmp_path):
    from asynctrain.components.example_gen import csv_dialect, csv_sample
    from asynctrain.pipelines.init import training_draft

    (tmp_path / 'data').mkdir()
    (tmp_path / 'data' / 'rows.csv').write_text(
        'x,y\n' + ''.join(f'{i},{i * 2}\n' for i in range(30_000))
    )
    sample = csv_sample.read_sample(
        csv_sample.input_files(str(tmp_path / 'data')), csv_dialect.CsvDialect()
    )
    # 20,000 training rows in batches of 64: 20 passes are 6,250 steps (no longer cut to 1,500);
    # a long tail gets 40 passes, 12,500 steps, under the cap of 15,000.
    assert training_draft.plan_training(sample, 'regression').train_steps == 6250
    long = training_draft.plan_training(sample, 'regression', long_tail=True)
    assert long.train_steps == 12_500
    assert long.reason.endswith('(bounded to 100-15000 steps; the label has a long right tail)')
    # A class label has no tail: the flag changes nothing (40 passes).
    assert training_draft.plan_training(sample, 'multiclass', long_tail=True) == (
        training_draft.plan_training(sample, 'multiclass')
    )
