"""asynctrain's pipeline layer: the wiring (`pipeline.create_pipeline`, its `config`, the
dataset's spec) and the local runner here, and by concern below: `cli` (the `asynctrain`
command), `init` (drafting a new dataset's files), `kubeflow` (compile, schedule, the compiled
steps' entrypoint and the local KFP backend of `run --compiled`)."""
