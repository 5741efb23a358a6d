"""The executor's `Do` with hand-built artifacts: paths in, a served Model and a ModelRun out,
warm-started from a base Model, carrying its pipeline's identity."""

import json
import os

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from asynctrain.components.shared import model_identity
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer import executor, spec
from asynctrain.components.trainer.training import run_files
from tests.components.trainer.trainer_testdata import LABEL_KEY, SCHEMA_PBTXT, make_artifact

pytestmark = pytest.mark.integration


def test_do_trains_warm_started_and_exports(transformed_data, trained_model, tmp_path):
    schema_dir = tmp_path / 'schema'
    schema_dir.mkdir()
    (schema_dir / 'schema.pbtxt').write_text(SCHEMA_PBTXT.read_text())
    base_model_uri = os.path.dirname(trained_model.serving_model_dir)
    # A learning rate so small that the 10 steps barely move the weights: what comes out is the
    # base model, so the eval AUC shows that the warm start loaded it.
    config = config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=10, steps_per_execution=5, learning_rate=1e-7, optimizer='sgd'
        )
    )
    input_dict = {
        spec.EXAMPLES_KEY: [
            make_artifact(standard_artifacts.Examples, transformed_data.examples, ['train', 'eval'])
        ],
        spec.TRANSFORM_GRAPH_KEY: [
            make_artifact(standard_artifacts.TransformGraph, transformed_data.transform_graph)
        ],
        spec.SCHEMA_KEY: [make_artifact(standard_artifacts.Schema, schema_dir)],
        spec.BASE_MODEL_KEY: [make_artifact(standard_artifacts.Model, base_model_uri)],
    }
    model = make_artifact(standard_artifacts.Model, tmp_path / 'model')
    model_run = make_artifact(standard_artifacts.ModelRun, tmp_path / 'model_run')
    output_dict = {spec.MODEL_KEY: [model], spec.MODEL_RUN_KEY: [model_run]}
    exec_properties = {
        spec.CONFIG_KEY: json.dumps(config_lib.to_dict(config)),
        spec.LABEL_KEY_KEY: LABEL_KEY,
        spec.MODEL_IDENTITY_KEY: model_identity.ModelIdentity(
            'taxi-daily', LABEL_KEY, '0123456789abcdef'
        ).to_json(),
    }

    executor.Executor().Do(input_dict, output_dict, exec_properties)

    with open(os.path.join(model_run.uri, run_files.REPORT_FILE)) as f:
        report = json.load(f)
    assert report['steps'] == 10
    assert report['eval']['auc'] == pytest.approx(trained_model.report.eval['auc'], abs=0.01)
    loaded = tf.saved_model.load(os.path.join(model.uri, 'Format-Serving'))
    assert set(loaded.signatures) == {'serving_default', 'transform_features'}
    # The pipeline's identity travels in the model, as LatestBlessedModel reads it from a push.
    identity_path = os.path.join(model.uri, 'Format-Serving', model_identity.MODEL_IDENTITY_PATH)
    with open(identity_path) as f:
        assert json.load(f) == {
            'pipeline_name': 'taxi-daily',
            'label': LABEL_KEY,
            'schema_fingerprint': '0123456789abcdef',
        }
