"""`compiled_pipeline`: the compiled YAML (or a PipelineJob's JSON) read once into kfp's
PipelineSpec proto, its executors typed, the tasks each task runs after and the order they run in,
and the plain values of what the proto keeps as `Value`s."""

from __future__ import annotations

import json

import pytest
import yaml

from asynctrain.pipelines.kubeflow.compile import compiled_pipeline

DOCUMENT = {
    'schemaVersion': '2.1.0',
    'pipelineInfo': {'name': 'p'},
    'defaultPipelineRoot': 's3://bucket/root',
    'components': {'c': {'executorLabel': 'e'}},
    'deploymentSpec': {
        'executors': {
            'e': {
                'container': {
                    'image': 'asynctrain:1',
                    'command': [
                        'python',
                        '-m',
                        'asynctrain.pipelines.kubeflow.container.kfp_entrypoint',
                    ],
                    'args': ['--executor_class_path', 'a.b.Executor'],
                }
            },
            'i': {'importer': {'artifactUri': {'constant': 's3://bucket/schema'}}},
        }
    },
    'root': {
        'dag': {
            'tasks': {
                'a': {'componentRef': {'name': 'c'}},
                'b': {
                    'componentRef': {'name': 'c'},
                    'dependentTasks': ['z'],
                    'inputs': {
                        'artifacts': {
                            'examples': {
                                'taskOutputArtifact': {
                                    'producerTask': 'a',
                                    'outputArtifactKey': 'o',
                                }
                            }
                        },
                        'parameters': {
                            'count': {
                                'taskOutputParameter': {
                                    'producerTask': 'q',
                                    'outputParameterKey': 'n',
                                }
                            },
                            'rate': {'runtimeValue': {'constant': 0.5}},
                            'day': {'componentInputParameter': 'day'},
                        },
                    },
                },
            }
        }
    },
}


def test_the_yaml_is_read_into_the_proto_with_its_executors_typed(tmp_path):
    path = tmp_path / 'pipeline.yaml'
    path.write_text('# PIPELINE DEFINITION\n' + yaml.safe_dump(DOCUMENT))

    assert compiled_pipeline.read_document(str(path)) == DOCUMENT
    pipeline = compiled_pipeline.load(str(path))
    assert pipeline.pipeline_info.name == 'p'
    assert pipeline.default_pipeline_root == 's3://bucket/root'
    assert (
        pipeline.root.dag.tasks['b'].inputs.parameters['rate'].runtime_value.constant.number_value
        == 0.5
    )
    executors = compiled_pipeline.executors(pipeline)
    assert sorted(executors) == ['e', 'i']
    assert (
        list(executors['e'].container.command)
        == DOCUMENT['deploymentSpec']['executors']['e']['container']['command']
    )
    assert executors['i'].WhichOneof('spec') == 'importer'
    assert executors['i'].importer.artifact_uri.constant.string_value == 's3://bucket/schema'


def test_a_pipeline_job_gives_its_pipeline_spec(tmp_path):
    path = tmp_path / 'job.json'
    path.write_text(json.dumps({'displayName': 'p', 'pipelineSpec': DOCUMENT}))

    assert compiled_pipeline.load(str(path)).pipeline_info.name == 'p'


def test_upstream_tasks_are_the_dependencies_and_the_producers_of_inputs():
    tasks = compiled_pipeline.parse(DOCUMENT).root.dag.tasks

    assert compiled_pipeline.upstream_tasks(tasks['a']) == set()
    # A pipeline input (`componentInputParameter`) and a constant name no task.
    assert compiled_pipeline.upstream_tasks(tasks['b']) == {'a', 'q', 'z'}


def test_tasks_run_after_their_producers_ties_by_name():
    def task(producer=None):
        consumed = {'taskOutputArtifact': {'producerTask': producer, 'outputArtifactKey': 'out'}}
        inputs = {'inputs': {'artifacts': {'examples': consumed}}} if producer else {}
        return {'componentRef': {'name': 'c'}, **inputs}

    tasks = {'d': task('b'), 'b': task('a'), 'c': task('a'), 'a': task()}
    tasks['c']['dependentTasks'] = ['d']
    spec = {**DOCUMENT, 'root': {'dag': {'tasks': tasks}}}
    assert compiled_pipeline.task_order(compiled_pipeline.parse(spec)) == ['a', 'b', 'd', 'c']


def test_components_parameter_types_and_values_read_as_the_document_writes_them():
    spec = {
        **DOCUMENT,
        'components': {
            'c': {
                'executorLabel': 'e',
                'inputDefinitions': {
                    'parameters': {
                        'n': {'parameterType': 'NUMBER_INTEGER', 'defaultValue': 3},
                        'untyped': {'isOptional': True},
                    }
                },
            }
        },
    }
    pipeline = compiled_pipeline.parse(spec)
    tasks = pipeline.root.dag.tasks
    parameters = compiled_pipeline.component(pipeline, tasks['a']).input_definitions.parameters
    assert compiled_pipeline.parameter_type(parameters['n']) == 'NUMBER_INTEGER'
    assert compiled_pipeline.parameter_type(parameters['untyped']) == ''
    # Every number of a `Value` is a double: the proto has no integers.
    assert compiled_pipeline.plain(parameters['n'].default_value) == 3.0
    rate = tasks['b'].inputs.parameters['rate']
    assert compiled_pipeline.json_name(rate, rate.WhichOneof('kind')) == 'runtimeValue'
    assert compiled_pipeline.json_name(rate, None) == 'none'
    with pytest.raises(KeyError, match='gone'):
        compiled_pipeline.component(
            pipeline, compiled_pipeline.PipelineTaskSpec(component_ref={'name': 'gone'})
        )
    assert 'gone' not in pipeline.components


def test_what_the_proto_does_not_accept_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r'not a PipelineSpec that kfp reads: .*cachingOption'):
        compiled_pipeline.parse(
            {**DOCUMENT, 'root': {'dag': {'tasks': {'a': {'cachingOption': {}}}}}}
        )
    path = tmp_path / 'list.yaml'
    path.write_text('- a\n')
    with pytest.raises(ValueError, match=r'list.yaml: expected a PipelineSpec mapping, got list'):
        compiled_pipeline.read_document(str(path))
