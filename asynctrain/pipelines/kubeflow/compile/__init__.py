"""Compiling the pipeline for Kubeflow Pipelines (KFP v2) or Vertex AI, and scheduling what was
compiled: `asynctrain compile` and `asynctrain schedule`.

`compile_options` (what `compile` is asked for, checked before TFX is imported), `compile_command`
(the command), `kubeflow_runner` (`create_pipeline` through TFX's `KubeflowV2DagRunner`, every
container pointed at the `container` room's entrypoint), `kfp_rules` (what the open-source backend
refuses in a PipelineSpec, checked before a spec is written, uploaded or run),
`compiled_pipeline` (a compiled file read back into kfp's typed PipelineSpec, for whoever walks it)
and `schedule` (a recurring run of the compiled spec on a cluster).

May import `asynctrain.pipelines.kubeflow.container` (the entrypoint a compiled step runs, the
launcher's staging rule), never `local_backend`.
"""
