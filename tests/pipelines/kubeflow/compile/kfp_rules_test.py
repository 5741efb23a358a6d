"""What the open-source KFP backend refuses, on real specs: the same pipeline compiled by TFX in
its schema 2.0.0 mode (a resolver task, legacy `constantValue` parameters) is refused by
`kfp_rules` and by `asynctrain run --compiled` before any task runs; the 2.1.0 spec
`asynctrain compile` writes is not."""

from __future__ import annotations

import pytest
import yaml
from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

from asynctrain import cli
from asynctrain.pipelines import dataset
from asynctrain.pipelines.config import load_config
from asynctrain.pipelines.kubeflow.compile import kfp_rules
from asynctrain.pipelines.pipeline import create_pipeline

pytestmark = pytest.mark.integration


def _tfx_spec(use_pipeline_spec_2_1: bool, **config) -> dict:
    loaded = load_config(None, **config)
    pipeline = create_pipeline(loaded, dataset.load(loaded), pipeline_root='/tmp/root')
    runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
        config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
            default_image='asynctrain:1', use_pipeline_spec_2_1=use_pipeline_spec_2_1
        )
    )
    return runner.run(pipeline, write_out=False)['pipelineSpec']


@pytest.fixture(scope='module')
def legacy_spec() -> dict:
    """Schema 2.0.0 with the analyzer cache's resolver: what TFX writes without the 2.1 flag."""
    return _tfx_spec(False, retraining={'analyzer_cache': True})


def test_a_2_0_spec_with_a_resolver_is_refused_for_each_reason(legacy_spec):
    found = kfp_rules.refusals(legacy_spec)
    by_kind = {}
    for refusal in found:
        by_kind.setdefault(refusal.source, []).append(refusal)

    (version,) = by_kind['backend/src/apiserver/template/v2_template.go']
    assert version.where == 'schemaVersion'
    assert version.reason == (
        'KFP only supports schema version 2.1.0, but the pipeline spec has version 2.0.0'
    )
    (resolver,) = by_kind['backend/src/v2/compiler/argocompiler/dag.go']
    assert resolver.where == 'deploymentSpec.executors.latest_transform_cache_executor'
    assert resolver.reason == 'resolver executors not implemented'
    legacy = by_kind['backend/src/v2/driver/resolve.go']
    # Every constant parameter of every task is in the legacy form in a 2.0.0 spec.
    assert 'root.dag.tasks.Transform.inputs.parameters.preprocessing_fn' in {
        r.where for r in legacy
    }
    assert all(
        r.reason == 'param runtime value spec of type '
        '*pipelinespec.ValueOrRuntimeParameter_ConstantValue not implemented'
        for r in legacy
    )
    assert len(found) == 2 + len(legacy)


def test_the_2_1_spec_of_the_same_pipeline_is_accepted():
    spec = _tfx_spec(True, retraining={'warm_start': True})
    assert kfp_rules.refusals(spec) == []


def test_a_non_container_executor_is_refused_by_label():
    spec = {
        'schemaVersion': '2.1.0',
        'deploymentSpec': {'executors': {'x_executor': {'customJob': {}}}},
    }
    (refusal,) = kfp_rules.refusals(spec)
    assert str(refusal) == (
        'deploymentSpec.executors.x_executor: executor(label="x_executor"): non-container and '
        'non-importer executor not implemented (KFP backend, backend/src/v2/compiler/visitor.go)'
    )


def test_run_compiled_refuses_before_running_anything(legacy_spec, tmp_path, capsys):
    path = tmp_path / 'legacy.yaml'
    path.write_text(yaml.safe_dump(legacy_spec))
    root = tmp_path / 'root'

    code = cli.main(['run', '--compiled', str(path), '--pipeline-root', str(root)])

    assert code == 2
    printed = capsys.readouterr().err
    assert 'open-source Kubeflow Pipelines would refuse this pipeline' in printed
    assert 'KFP only supports schema version 2.1.0' in printed
    assert 'resolver executors not implemented' in printed
    assert 'ValueOrRuntimeParameter_ConstantValue not implemented' in printed
    assert not root.exists()
