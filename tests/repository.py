"""The checkout the tests run from: the folders tests read that are not package data (datasets/,
docs/, examples/, kubeflow/). Code under asynctrain/ never looks for these; it finds its own data
through the installed package."""

import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
