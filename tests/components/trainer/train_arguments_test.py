"""Tests for asynctrain/components/trainer/train_arguments.py: `asynctrain train`'s flags, declared once."""

from __future__ import annotations

import argparse

import pytest

from asynctrain.components.trainer import train_arguments


def test_train_arguments_can_point_the_replicas_at_artifact_uris():
    train = train_arguments.TrainArguments(
        examples='gs://b/e/7',
        transform_graph='gs://b/t/7',
        serving_model_dir='gs://b/Trainer/model/9/Format-Serving',
        model_run_dir='gs://b/Trainer/model_run/9',
        config='gs://b/Trainer/model_run/9/trainer_config.yaml',
        label_key='big_tipper',
        base_model='gs://b/m/3/Format-Serving',
    )
    assert train.to_argv() == [
        'train',
        '--examples',
        'gs://b/e/7',
        '--transform-graph',
        'gs://b/t/7',
        '--serving-model-dir',
        'gs://b/Trainer/model/9/Format-Serving',
        '--model-run-dir',
        'gs://b/Trainer/model_run/9',
        '--config',
        'gs://b/Trainer/model_run/9/trainer_config.yaml',
        '--label-key',
        'big_tipper',
        '--base-model',
        'gs://b/m/3/Format-Serving',
    ]
    with pytest.raises(
        ValueError, match='output: required unless serving_model_dir and model_run_dir'
    ):
        train_arguments.TrainArguments(
            examples='e', transform_graph='t', serving_model_dir='s', config='c'
        )


def test_parsed_flags_give_back_the_arguments_and_the_same_argv():
    parser = argparse.ArgumentParser()
    train_arguments.add_arguments(parser)
    argv = [
        'train',
        '--examples',
        'e',
        '--transform-graph',
        't',
        '--output',
        'o',
        '--config',
        'c.yaml',
        '--label-key',
        'label',
        '--base-model',
        'm',
    ]

    train = train_arguments.TrainArguments.from_namespace(parser.parse_args(argv[1:]))

    assert train == train_arguments.TrainArguments(
        examples='e',
        transform_graph='t',
        output='o',
        config='c.yaml',
        label_key='label',
        base_model='m',
    )
    assert train.to_argv() == argv


def test_label_key_has_no_default(capsys):
    parser = argparse.ArgumentParser()
    train_arguments.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(['--examples', 'e', '--transform-graph', 't', '--output', 'o'])
    assert 'the following arguments are required: --label-key' in capsys.readouterr().err
    with pytest.raises(ValueError, match='label_key: expected a feature name, got None'):
        train_arguments.TrainArguments(examples='e', transform_graph='t', output='o')


def test_profile_steps_reach_the_replicas_and_are_checked():
    parser = argparse.ArgumentParser()
    train_arguments.add_arguments(parser)
    argv = ['train', '--examples', 'e', '--transform-graph', 't', '--output', 'o']
    argv += ['--label-key', 'label', '--profile-steps', '100:20']

    train = train_arguments.TrainArguments.from_namespace(parser.parse_args(argv[1:]))

    assert train.profile_steps == '100:20'
    assert train.to_argv() == argv
    assert train_arguments.parse_profile_steps(train.profile_steps) == (100, 20)
    for bad in ('100', '100:0', '-1:5', 'a:b', '10:20:30'):
        with pytest.raises(ValueError, match=f"--profile-steps: expected N:K .*, got '{bad}'"):
            train_arguments.parse_profile_steps(bad)
    with pytest.raises(ValueError, match='--profile-steps: expected N:K'):
        train_arguments.TrainArguments(
            examples='e', transform_graph='t', output='o', label_key='y', profile_steps='5'
        )
