"""asynctrain: TFX pipeline components for production training that never waits for input.

One namespace for everything the wheel installs, as TFX keeps `tfx.components`:
`asynctrain.components` (the custom TFX components and the code they share),
`asynctrain.pipelines` (pipeline wiring, runners, the command line, Kubeflow), `asynctrain.benchmarks`,
and the bundled data as package data (`asynctrain/schemas/<dataset>/`, read through
`importlib.resources`, never through a checkout).
"""
