"""The loss `asynctrain init` proposes for a regression label, from its skewness."""

from __future__ import annotations

import numpy as np
import pytest

from asynctrain.pipelines.init import label_skew


def test_skewness_is_zero_for_symmetric_values_and_positive_for_a_right_tail():
    assert label_skew.skewness(np.array([1.0, 2.0, 3.0, 4.0, 5.0])) == pytest.approx(0.0, abs=1e-12)
    # 1, 1, 1, 5: mean 2, std sqrt(3); third moment (3 * -1 + 27) / 4 = 6.
    assert label_skew.skewness(np.array([1.0, 1.0, 1.0, 5.0])) == pytest.approx(6 / 3**1.5)
    assert label_skew.skewness(np.array([2.0, 2.0])) == 0.0


def test_a_long_tailed_non_negative_label_is_trained_on_its_log():
    prices = np.exp(np.random.default_rng(0).normal(8.0, 1.0, 5000))  # log-normal, like prices
    plan = label_skew.plan_loss(prices)
    assert plan.loss == 'msle'
    assert plan.reason.startswith('a long right tail (skewness ')
    assert "predictions served in the label's units" in plan.reason


@pytest.mark.parametrize(
    'labels, reason',
    [
        (np.random.default_rng(1).normal(150.0, 40.0, 5000), 'at most 0.75: no log'),
        (np.exp(np.random.default_rng(2).normal(3.0, 1.0, 5000)) - 10.0, 'negative values'),
    ],
)
def test_a_symmetric_label_or_one_with_negative_values_keeps_mse(labels, reason):
    plan = label_skew.plan_loss(labels)
    assert plan.loss == 'mse'
    assert reason in plan.reason
