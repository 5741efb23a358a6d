"""Compiles `create_pipeline` for Kubeflow Pipelines (KFP v2) or Vertex AI Pipelines.

A thin runner, like the local one: it only adds the pipeline root, the container image and the
Beam arguments, then hands the pipeline to TFX's `KubeflowV2DagRunner`, which writes

- `kubeflow`: the bare PipelineSpec as YAML, what the open-source KFP v2 backend accepts
  (`kfp.Client.upload_pipeline`, `asynctrain schedule`): schema 2.1.0, container executors only,
  parameters read as `parameterValues` (`kfp_rules` checks it before it is written); every
  container runs our entrypoint (`kfp_entrypoint`), a layer over TFX's that survives what the
  open-source driver and launcher hand a step (tensorflow/tfx#7768), given each component's
  output definitions and how its executor reaches artifacts (`container_entrypoints`);
- `vertex`: the PipelineJob as JSON (PipelineSpec plus runtime config), what Vertex AI runs.

Both are schema 2.1.0 (`use_pipeline_spec_2_1`): the only version the open-source API server
stores, and one Vertex AI runs too.

Compiling makes no network call and writes only the output file: the pipeline root is a string
placed in the spec, never opened here.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from tfx.components.util import udf_utils
from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

from asynctrain.components.shared import beam_runner
from asynctrain.pipelines import dataset
from asynctrain.pipelines.config import PipelineConfig
from asynctrain.pipelines.kubeflow.compile import kfp_rules
from asynctrain.pipelines.kubeflow.compile.compile_options import CompileOptions, check_target
from asynctrain.pipelines.pipeline import create_pipeline


def _refuse_module_file_upload(pipeline: Any, pipeline_root: str) -> None:
    """Keeps compiling offline: TFX would package a user module file into a remote root now.

    `KubeflowV2DagRunner.run` builds a wheel of every component's `module_file` and copies it to
    the pipeline root while compiling. For a local root that is a file write; for `gs://` or
    `s3://` it is an upload, so it is refused with the way out.
    """
    if '://' not in pipeline_root:
        return
    for component in pipeline.components:
        # TFX keeps these futures on a private attribute; it is the only record of them.
        for dependency in getattr(component, '_pip_dependencies', ()):
            if isinstance(
                dependency, udf_utils.UserModuleFilePipDependency
            ) and component.exec_properties.get(dependency.module_file_key):
                raise ValueError(
                    f'{component.id}: its module file would be uploaded to {pipeline_root} while '
                    'compiling; build the module into the image (kubeflow/Dockerfile) and leave '
                    'preprocessing_module unset, or compile with a local --pipeline-root'
                )


TFX_ENTRYPOINT = 'tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor'
ENTRYPOINT = 'asynctrain.pipelines.kubeflow.container.kfp_entrypoint'
# Executors whose work leaves the step's pod when the config says so: they are given object-store
# URIs rather than the launcher's local copies (`kfp_entrypoint`, `--artifact_access`).
_TRAINER_EXECUTOR = 'asynctrain.components.trainer.executor.Executor'
_TFX_FLAGS = (
    '--executor_class_path',
    '--json_serialized_invocation_args',
    '--json_serialized_inputs_spec_args',
)


def artifact_access(config: PipelineConfig, executor_class_path: str, is_beam: bool) -> str:
    """How a step's executor reaches its artifacts: `object_store` where its work runs outside the
    step's pod (the Trainer's TFJob replicas; Beam workers of a runner other than the direct one),
    `staged` (the launcher's local copies) otherwise."""
    if executor_class_path == _TRAINER_EXECUTOR and config.trainer.distribution.cluster == 'tfjob':
        return 'object_store'
    if is_beam and not beam_runner.is_direct(config.beam_pipeline_args):
        return 'object_store'
    return 'staged'


# Steps whose result depends on more than their inputs and parameters: the day's CSV folder
# (ExampleGen) and the push destination (latest_blessed_model reads it, the Pusher writes it). A
# recurring run compiled once gives them the same parameters every day, so KFP's cache, on for
# every task by default (`cachingOptions.enableCache`; backend/src/v2/cacheutils/cache.go keys on
# inputs, parameters, image and command), would hand back the first day's outputs for good.
UNCACHED_EXECUTORS = (
    'asynctrain.components.example_gen.executor.Executor',
    'asynctrain.components.latest_blessed_model.executor.Executor',
    'tfx.components.pusher.executor.Executor',
)


def _executor_class_path(container: dict[str, Any]) -> str:
    args = container.get('args', [])
    return args[args.index('--executor_class_path') + 1] if '--executor_class_path' in args else ''


def uncache_outside_readers(document: dict[str, Any]) -> None:
    """Turns KFP's cache off, in place, for the tasks of `UNCACHED_EXECUTORS`. Their outputs are new
    artifacts each run, so the tasks after them run again too, on what they produced."""
    executors = document['deploymentSpec']['executors']
    for task in document['root']['dag']['tasks'].values():
        component = document['components'][task['componentRef']['name']]
        container = executors[component['executorLabel']].get('container', {})
        if _executor_class_path(container) in UNCACHED_EXECUTORS:
            task['cachingOptions'] = {'enableCache': False}


def container_entrypoints(document: dict[str, Any], config: PipelineConfig) -> None:
    """Points every TFX container of the PipelineSpec `document` at `kfp_entrypoint`, in place:
    the same arguments, plus the component's output definitions and its `--artifact_access`."""
    from tfx.dsl.components.base import base_beam_executor
    from tfx.utils import import_utils

    executors = document['deploymentSpec']['executors']
    for component in document['components'].values():
        container = executors[component['executorLabel']].get('container')
        if not container or container.get('command', [])[-1:] != [TFX_ENTRYPOINT]:
            continue
        args = list(container.get('args', []))
        class_path = _executor_class_path(container)
        is_beam = issubclass(
            import_utils.import_class_by_path(class_path), base_beam_executor.BaseBeamExecutor
        )
        container['command'] = [*container['command'][:-1], ENTRYPOINT]
        # TFX writes its flags as pairs, then Beam's arguments; ours go between.
        beam_start = 0
        while beam_start < len(args) and args[beam_start] in _TFX_FLAGS:
            beam_start += 2
        ours = [
            '--json_serialized_outputs_spec_args',
            json.dumps(component.get('outputDefinitions', {}), sort_keys=True),
            '--artifact_access',
            artifact_access(config, class_path, is_beam),
        ]
        container['args'] = [*args[:beam_start], *ours, *args[beam_start:]]


def compile_pipeline(config: PipelineConfig, options: CompileOptions) -> dict[str, Any]:
    """Writes the compiled pipeline to `options.output` and returns what was written.

    For `kubeflow` that is the PipelineSpec, with `defaultPipelineRoot` set to the pipeline root
    (the open-source backend reads the root from there; TFX's runner only puts it in the
    PipelineJob's runtime config, which that backend never sees). For `vertex` it is the
    PipelineJob: the PipelineSpec plus `runtimeConfig.gcsOutputDirectory`.
    """
    check_target(config, options.target)
    if options.beam_pipeline_args is not None:
        config = dataclasses.replace(config, beam_pipeline_args=tuple(options.beam_pipeline_args))
    pipeline = create_pipeline(config, dataset.load(config), pipeline_root=options.pipeline_root)
    _refuse_module_file_upload(pipeline, options.pipeline_root)
    runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
        config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
            display_name=config.pipeline_name,
            default_image=options.image,
            use_pipeline_spec_2_1=True,
        )
    )
    job = runner.run(pipeline, write_out=False)
    if options.target == 'kubeflow':
        document = {**job['pipelineSpec'], 'defaultPipelineRoot': options.pipeline_root}
        container_entrypoints(document, config)
        uncache_outside_readers(document)
        # Fails here, not at upload, if the document is not a PipelineSpec this kfp can read.
        json_format.ParseDict(document, pipeline_spec_pb2.PipelineSpec())
        # And here, not on the cluster, if the open-source backend would refuse it.
        kfp_rules.check(document)
        text = f'# PIPELINE DEFINITION\n# Name: {config.pipeline_name}\n' + yaml.safe_dump(
            document, sort_keys=True
        )
    else:
        document = job
        json_format.ParseDict(document, pipeline_spec_pb2.PipelineJob())
        text = json.dumps(document, indent=2, sort_keys=True) + '\n'
    with open(options.output, 'w', encoding='utf-8') as f:
        f.write(text)
    return document
