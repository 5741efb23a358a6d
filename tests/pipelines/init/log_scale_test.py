"""`asynctrain init` proposes `log: true` for a numeric column with a long right tail and no
negative value, with the skewness it measured; other columns keep a plain z-score."""

from __future__ import annotations

import numpy as np
import yaml

from asynctrain.components.example_gen import csv_dialect, csv_sample
from asynctrain.pipelines.init import log_scale, pipeline_draft, review_files


def _sample(tmp_path, header, rows):
    (tmp_path / 'data').mkdir(parents=True)
    text = header + '\n' + ''.join(','.join(map(str, row)) + '\n' for row in rows)
    (tmp_path / 'data' / 'part.csv').write_text(text)
    return csv_sample.read_sample(
        csv_sample.input_files(str(tmp_path / 'data')), csv_dialect.CsvDialect()
    )


def test_a_right_tailed_non_negative_column_is_z_scored_on_the_log_scale(tmp_path):
    rng = np.random.default_rng(0)
    # Counts spread over orders of magnitude (skewness about 6), the same shifted below 0, and
    # an even spread (skewness about 0).
    sales = np.round(rng.lognormal(3.0, 1.2, 400)).astype(int)
    shifted = sales - 5
    even = np.round(rng.uniform(0, 100, 400), 2)
    rows = [(s, t, e, i % 2) for i, (s, t, e) in enumerate(zip(sales, shifted, even))]
    sample = _sample(tmp_path, 'sales,shifted,even,y', rows)
    plans = {
        plan.name: log_scale.with_log_scale(sample, plan)
        for plan in pipeline_draft.plan_columns(sample, 'y')
    }
    skew = float(np.mean(((sales - sales.mean()) / sales.std()) ** 3))
    logged = np.log1p(sales.astype(float))
    logged_skew = float(np.mean(((logged - logged.mean()) / logged.std()) ** 3))
    assert skew > log_scale.MIN_SKEWNESS
    assert plans['sales'].options == {'fill': 'mean', 'log': True}
    assert plans['sales'].reason == (
        f'numeric, {len(set(sales))} values; a long right tail (skewness {skew:.2f} > 2.0, no '
        f'value below 0): z-score of log(1 + x), skewness {logged_skew:.2f}'
    )
    # A negative value: log(1 + x) is no longer the log of a magnitude, so no proposal.
    assert plans['shifted'].options == {'fill': 'mean'}
    assert plans['even'].options == {'fill': 'mean'}
    assert 'skewness' not in plans['even'].reason

    review_files.write_features(
        str(tmp_path / 'features.yaml'),
        pipeline_draft.plan_task(sample, 'y'),
        list(plans.values()),
    )
    written = yaml.safe_load((tmp_path / 'features.yaml').read_text())['features']
    assert written[0] == {'name': 'sales', 'transform': 'zscore', 'fill': 'mean', 'log': True}
    assert 'log' not in written[1]


def test_log_reason_needs_a_skewness_above_the_threshold_and_no_negative_value():
    # Three large values among many small ones.
    values = np.array([1.0] * 95 + [2.0, 3.0, 500.0, 800.0, 1000.0])
    assert log_scale.log_reason(values) == (
        'a long right tail (skewness 6.06 > 2.0, no value below 0): z-score of log(1 + x), '
        'skewness 5.48'
    )
    assert log_scale.log_reason(np.append(values, -1.0)) is None
    # Diamonds' `carat`-like tail, skewness about 1.1: left as it is (no gain measured).
    carat = np.random.default_rng(1).gamma(3.0, 0.27, 1000)
    assert log_scale.log_reason(carat) is None
    assert log_scale.log_reason(np.array([])) is None
