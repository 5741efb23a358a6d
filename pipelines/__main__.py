"""`python -m pipelines` is the `asynctrain` command."""

from pipelines.cli import entrypoint

entrypoint()
