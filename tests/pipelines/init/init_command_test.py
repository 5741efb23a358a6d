"""`asynctrain init`: the decisions on small hand-made CSVs, the files it writes, its errors."""

from __future__ import annotations

import dataclasses
import random
import re

import pyarrow as pa
import pytest
import yaml

from asynctrain.components.example_gen import csv_dialect, csv_sample
from asynctrain.components.shared import feature_types
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.components.shared.yaml_config import ConfigError
from asynctrain.components.transform import datetime_formats
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines.init import init_command, pipeline_draft, training_draft
from tests.pipelines.init.init_args import init_args


def _write_csv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [','.join(header)] + [','.join(str(v) for v in row) for row in rows]
    path.write_text('\n'.join(lines) + '\n')
    return path


def _sample(tmp_path, header, rows, null_markers=()):
    _write_csv(tmp_path / 'data' / 'part.csv', header, rows)
    files = csv_sample.input_files(str(tmp_path / 'data'))
    return csv_sample.read_sample(files, csv_dialect.CsvDialect(null_markers=null_markers))


def _rows(n=60, seed=0):
    rng = random.Random(seed)
    return [
        (
            f'id-{i:04d}',  # unique: an id
            'same',  # constant
            f'user{rng.randrange(n)}',  # high-cardinality string, some repeated
            rng.choice(['red', 'green', 'blue']),  # few-valued string
            rng.randrange(3),  # int with 3 values
            round(rng.gauss(10, 2), 3),  # float
            '' if i % 10 == 0 else rng.randrange(1000),  # numeric int with missing cells
        )
        for i in range(n)
    ]


HEADER = ('trip id', 'country', 'user', 'color', 'level', 'weight (kg)', 'count')


def test_columns_get_the_transform_their_values_call_for(tmp_path):
    sample = _sample(tmp_path, HEADER, _rows())
    plans = {plan.name: plan for plan in pipeline_draft.plan_columns(sample, label='weight (kg)')}
    assert 'weight (kg)' not in plans
    assert plans['trip id'].transform is None and 'an id' in plans['trip id'].reason
    assert plans['country'].transform is None and 'constant' in plans['country'].reason
    assert plans['user'].transform == 'hash'
    assert plans['user'].options['num_buckets'] >= 2 * 50
    assert plans['color'].transform == 'vocabulary'
    assert plans['color'].options == {'top_k': 3, 'oov_buckets': 1}
    assert plans['level'].transform == 'vocabulary'  # an int with 3 values is categorical
    assert plans['count'].transform == 'zscore'
    assert '6 missing' in plans['count'].reason


def test_the_task_follows_the_label(tmp_path):
    sample = _sample(tmp_path, HEADER, _rows())
    level = pipeline_draft.plan_task(sample, 'level')
    assert level.task == 'multiclass'
    assert sorted(value for value, _ in level.classes) == [0, 1, 2]
    assert sum(count for _, count in level.classes) == 60
    assert pipeline_draft.plan_task(sample, 'weight (kg)').task == 'regression'
    assert pipeline_draft.plan_task(sample, 'color', task='multiclass').task == 'multiclass'


def test_a_two_valued_label_is_binary_with_the_rarer_class_positive(tmp_path):
    rows = [(i, 'yes' if i % 4 == 0 else 'no', i * 0.5) for i in range(40)]
    sample = _sample(tmp_path, ('n', 'answer', 'x'), rows)
    plan = pipeline_draft.plan_task(sample, 'answer')
    assert (plan.task, plan.positive, plan.classes) == ('binary', 'yes', (('no', 30), ('yes', 10)))
    assert pipeline_draft.plan_task(sample, 'answer', positive='no').positive == 'no'
    with pytest.raises(ConfigError, match="--positive: 'maybe' is not a value of 'answer'"):
        pipeline_draft.plan_task(sample, 'answer', positive='maybe')


