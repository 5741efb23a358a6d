"""Session fixtures for the Trainer tests: the transformed taxi sample, and one trained model
that the tests which only inspect outputs share (training is the expensive part), each built once
for all pytest-xdist workers."""

import os
import shutil

import pytest

from tests.components.trainer.trainer_testdata import (
    LABEL_KEY,
    TRAIN_STEPS,
    TrainedModel,
    TransformedData,
    make_transformed_data,
)
from tests.shared_data import built_once


@pytest.fixture(scope='session')
def transformed_data(tmp_path_factory) -> TransformedData:
    return built_once(tmp_path_factory, 'taxi', make_transformed_data)


@pytest.fixture(scope='session')
def trained_model(transformed_data, tmp_path_factory) -> TrainedModel:
    return built_once(
        tmp_path_factory, 'trained', lambda root: _train_model(transformed_data, root)
    )


def _train_model(transformed_data: TransformedData, root: str) -> TrainedModel:
    from asynctrain.components.trainer import config as config_lib
    from asynctrain.components.trainer.cluster import launch

    transform_graph = os.path.join(root, 'transform_graph')
    shutil.copytree(transformed_data.transform_graph, transform_graph)
    config = config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=TRAIN_STEPS,
            steps_per_execution=10,
            checkpoint_interval_steps=100,
            summary_interval_steps=50,
        )
    )
    serving_model_dir = os.path.join(root, 'model', 'Format-Serving')
    model_run_dir = os.path.join(root, 'model_run')
    report = launch.train_and_export(
        transformed_data.examples,
        transform_graph,
        serving_model_dir,
        model_run_dir,
        config,
        LABEL_KEY,
    )
    return TrainedModel(
        report=report,
        serving_model_dir=serving_model_dir,
        model_run_dir=model_run_dir,
        transform_graph=transform_graph,
    )


@pytest.fixture
def fake_api():
    """A fake Kubernetes API on loopback and a real `TrainingClient` for it (`fake_kubernetes`)."""
    from tests.components.trainer import fake_kubernetes

    with fake_kubernetes.serve() as server_and_client:
        yield server_and_client
