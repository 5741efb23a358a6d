"""`python -m asynctrain` is the `asynctrain` command."""

from asynctrain.cli import entrypoint

entrypoint()
