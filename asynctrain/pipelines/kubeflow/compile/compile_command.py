"""`asynctrain compile`: write the pipeline for Kubeflow Pipelines or Vertex AI.

    asynctrain compile --target kubeflow --output pipeline.yaml \\
        [--image gcr.io/PROJECT/asynctrain:1] [--pipeline-root gs://BUCKET/asynctrain] \\
        [--config deploy.yaml] [--beam-arg=--runner=DataflowRunner ...] [-- BEAM ARGS]

Without `--image`, every step runs the local tag `asynctrain:<version>` (for clusters that load
local images, such as kind or minikube; pass the pushed image otherwise); without
`--pipeline-root`, the config's `<work_dir>/<pipeline_name>/pipeline_root`.

Beam arguments given with `--beam-arg` (repeatable) or after `--` replace the config's
`beam_pipeline_args`; with neither, the config's are compiled in.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from asynctrain.components.shared.yaml_config import ConfigError
from asynctrain.pipelines.config import load_config
from asynctrain.pipelines.kubeflow.compile import compile_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--target',
        choices=compile_options.TARGETS,
        default='kubeflow',
        help='kubeflow: PipelineSpec YAML for open-source KFP; vertex: PipelineJob JSON',
    )
    parser.add_argument(
        '--output', required=True, help='file to write (.yaml for kubeflow, .json for vertex)'
    )
    parser.add_argument(
        '--image',
        help=f'container image of every step: {compile_options.DEFAULT_IMAGE_HINT}; '
        'default the local tag asynctrain:<version>',
    )
    parser.add_argument(
        '--pipeline-root',
        help='artifact root the cluster writes, e.g. gs://bucket/asynctrain; '
        "default the config's pipeline root (<work_dir>/<pipeline_name>/pipeline_root)",
    )
    parser.add_argument(
        '--config', help='pipeline config YAML (asynctrain/pipelines/config.py); defaults otherwise'
    )
    parser.add_argument(
        '--beam-arg',
        action='append',
        dest='beam_arg',
        metavar='ARG',
        help='a Beam pipeline argument for every Beam-based step, e.g. --beam-arg=--runner=DataflowRunner',
    )


def run(args: argparse.Namespace) -> int:
    beam_args = [*(args.beam_arg or []), *(getattr(args, 'beam_args', None) or [])]
    try:
        config = load_config(args.config)
        options = compile_options.CompileOptions(
            target=args.target,
            output=args.output,
            image=args.image or compile_options.default_image(),
            pipeline_root=args.pipeline_root or config.pipeline_root,
            beam_pipeline_args=tuple(beam_args) if beam_args else None,
        )
        compile_options.check_target(config, args.target)
    except (ConfigError, ValueError) as error:
        print(f'asynctrain compile: {error}')
        return 2
    from asynctrain.components.shared import console

    # TensorFlow's import-time lines and TFX's logs go to a file, as for `asynctrain run`.
    log_path = console.new_log_path(os.path.join(tempfile.gettempdir(), 'asynctrain'), 'compile')
    try:
        with console.quiet(log_path):
            from asynctrain.pipelines.kubeflow.compile import kubeflow_runner

            document = kubeflow_runner.compile_pipeline(config, options)
    except ValueError as error:  # kfp_rules.PipelineRefused, a module file with a remote root
        print(f'asynctrain compile: {error}\n  log: {log_path}')
        return 2
    spec = document.get('pipelineSpec', document)
    print(
        f'wrote {args.output}: {args.target} pipeline {config.pipeline_name!r}, '
        f'{len(spec["root"]["dag"]["tasks"])} steps, image {options.image}, '
        f'pipeline root {options.pipeline_root}'
    )
    from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
    from asynctrain.pipelines.kubeflow.container import kfp_storage

    for where in kfp_storage.pod_local_paths(compiled_pipeline.parse(spec)):
        print(
            f"  warning: {where} is a local path: a step's pod starts without it and loses what "
            'it writes there; give a gs:// or s3:// URI (docs/kubeflow.md, where artifacts live)'
        )
    return 0
