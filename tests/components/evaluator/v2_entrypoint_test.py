"""Our Evaluator and stock Evaluator through TFX's Kubeflow V2 entrypoint, the command every
compiled task runs: on the same inputs, the ModelBlessing each publishes in its executor output
carries the same properties, the model ids rewritten into the run's artifact names
(`refactor_model_blessing`), which the entrypoint does for stock Evaluator's class only."""

from __future__ import annotations

import argparse
import json
import os

import pytest
from google.protobuf import json_format
from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor

from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines import tfma_config
from asynctrain.pipelines.config import load_config
from asynctrain.pipelines.kubeflow.local_backend import kfp_driver
from tests.components.evaluator import evaluator_testdata as data

pytestmark = pytest.mark.integration

TYPES = {
    name: {'instanceSchema': f'title: tfx.{name}\ntype: object\n'}
    for name in ('Examples', 'Model', 'ModelEvaluation', 'ModelBlessing')
}
OURS = 'asynctrain.components.evaluator.executor.Executor'
STOCK = 'tfx.components.evaluator.executor.Executor'


@pytest.fixture(scope='module')
def inputs(tmp_path_factory):
    """Examples with an eval split, a candidate and a baseline model, as a run hands them on:
    each named by its ML Metadata id."""
    root = tmp_path_factory.mktemp('inputs')
    rows = data.random_rows(fc.MULTICLASS, 400, seed=5)
    data.write_gzip_tfrecords(
        str(root / 'examples' / 'Split-eval' / 'data'), data.serialize(rows), 2
    )
    data.save_model(fc.MULTICLASS, str(root / 'model' / 'Format-Serving'))
    data.save_model(fc.MULTICLASS, str(root / 'baseline' / 'Format-Serving'), 3.0)
    config = load_config(
        work_dir=str(root / 'work'),
        evaluation={'min_value': 0.3, 'baseline': 'latest_blessed', 'max_regression': 0.5},
    )
    eval_config = tfma_config.eval_config(config, fc.ColumnLabel(data.LABEL, fc.MULTICLASS))
    return {
        'artifacts': {
            'examples': [
                {
                    'name': '4',
                    'uri': str(root / 'examples'),
                    'type': TYPES['Examples'],
                    'metadata': {'split_names': '["eval"]'},
                }
            ],
            'model': [{'name': '17', 'uri': str(root / 'model'), 'type': TYPES['Model']}],
            'baseline_model': [
                {'name': '9', 'uri': str(root / 'baseline'), 'type': TYPES['Model']}
            ],
        },
        'parameters': {
            'eval_config': json_format.MessageToJson(eval_config),
            'example_splits': 'null',
        },
    }


def _published_blessing(inputs, executor_class: str, task_root) -> dict:
    """Runs `executor_class` through the entrypoint; the blessing as its executor output has it."""
    outputs = {
        'evaluation': [
            {
                'name': 'evaluation',
                'uri': f'{task_root}/evaluation',
                'type': TYPES['ModelEvaluation'],
            }
        ],
        'blessing': [
            {'name': 'blessing', 'uri': f'{task_root}/blessing', 'type': TYPES['ModelBlessing']}
        ],
    }
    os.makedirs(f'{task_root}/blessing')
    parameters = dict(inputs['parameters'])
    if executor_class == OURS:
        parameters['batch_size'] = 64
    invocation = kfp_driver.executor_input(
        parameters, inputs['artifacts'], outputs, f'{task_root}/output_metadata.json'
    )
    kubeflow_v2_run_executor._run_executor(
        argparse.Namespace(
            executor_class_path=executor_class,
            json_serialized_invocation_args=invocation,
            # As compiled with schema 2.1: the parameters' types, so parameterValues are read.
            json_serialized_inputs_spec_args=json.dumps(
                {
                    'parameters': {
                        name: {
                            'parameterType': 'NUMBER_INTEGER'
                            if isinstance(value, int)
                            else 'STRING'
                        }
                        for name, value in parameters.items()
                    }
                }
            ),
        ),
        [],
    )
    with open(f'{task_root}/output_metadata.json') as f:
        (blessing,) = json.load(f)['artifacts']['blessing']['artifacts']
    return blessing


def test_the_blessing_carries_what_stock_evaluators_does(inputs, tmp_path):
    ours = _published_blessing(inputs, OURS, tmp_path / 'ours')
    stock = _published_blessing(inputs, STOCK, tmp_path / 'stock')

    assert ours['metadata'] == stock['metadata']
    # The ids are the names the run gave the models, as a filter on them can match.
    assert ours['metadata']['current_model_id'] == '17'
    assert ours['metadata']['baseline_model_id'] == '9'
    assert ours['metadata']['blessed'] == 1
    assert ours['metadata']['current_model'] == inputs['artifacts']['model'][0]['uri']
    assert (
        os.listdir(tmp_path / 'ours' / 'blessing')
        == os.listdir(tmp_path / 'stock' / 'blessing')
        == ['BLESSED']
    )
