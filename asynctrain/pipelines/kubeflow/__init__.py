"""Kubeflow Pipelines, in three rooms: compiling the pipeline, what runs in a compiled step's
container, and a local backend that runs the compiled pipeline as KFP's driver and launcher would.

- `compile/`: `asynctrain compile` and `asynctrain schedule`, what the cluster is given;
- `container/`: the entrypoint every compiled step's container runs, and where KFP's launcher
  stages artifacts in the step's pod;
- `local_backend/`: `asynctrain run --compiled`, KFP's driver, launcher and cache emulated on this
  machine.

Imports run one way (`tools/import_graph.py` checks it): `local_backend` may import `compile` and
`container`, `compile` may import `container`, and `container` imports neither.
"""
