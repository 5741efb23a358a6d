"""Kubeflow Pipelines: compile, schedule, the compiled steps' entrypoint, and `run --compiled`.
Compiling the pipeline (`kubeflow_runner`, `compile_command`, `compile_options`, `kfp_rules`,
`kfp_storage`), scheduling it (`schedule`), the entrypoint every compiled step runs
(`kfp_entrypoint`), and `asynctrain run --compiled`, which runs a compiled spec on this machine as
an open-source KFP line's driver and launcher would (`compiled_run`, `compiled_task`,
`kfp_driver`, `kfp_launcher`, `kfp_cache`, `kfp_profiles`)."""
