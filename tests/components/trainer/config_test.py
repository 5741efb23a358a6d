"""TrainerConfig: defaults, YAML-shaped input, and validation errors that name the field."""

import dataclasses

import pytest

from asynctrain.components.trainer import config as config_lib


def test_defaults_are_valid_and_round_trip():
    config = config_lib.TrainerConfig()
    assert config.distribution.cluster == 'in_process'
    # Chosen from the parameter-server bench and the bundled run (see config.py).
    assert config.training.steps_per_execution == 100
    assert (config.training.batch_size, config.training.train_steps) == (2048, 500)
    assert (config.distribution.num_ps, config.distribution.partitioner) == (1, 'min_shard_size')
    assert config_lib.from_dict(config_lib.to_dict(config)) == config


def test_stale_gradient_remedies_are_off_by_default_and_switch_on_from_yaml():
    assert not config_lib.TrainerConfig().stale_gradients.enabled
    config = config_lib.from_dict(
        {
            'training': {'optimizer': 'sgd'},
            'stale_gradients': {'top_k_fraction': 0.01, 'delay_compensation': 'adaptive'},
        }
    )
    settings = config.stale_gradients
    assert settings.enabled
    assert (settings.top_k_fraction, settings.delay_compensation) == (0.01, 'adaptive')
    assert config_lib.from_dict(
        {'stale_gradients': {'delay_compensation': 'constant'}}
    ).stale_gradients.enabled


def test_from_dict_fills_defaults_and_turns_lists_into_tuples():
    config = config_lib.from_dict(
        {
            'model': {'hidden_units': [16, 8]},
            'training': {
                'train_steps': 50,
                'optimizer': 'sgd',
                'staleness_aware_learning_rate': True,
            },
            'distribution': {'num_workers': 3, 'partitioner': 'min_shard_size'},
        }
    )
    assert config.model.hidden_units == (16, 8)
    assert config.model.embedding_dim == config_lib.ModelConfig().embedding_dim
    assert config.training.train_steps == 50
    assert config.distribution.num_workers == 3
    assert config.distribution.num_ps == 1
    hash(config)  # frozen and hashable, lists included
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.training.train_steps = 1


