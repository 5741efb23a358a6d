"""LatestBlessedModel's executor on hand-built push destinations, and how the Trainer and the
Evaluator take the empty model it hands on before the first push."""

from __future__ import annotations

import os

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from asynctrain.components.evaluator import executor as evaluator_executor
from asynctrain.components.latest_blessed_model import executor, spec
from asynctrain.components.trainer import executor as trainer_executor


def _saved_model(path) -> None:
    module = tf.Module()
    module.v = tf.Variable(1.0)
    module.f = tf.function(lambda: module.v * 2.0, input_signature=[])
    tf.saved_model.save(module, str(path))


def _run(push_destination: str, model_dir) -> standard_artifacts.Model:
    model = standard_artifacts.Model()
    model.uri = str(model_dir)
    executor.Executor().Do(
        {}, {spec.MODEL_KEY: [model]}, {spec.PUSH_DESTINATION_KEY: push_destination}
    )
    return model


@pytest.fixture(scope='module')
def pushes(tmp_path_factory):
    """Pushes 1700000000 and 1700000100 (the newest), plus what is not a push: a newer
    directory with no SavedModel (a copy cut short), a non-numeric directory, a file."""
    root = tmp_path_factory.mktemp('serving')
    _saved_model(root / '1700000000')
    _saved_model(root / '1700000100')
    (root / '1700000200').mkdir()
    _saved_model(root / 'latest')
    (root / '1700000300').write_text('')
    return root


def test_the_newest_pushed_savedmodel_is_copied_into_the_model(pushes, tmp_path):
    model = _run(str(pushes), tmp_path / 'model')

    assert executor.latest_pushed_version(str(pushes)) == (1700000100, str(pushes / '1700000100'))
    assert model.get_string_custom_property(spec.PUSHED_MODEL_PROPERTY) == str(
        pushes / '1700000100'
    )
    assert model.get_int_custom_property(spec.PUSHED_VERSION_PROPERTY) == 1700000100
    copied = tmp_path / 'model' / 'Format-Serving'
    assert sorted(os.listdir(copied)) == sorted(os.listdir(pushes / '1700000100'))
    assert tf.saved_model.load(str(copied)).f().numpy() == 2.0
    # The base model the Trainer warm-starts from, the baseline the Evaluator scores.
    assert trainer_executor._base_model_dir([model]) == str(copied)
    assert evaluator_executor._holds_model(model)


@pytest.mark.parametrize('destination', ['absent', 'empty'])
def test_before_the_first_push_the_model_is_empty_and_taken_as_none(tmp_path, destination):
    (tmp_path / 'empty').mkdir()
    model = _run(str(tmp_path / destination), tmp_path / 'model')

    assert executor.latest_pushed_version(str(tmp_path / destination)) is None
    assert model.get_string_custom_property(spec.PUSHED_MODEL_PROPERTY) == ''
    assert model.get_int_custom_property(spec.PUSHED_VERSION_PROPERTY) == -1
    assert os.listdir(tmp_path / 'model') == []
    assert trainer_executor._base_model_dir([model]) is None
    assert trainer_executor._base_model_dir([]) is None
    assert not evaluator_executor._holds_model(model)


def test_the_push_destination_is_required():
    from tfx.types import channel

    from asynctrain.components.latest_blessed_model.component import LatestBlessedModel

    with pytest.raises(ValueError, match="push_destination: expected the Pusher's base directory"):
        LatestBlessedModel(
            examples=channel.Channel(type=standard_artifacts.Examples), push_destination=''
        )
