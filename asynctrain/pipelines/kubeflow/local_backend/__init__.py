"""`asynctrain run --compiled`: a compiled PipelineSpec run on this machine as an open-source KFP
2.x line's driver and launcher would run it, with KFP's cache and ML Metadata ids.

`compiled_run` (the run, task by task), `compiled_task` (each task's process in a pod of its own),
`kfp_driver` (the driver's outputs, parameters and ExecutorInput), `kfp_container_args` (2.17's
driver-filled command line), `kfp_launcher` (the launcher's downloads, placeholders and
uploads), `kfp_cache` (the cache key, the ML Metadata store and what it records of an output)
and `kfp_profiles` (the KFP lines reproduced, one behaviour a field).

May import `compile` (`kfp_rules`, to refuse what the backend refuses; `compiled_pipeline`, the
typed PipelineSpec) and `container` (the launcher's staging rule); neither imports this room.
"""
