"""A failing component publishes nothing, and the rerun after the fix executes only what had not
succeeded: the components upstream of the failure come from the cache."""

import os

import pytest
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx
from tfx.orchestration import metadata

from asynctrain.pipelines.config import bundled_data_dir, load_config
from asynctrain.pipelines.local_runner import PipelineRunError, run_local
from tests.e2e.e2e_helpers import COMPONENTS

pytestmark = pytest.mark.e2e

BROKEN = """
def preprocessing_fn(inputs):
    raise ValueError('broken preprocessing: no feature mapping yet')
"""

FIXED = """
from asynctrain.components.transform import feature_config, preprocessing

preprocessing_fn = preprocessing.build_preprocessing_fn(
    feature_config.load_feature_config({features!r}, {schema!r}))
"""


def _completed_components(config) -> list[str]:
    connection = tfx.orchestration.metadata.sqlite_metadata_connection_config(config.metadata_path)
    prefix = f'{config.pipeline_name}.'
    with metadata.Metadata(connection) as m:
        done = set()
        for execution in m.store.get_executions():
            if execution.last_known_state == metadata_store_pb2.Execution.COMPLETE:
                for context in m.store.get_contexts_by_execution(execution.id):
                    if context.name.startswith(prefix):
                        done.add(context.name[len(prefix) :])
        return sorted(done)


def _transform_executions(config):
    connection = tfx.orchestration.metadata.sqlite_metadata_connection_config(config.metadata_path)
    with metadata.Metadata(connection) as m:
        context = m.store.get_context_by_type_and_name('node', f'{config.pipeline_name}.Transform')
        executions = m.store.get_executions_by_context(context.id)
        outputs = {}
        for execution in executions:
            events = m.store.get_events_by_execution_ids([execution.id])
            ids = [
                e.artifact_id
                for e in events
                if e.type
                in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)
            ]
            outputs[execution.id] = [
                a
                for a in m.store.get_artifacts_by_id(ids)
                if a.state == metadata_store_pb2.Artifact.LIVE
            ]
        return executions, outputs


def test_failed_transform_publishes_nothing_and_the_fixed_rerun_reuses_the_rest(tmp_path):
    data = tmp_path / 'data'
    data.mkdir()
    with open(os.path.join(bundled_data_dir(), 'data.csv')) as src:
        (data / 'data.csv').write_text(''.join(line for _, line in zip(range(801), src)))
    module = tmp_path / 'user_preprocessing.py'
    module.write_text(BROKEN)
    config = load_config(
        data=str(data),
        work_dir=str(tmp_path / 'work'),
        preprocessing_module=str(module),
        trainer={'training': {'train_steps': 60, 'eval_steps': 5}},
        evaluation={'min_value': 0.5},
    )

    with pytest.raises(PipelineRunError) as failure:
        run_local(config)
    assert failure.value.component == 'Transform'
    assert 'broken preprocessing' in str(failure.value)
    executions, outputs = _transform_executions(config)
    assert [e.last_known_state for e in executions] == [metadata_store_pb2.Execution.FAILED]
    assert outputs[executions[0].id] == []
    # Resolver nodes (latest blessed model, latest cache) resolve afresh on every run.
    succeeded = [c for c in _completed_components(config) if c in COMPONENTS]
    # Everything upstream of Transform succeeded before it failed; nothing downstream ran.
    assert {'CsvExampleGen', 'ImportSchemaGen', 'DriftValidator'} <= set(succeeded)
    assert not {'Transform', 'ExampleBatcher', 'Trainer', 'Evaluator', 'Pusher'} & set(succeeded)

    module.write_text(FIXED.format(features=config.feature_config_path, schema=config.schema_path))
    summary = run_local(config)

    assert summary.cached == succeeded
    assert summary.executed == sorted(set(COMPONENTS) - set(succeeded))
    assert summary.pushed_model is not None
