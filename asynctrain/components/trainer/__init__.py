"""The Trainer: asynchronous training under ParameterServerStrategy, exporting a serving model.

The TFX layer (`spec`, `component`, `executor`) is thin: it turns artifacts into paths and a
`TrainerConfig` and calls framework-free modules that never import TFX:

- `config`: the typed configuration;
- `data`: one worker's `tf.data` pipeline over transformed examples;
- `model`: the Keras model built from the transformed schema;
- `task`: the single-replica view (inputs, model, one train step, one eval step);
- `cluster`: the cluster a `ParameterServerStrategy` runs on (in-process, local processes, TF_CONFIG);
- `train_lib`: the loop that owns the strategy, the coordinator, `tf.function`, checkpoints,
  summaries and the training report;
- `export`: the standalone serving SavedModel;
- `cli`: `asynctrain train`, also what each Kubernetes replica runs;
- `tfjob`: the Training Operator TFJob whose replicas run `cli` (build, `TF_CONFIG`, submit, wait,
  cancel), and `tfjob_local`, the same TFJob as processes on one machine;
- `tfjob_training`: the `tfjob` cluster mode, one execution trained as a TFJob.
"""
