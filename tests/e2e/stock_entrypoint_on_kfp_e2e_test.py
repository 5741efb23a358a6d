"""Stock TFX's Kubeflow V2 entrypoint, put back in every container of the compiled taxi pipeline,
fails under `asynctrain run --compiled` exactly where it fails on an open-source KFP cluster,
line by line of KFP (`kfp_profiles`):

- 2.5 and later: the driver adds an `executor-logs` output of schema title `system.Artifact` to
  every container task (`backend/src/v2/driver/driver.go`, `provisionOutputs`); TFX cannot map
  that title to a class, so the first task fails with `Could not import system.Artifact`;
- 2.0: the first task with an upstream input artifact fails, because ML Metadata hands it that
  artifact with an empty instance schema (`metadata/client.go`,
  `GetOutputArtifactsByExecutionId`: `Schema: ""`), from which TFX reads no title:
  `AttributeError: 'NoneType' object has no attribute 'get'`;
- on a `minio://` root, the first task fails because neither TensorFlow nor Beam has a
  `minio://` file system, and stock TFX writes to the artifact's URI, not to the launcher's
  `/minio/...` staging path.

The data lives in the test's bucket of the S3 endpoint (`s3_store`); the tasks read and write
s3:// through TensorFlow in their own processes, never in this one. On the TFX 1.21 line
TensorFlow has no s3:// filesystem, so stock TFX's first step that writes through TensorFlow
(ImportSchemaGen) fails there before 2.0's missing type can.
"""

from __future__ import annotations

import os

import pytest
import yaml

from asynctrain import cli
from asynctrain.pipelines.config import bundled_data_dir

pytestmark = pytest.mark.e2e

ROWS = 300
STOCK_COMMAND = ['python', '-m', 'tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor']
# The arguments TFX's own Kubeflow V2 compiler gives that entrypoint (TFX 1.16,
# `tfx/orchestration/kubeflow/v2/step_builder.py`); ours adds others.
STOCK_FLAGS = (
    '--executor_class_path',
    '--json_serialized_invocation_args',
    '--json_serialized_inputs_spec_args',
)


@pytest.fixture
def taxi_data(s3_store, tmp_path, monkeypatch) -> str:
    """A bucket of the test's own holding the first ROWS rows of the taxi CSV under `data/`;
    the test runs in `tmp_path` (where `runs/compiled/...` logs go)."""
    monkeypatch.chdir(tmp_path)
    sample = tmp_path / 'sample'
    sample.mkdir()
    with open(os.path.join(bundled_data_dir(), 'data.csv')) as src:
        lines = [line for _, line in zip(range(ROWS + 1), src)]
    (sample / 'data.csv').write_text(''.join(lines))
    bucket = s3_store.new_bucket()
    s3_store.upload_dir(str(sample), f's3://{bucket}/data')
    return bucket


def _stock_spec(tmp_path, bucket: str, root: str) -> str:
    """The taxi pipeline compiled for `root`, every container running stock TFX's entrypoint
    with the arguments stock TFX gives it."""
    config = tmp_path / 'config.yaml'
    config.write_text(
        yaml.safe_dump(
            {
                'pipeline_name': 'taxi-stock',
                'data': f's3://{bucket}/data',
                'work_dir': f's3://{bucket}/work',
                'trainer': {'training': {'train_steps': 10, 'eval_steps': 2}},
            }
        )
    )
    compiled = tmp_path / 'compiled.yaml'
    argv = ['compile', '--target', 'kubeflow', '--output', str(compiled)]
    assert cli.main([*argv, '--pipeline-root', root, '--config', str(config)]) == 0
    spec = yaml.safe_load(compiled.read_text())
    for executor in spec['deploymentSpec']['executors'].values():
        container = executor.get('container')
        if container is None:
            continue
        args = container['args']
        container['command'] = STOCK_COMMAND
        container['args'] = [
            item
            for flag, value in zip(args[::2], args[1::2])
            if flag in STOCK_FLAGS
            for item in (flag, value)
        ]
    stock = tmp_path / 'stock.yaml'
    stock.write_text(yaml.safe_dump(spec))
    return str(stock)


def _run(spec: str, version: str, run_id: str, capsys) -> tuple[int, str]:
    """`asynctrain run --compiled`: (exit code, what it printed)."""
    code = cli.main(['run', '--compiled', spec, '--kfp-version', version, '--run-id', run_id])
    printed = capsys.readouterr()
    return code, printed.out + printed.err


