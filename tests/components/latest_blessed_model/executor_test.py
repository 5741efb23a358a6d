"""LatestBlessedModel's executor on hand-built push destinations: the newest push of its own
pipeline taken, another pipeline's passed over with a line naming both, and how the Trainer
and the Evaluator take the empty model it hands on before the first push."""

from __future__ import annotations

import json
import logging
import os

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from asynctrain.components.evaluator import executor as evaluator_executor
from asynctrain.components.latest_blessed_model import executor, spec
from asynctrain.components.shared import model_identity
from asynctrain.components.shared.model_identity import ModelIdentity
from asynctrain.components.trainer import executor as trainer_executor

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = pytest.mark.xdist_group('components.latest_blessed_model.executor_test')

PENGUINS = ModelIdentity('penguins-species', 'Species', '0123456789abcdef')
DIABETES = ModelIdentity('diabetes-disease-progression', 'disease_progression', 'fedcba9876543210')


def _saved_model(path, identity: ModelIdentity | None = PENGUINS, value: float = 1.0) -> None:
    module = tf.Module()
    module.v = tf.Variable(value)
    module.f = tf.function(lambda: module.v * 2.0, input_signature=[])
    tf.saved_model.save(module, str(path))
    if identity is not None:
        model_identity.attach(identity, str(path))


def _run(push_destination: str, model_dir, identity=PENGUINS) -> standard_artifacts.Model:
    model = standard_artifacts.Model()
    model.uri = str(model_dir)
    executor.Executor().Do(
        {},
        {spec.MODEL_KEY: [model]},
        {
            spec.PUSH_DESTINATION_KEY: push_destination,
            spec.MODEL_IDENTITY_KEY: identity.to_json(),
        },
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
            examples=channel.Channel(type=standard_artifacts.Examples),
            push_destination='',
            model_identity=PENGUINS,
        )
    with pytest.raises(ValueError, match="model_identity: expected the pipeline's ModelIdentity"):
        LatestBlessedModel(
            examples=channel.Channel(type=standard_artifacts.Examples),
            push_destination='/serving',
            model_identity=PENGUINS.to_json(),
        )


@pytest.fixture(scope='module')
def shared_pushes(tmp_path_factory):
    """One destination, three pipelines' pushes: penguins' 1700000000 (its newest), then
    diabetes' 1700000100, then a model with no identity (pushed before identities were recorded)
    at 1700000200, the newest of all."""
    root = tmp_path_factory.mktemp('shared-serving')
    _saved_model(root / '1700000000', PENGUINS, value=1.0)
    _saved_model(root / '1700000100', DIABETES, value=5.0)
    _saved_model(root / '1700000200', None, value=7.0)
    return root


def test_only_a_model_this_pipeline_pushed_is_taken_the_others_named_and_passed_over(
    shared_pushes, tmp_path, caplog
):
    with caplog.at_level(logging.WARNING):
        model = _run(str(shared_pushes), tmp_path / 'model', identity=PENGUINS)

    taken = str(shared_pushes / '1700000000')
    assert executor.latest_pushed_version(str(shared_pushes))[0] == 1700000200
    assert model.get_string_custom_property(spec.PUSHED_MODEL_PROPERTY) == taken
    assert model.get_int_custom_property(spec.PUSHED_VERSION_PROPERTY) == 1700000000
    copied = tmp_path / 'model' / 'Format-Serving'
    assert tf.saved_model.load(str(copied)).f().numpy() == 2.0  # penguins' model, not diabetes'
    passed_over = [
        f'not using the pushed model {shared_pushes / "1700000200"}: it carries no pipeline '
        'identity (pushed before asynctrain recorded one), and this is pipeline '
        "'penguins-species' (label 'Species')",
        f'not using the pushed model {shared_pushes / "1700000100"}: it was pushed by pipeline '
        "'diabetes-disease-progression' (label 'disease_progression'), and this is pipeline "
        "'penguins-species' (label 'Species')",
    ]
    assert json.loads(model.get_string_custom_property(spec.PASSED_OVER_PROPERTY)) == passed_over
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f'LatestBlessedModel: {line}.' for line in passed_over]


def test_a_pipeline_with_no_push_of_its_own_gets_the_empty_model_whatever_the_others_pushed(
    shared_pushes, tmp_path
):
    other = ModelIdentity('wine-quality', 'quality', '0000000000000000')
    model = _run(str(shared_pushes), tmp_path / 'model', identity=other)

    assert model.get_string_custom_property(spec.PUSHED_MODEL_PROPERTY) == ''
    assert model.get_int_custom_property(spec.PUSHED_VERSION_PROPERTY) == -1
    assert os.listdir(tmp_path / 'model') == []
    assert len(json.loads(model.get_string_custom_property(spec.PASSED_OVER_PROPERTY))) == 3
    assert trainer_executor._base_model_dir([model]) is None
    assert not evaluator_executor._holds_model(model)


def test_the_same_pipeline_with_another_label_is_not_taken_another_schema_is(tmp_path):
    root = tmp_path / 'serving'
    _saved_model(root / '1700000000', PENGUINS)
    relabeled = ModelIdentity(PENGUINS.pipeline_name, 'Island', PENGUINS.schema_fingerprint)
    model = _run(str(root), tmp_path / 'relabeled', identity=relabeled)
    assert model.get_string_custom_property(spec.PUSHED_MODEL_PROPERTY) == ''
    assert json.loads(model.get_string_custom_property(spec.PASSED_OVER_PROPERTY)) == [
        f'not using the pushed model {root / "1700000000"}: it was trained for label '
        "'Species', and this is pipeline 'penguins-species' (label 'Island')"
    ]
    # A reviewed schema edit is the pipeline's own: its model is still the reference.
    edited = ModelIdentity(PENGUINS.pipeline_name, PENGUINS.label, 'ffffffffffffffff')
    model = _run(str(root), tmp_path / 'edited', identity=edited)
    assert model.get_string_custom_property(spec.PUSHED_MODEL_PROPERTY) == str(root / '1700000000')
    assert json.loads(model.get_string_custom_property(spec.PASSED_OVER_PROPERTY)) == []
