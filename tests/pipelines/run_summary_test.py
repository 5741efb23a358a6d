"""The run summary's closing lines: the pushed model, then where TensorBoard reads the run."""

from asynctrain.pipelines import run_summary


def _summary(**overrides) -> run_summary.RunSummary:
    fields = dict(
        executed=['Trainer', 'Pusher'],
        cached=['CsvExampleGen'],
        rows={'rows_read': 10, 'rows_written': 9, 'rows_rejected': 1},
        eval_metric=('auc', 0.91234),
        blessed=True,
        training={'examples_per_sec': 1234.4, 'steps': 50},
        pushed_model='/w/serving_model/1',
    )
    fields.update(overrides)
    return run_summary.RunSummary(**fields)


def test_summary_ends_with_the_tensorboard_command_for_the_model_run():
    lines = _summary(tensorboard_dir='/w/pipeline_root/Trainer/model_run/7').format().splitlines()

    assert lines == [
        'components executed: 2, from cache: 1',
        'rows: read 10, written 9, rejected 1',
        'eval auc: 0.9123, blessed: yes',
        'training: 1234 examples/s over 50 steps',
        'pushed model: /w/serving_model/1',
        'tensorboard: tensorboard --logdir /w/pipeline_root/Trainer/model_run/7',
    ]


def test_the_pushes_of_other_pipelines_passed_over_are_named_before_the_drift_line():
    line = (
        'not using the pushed model /w/serving_model/17: it was pushed by pipeline '
        "'penguins-species' (label 'Species'), and this is pipeline 'diabetes-target' "
        "(label 'target')"
    )
    summary = _summary(
        passed_over=[line],
        drift={'first_run': True, 'drifted': [], 'accepted': [], 'compared_with': ''},
    )
    lines = summary.format().splitlines()
    assert lines[4:6] == [
        f'latest blessed model: {line}',
        "drift: nothing to compare with yet; today's data judged on the schema alone",
    ]


def test_no_tensorboard_line_before_the_trainer_ever_ran():
    lines = _summary(training={}, pushed_model=None).format().splitlines()

    assert lines[-1] == 'pushed model: none (not blessed)'
    assert not any(line.startswith('tensorboard') for line in lines)


def test_the_drift_line_names_each_drifted_feature_with_its_distance_and_threshold():
    drift = {
        'first_run': False,
        'drifted': [
            {
                'feature': 'fare',
                'comparator': 'jensen_shannon_divergence',
                'distance': 0.98765,
                'threshold': 0.3,
            },
            {
                'feature': 'tips',
                'comparator': 'jensen_shannon_divergence',
                'distance': None,
                'threshold': 0.3,
            },
        ],
        'accepted': ['company'],
        'compared_with': '/w/m/FeatureStats.pb',
    }
    lines = _summary(drift=drift, pushed_model=None).format().splitlines()

    assert lines[-2:] == [
        'drift: fare (jensen_shannon_divergence 0.988 > 0.300); tips (present on one side '
        'only); accepted for this run: company (against /w/m/FeatureStats.pb)',
        'pushed model: none (not blessed)',
    ]


def test_the_drift_line_of_a_first_run_says_it_was_judged_on_the_schema_alone():
    drift = {'first_run': True, 'drifted': [], 'accepted': [], 'compared_with': ''}
    assert (
        run_summary.drift_text(drift)
        == "drift: nothing to compare with yet; today's data judged on the schema alone"
    )
    compared = {'first_run': False, 'drifted': [], 'accepted': [], 'compared_with': '/s.pb'}
    assert (
        run_summary.drift_text(compared) == 'drift: no feature over its threshold (against /s.pb)'
    )


def test_the_drift_verdict_reads_the_validators_properties_however_they_are_stored():
    # As a compiled run's executor output publishes them (a plain mapping; ints for flags).
    published = {
        'first_run': 0,
        'drifted_features': '[{"feature": "fare", "comparator": "jensen_shannon_divergence", '
        '"distance": 0.5, "threshold": 0.3}]',
        'accepted_features': '["company"]',
        'compared_with': '/s.pb',
    }
    verdict = run_summary.drift_verdict(published.get)
    assert verdict == {
        'first_run': False,
        'drifted': [
            {
                'feature': 'fare',
                'comparator': 'jensen_shannon_divergence',
                'distance': 0.5,
                'threshold': 0.3,
            }
        ],
        'accepted': ['company'],
        'compared_with': '/s.pb',
    }
    # Nothing published but the first-run flag: nothing drifted, nothing compared.
    assert run_summary.drift_verdict({'first_run': 1}.get) == {
        'first_run': True,
        'drifted': [],
        'accepted': [],
        'compared_with': '',
    }
