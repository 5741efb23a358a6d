"""The Trainer component: its channels, parameters and constructor validation."""

import json

import pytest
from tfx.types import channel_utils, standard_artifacts

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer import spec
from asynctrain.components.trainer.component import Trainer


def _channels():
    return {
        'examples': channel_utils.as_channel([standard_artifacts.Examples()]),
        'transform_graph': channel_utils.as_channel([standard_artifacts.TransformGraph()]),
        'schema': channel_utils.as_channel([standard_artifacts.Schema()]),
    }


def test_outputs_and_parameters():
    config = config_lib.TrainerConfig(training=config_lib.TrainingConfig(train_steps=7))
    trainer = Trainer(**_channels(), config=config, label_key='big_tipper')
    assert trainer.outputs[spec.MODEL_KEY].type == standard_artifacts.Model
    assert trainer.outputs[spec.MODEL_RUN_KEY].type == standard_artifacts.ModelRun
    assert trainer.exec_properties[spec.LABEL_KEY_KEY] == 'big_tipper'
    stored = config_lib.from_dict(json.loads(trainer.exec_properties[spec.CONFIG_KEY]))
    assert stored == config
    assert spec.BASE_MODEL_KEY not in trainer.inputs or not trainer.inputs.get(spec.BASE_MODEL_KEY)


def test_base_model_is_an_optional_input():
    base = channel_utils.as_channel([standard_artifacts.Model()])
    trainer = Trainer(**_channels(), label_key='big_tipper', base_model=base)
    assert trainer.inputs[spec.BASE_MODEL_KEY].type == standard_artifacts.Model
    assert (
        config_lib.from_dict(json.loads(trainer.exec_properties[spec.CONFIG_KEY]))
        == config_lib.TrainerConfig()
    )


def test_rejects_a_config_that_is_not_a_trainer_config():
    with pytest.raises(ValueError, match='config: expected a TrainerConfig, got dict'):
        Trainer(**_channels(), label_key='big_tipper', config={'training': {}})
    with pytest.raises(ValueError, match='label_key'):
        Trainer(**_channels(), label_key='')