def test_thresholds_are_a_stated_margin_over_the_trivial_model(tmp_path):
    rows = [(i, ['a', 'a', 'b', 'c'][i % 4], float(i % 5)) for i in range(40)]
    sample = _sample(tmp_path, ('n', 'kind', 'y'), rows)
    multiclass = pipeline_draft.plan_threshold(sample, pipeline_draft.plan_task(sample, 'kind'))
    assert (multiclass.metric, multiclass.bound, multiclass.baseline) == (
        'Accuracy',
        'min_value',
        0.5,
    )
    assert multiclass.value == pytest.approx(0.5 + 0.2 * 0.5)
    regression = pipeline_draft.plan_threshold(sample, pipeline_draft.plan_task(sample, 'y'))
    assert (regression.metric, regression.bound) == ('RMSE', 'max_value')
    assert regression.baseline == pytest.approx(2**0.5)  # std of 0..4, equally often
    assert regression.value == pytest.approx(0.8 * 2**0.5, rel=1e-3)


@pytest.mark.parametrize(
    'label, rows, message',
    [
        ('colour', None, "--label: no column 'colour' in .*columns: \\['trip id', 'country'"),
        ('empty', [(1, ''), (2, '')], "--label: column 'empty' is empty"),
    ],
)
def test_label_errors_say_what_is_wrong(tmp_path, label, rows, message):
    if rows is None:
        sample = _sample(tmp_path, HEADER, _rows())
    else:
        sample = _sample(tmp_path, ('n', 'empty'), rows)
    with pytest.raises(ConfigError, match=message):
        pipeline_draft.plan_task(sample, label)


def test_a_file_that_is_not_csv_is_named(tmp_path):
    data = tmp_path / 'data'
    data.mkdir()
    (data / 'model.bin').write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ConfigError, match=r'model\.bin: not a CSV file'):
        csv_sample.read_sample(csv_sample.input_files(str(data)), csv_dialect.CsvDialect())


def test_a_large_input_is_sampled_from_end_to_end_and_says_so(tmp_path):
    sample_rows = _rows(n=200)
    _write_csv(tmp_path / 'data' / 'a.csv', HEADER, sample_rows)
    files = csv_sample.input_files(str(tmp_path / 'data'))
    sample = csv_sample.read_sample(files, csv_dialect.CsvDialect(), max_rows=50)
    assert (sample.rows, sample.complete) == (50, False)
    ids = sample.columns['trip id'].to_pylist()
    # Rows evenly spaced over the file, in file order: the first and the last among them.
    assert ids[0] == 'id-0000' and ids[-1] == 'id-0199'
    assert ids == sorted(ids) and len(set(ids)) == 50


STORES = [f'store-{i:02d}' for i in range(12)]


def _sorted_and_shuffled(tmp_path, suffix=''):
    """30,000 rows (about 1 MB) sorted by `store`, and the same rows shuffled, each the one file
    of its folder (gzipped with `suffix` '.gz')."""
    import gzip

    rng = random.Random(3)
    rows = [
        (store, rng.choice(['cash', 'card']), round(rng.gauss(20, 4), 2), rng.randrange(5))
        for store in STORES
        for _ in range(2500)
    ]
    shuffled = list(rows)
    rng.shuffle(shuffled)
    header = ('store', 'payment', 'amount', 'items')
    dirs = []
    for name, order in (('sorted', rows), ('shuffled', shuffled)):
        path = _write_csv(tmp_path / name / 'rows.csv', header, order)
        if suffix:
            path.with_name('rows.csv.gz').write_bytes(gzip.compress(path.read_bytes()))
            path.unlink()
        dirs.append(str(tmp_path / name))
    return dirs


@pytest.mark.parametrize('suffix', ['', '.gz'])
def test_a_file_sorted_by_a_column_gives_the_proposal_of_the_same_rows_shuffled(tmp_path, suffix):
    from asynctrain.pipelines.init import drift_draft, review_files

    proposals = []
    for data in _sorted_and_shuffled(tmp_path, suffix):
        sample = csv_sample.read_sample(
            csv_sample.input_files(data), csv_dialect.CsvDialect(), max_rows=3000
        )
        assert (sample.rows, sample.complete) == (3000, False)
        assert sample.chunks > 20  # read from many places, not one block
        stores = sample.columns['store'].value_counts().to_pylist()
        # Every store, each about a twelfth of the sample (the head would hold one store).
        assert sorted(c['values'] for c in stores) == STORES
        assert all(150 <= c['counts'] <= 350 for c in stores), stores
        plans = pipeline_draft.plan_columns(sample, 'amount')
        drift = drift_draft.plan_drift(sample, review_files.infer_schema(sample), 'amount')
        proposals.append(
            (
                [(plan.name, plan.transform, plan.options) for plan in plans],
                pipeline_draft.plan_task(sample, 'amount').task,
                set(drift.features),
            )
        )
        if data.endswith('sorted'):
            assert "sorted or grouped by 'store'" in drift.reason
    assert proposals[0] == proposals[1]
    assert ('store', 'vocabulary', {'top_k': 12, 'oov_buckets': 1}) in proposals[0][0]


