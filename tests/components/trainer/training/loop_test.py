"""In-process parameter-server training: it learns, it reports, it resumes, it traces once, and
its export stands alone."""

import gc
import json
import math
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import servers as cluster_lib
from asynctrain.components.trainer.training import evaluation, export, loop, run_files, task, tasks
from tests.components.trainer.trainer_testdata import (
    LABEL_KEY,
    TRAIN_STEPS,
    label_of,
    raw_example,
    raw_feature_spec,
    read_taxi_rows,
)

pytestmark = pytest.mark.integration


def test_training_beats_the_majority_class_baseline(trained_model):
    report = trained_model.report
    assert report.steps == TRAIN_STEPS
    evaluation = report.eval
    assert evaluation['examples'] == 1000
    assert evaluation['auc'] > 0.8
    # Log loss of always predicting the label mean: what a model that learned nothing gets.
    p = evaluation['label_mean']
    baseline_loss = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    assert evaluation['loss'] < 0.8 * baseline_loss
    assert evaluation['accuracy'] > 1 - p


def test_report_and_summaries(trained_model):
    with open(os.path.join(trained_model.model_run_dir, run_files.REPORT_FILE)) as f:
        report = json.load(f)
    assert {
        'examples_per_sec',
        'steps',
        'staleness_mean',
        'staleness_max',
        'eval',
        'input_wait_fraction',
        'seconds',
    } <= set(report)
    assert {'loss', 'auc'} <= set(report['eval'])
    assert report['steps'] == TRAIN_STEPS and report['initial_step'] == 0
    assert report['examples_per_sec'] > 0 and report['seconds'] > 0
    assert 0 <= report['staleness_mean'] <= report['staleness_max']
    assert 0 <= report['input_wait_fraction'] < 1
    # Remedies off: every gradient is sent as it is, dense or as embedding rows.
    assert report['gradient_bytes_per_step'] == report['dense_gradient_bytes_per_step'] > 0
    # Every step is counted once, by the worker that ran it (two in-process workers).
    assert set(report['worker_steps']) == {'0', '1'}
    assert sum(report['worker_steps'].values()) == TRAIN_STEPS
    tags, staleness_steps, latest = set(), 0, {}
    for path in tf.io.gfile.glob(os.path.join(trained_model.model_run_dir, 'events.out.*')):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                tags.add(value.tag)
                latest[value.tag] = tf.make_ndarray(value.tensor)
                if value.tag == 'train/staleness':
                    staleness_steps += int(latest[value.tag][:, 2].sum())
    assert {
        'train/loss',
        'train/examples_per_sec',
        'train/staleness_mean',
        'train/staleness_max',
        'train/input_wait_fraction',
        'train/gradient_bytes_per_step',
        'train/worker_steps_per_sec/worker_0',
        'train/worker_steps_per_sec/worker_1',
        'train/staleness',
        'train/gradient_norm/global',
        'train/gradient_norm/hidden_0/kernel',
        'eval/loss',
        'eval/auc',
    } <= tags
    # The staleness histograms cover every step once.
    assert staleness_steps == TRAIN_STEPS
    assert latest['train/gradient_norm/global'] > 0
    # A gradient histogram counts each entry of the variable once: 64 biases, a 32 x 1 kernel.
    assert latest['gradients/hidden_0/bias'][:, 2].sum() == 64
    assert latest['gradients/logits/kernel'][:, 2].sum() == 32
    assert {t for t in tags if t.startswith('gradients/')} == {
        f'gradients/{variable["name"]}' for variable in report['placement']['model']
    }
    checkpoints = tf.train.get_checkpoint_state(
        os.path.join(trained_model.model_run_dir, run_files.CHECKPOINT_SUBDIR)
    )
    assert checkpoints.model_checkpoint_path.endswith(f'-{TRAIN_STEPS}')


def test_export_serves_raw_examples_without_the_transform_output(trained_model):
    shutil.rmtree(trained_model.transform_graph)
    rows = read_taxi_rows(5000)[4000:4400]
    spec = raw_feature_spec()
    examples = tf.constant([raw_example(r, spec) for r in rows])
    loaded = tf.saved_model.load(trained_model.serving_model_dir)

    probabilities = loaded.signatures[export.SERVING_SIGNATURE](examples=examples)[
        export.PROBABILITIES
    ].numpy()
    assert probabilities.shape == (len(rows), 1)
    assert ((probabilities >= 0) & (probabilities <= 1)).all()
    labels = np.array([label_of(r) for r in rows])
    assert probabilities[labels == 1].mean() > probabilities[labels == 0].mean() + 0.3

    transformed = loaded.signatures[export.TRANSFORM_SIGNATURE](examples=examples)
    np.testing.assert_array_equal(transformed[LABEL_KEY].numpy(), labels)
    assert transformed['fare'].dtype == tf.float32
    assert transformed['company'].dtype == tf.int64


