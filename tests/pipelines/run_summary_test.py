"""The run summary's closing lines: the pushed model, then where TensorBoard reads the run."""

from pipelines import run_summary


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


def test_no_tensorboard_line_before_the_trainer_ever_ran():
    lines = _summary(training={}, pushed_model=None).format().splitlines()

    assert lines[-1] == 'pushed model: none (not blessed)'
    assert not any(line.startswith('tensorboard') for line in lines)