@pytest.mark.integration
def test_init_writes_reviewable_files_that_the_pipeline_config_accepts(tmp_path, capsys):
    from asynctrain.pipelines.config import load_config

    rows = [(*row[:5], row[5], row[6] if row[6] != '' else 'NA') for row in _rows(80)]
    _write_csv(tmp_path / 'data' / 'part.csv', HEADER, rows)
    spec = tmp_path / 'spec'
    args = init_args(tmp_path / 'data', 'level', spec, null_marker=['NA'])
    assert init_command.run(args) == 0
    printed = capsys.readouterr().out
    assert "label 'level': multiclass" in printed
    assert f'asynctrain run --config {spec}/config.yaml' in printed
    config = load_config(str(spec / 'config.yaml'))
    assert config.example_gen.null_markers == ('NA',)
    assert config.evaluation.metric == 'Accuracy'
    assert config.evaluation.baseline == 'latest_blessed'
    # 80 rows: batches of 32, 40 passes over ~53 training rows is 67 steps, raised to 100.
    assert (config.trainer.training.batch_size, config.trainer.training.train_steps) == (32, 100)
    assert config.evaluation.max_regression == pytest.approx(
        config.evaluation.min_value / 10, abs=0.05
    )
    # The drift section: the defaults, 80 rows being too few to measure how the data varies.
    assert (config.drift.enabled, config.drift.action, config.drift.features) == (True, 'stop', {})
    assert '80 rows: too few to measure' in (spec / 'config.yaml').read_text()
    assert '  drift: the default thresholds (80 rows: too few' in printed
    features = yaml.safe_load((spec / 'features.yaml').read_text())
    assert features['label'] == {'column': 'level', 'task': 'multiclass'}
    names = [f['name'] for f in features['features']]
    assert names == ['user', 'color', 'weight (kg)', 'count']
    schema = feature_types.load_schema(str(spec / 'schema.pbtxt'))
    assert [f.name for f in schema.feature] == list(HEADER)
    types = {f.name: f.type for f in schema.feature}
    assert (types['count'], types['weight (kg)'], types['user']) == (2, 3, 1)  # INT FLOAT BYTES


def test_a_column_of_dates_is_proposed_as_calendar_parts_with_its_resolution(tmp_path):
    rows = [
        (
            f'2014-{1 + i % 12:02d}-{1 + i % 28:02d}',  # dates, not ids
            f'2014-03-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00',  # datetimes
            f'2012/01/{1 + i % 28:02d}' if i % 40 else 'unknown',  # 1 in 40 does not parse
            f'{i:05d}-x',  # an id that is not a date
            1_400_000_000 + 86_400 * i,  # epoch seconds, named as a time, midnight + a fraction
            1_400_000_000 + 86_400 * i,  # the same numbers under a name that is not a time
            i % 2,
        )
        for i in range(60)
    ]
    header = ('day', 'seen', 'slashed', 'code', 'created_at', 'amount', 'y')
    sample = _sample(tmp_path, header, rows)
    plans = {plan.name: plan for plan in pipeline_draft.plan_columns(sample, label='y')}

    # Every date is in 2014: the year is a constant part, left out with its value.
    varying = [part for part in datetime_formats.DATE_PARTS if part != 'year']
    assert plans['day'].transform == 'datetime'
    assert plans['day'].options == {'parts': varying}
    assert plans['day'].reason.startswith('dates from 2014-01-01 to 2014-12-24: calendar parts')
    assert plans['day'].reason.endswith('; left out, constant: year (2014)')
    # March 2014 only, at every hour and minute.
    assert plans['seen'].options == {'parts': [*varying[1:], *datetime_formats.TIME_PARTS]}
    assert 'with the time of day' in plans['seen'].reason
    assert plans['seen'].reason.endswith('; left out, constant: year (2014), month (3)')
    assert plans['slashed'].transform == 'datetime'
    assert plans['slashed'].reason.endswith(
        ', 2 cells that do not parse become missing; left out, constant: year (2012), month (1)'
    )
    assert plans['code'].transform is None and 'an id' in plans['code'].reason
    assert plans['created_at'].transform == 'datetime'
    # 1,400,000,000 s is 2014-05-13 16:53:20 UTC: a time of day, in seconds, the same every day:
    # its hour and minute are constant parts.
    assert plans['created_at'].options == {'parts': varying, 'unit': 'seconds'}
    assert plans['created_at'].reason.endswith(
        'calendar parts; left out, constant: year (2014), hour (16), minute (53)'
    )
    # Not named as a time: the same numbers are what they were before, an id.
    assert plans['amount'].transform is None and 'an id' in plans['amount'].reason


