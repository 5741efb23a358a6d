"""asynctrain's pipeline layer: the wiring and the local runner here, the rest by concern below.
Here: `pipeline.create_pipeline`, its `config`, the dataset's spec, the local runner and its
summary. Below: `cli` (the `asynctrain` command), `init` (drafting a new dataset's files),
`kubeflow` (compile, schedule, the compiled steps' entrypoint and the local KFP backend of
`run --compiled`)."""
