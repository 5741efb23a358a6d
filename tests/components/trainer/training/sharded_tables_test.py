"""A 10^6-row embedding table on an in-process cluster: split over every parameter server with
its optimizer slots, touched only row by row, resumed and warm-started across a change of
`num_ps`, and exported as a plain SavedModel that scores as the sharded model does."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import servers as cluster_lib
from asynctrain.components.trainer.training import (
    checkpoints,
    export,
    loop,
    placement,
    task,
    tasks,
)
from tests.components.trainer.training import sharded_testdata
from tests.components.trainer.training.sharded_testdata import LABEL, TABLE_ROWS
from tests.shared_data import built_once

pytestmark = pytest.mark.integration

TABLE = 'item_embedding/embeddings'
PS_TASKS = {f'/job:ps/replica:0/task:{i}' for i in range(2)}


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> sharded_testdata.ShardedTableData:
    return built_once(tmp_path_factory, 'sharded_tables', sharded_testdata.make)


def _config(num_ps: int, train_steps: int, optimizer: str = 'adagrad'):
    return config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=train_steps,
            batch_size=64,
            steps_per_execution=5,
            checkpoint_interval_steps=0,
            summary_interval_steps=train_steps,
            optimizer=optimizer,
        ),
        # The default partitioner (`min_shard_size`, at most one shard per server).
        distribution=config_lib.DistributionConfig(num_workers=1, num_ps=num_ps, server_threads=3),
    )


@contextlib.contextmanager
def _trainer(data, num_ps, train_steps, run_dir, checkpoint_dir=None, optimizer='adagrad'):
    config = _config(num_ps, train_steps, optimizer)
    schema = task.load_transformed_schema(data.transform_graph, LABEL)
    with cluster_lib.start(config.distribution) as cluster:
        yield loop.Trainer(
            tasks.BinaryClassificationTask(schema, config),
            cluster,
            data.examples,
            str(run_dir),
            None if checkpoint_dir is None else str(checkpoint_dir),
        )


def _whole(variable) -> np.ndarray:
    """The full value of a variable, sharded or not."""
    pieces = [v.numpy() for v in getattr(variable, 'variables', [variable])]
    return np.concatenate(pieces) if pieces[0].ndim else pieces[0]


def _state(trainer) -> dict[str, np.ndarray]:
    """Every model and optimizer variable, whole, by name (slots are named after their
    variable, `accumulator/item_embedding/embeddings`)."""
    sharded = {}
    for variable in [*trainer.model.variables, *trainer.optimizer.variables]:
        container = getattr(variable, '_sharded_container', None)
        variable = container() if container is not None else variable
        sharded[placement.sharded_name(variable)] = variable
    return {name: _whole(v) for name, v in sharded.items()}


def _by_name(placements) -> dict[str, placement.VariablePlacement]:
    return {p.name: p for p in placements}


@pytest.mark.fresh_process
def test_table_and_its_slot_are_split_over_both_servers_and_updated_row_by_row(data, tmp_path):
    with _trainer(data, 2, 10, tmp_path / 'run') as trainer:
        trainer.train()
        table = _by_name(placement.model_placement(trainer.model))[TABLE]
        slot = _by_name(placement.optimizer_placement(trainer.optimizer))[f'accumulator/{TABLE}']
        for variable in (table, slot):
            assert variable.shape == (TABLE_ROWS, 8)
            assert variable.tasks == PS_TASKS
            assert [s.rows for s in variable.shards] == [TABLE_ROWS // 2] * 2
            assert variable.largest_shard_rows < TABLE_ROWS
        # The slot's shards lie beside the table's, row range for row range.
        assert [s.device for s in slot.shards] == [s.device for s in table.shards]
        recorded = placement.report(trainer.model, trainer.optimizer)
        assert set(recorded['bytes_per_task']) == PS_TASKS
        table_and_slot_bytes = 2 * TABLE_ROWS * 8 * 4
        assert sum(recorded['bytes_per_task'].values()) > table_and_slot_bytes
        assert max(recorded['bytes_per_task'].values()) < table_and_slot_bytes
        assert [s['rows'] for s in _by_name_dicts(recorded['model'])[TABLE]['shards']] == [
            TABLE_ROWS // 2
        ] * 2

        layer = trainer.model.get_layer('item_embedding')
        slot_variable = [
            v
            for v in trainer.optimizer.variables
            if placement.sharded_name(v) == f'accumulator/{TABLE}'
        ][0]
        accessed = placement.access_ops(trainer.train_steps, [layer.embeddings, slot_variable])
        assert len(accessed) == 4  # two shards of each
        for name, ops in accessed.items():
            assert ops <= placement.SPARSE_OPS, (name, ops)
            assert {'ResourceGather', 'ResourceScatterAdd'} <= ops, (name, ops)


def _by_name_dicts(variables: list[dict]) -> dict[str, dict]:
    return {v['name']: v for v in variables}


@pytest.mark.fresh_process
def test_adam_reads_and_writes_whole_tables(data, tmp_path):
    """Recorded, not wished for: tf_keras's Adam decays every row of its slots each step."""
    with _trainer(data, 2, 1, tmp_path / 'run', optimizer='adam') as trainer:
        layer = trainer.model.get_layer('item_embedding')
        slots = [v for v in trainer.optimizer.variables if TABLE in placement.sharded_name(v)]
        accessed = placement.access_ops(trainer.train_steps, [layer.embeddings, *slots])
    assert len(accessed) == 6
    dense = {name for name, ops in accessed.items() if not ops <= placement.SPARSE_OPS}
    assert {f'm/{TABLE}/part_0', f'v/{TABLE}/part_1', f'{TABLE}/part_0'} <= dense