def test_a_text_column_with_too_many_values_that_are_not_dates_is_not_dates(tmp_path):
    rows = [('2014-03-05' if i % 10 else 'soon', i % 3, i) for i in range(60)]
    sample = _sample(tmp_path, ('when', 'k', 'y'), rows)
    plans = {plan.name: plan for plan in pipeline_draft.plan_columns(sample, label='y')}
    assert plans['when'].transform == 'vocabulary'  # 6 'soon' in 60: 90% parse, below 95%


def test_max_bad_fraction_has_a_floor_when_the_sample_has_no_bad_row(tmp_path):
    clean = pipeline_draft.plan_bad_rows(_sample(tmp_path / 'a', HEADER, _rows()), 'color')
    assert clean.max_bad_fraction == pipeline_draft.MIN_BAD_FRACTION == 0.01
    assert 'every row of the sample is readable and has its label' in clean.reason
    assert 'at least 1%' in clean.reason
    rows = [(i, '' if i % 10 == 0 else 'a', i) for i in range(100)]  # 10 of 100 unlabeled
    some = pipeline_draft.plan_bad_rows(_sample(tmp_path / 'b', ('n', 'k', 'y'), rows), 'k')
    assert some.max_bad_fraction == 0.2
    assert "10 rows without 'k'" in some.reason


