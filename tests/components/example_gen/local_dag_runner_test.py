"""The component in a one-node LocalDagRunner pipeline: the driver resolves the span, the
executor publishes the examples with their row counts, and a re-run is a cache hit."""

import os
import shutil

import pytest
from ml_metadata.proto import metadata_store_pb2
from tfx.orchestration import metadata, pipeline
from tfx.orchestration.local.local_dag_runner import LocalDagRunner
from tfx.proto import example_gen_pb2

from asynctrain.components.example_gen import component

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'csv')


@pytest.mark.integration
def test_runs_in_local_dag_runner_with_span_and_cache(tmp_path):
    for span, name in ((1, 'crlf.csv'), (2, 'quoted_delimiters_newlines.csv')):
        directory = tmp_path / 'input' / f'span-{span}'
        directory.mkdir(parents=True)
        shutil.copy(os.path.join(FIXTURES, name), directory / 'data.csv')
    metadata_path = str(tmp_path / 'metadata.sqlite')

    def build():
        gen = component.CsvExampleGen(
            input_base=str(tmp_path / 'input'),
            schema_path=os.path.join(FIXTURES, 'schema.pbtxt'),
            input_config=example_gen_pb2.Input(
                splits=[example_gen_pb2.Input.Split(name='single_split', pattern='span-{SPAN}/*')]
            ),
        )
        return pipeline.Pipeline(
            pipeline_name='examplegen_test',
            pipeline_root=str(tmp_path / 'root'),
            components=[gen],
            enable_cache=True,
            metadata_connection_config=metadata.sqlite_metadata_connection_config(metadata_path),
        )

    LocalDagRunner().run(build())
    LocalDagRunner().run(build())

    with metadata.Metadata(metadata.sqlite_metadata_connection_config(metadata_path)) as m:
        examples = m.store.get_artifacts_by_type('Examples')
        executions = m.store.get_executions()
    assert len(examples) == 1  # The second run reused the first run's output.
    assert [e.last_known_state for e in executions] == [
        metadata_store_pb2.Execution.COMPLETE,
        metadata_store_pb2.Execution.CACHED,
    ]
    props = examples[0].custom_properties
    assert props['span'].int_value == 2
    assert props['rows_read'].int_value == 3
    assert props['rows_written'].int_value == 3
    assert props['rows_rejected'].int_value == 0
    assert (props['rows_written_train'].int_value + props['rows_written_eval'].int_value) == 3
