"""Tests for asynctrain/pipelines/kubeflow/compile/kubeflow_runner.py and `asynctrain compile`.

The compiled files are read back with kfp's own protos (`pipeline_spec_pb2.PipelineSpec` for the
KFP YAML, `PipelineJob` for the Vertex JSON) and compared, step by step, with the TFX pipeline
`create_pipeline` builds: every component is a task whose executor runs the given image with
our entrypoint over TFX's Kubeflow V2 one (`kfp_entrypoint`), its own executor class, the
component's own input and output definitions and the Beam arguments.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
import sys

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from tfx.dsl.components.base import base_component
from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

from asynctrain import cli
from asynctrain.components.shared import versions
from asynctrain.pipelines import dataset
from asynctrain.pipelines.config import bundled_data_dir, load_config
from asynctrain.pipelines.kubeflow.compile import compile_options, kfp_rules, kubeflow_runner
from asynctrain.pipelines.pipeline import PREPROCESSING_FN, create_pipeline

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = pytest.mark.xdist_group('pipelines.kubeflow.compile.kubeflow_runner_test')

IMAGE = 'registry.example/asynctrain:1.2.3'
ROOT = 'gs://asynctrain-test/root'


@pytest.fixture(scope='module')
def config_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('config') / 'deploy.yaml'
    path.write_text(
        yaml.safe_dump(
            {
                'pipeline_name': 'taxi-daily',
                'beam_pipeline_args': ['--direct_num_workers=2'],
                'retraining': {'warm_start': True},
                'evaluation': {'baseline': 'latest_blessed'},
            }
        )
    )
    return path


@pytest.fixture(scope='module')
def expected_components(config_file):
    """Component id -> executor class path, for every node of the TFX pipeline: with warm start
    and the latest-blessed baseline on, still no resolver node (none runs on open-source KFP)."""
    config = load_config(str(config_file))
    pipeline = create_pipeline(config, dataset.load(config), pipeline_root=ROOT)
    expected = {}
    for component in pipeline.components:
        assert isinstance(component, base_component.BaseComponent), component.id
        executor = component.executor_spec.executor_class
        expected[component.id] = f'{executor.__module__}.{executor.__name__}'
    return expected


@pytest.fixture(scope='module')
def kubeflow_yaml(tmp_path_factory, config_file):
    output = tmp_path_factory.mktemp('kfp') / 'pipeline.yaml'
    code = cli.main(
        [
            'compile',
            '--target',
            'kubeflow',
            '--output',
            str(output),
            '--image',
            IMAGE,
            '--pipeline-root',
            ROOT,
            '--config',
            str(config_file),
        ]
    )
    assert code == 0
    return output


def _executor_args(spec: pipeline_spec_pb2.PipelineSpec) -> dict:
    deployment = json_format.MessageToDict(spec.deployment_spec)
    return {
        label: executor['container']
        for label, executor in deployment['executors'].items()
        if 'container' in executor
    }


def test_kubeflow_yaml_loads_as_a_pipeline_spec_naming_every_component(
    kubeflow_yaml, expected_components
):
    text = kubeflow_yaml.read_text()
    assert text.startswith('# PIPELINE DEFINITION\n# Name: taxi-daily\n')
    (document,) = yaml.safe_load_all(text)  # one bare PipelineSpec, not a PipelineJob
    spec = json_format.ParseDict(document, pipeline_spec_pb2.PipelineSpec())

    assert spec.pipeline_info.name == 'taxi-daily'
    assert spec.default_pipeline_root == ROOT
    # The only version the open-source API server stores; nothing it would refuse.
    assert spec.schema_version == '2.1.0'
    assert kfp_rules.refusals(document) == []
    # The TFX that compiled it: 1.16.0 or 1.21.0, the line under test.
    assert spec.sdk_version == f'tfx-{importlib.metadata.version("tfx")}'
    assert set(expected_components) == set(spec.root.dag.tasks)
    assert {
        'CsvExampleGen',
        'Transform',
        'latest_blessed_model',
        'Trainer',
        'Evaluator',
        'Pusher',
    } <= set(expected_components)
    # Every task runs a container: no resolver (Vertex AI only) for the latest blessed model.
    deployment = json_format.MessageToDict(spec.deployment_spec)['executors']
    assert {kind for executor in deployment.values() for kind in executor} == {'container'}
    trainer_inputs = spec.root.dag.tasks['Trainer'].inputs.artifacts
    assert trainer_inputs['base_model'].task_output_artifact.producer_task == 'latest_blessed_model'
    evaluator_inputs = spec.root.dag.tasks['Evaluator'].inputs.artifacts
    assert (
        evaluator_inputs['baseline_model'].task_output_artifact.producer_task
        == 'latest_blessed_model'
    )
    containers = _executor_args(spec)
    for component_id, executor_class in expected_components.items():
        assert spec.root.dag.tasks[component_id].component_ref.name == component_id
        label = spec.components[component_id].executor_label
        assert label == f'{component_id}_executor'
        container = containers[label]
        assert container['image'] == IMAGE
        # TFX's command, our module: the entrypoint that survives KFP's driver and launcher.
        assert container['command'] == [
            *kubeflow_v2_dag_runner.KUBEFLOW_TFX_CMD[:-1],
            'asynctrain.pipelines.kubeflow.container.kfp_entrypoint',
        ]
        args = container['args']
        assert args[:4] == [
            '--executor_class_path',
            executor_class,
            '--json_serialized_invocation_args',
            '{{$}}',
        ], component_id
        # Schema 2.1: the entrypoint reads parameterValues with the types of the inputs spec.
        assert args[4] == '--json_serialized_inputs_spec_args'
        inputs_spec = json_format.MessageToDict(spec.components[component_id].input_definitions)
        assert json.loads(args[5]) == inputs_spec, component_id
        # The types of the outputs too, which the driver never sends (`kfp_entrypoint`).
        assert args[6] == '--json_serialized_outputs_spec_args'
        outputs_spec = json_format.MessageToDict(spec.components[component_id].output_definitions)
        assert json.loads(args[7]) == outputs_spec, component_id
        # Every step reads the launcher's local copies: nothing here runs outside its pod.
        assert args[8:10] == ['--artifact_access', 'staged'], component_id
        assert args[10:] == ['--direct_num_workers=2'], component_id  # the config's Beam args
    # KFP caches every task by default; the ones reading the day's folder or the push
    # destination must run every day.
    uncached = {
        name for name, task in spec.root.dag.tasks.items() if not task.caching_options.enable_cache
    }
    assert uncached == {'CsvExampleGen', 'latest_blessed_model', 'Pusher'}


@pytest.mark.parametrize(
    ('settings', 'object_store_steps'),
    [
        (
            {
                'trainer': {
                    'distribution': {'cluster': 'tfjob'},
                    'kubernetes': {'image': IMAGE},
                }
            },
            {'Trainer'},
        ),
        (
            {'beam_pipeline_args': ['--runner=PortableRunner', '--job_endpoint=localhost:8099']},
            {'CsvExampleGen', 'Transform', 'ExampleBatcher', 'Evaluator'},  # the Beam-based ones
        ),
    ],
)
def test_steps_whose_work_leaves_the_pod_get_object_store_uris(
    tmp_path, settings, object_store_steps
):
    config = tmp_path / 'c.yaml'
    config.write_text(yaml.safe_dump(settings))
    output = tmp_path / 'p.yaml'
    args = ['compile', '--output', str(output), '--pipeline-root', ROOT, '--config', str(config)]
    assert cli.main(args) == 0
    document = yaml.safe_load(output.read_text())
    access = {}
    for name, component in document['components'].items():
        container = document['deploymentSpec']['executors'][component['executorLabel']]
        container_args = container['container']['args']
        access[name] = container_args[container_args.index('--artifact_access') + 1]
    assert {n for n, a in access.items() if a == 'object_store'} == object_store_steps
    assert set(access.values()) == {'object_store', 'staged'}


def test_kubeflow_yaml_carries_the_components_parameters(kubeflow_yaml):
    spec = json_format.ParseDict(
        yaml.safe_load(kubeflow_yaml.read_text()), pipeline_spec_pb2.PipelineSpec()
    )
    transform = json_format.MessageToDict(spec.root.dag.tasks['Transform'])
    # `runtimeValue.constant`: the legacy `constantValue` is what the open-source driver refuses.
    assert transform['inputs']['parameters']['preprocessing_fn'] == {
        'runtimeValue': {'constant': PREPROCESSING_FN}
    }
    # Transform analyzes the ExampleGen's Parquet copy of the examples.
    assert transform['inputs']['artifacts']['examples']['taskOutputArtifact'] == {
        'producerTask': 'CsvExampleGen',
        'outputArtifactKey': 'parquet_examples',
    }
    evaluator = json_format.MessageToDict(spec.root.dag.tasks['Evaluator'])
    eval_config = json.loads(
        evaluator['inputs']['parameters']['eval_config']['runtimeValue']['constant']
    )
    metrics = {m['class_name']: m for spec in eval_config['metrics_specs'] for m in spec['metrics']}
    assert metrics['AUC']['threshold']['value_threshold']['lower_bound'] == 0.6  # the blessing rule


def test_vertex_json_loads_as_a_pipeline_job_with_beam_args_replaced(
    tmp_path, config_file, expected_components
):
    output = tmp_path / 'pipeline.json'
    code = cli.main(
        [
            'compile',
            '--target',
            'vertex',
            '--output',
            str(output),
            '--image',
            IMAGE,
            '--pipeline-root',
            ROOT,
            '--config',
            str(config_file),
            '--beam-arg=--runner=DataflowRunner',
            '--',
            '--project=p',
            '--region=r',
        ]
    )

    assert code == 0
    job = json_format.Parse(output.read_text(), pipeline_spec_pb2.PipelineJob())
    assert job.display_name == 'taxi-daily'
    assert job.runtime_config.gcs_output_directory == ROOT
    spec = json_format.ParseDict(
        json_format.MessageToDict(job.pipeline_spec), pipeline_spec_pb2.PipelineSpec()
    )
    containers = _executor_args(spec)
    assert set(expected_components) <= set(spec.root.dag.tasks)
    for component_id, executor_class in expected_components.items():
        container = containers[f'{component_id}_executor']
        assert container['image'] == IMAGE
        assert container['args'][:2] == ['--executor_class_path', executor_class]
        assert container['args'][-3:] == ['--runner=DataflowRunner', '--project=p', '--region=r']


def test_compiling_makes_no_network_call(tmp_path, config_file, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f'network access while compiling: {args!r}')

    monkeypatch.setattr(socket.socket, 'connect', refuse)
    monkeypatch.setattr(socket.socket, 'connect_ex', refuse)
    monkeypatch.setattr(socket, 'getaddrinfo', refuse)
    monkeypatch.chdir(tmp_path)

    document = kubeflow_runner.compile_pipeline(
        load_config(str(config_file)),
        compile_options.CompileOptions(
            target='kubeflow', output='out.yaml', image=IMAGE, pipeline_root=ROOT
        ),
    )

    assert document['defaultPipelineRoot'] == ROOT
    assert sorted(p.name for p in tmp_path.iterdir()) == ['out.yaml']  # nothing else written


def test_a_module_file_with_a_remote_root_is_refused_before_uploading(tmp_path):
    module = tmp_path / 'my_preprocessing.py'
    module.write_text('def preprocessing_fn(inputs):\n  return inputs\n')
    config = load_config(None, preprocessing_module=str(module))
    options = compile_options.CompileOptions(
        target='kubeflow', output=str(tmp_path / 'p.yaml'), image=IMAGE, pipeline_root=ROOT
    )

    with pytest.raises(
        ValueError,
        match='Transform: its module file would be uploaded to gs://asynctrain-test/root',
    ):
        kubeflow_runner.compile_pipeline(config, options)
    assert not (tmp_path / 'p.yaml').exists()


@pytest.mark.parametrize(
    'args, message',
    [
        (
            ['--target', 'kubeflow', '--output', 'p.json'],
            "output: the kubeflow target writes .yaml or .yml files, got 'p.json'",
        ),
        (
            ['--target', 'vertex', '--output', 'p.yaml'],
            "output: the vertex target writes .json files, got 'p.yaml'",
        ),
    ],
)
def test_bad_options_name_the_field(tmp_path, capsys, args, message):
    code = cli.main(['compile', *args, '--image', IMAGE, '--pipeline-root', ROOT])
    assert code == 2
    assert message in capsys.readouterr().out


def test_image_must_be_tagged():
    with pytest.raises(ValueError, match='image: expected a tagged image reference'):
        compile_options.CompileOptions(
            target='kubeflow',
            output='p.yaml',
            image='registry.example:5000/asynctrain',
            pipeline_root=ROOT,
        )
    assert compile_options.CompileOptions(
        target='kubeflow', output='p.yaml', image='r.example:5000/a@sha256:ab', pipeline_root=ROOT
    )


def test_image_and_pipeline_root_default_to_the_local_tag_and_the_configs_root(
    tmp_path, config_file, capsys
):
    output = tmp_path / 'pipeline.yaml'

    assert (
        cli.main(
            [
                'compile',
                '--target',
                'kubeflow',
                '--output',
                str(output),
                '--config',
                str(config_file),
            ]
        )
        == 0
    )

    spec = json_format.ParseDict(
        yaml.safe_load(output.read_text()), pipeline_spec_pb2.PipelineSpec()
    )
    assert spec.default_pipeline_root == load_config(str(config_file)).pipeline_root
    images = {c['image'] for c in _executor_args(spec).values()}
    # The local tag of the line's own image: asynctrain:<version> on 1.16, <version>-tfx121 on 1.21.
    version = importlib.metadata.version('asynctrain')
    expected = {'tfx116': f'asynctrain:{version}', 'tfx121': f'asynctrain:{version}-tfx121'}
    assert images == {expected[versions.LINE]}
    assert f'image {expected[versions.LINE]}' in capsys.readouterr().out


def test_the_analyzer_cache_is_refused_for_kubeflow_by_its_field_and_kept_for_vertex(
    tmp_path, capsys
):
    config_file = tmp_path / 'cache.yaml'
    config_file.write_text(yaml.safe_dump({'retraining': {'analyzer_cache': True}}))
    base = ['compile', '--image', IMAGE, '--pipeline-root', ROOT, '--config', str(config_file)]

    code = cli.main([*base, '--target', 'kubeflow', '--output', str(tmp_path / 'p.yaml')])

    assert code == 2
    printed = capsys.readouterr().out
    assert 'retraining.analyzer_cache: true needs an ML Metadata resolver task' in printed
    assert 'resolver executors not implemented' in printed
    assert not (tmp_path / 'p.yaml').exists()
    # Vertex AI runs resolver tasks: the cache's resolver compiles there.
    assert cli.main([*base, '--target', 'vertex', '--output', str(tmp_path / 'p.json')]) == 0
    job = json.loads((tmp_path / 'p.json').read_text())
    executors = job['pipelineSpec']['deploymentSpec']['executors']
    assert [label for label, e in executors.items() if 'resolver' in e] == [
        'latest_transform_cache_executor'
    ]


def test_compile_prints_its_own_line_only(tmp_path):
    """TensorFlow's and TFX's lines go to the log file, as for `asynctrain run`."""
    output = tmp_path / 'pipeline.yaml'
    done = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), 'asynctrain'),
            'compile',
            '--target',
            'kubeflow',
            '--output',
            str(output),
            '--image',
            IMAGE,
            '--pipeline-root',
            ROOT,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ''
    lines = done.stdout.splitlines()
    assert lines[0] == (
        f"wrote {output}: kubeflow pipeline 'asynctrain-taxi', 10 steps, image {IMAGE}, "
        f'pipeline root {ROOT}'
    )
    # The default config's input folder and push destination are local paths, which a step's
    # pod does not have: said, by task and parameter.
    assert [line.split(' is a local path')[0] for line in lines[1:]] == [
        f'  warning: CsvExampleGen.input_base: {bundled_data_dir()}',
        # The pipeline's own folder of the default work dir (`work_dir_layout`).
        '  warning: Pusher.push_destination: '
        + os.path.abspath('runs/local/asynctrain-taxi/serving_model'),
        '  warning: latest_blessed_model.push_destination: '
        + os.path.abspath('runs/local/asynctrain-taxi/serving_model'),
    ]