@pytest.mark.fresh_process
def test_resume_across_a_change_of_num_ps_restores_tables_and_slots(data, tmp_path):
    checkpoints = tmp_path / 'checkpoints'
    saved = None
    # 1 -> 2 -> 1 -> 2 -> 3 servers, 5 more steps each time, one checkpoint directory.
    for attempt, num_ps in enumerate((1, 2, 1, 2, 3)):
        saved = _resume_and_train(
            data, attempt, num_ps, tmp_path / f'run{attempt}', checkpoints, saved
        )
    assert saved[f'accumulator/{TABLE}'].shape == (TABLE_ROWS, 8)
    # Training moved the slot away from Adagrad's initial 0.1 on the rows it touched.
    assert np.count_nonzero(saved[f'accumulator/{TABLE}'] != np.float32(0.1)) > 0


# One cluster per call, so that nothing of it stays referenced when the next one connects (what
# `connection.release_earlier_cluster_objects` needs): each returns only NumPy arrays and paths.


def _resume_and_train(data, attempt, num_ps, run_dir, checkpoints, saved) -> dict:
    with _trainer(data, num_ps, 5 * (attempt + 1), run_dir, checkpoints) as trainer:
        assert trainer.restore() == 5 * attempt
        table = _by_name(placement.model_placement(trainer.model))[TABLE]
        assert len(table.shards) == num_ps
        if saved is not None:
            restored = _state(trainer)
            assert set(restored) == set(saved)
            for name, value in saved.items():
                np.testing.assert_array_equal(restored[name], value, err_msg=name)
        trainer.train()
        return _state(trainer)


def _train_and_export(data, tmp_path) -> tuple[dict, str]:
    with _trainer(data, 2, 10, tmp_path / 'base') as base:
        base.train()
        base_dir = export.export_serving_model(
            base.serving_model(),
            data.transform_graph,
            str(tmp_path / 'base_model'),
            base.task.serving_outputs,
            tuple(base.task.element_spec[0]),
        )
        return _state(base), base_dir


def _warm_started(data, num_ps, base_dir, tmp_path) -> dict:
    with _trainer(data, num_ps, 10, tmp_path / f'warm{num_ps}') as trainer:
        warm = trainer.task.build_model()
        assert export.load_weights_by_name(warm, base_dir) == len(warm.weights)
        checkpoints.transfer_weights(warm, trainer.model, str(tmp_path / f'scratch{num_ps}'))
        assert len(_by_name(placement.model_placement(trainer.model))[TABLE].shards) == num_ps
        started = _state(trainer)
        return {
            name: started[name]
            for name in (
                v.name.removesuffix(':0').split('/part_')[0] for v in trainer.model.variables
            )
        }


@pytest.mark.fresh_process
def test_warm_start_from_an_export_of_another_num_ps(data, tmp_path):
    trained, base_dir = _train_and_export(data, tmp_path)
    for num_ps in (1, 3):
        started = _warm_started(data, num_ps, base_dir, tmp_path)
        assert started
        for name, value in started.items():
            np.testing.assert_array_equal(value, trained[name], err_msg=name)


@pytest.mark.fresh_process
def test_export_of_a_sharded_model_is_plain_and_scores_as_it(data, tmp_path):
    model_run = str(tmp_path / 'model_run')
    serving_dir = str(tmp_path / 'serving')
    config = _config(2, 10)
    with cluster_lib.start(config.distribution) as cluster:
        report = loop.train_and_export(
            cluster,
            data.examples,
            data.transform_graph,
            serving_dir,
            model_run,
            config,
            LABEL,
        )
    recorded = _by_name_dicts(report.placement['model'])[TABLE]
    assert {s['device'].split('/device:')[0] for s in recorded['shards']} == PS_TASKS
    assert max(s['rows'] for s in recorded['shards']) < TABLE_ROWS

    loaded = tf.saved_model.load(serving_dir)
    # Nothing the export tracks is sharded; its table is one plain variable.
    assert not any(
        isinstance(v, tf.__internal__.distribute.ShardedVariable)
        for v in tf.train.TrackableView(loaded).descendants()
    )
    tables = [v for v in export.exported_variables(loaded) if v.name.startswith(TABLE)]
    assert [tuple(v.shape) for v in tables] == [(TABLE_ROWS, 8)]
    # This test data's raw schema requires the label (the pipeline's own schemas do not).
    examples = tf.constant([sharded_testdata.raw_example(r) for r in data.eval_rows])
    served = loaded.signatures[export.SERVING_SIGNATURE](examples=examples)
    transformed = loaded.signatures[export.TRANSFORM_SIGNATURE](examples=examples)
    # The sharded model, as training left it (restored onto 2 servers from its checkpoint).
    with _trainer(data, 2, 10, tmp_path / 'check', os.path.join(model_run, 'checkpoints')) as tr:
        assert tr.restore() == 10
        features = {name: transformed[name] for name in tr.task.element_spec[0]}
        expected = tf.sigmoid(tr.model(features)).numpy()
    probabilities = served[export.PROBABILITIES].numpy()
    assert probabilities.shape == (len(data.eval_rows), 1)
    np.testing.assert_allclose(probabilities, expected, atol=1e-6, rtol=0)
    assert probabilities.std() > 1e-3  # the scores differ from row to row