def _config(train_steps, steps_per_execution=4, checkpoint_interval_steps=10):
    return config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=train_steps,
            steps_per_execution=steps_per_execution,
            checkpoint_interval_steps=checkpoint_interval_steps,
            summary_interval_steps=10,
        )
    )


@pytest.mark.fresh_process
def test_resume_continues_at_the_saved_step_in_one_trace(transformed_data, tmp_path, capfd):
    """A second run on the same checkpoints resumes at the saved step, optimizer state included,
    and the first run's functions, collected in between, never reach the second cluster."""
    # Both clusters in this process (the first Trainer's functions die here), not the first in a
    # child as `launch` runs it.
    with cluster_lib.start(_config(30).distribution) as first_cluster:
        first = loop.train_and_export(
            first_cluster,
            transformed_data.examples,
            transformed_data.transform_graph,
            str(tmp_path / 'model'),
            str(tmp_path / 'run'),
            _config(30),
            LABEL_KEY,
        )
    assert (first.initial_step, first.steps) == (0, 30)
    checkpoint_dir = str(tmp_path / 'run' / run_files.CHECKPOINT_SUBDIR)
    reader = tf.train.load_checkpoint(checkpoint_dir)
    # The optimizer's slots (Adagrad accumulators), stored whole whatever their sharding.
    saved_slots = [
        reader.get_tensor(k)
        for k, shape in reader.get_variable_to_shape_map().items()
        if k.startswith('optimizer/_variables/') and shape
    ]
    assert saved_slots

    # A rerun on the same checkpoint directory: restores step and optimizer state, then trains
    # 7 + 7 + 6 steps: the shorter last execution must not retrace.
    config = _config(50, steps_per_execution=7)
    schema = task.load_transformed_schema(transformed_data.transform_graph, LABEL_KEY)
    capfd.readouterr()  # checked from here on
    with cluster_lib.start(config.distribution) as cluster:
        trainer = loop.Trainer(
            tasks.BinaryClassificationTask(schema, config),
            cluster,
            transformed_data.examples,
            str(tmp_path / 'run2'),
            checkpoint_dir=checkpoint_dir,
        )
        # Whatever of the first run was still uncollected went before this Trainer connected,
        # to the first cluster: a collection now removes none of its functions from this
        # cluster's servers, which would refuse them as unknown. (The restore's remote reads come
        # back after any removal's answer on the same streams.) Removals that an earlier test's
        # objects sent to that test's stopped servers fail to connect instead: not this cluster.
        gc.collect()
        assert trainer.restore() == 30
        refused = [
            line for line in capfd.readouterr().err.splitlines() if 'non-existent function' in line
        ]
        assert not refused, refused[:3]
        restored_slots = [v.numpy() for v in trainer.optimizer.variables if v.shape.rank]
        initial_value = 0.1  # Adagrad's initial accumulator
        assert sum(np.abs(s - initial_value).sum() for s in saved_slots) > 1.0
        assert sum(np.sum(s) for s in restored_slots) == pytest.approx(
            sum(np.sum(s) for s in saved_slots), rel=1e-6
        )
        measured = trainer.train()
        assert (measured['initial_step'], measured['steps'], measured['steps_this_run']) == (
            30,
            50,
            20,
        )
        assert trainer.train_steps.experimental_get_tracing_count() == 1
    assert tf.train.latest_checkpoint(checkpoint_dir).endswith('-50')


def test_eval_step_traces_once_for_full_and_partial_batches(transformed_data):
    config = config_lib.TrainerConfig(training=config_lib.TrainingConfig(batch_size=64))
    schema = task.load_transformed_schema(transformed_data.transform_graph, LABEL_KEY)
    binary_task = tasks.BinaryClassificationTask(schema, config)
    model = binary_task.build_model()
    metrics = binary_task.build_metrics()
    eval_step = evaluation.make_eval_step(binary_task, model, metrics)
    sizes = []
    for features, labels in binary_task.build_inputs(
        transformed_data.examples, 'eval', training=False
    ):
        sizes.append(int(eval_step(features, labels)))
    assert sizes[0] == 64 and sizes[-1] == 1000 % 64 and sum(sizes) == 1000
    assert eval_step.experimental_get_tracing_count() == 1
    assert metrics['label_mean'].result().numpy() == pytest.approx(
        np.mean([label_of(r) for r in read_taxi_rows(5000)[4000:]]), abs=1e-6
    )
