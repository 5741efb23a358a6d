"""`asynctrain init` proposes `log: true` for a numeric column with a long right tail of many
rows and no negative value, with the skewness it measured; other columns keep a plain z-score."""

from __future__ import annotations

import numpy as np
import yaml

from asynctrain.components.example_gen import csv_dialect, csv_sample
from asynctrain.pipelines.init import label_skew, log_scale, pipeline_draft, review_files


def _sample(tmp_path, header, rows):
    (tmp_path / 'data').mkdir(parents=True)
    text = header + '\n' + ''.join(','.join(map(str, row)) + '\n' for row in rows)
    (tmp_path / 'data' / 'part.csv').write_text(text)
    return csv_sample.read_sample(
        csv_sample.input_files(str(tmp_path / 'data')), csv_dialect.CsvDialect()
    )


def _bulk(values):
    low, high = np.percentile(values, [1, 99])
    return values[(values >= low) & (values <= high)]


def test_a_right_tailed_non_negative_column_is_z_scored_on_the_log_scale(tmp_path):
    rng = np.random.default_rng(0)
    # Counts spread over orders of magnitude, the same shifted below 0, and an even spread.
    sales = np.round(rng.lognormal(3.0, 1.2, 400)).astype(int)
    shifted = sales - 5
    even = np.round(rng.uniform(0, 100, 400), 2)
    rows = [(s, t, e, i % 2) for i, (s, t, e) in enumerate(zip(sales, shifted, even))]
    sample = _sample(tmp_path, 'sales,shifted,even,y', rows)
    plans = {
        plan.name: log_scale.with_log_scale(sample, plan)
        for plan in pipeline_draft.plan_columns(sample, 'y')
    }
    bulk = _bulk(sales.astype(float))
    skew = label_skew.skewness(bulk)
    assert skew > log_scale.MIN_SKEWNESS
    assert plans['sales'].options == {'fill': 'mean', 'log': True}
    assert plans['sales'].reason == (
        f'numeric, {len(set(sales))} values; a long right tail (skewness {skew:.2f} > 2.0 between '
        f'the 1st and 99th percentiles, no value below 0): z-score of log(1 + x), skewness '
        f'{label_skew.skewness(np.log1p(bulk)):.2f}'
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


def test_one_far_value_is_no_long_tail_and_a_mild_skew_stays_linear():
    rng = np.random.default_rng(1)
    # Diamonds' `y`: widths near 5.7 mm and one of 58.9 (skewness 2.43 over all its values).
    widths = np.append(rng.normal(5.7, 1.1, 999), 58.9)
    assert label_skew.skewness(widths) > log_scale.MIN_SKEWNESS
    assert log_scale.log_reason(widths) is None
    # Diamonds' `carat`-like tail, skewness about 1.1.
    assert log_scale.log_reason(rng.gamma(3.0, 0.27, 1000)) is None
    # Rain in mm, 0 on most days (seattle_weather's `precipitation`): a tail of many rows.
    rain = np.where(rng.random(1000) < 0.55, 0.0, np.round(rng.exponential(4.0, 1000) ** 1.3, 1))
    bulk = _bulk(rain)
    assert log_scale.log_reason(rain) == (
        f'a long right tail (skewness {label_skew.skewness(bulk):.2f} > 2.0 between the 1st and '
        f'99th percentiles, no value below 0): z-score of log(1 + x), skewness '
        f'{label_skew.skewness(np.log1p(bulk)):.2f}'
    )
    assert log_scale.log_reason(np.append(rain, -0.1)) is None
    assert log_scale.log_reason(np.array([])) is None
