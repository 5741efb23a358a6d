"""`launch.train_and_export` with an `in_process` cluster: the cluster and its coordinator live in a
child process, and the child's error reaches the caller with the child's message."""

import os

import pytest

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import launch, recovery
from asynctrain.components.trainer.training import run_files

pytestmark = pytest.mark.integration


def test_an_error_in_the_in_process_child_surfaces_with_its_message(tmp_path):
    missing = str(tmp_path / 'no_transform_graph')
    model_run_dir = str(tmp_path / 'model_run')
    config = config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(train_steps=2, steps_per_execution=1)
    )

    with pytest.raises(recovery.TrainingFailed) as failure:
        launch.train_and_export(
            str(tmp_path / 'examples'),
            missing,
            str(tmp_path / 'model'),
            model_run_dir,
            config,
            'big_tipper',
        )

    message = str(failure.value)
    assert 'training in its child process' in message
    assert 'exited with status 1' in message
    # The child's own error, naming the directory it could not read.
    assert missing in message
    # The child wrote its request and its failure where the parent looked; no report.
    request = run_files.read_json(os.path.join(model_run_dir, recovery._REQUEST_FILE))
    assert request['cluster_spec'] is None
    assert request['transform_graph_dir'] == missing
    assert not os.path.exists(os.path.join(model_run_dir, run_files.REPORT_FILE))
