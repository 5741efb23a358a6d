"""Training on an in-process parameter-server cluster with each stale-gradient remedy on: the
loss falls, each worker keeps its own state, and Top-K sends fewer bytes than dense."""

from __future__ import annotations

import numpy as np
import pytest

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import servers as cluster_lib
from asynctrain.components.trainer.stale_gradients_config import StaleGradientsConfig
from asynctrain.components.trainer.training import data, gradient_remedies, loop, task, tasks
from tests.components.trainer.trainer_testdata import LABEL_KEY

pytestmark = pytest.mark.integration

TRAIN_STEPS = 80


def _config(stale_gradients: StaleGradientsConfig) -> config_lib.TrainerConfig:
    return config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=TRAIN_STEPS,
            batch_size=256,
            optimizer='sgd',
            learning_rate=0.1,
            steps_per_execution=10,
            checkpoint_interval_steps=0,
            summary_interval_steps=TRAIN_STEPS,
        ),
        distribution=config_lib.DistributionConfig(num_workers=2, num_ps=1),
        stale_gradients=stale_gradients,
    )


def _loss_on(trainer: loop.Trainer, batch) -> float:
    features, labels = batch
    return float(trainer.task.loss(labels, trainer.model(features, training=False)))


def _worker_states(holders) -> list[list[np.ndarray]]:
    """Each worker's copy of every holder that exists, worker by worker."""
    per_holder = [h.read_all() for h in holders if h is not None]
    return [[values[i].numpy() for values in per_holder] for i in range(len(per_holder[0]))]


@pytest.mark.fresh_process
@pytest.mark.parametrize(
    'stale_gradients',
    [
        StaleGradientsConfig(top_k_fraction=0.1),
        StaleGradientsConfig(delay_compensation='constant'),
        StaleGradientsConfig(delay_compensation='adaptive', delay_compensation_lambda=2.0),
    ],
    ids=['top_k', 'delay_compensation_constant', 'delay_compensation_adaptive'],
)
def test_training_with_a_remedy_reduces_the_loss(transformed_data, tmp_path, stale_gradients):
    config = _config(stale_gradients)
    schema = task.load_transformed_schema(transformed_data.transform_graph, LABEL_KEY)
    binary_task = tasks.BinaryClassificationTask(schema, config)
    batch = next(
        iter(binary_task.build_inputs(transformed_data.examples, data.TRAIN_SPLIT, training=False))
    )
    with cluster_lib.start(config.distribution) as cluster:
        trainer = loop.Trainer(binary_task, cluster, transformed_data.examples, str(tmp_path))
        initial_loss = _loss_on(trainer, batch)
        measured = trainer.train(save=False)
        final_loss = _loss_on(trainer, batch)
        assert measured['steps'] == TRAIN_STEPS
        assert final_loss < 0.9 * initial_loss, (initial_loss, final_loss)
        assert np.isfinite(measured['loss'])
        remedies = trainer.remedies
        sent = measured['gradient_bytes_per_step']
        dense = measured['dense_gradient_bytes_per_step']
        if stale_gradients.top_k_fraction:
            # Each worker's residuals are its own, and hold what it has not sent yet.
            workers = _worker_states(remedies.residuals)
            assert len(workers) == 2
            assert all(sum(np.abs(r).sum() for r in residuals) > 0 for residuals in workers)
            assert not all(np.array_equal(a, b) for a, b in zip(*workers))
            # Every step, each dense variable's entries (4 bytes each) become k values and k
            # index rows (4 bytes per axis); embedding rows are sent as they are either way.
            saved = 0
            for residual in remedies.residuals:
                if residual is not None:
                    entries = residual.shape.num_elements()
                    k = gradient_remedies.top_k_count(entries, stale_gradients.top_k_fraction)
                    saved += 4 * entries - k * 4 * (1 + residual.shape.rank)
            assert saved > 0
            assert dense - sent == pytest.approx(saved)
        else:
            assert sent == dense > 0
        if stale_gradients.delay_compensation == 'adaptive':
            workers = _worker_states(remedies.mean_squares)
            assert all(all(ms.min() >= 0 for ms in squares) for squares in workers)
            assert all(sum(ms.sum() for ms in squares) > 0 for squares in workers)