@pytest.mark.parametrize(
    'data, message',
    [
        (
            {'training': {'optimizer': 'rmsprop'}},
            "trainer.training.optimizer: got 'rmsprop'; allowed: ['adagrad', 'adam', 'sgd']",
        ),
        (
            {'input': {'cache': 'disk'}},
            "trainer.input.cache: got 'disk'; allowed: ['none', 'memory', 'file']",
        ),
        (
            {'distribution': {'cluster': 'k8s'}},
            "trainer.distribution.cluster: got 'k8s'; allowed: ['in_process', 'local_processes', "
            "'tf_config', 'tfjob']",
        ),
        (
            {'distribution': {'cluster': 'tfjob'}},
            'trainer.kubernetes.image: required when distribution.cluster is tfjob',
        ),
        (
            {'kubernetes': {'job_name_prefix': 'Taxi_train'}},
            "trainer.kubernetes.job_name_prefix: got 'Taxi_train'; allowed: lower-case letters",
        ),
        ({'kubernetes': {'job_name_prefix': 'a' * 31}}, 'at most 30 characters'),
        ({'kubernetes': {'namespace': 'ML'}}, "trainer.kubernetes.namespace: got 'ML'"),
        (
            {'kubernetes': {'timeout_seconds': 0}},
            'trainer.kubernetes.timeout_seconds: got 0; allowed: values > 0',
        ),
        ({'kubernetes': {'tfjob_values': ''}}, 'trainer.kubernetes.tfjob_values: expected a file'),
        ({'kubernetes': {'imag': 'r/a:1'}}, 'trainer.kubernetes.imag: unknown field'),
        (
            {'distribution': {'partitioner': 'round_robin'}},
            "trainer.distribution.partitioner: got 'round_robin'",
        ),
        (
            {'training': {'batch_size': 0}},
            'trainer.training.batch_size: got 0; allowed: values > 0',
        ),
        ({'input': {'prefetch': 0}}, 'trainer.input.prefetch: got 0; allowed: -1 (AUTOTUNE)'),
        ({'model': {'hidden_units': [8, -1]}}, 'trainer.model.hidden_units'),
        ({'model': {'dropout': 1.0}}, 'trainer.model.dropout: got 1.0; allowed: [0, 1)'),
        (
            {'training': {'optimizer': 'adam', 'staleness_aware_learning_rate': True}},
            'trainer.training.staleness_aware_learning_rate: needs training.optimizer in '
            "['adagrad', 'sgd'], got 'adam'",
        ),
        (
            {'stale_gradients': {'top_k_fraction': 1.0}, 'training': {'optimizer': 'sgd'}},
            'trainer.stale_gradients.top_k_fraction: got 1.0; allowed: 0 (off) or a fraction '
            'in (0, 1)',
        ),
        (
            {'stale_gradients': {'top_k_fraction': 0.01}},
            "trainer.stale_gradients.top_k_fraction: needs training.optimizer in ['sgd'], "
            "got 'adagrad'",
        ),
        (
            {'stale_gradients': {'delay_compensation': 'dc-asgd'}},
            "trainer.stale_gradients.delay_compensation: got 'dc-asgd'; allowed: "
            "['off', 'constant', 'adaptive']",
        ),
        (
            {'stale_gradients': {'delay_compensation_lambda': 0}},
            'trainer.stale_gradients.delay_compensation_lambda: got 0; allowed: values > 0',
        ),
        (
            {'stale_gradients': {'delay_compensation_momentum': 1.0}},
            'trainer.stale_gradients.delay_compensation_momentum: got 1.0; allowed: [0, 1)',
        ),
        ({'training': {'trian_steps': 5}}, 'trainer.training.trian_steps: unknown field; allowed:'),
        ({'optimiser': 'sgd'}, 'trainer.optimiser: unknown field'),
    ],
)
def test_invalid_values_name_the_field_and_the_allowed_values(data, message):
    with pytest.raises(ValueError) as error:
        config_lib.from_dict(data)
    assert message in str(error.value)


def test_tfjob_mode_reads_the_kubernetes_section():
    config = config_lib.from_dict(
        {
            'distribution': {'cluster': 'tfjob'},
            'kubernetes': {
                'image': 'registry.example/asynctrain:1',
                'namespace': 'ml',
                'timeout_seconds': 600,
            },
        }
    )
    assert config.kubernetes == config_lib.KubernetesConfig(
        tfjob_values='kubeflow/tfjob-values.yaml',
        namespace='ml',
        image='registry.example/asynctrain:1',
        job_name_prefix='asynctrain-train',
        timeout_seconds=600,
    )
    assert config_lib.from_dict(config_lib.to_dict(config)) == config
    # Other modes ignore the section, so its image stays optional there.
    assert config_lib.TrainerConfig().kubernetes.image == ''


def test_profile_is_off_by_default_and_read_from_yaml():
    assert not config_lib.TrainerConfig().profile.enabled
    config = config_lib.from_dict({'profile': {'start_step': 100, 'num_steps': 20}})
    assert config.profile == config_lib.ProfileConfig(start_step=100, num_steps=20)
    assert config.profile.enabled
    assert config_lib.from_dict(config_lib.to_dict(config)) == config
    with pytest.raises(ValueError, match=r'trainer\.profile\.num_steps: got -1; allowed: an int'):
        config_lib.from_dict({'profile': {'num_steps': -1}})
    with pytest.raises(ValueError, match=r'trainer\.profile\.start_step: expected int, got 1\.5'):
        config_lib.from_dict({'profile': {'start_step': 1.5}})
