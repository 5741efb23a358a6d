"""The Trainer's own model of a finished run, rebuilt as the Trainer builds it, on a fresh
in-process cluster of the run's size: where each variable lives, and its scores of raw examples.

    python -m tests.e2e.sharded_model_probe REQUEST CHECKPOINT_DIR EXAMPLES OUTPUT

- REQUEST: the Trainer's `coordinator_request.json` (its configuration and paths, as the run's
  coordinator read them);
- CHECKPOINT_DIR: the run's checkpoints, restored by the Trainer's own `restore`;
- EXAMPLES: serialized raw tf.Examples, one per line, base64;
- OUTPUT: JSON with `step` (restored), `variables` (each embedding table and optimizer variable
  of at least `MIN_ROWS` rows: its name, full shape, per shard its device and rows, and the
  checkpoint's tensors that the shards together equal) and `probabilities` (the sharded model's
  scores of EXAMPLES through the run's transform graph, read from the parameter servers).

A process of its own: a cluster's servers and the strategy that connects to them live as long as
the process that started them, and a test process must not join one.
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile

from asynctrain.components.shared import tf_environment

tf_environment.configure()

# Variables this large are the embedding tables (and their optimizer slots) a test looks at.
MIN_ROWS = 10_000


def _variables(trainer, checkpoint_path: str) -> list[dict]:
    import numpy as np
    import tensorflow as tf

    reader = tf.train.load_checkpoint(checkpoint_path)
    saved = {
        key: shape for key, shape in reader.get_variable_to_shape_map().items() if len(shape) == 2
    }
    # A table as its layer holds it (`model.variables` lists a sharded one's parts), then the
    # optimizer's variables (its slots, each as one sharded variable).
    tables = [layer.embeddings for layer in trainer.model.layers if hasattr(layer, 'embeddings')]
    described = []
    for variable in [*tables, *trainer.optimizer.variables]:
        shards = list(getattr(variable, 'variables', [variable]))
        if not shards[0].shape.rank or sum(int(s.shape[0]) for s in shards) < MIN_ROWS:
            continue
        value = np.concatenate([shard.numpy() for shard in shards])
        matches = [
            key
            for key, shape in saved.items()
            if list(shape) == list(value.shape) and np.array_equal(reader.get_tensor(key), value)
        ]
        described.append(
            {
                'name': variable.name,
                'shape': list(value.shape),
                'sharded': len(shards) > 1,
                'shards': [{'device': s.device, 'rows': int(s.shape[0])} for s in shards],
                'checkpoint_keys': matches,
            }
        )
    return described


def main(argv: list[str]) -> int:
    request_path, checkpoint_dir, examples_path, output_path = argv
    import tensorflow as tf
    import tensorflow_transform as tft

    from asynctrain.components.trainer import config as config_lib
    from asynctrain.components.trainer.cluster import servers
    from asynctrain.components.trainer.training import loop, tasks
    from asynctrain.components.trainer.training import task as task_lib

    with open(request_path, encoding='utf-8') as f:
        request = json.load(f)
    with open(examples_path, encoding='ascii') as f:
        examples = [base64.b64decode(line) for line in f if line.strip()]
    trainer_config = config_lib.from_dict(request['trainer_config'])
    graph_dir = request['transform_graph_dir']
    schema = task_lib.load_transformed_schema(graph_dir, request['label_key'])
    with (
        servers.start(trainer_config.distribution) as cluster,
        tempfile.TemporaryDirectory() as run_dir,
    ):
        task = tasks.make_task(schema, trainer_config, graph_dir)
        trainer = loop.Trainer(task, cluster, request['examples_dir'], run_dir, checkpoint_dir)
        step = trainer.restore()
        variables = _variables(trainer, trainer.checkpoint_manager.latest_checkpoint)
        tft_output = tft.TFTransformOutput(graph_dir)
        raw = tf.io.parse_example(tf.constant(examples), tft_output.raw_feature_spec())
        transformed = tft_output.transform_features_layer()(raw)
        features_spec, _ = task.element_spec
        logits = trainer.model({name: transformed[name] for name in features_spec}, training=False)
        probabilities = task.serving_outputs(logits)['probabilities'].numpy()
    with open(output_path, 'w', encoding='utf-8') as f:
        json.dump(
            {
                'step': step,
                'num_ps': cluster.num_ps,
                'variables': variables,
                'probabilities': probabilities[:, 0].tolist(),
            },
            f,
        )
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