def _log(run_id: str, task: str) -> str:
    with open(os.path.join('runs', 'compiled', 'taxi-stock', run_id, f'{task}.log')) as f:
        return f.read()


@pytest.mark.parametrize('version', ['2.17', '2.5'])
def test_from_2_5_the_first_task_cannot_import_the_executor_logs_type(
    taxi_data, tmp_path, capsys, s3_store, version
):
    spec = _stock_spec(tmp_path, taxi_data, f's3://{taxi_data}/root')

    code, printed = _run(spec, version, 'r1', capsys)

    assert code == 1
    assert 'task CsvExampleGen failed (exit status 1)' in printed
    assert '[2/10]' not in printed
    log = _log('r1', 'CsvExampleGen')
    assert "ModuleNotFoundError: No module named 'system'" in log
    assert 'ImportError: Could not import system.Artifact' in log
    # Nothing but the failed task's logs reached the store (2.16+ uploads them; 2.5 nothing).
    written = s3_store.keys(f's3://{taxi_data}/root')
    if version == '2.17':
        (logs,) = written
        assert logs.startswith('taxi-stock/r1/CsvExampleGen/')
        assert logs.endswith('/executor-logs-0')
    else:
        assert written == []


@pytest.mark.only_line(
    'tfx116', 'stock TFX writes s3:// through TensorFlow, which tensorflow-io (TF 2.16) gives it'
)
def test_on_2_0_the_first_task_with_an_upstream_artifact_reads_no_type(
    taxi_data, tmp_path, capsys, s3_store
):
    spec = _stock_spec(tmp_path, taxi_data, f's3://{taxi_data}/root')

    code, printed = _run(spec, '2.0', 'r2', capsys)

    assert code == 1
    # The two tasks without input artifacts ran, stock TFX writing to s3:// itself.
    assert '[1/10] CsvExampleGen: done in' in printed
    assert '[2/10] ImportSchemaGen: done in' in printed
    assert 'task ExampleValidator failed (exit status 1)' in printed
    log = _log('r2', 'ExampleValidator')
    assert "AttributeError: 'NoneType' object has no attribute 'get'" in log
    written = s3_store.keys(f's3://{taxi_data}/root/taxi-stock/r2')
    assert 'ImportSchemaGen/schema/schema.pbtxt' in written
    assert any(k.startswith('CsvExampleGen/examples/Split-train/') for k in written)


@pytest.mark.only_line('tfx121', 'TF 2.21 has no s3:// filesystem (tensorflow-io stops at TF 2.16)')
def test_on_the_1_21_line_stock_tfx_writes_the_store_through_beam_only(
    taxi_data, tmp_path, capsys, s3_store
):
    spec = _stock_spec(tmp_path, taxi_data, f's3://{taxi_data}/root')

    code, printed = _run(spec, '2.0', 'r4', capsys)

    assert code == 1
    # CsvExampleGen writes through Beam's S3 IO (boto3); ImportSchemaGen through TensorFlow.
    assert '[1/10] CsvExampleGen: done in' in printed
    assert 'task ImportSchemaGen failed (exit status 1)' in printed
    log = _log('r4', 'ImportSchemaGen')
    assert "File system scheme 's3' not implemented" in log
    written = s3_store.keys(f's3://{taxi_data}/root/taxi-stock/r4')
    assert any(k.startswith('CsvExampleGen/examples/Split-train/') for k in written)
    assert not any(k.startswith('ImportSchemaGen/schema/') for k in written)


def test_on_a_minio_root_stock_tfx_cannot_write_minio_uris(taxi_data, tmp_path, capsys, s3_store):
    spec = _stock_spec(tmp_path, taxi_data, f'minio://{taxi_data}/root')

    code, printed = _run(spec, '2.0', 'r3', capsys)

    assert code == 1
    assert 'task CsvExampleGen failed (exit status 1)' in printed
    log = _log('r3', 'CsvExampleGen')
    assert (
        'ValueError: Unable to get filesystem from specified path, please use the correct path '
        'or ensure the required dependency is installed, e.g., pip install apache-beam[gcp]. '
        f'Path specified: minio://{taxi_data}/root/taxi-stock/r3/CsvExampleGen/examples/'
        'Split-train'
    ) in log
    assert s3_store.keys(f's3://{taxi_data}/root') == []