@pytest.mark.integration
def test_init_shows_only_its_own_lines_and_logs_tensorflows(tmp_path):
    import gzip
    import subprocess
    import sys

    from tests.repository import REPO_ROOT

    (tmp_path / 'data').mkdir()
    text = '\n'.join([','.join(HEADER)] + [','.join(map(str, r)) for r in _rows()]) + '\n'
    (tmp_path / 'data' / 'part.csv.gz').write_bytes(gzip.compress(text.encode()))
    result = subprocess.run(
        [
            sys.executable,
            '-m',
            'asynctrain',
            'init',
            '--data',
            str(tmp_path / 'data'),
            '--label',
            'color',
            '--output',
            str(tmp_path / 'spec'),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ''
    assert 'Unable to register' not in result.stdout
    assert result.stdout.startswith('asynctrain init: read all rows of 1 file(s)\n')
    assert "label 'color': multiclass" in result.stdout


@pytest.mark.integration
@pytest.mark.parametrize(
    'name, label, transforms',
    [
        ('seattle_weather', 'weather', {'date': 'datetime', 'precipitation': 'zscore'}),
        ('wine', 'cultivar', {'alcohol': 'zscore', 'proline': 'zscore'}),
        # Written with `NA` and sorted by city; and a long-tailed price, gzipped.
        ('txhousing', 'median', {'city': 'vocabulary', 'sales': 'zscore'}),
        ('diamonds', 'price', {'carat': 'zscore', 'clarity': 'vocabulary'}),
    ],
)
def test_the_committed_date_and_gzip_datasets_are_what_init_proposes(
    tmp_path, capsys, monkeypatch, name, label, transforms
):
    from asynctrain.pipelines import dataset
    from asynctrain.pipelines.config import load_config
    from tests.repository import REPO_ROOT

    committed = REPO_ROOT / 'datasets' / name
    args = init_args(committed / 'data', label, tmp_path / 'spec')
    assert init_command.run(args) == 0
    capsys.readouterr()
    for spec_file in ('schema.pbtxt', 'features.yaml'):
        assert (tmp_path / 'spec' / spec_file).read_text() == (committed / spec_file).read_text()
    # The committed config's values are init's, but for the names of the folders.
    proposed = yaml.safe_load((tmp_path / 'spec' / 'config.yaml').read_text())
    written = yaml.safe_load((committed / 'config.yaml').read_text())
    for key in set(written) - {'pipeline_name', 'data', 'dataset'}:
        assert written[key] == proposed[key], key
    monkeypatch.chdir(REPO_ROOT)
    features = dataset.load(load_config(str(committed / 'config.yaml'))).features
    for column, transform in transforms.items():
        assert features.feature(column).transform == transform


def test_a_class_label_trains_40_passes_and_a_regression_label_20(tmp_path):
    sample = _sample(tmp_path, HEADER, _rows(n=960))  # 640 training rows, batches of 32
    assert training_draft.plan_training(sample, 'multiclass').train_steps == 800
    assert training_draft.plan_training(sample, 'binary').train_steps == 800
    regression = training_draft.plan_training(sample, 'regression')
    assert regression.train_steps == 400
    assert regression.reason.startswith('400 steps of 32: about 20 passes over the ~640 training')


def _rows_sample(rows, complete=True):
    """A sample of `rows` rows: all the step budget reads of one."""
    return csv_sample.CsvSample(('part.csv',), {}, {}, rows, 0, complete)


@pytest.mark.parametrize(
    'rows, task, batch_size, steps',
    [
        (150, 'multiclass', 32, 125),  # 100 training rows, 40 passes
        (60, 'regression', 32, 100),  # 40 training rows: 25 steps, raised to the floor of 100
        (26_115, 'regression', 64, 5_441),  # the 17,410 training rows: 20 passes
        (15_002, 'regression', 64, 3_126),  # the bundled taxi data's size
        (15_002, 'binary', 64, 6_251),
        (100_000, 'binary', 256, 10_417),  # a full default sample, under the cap
    ],
)
def test_the_step_budget_is_passes_over_the_training_rows(rows, task, batch_size, steps):
    plan = training_draft.plan_training(_rows_sample(rows), task)
    assert (plan.batch_size, plan.train_steps) == (batch_size, steps)
    passes = training_draft.EPOCHS[task]
    if steps > training_draft.MIN_STEPS:
        assert f'about {passes} passes over the ~{rows * 2 // 3:,} training rows' in plan.reason


def test_only_an_input_past_the_cap_trains_fewer_passes_and_says_so():
    # 240,000 training rows (a sample of --max-rows 360000), 40 passes of 256: 37,500 steps,
    # cut to the cap.
    plan = training_draft.plan_training(_rows_sample(360_000, complete=False), 'binary')
    assert plan.train_steps == training_draft.MAX_STEPS == 15_000
    assert plan.reason.startswith(
        '15000 steps of 256: about 16 passes (not 40: 37,500 steps are over the cap) over the '
        '~240,000 training rows of the 360,000 sampled rows'
    )


def _drift_sample(tmp_path, rows):
    sample = _sample(tmp_path, ('region', 'amount', 'label'), rows)
    from asynctrain.pipelines.init import review_files

    return sample, review_files.infer_schema(sample)


def test_init_proposes_a_threshold_for_a_feature_that_moves_over_the_file(tmp_path):
    from asynctrain.pipelines.init import drift_draft

    rng = random.Random(0)
    # `region` shifts from the first half of the file to the second (north 80% -> 20%), as a
    # feature that moves from day to day; `amount` and the label do not move.
    rows = [
        (
            'north' if rng.random() < (0.8 if i < 300 else 0.2) else 'south',
            round(rng.gauss(50, 5), 2),
            rng.choice(['a', 'b']),
        )
        for i in range(600)
    ]
    sample, schema = _drift_sample(tmp_path, rows)
    plan = drift_draft.plan_drift(sample, schema, 'label')

    assert set(plan.features) == {'region'}
    threshold, reason = plan.features['region']
    measured = float(reason.split('varies by ')[1].split(' ')[0])
    # The file-order halves differ by about 0.6 in north's share: twice that, capped at 0.9.
    assert 0.5 < measured < 0.7
    assert threshold == drift_draft.MAX_PROPOSED
    assert 'first and second halves of 600 sampled rows' in plan.reason


def test_the_drift_line_counts_the_rows_read_when_a_half_leaves_one_out(tmp_path):
    from asynctrain.pipelines.init import drift_draft

    rng = random.Random(0)
    rows = [(rng.choice(['n', 's']), rng.random(), rng.choice(['a', 'b'])) for _ in range(601)]
    sample, schema = _drift_sample(tmp_path, rows)
    plan = drift_draft.plan_drift(sample, schema, 'label')
    # Halves of 300 rows each: the count said is the 601 read, not the 600 compared.
    assert plan.reason == (
        'measured between the first and second halves of 601 sampled rows, and random halves '
        '(4 splits; one row in neither half)'
    )
    few = drift_draft.plan_drift(_drift_sample(tmp_path / 'one', rows[:1])[0], schema, 'label')
    assert few.reason == '1 row: too few to measure how the data varies; the defaults apply'


def test_init_measures_random_halves_only_when_the_rows_are_ordered_by_the_label(tmp_path):
    from asynctrain.pipelines.init import drift_draft

    rng = random.Random(1)
    # Sorted by the label: file order says nothing of days, so `region`, which follows the
    # label, is judged on random halves (where it does not move) and keeps the default.
    rows = [
        ('north' if rng.random() < (0.8 if label == 'a' else 0.2) else 'south', 50.0, label)
        for label in ('a', 'b')
        for _ in range(300)
    ]
    sample, schema = _drift_sample(tmp_path, rows)
    plan = drift_draft.plan_drift(sample, schema, 'label')

    assert 'the rows are ordered' in plan.reason
    assert plan.features == {}


def test_init_keeps_the_defaults_on_too_few_rows(tmp_path):
    from asynctrain.pipelines.init import drift_draft

    rows = [('north', 1.0, 'a'), ('south', 2.0, 'b')] * 50
    sample, schema = _drift_sample(tmp_path, rows)
    plan = drift_draft.plan_drift(sample, schema, 'label')

    assert plan.features == {}
    assert plan.reason == '100 rows: too few to measure how the data varies; the defaults apply'


def test_drift_thresholds_are_those_of_the_same_rows_in_any_order(tmp_path):
    from asynctrain.pipelines.init import drift_draft

    rng = random.Random(2)
    # 400 rows: random halves differ enough that some features get thresholds of their own.
    # Sorted by `region`, file order says nothing of days and only random halves count.
    rows = [
        (rng.choice(['north', 'south', 'east']), f'v{rng.randrange(40)}', rng.choice('ab'))
        for _ in range(400)
    ]
    plans = []
    for name, order in (
        ('as-is', rows),
        ('shuffled', rng.sample(rows, len(rows))),
        ('sorted', sorted(rows)),
    ):
        sample, schema = _drift_sample(tmp_path / name, order)
        plans.append(drift_draft.plan_drift(sample, schema, 'label'))
    assert plans[0].features == plans[1].features == plans[2].features
    assert plans[0].features  # thresholds to compare, not three empty proposals
    assert "sorted or grouped by 'region'" in plans[2].reason
    assert 'sorted or grouped' not in plans[0].reason


def test_a_column_of_a_million_ids_is_hashed_into_buckets_sized_to_its_distinct_values():
    # A recommender's ids: 10^6 distinct values over 1.5 x 10^6 rows (a third of them repeated).
    rows = 1_500_000
    ids = pa.array([f'{i % 1_000_000:08x}' for i in range(rows)])
    label = pa.array([i % 2 for i in range(rows)])
    sample = csv_sample.CsvSample(
        files=('part.csv',),
        columns={'click': label, 'item': ids},
        types={'click': ColumnType.INT, 'item': ColumnType.BYTES},
        rows=rows,
        rejected=0,
        complete=True,
    )

    (plan,) = pipeline_draft.plan_columns(sample, label='click')

    assert (plan.transform, plan.options) == ('hash', {'num_buckets': 1 << 21})
    assert plan.reason == (
        '1000000 distinct strings in 1500000 cells: too many for a vocabulary; hashed into '
        '2097152 buckets (2x the distinct values, at most 2^21)'
    )
    # The table the Trainer builds: every distinct value could have a row of its own.
    spec = fc.FeatureSpec(name='item', transform=plan.transform, **plan.options)
    assert spec.cardinality == (1 << 21) + 1 > 1_000_000
    # Past 2^20 distinct values the buckets stop growing: no table above 2^21 + 1 rows.
    nearly_unique = pa.array([f'{max(i, 1):08x}' for i in range(rows)])
    many = dataclasses.replace(sample, columns={'click': label, 'item': nearly_unique})
    (plan,) = pipeline_draft.plan_columns(many, label='click')
    assert plan.options == {'num_buckets': pipeline_draft.MAX_HASH_BUCKETS}
    assert plan.reason.startswith(f'{rows - 1} distinct strings')


def _sliceable_rows(n=300, seed=1):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        size = 'XL' if i % 30 == 0 else rng.choice(['S', 'M', 'L'])  # XL: 10 rows
        rows.append(
            (
                rng.choice(['red', 'green', 'blue']),  # 3 values, each ~100 rows
                size,
                f'code{rng.randrange(20)}',  # 20 values
                rng.randrange(2),  # an int with 2 values
                round(rng.gauss(0, 1), 3),
                rng.randrange(2),  # the label
            )
        )
    return rows


SLICE_HEADER = ('color', 'size', 'code', 'flag', 'x', 'clicked')


def test_slices_are_proposed_for_the_categorical_columns_with_few_values_each_in_enough_rows(
    tmp_path,
):
    from asynctrain.pipelines.init import slice_draft

    sample = _sample(tmp_path, SLICE_HEADER, _sliceable_rows())
    columns = pipeline_draft.plan_columns(sample, label='clicked')
    task = pipeline_draft.plan_task(sample, 'clicked')
    plan = slice_draft.plan_slices(
        sample, columns, pipeline_draft.plan_threshold(sample, task), task
    )

    assert plan.slices == (('color',), ('flag',))
    assert plan.reasons['color'].startswith('3 values, the rarest ')
    assert "rarest value 'XL' has 10 rows" in plan.reasons['size']
    assert plan.reasons['code'] == 'not sliced: 20 values (more than 10)'
    assert 'x' not in plan.reasons  # numeric: not a slice candidate
    assert plan.gate_key == 'slice_min_value'


def test_slices_on_a_rare_positive_label_need_positives_and_negatives_in_every_value(tmp_path):
    from asynctrain.pipelines.init import slice_draft

    rows = []
    for i in range(1500):
        clicked = int(i % 50 < 3)  # 6% positive
        # 'C': 300 rows, none of them positive; 'A' and 'B' some 45 positives each.
        region = 'C' if not clicked and i % 5 == 4 else ('A', 'B')[(i // 7) % 2]
        rows.append((region, ('web', 'app')[i % 2], ('x', 'y')[i % 3 == 0], clicked))
    sample = _sample(tmp_path, ('region', 'channel', 'device', 'clicked'), rows)
    task = pipeline_draft.plan_task(sample, 'clicked')
    assert (task.task, task.positive) == ('binary', 1)
    columns = pipeline_draft.plan_columns(sample, label='clicked')
    plan = slice_draft.plan_slices(
        sample, columns, pipeline_draft.plan_threshold(sample, task), task
    )

    assert plan.slices == (('channel',), ('device',))
    assert plan.reasons['region'] == (
        "not sliced: its value 'C' has 0 rows with a positive label in the sample (fewer than "
        '30 of each class, for an AUC per slice)'
    )
    labels = sample.columns['clicked'].to_pylist()
    for (name,) in plan.slices:
        values = sample.columns[name].to_pylist()
        for value in set(values):
            classes = [y for v, y in zip(values, labels) if v == value]
            assert min(sum(classes), len(classes) - sum(classes)) >= 30, (name, value)


def test_init_writes_the_slices_and_a_commented_gate_the_config_accepts(tmp_path, capsys):
    from asynctrain.pipelines.config import load_config

    _write_csv(tmp_path / 'data' / 'part.csv', SLICE_HEADER, _sliceable_rows())
    spec = tmp_path / 'spec'
    assert init_command.run(init_args(tmp_path / 'data', 'clicked', spec)) == 0
    printed = capsys.readouterr().out
    assert '  slices: color, flag (reported, not gated: slice_min_value in config.yaml)' in printed
    text = (spec / 'config.yaml').read_text()
    config = load_config(str(spec / 'config.yaml'))
    assert config.evaluation.slices == (('color',), ('flag',))
    assert config.evaluation.slice_min_value is None
    # Uncommented, the gate is the whole split's bound, on every slice.
    gate = f'  # slice_min_value: {config.evaluation.min_value}\n'
    assert gate in text
    (spec / 'gated.yaml').write_text(text.replace(gate, gate.replace('# ', '')))
    gated = load_config(str(spec / 'gated.yaml'))
    assert gated.evaluation.slice_min_value == config.evaluation.min_value


@pytest.mark.parametrize(
    'files, label, name',
    [
        (['/d/penguins_raw.csv'], 'Species', 'penguins-raw-species'),
        (['/d/penguins_raw.csv.gz'], 'Species', 'penguins-raw-species'),
        (['/d/diabetes.csv'], 'disease_progression', 'diabetes-disease-progression'),
        (['/d/Weather 2024.CSV'], 'visib', 'weather-2024-visib'),
        (['/d/data.2024.tsv.bz2'], 'y', 'data-2024-y'),
        # Several files: the folder's name.
        (['/exports/daily/a.csv', '/exports/daily/b.csv'], 'Culmen Length (mm)', None),
        (['/d/x.csv'], 'é' * 3, 'x'),
        (['/d/' + 'a' * 80 + '.csv'], 'label', 'a' * 63),
        (['/d/' + 'a' * 62 + '.csv'], 'label', 'a' * 62),
    ],
)
def test_the_pipeline_is_named_after_the_data_and_the_label_in_tfxs_rules(files, label, name):
    from asynctrain.pipelines.config import PIPELINE_NAME
    from asynctrain.pipelines.init import review_files

    data_dir = '/exports/daily/' if len(files) > 1 else '/d'
    got = review_files.pipeline_name(files, data_dir, label)
    assert got == (name or 'daily-culmen-length-mm')
    # Kubeflow's pattern for a pipeline name, TFX's 63 characters, and a folder name.
    assert re.fullmatch(r'[a-z0-9][a-z0-9-]{0,62}', got) and PIPELINE_NAME.fullmatch(got)


@pytest.mark.integration
def test_init_names_the_pipeline_and_prints_a_command_with_absolute_paths(
    tmp_path, capsys, monkeypatch
):
    from asynctrain.pipelines.config import load_config

    _write_csv(tmp_path / 'exports' / 'Trips_2024.csv', HEADER, _rows(80))
    monkeypatch.chdir(tmp_path)
    # Relative paths, as a user types them.
    assert init_command.run(init_args('exports', 'level', 'spec')) == 0
    printed = capsys.readouterr().out

    written = yaml.safe_load((tmp_path / 'spec' / 'config.yaml').read_text())
    assert written['pipeline_name'] == 'trips-2024-level'
    state = tmp_path / 'runs' / 'local' / 'trips-2024-level'
    assert (
        f"  pipeline: 'trips-2024-level' (named after the data and the label; its state: {state})"
        in printed.splitlines()
    )
    command = printed.splitlines()[-1]
    assert command == (
        f'  asynctrain run --config {tmp_path}/spec/config.yaml --work-dir {tmp_path}/runs/local'
    )
    # From another folder, the command's config is the same pipeline in the same state folder.
    monkeypatch.chdir(tmp_path / 'exports')
    config = load_config(f'{tmp_path}/spec/config.yaml', work_dir=f'{tmp_path}/runs/local')
    assert config.pipeline_name == 'trips-2024-level'
    assert config.state_dir == str(state)
    assert config.data_dir == str(tmp_path / 'exports')
    assert config.dataset_dir == tmp_path / 'spec'
