"""Compiles `create_pipeline` for Kubeflow Pipelines (KFP v2) or Vertex AI Pipelines.

A thin runner, like the local one: it only adds the pipeline root, the container image and the
Beam arguments, then hands the pipeline to TFX's `KubeflowV2DagRunner`, which writes

- `kubeflow`: the bare PipelineSpec as YAML, what the open-source KFP v2 backend accepts
  (`kfp.Client.upload_pipeline`, `asynctrain schedule`): schema 2.1.0, container executors only,
  parameters read as `parameterValues` (`kfp_rules` checks it before it is written);
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

from pipelines import kfp_rules
from pipelines.compile_options import (  # noqa: F401 (the runner's API)
    DEFAULT_IMAGE_HINT,
    TARGETS,
    CompileOptions,
    check_target,
    default_image,
)
from pipelines.config import PipelineConfig
from pipelines.pipeline import create_pipeline


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
    pipeline = create_pipeline(config, pipeline_root=options.pipeline_root)
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
