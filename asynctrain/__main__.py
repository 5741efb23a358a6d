"""`python -m asynctrain` is the `asynctrain` command."""

from asynctrain.pipelines.cli import entrypoint

entrypoint()
