"""What runs inside a compiled step's container on Kubeflow Pipelines: the entrypoint every step's
command names, and where KFP's launcher stages artifacts in the step's pod.

`kfp_entrypoint` (`python -m asynctrain.pipelines.kubeflow.container.kfp_entrypoint`, a layer over
TFX's Kubeflow V2 entrypoint) and `kfp_storage` (the launcher's local path for an object-store URI),
as TFX keeps `tfx/orchestration/kubeflow/v2/container/` apart from its compiler.

Imports neither `compile` nor `local_backend`: the image runs this room, not the compiler or the
emulator.
"""
