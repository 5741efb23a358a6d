"""Where a pipeline's state lies in a work directory: one folder per pipeline name.

    <work_dir>/<pipeline_name>/pipeline_root/    the artifacts (TFX's pipeline root)
    <work_dir>/<pipeline_name>/metadata.sqlite   ML Metadata
    <work_dir>/<pipeline_name>/serving_model/    the Pusher's destination, one folder per push
    <work_dir>/<pipeline_name>/logs/             the runs' log files (`console.new_log_path`)
    <work_dir>/<pipeline_name>/.run.lock         held while a run of this pipeline goes on

TFX's templates key the pipeline root and the metadata by pipeline name in the same way, so two
pipelines run from one folder (`asynctrain run` defaults to `./runs/local`) never share a push
destination, a database or a cache: neither is judged against, warm-started from or compared
with the other's model.

A work directory written by asynctrain 0.1 holds `metadata.sqlite` at its top, one database,
pipeline root and push destination for every pipeline run in it. Such a directory keeps its
layout (`is_shared`): nothing is moved, a run prints `shared_notice`, and each pipeline still
takes only the models it pushed itself (`LatestBlessedModel` reads the identity a model carries).
"""

from __future__ import annotations

import os

PIPELINE_ROOT = 'pipeline_root'
METADATA_FILE = 'metadata.sqlite'
SERVING_DIR = 'serving_model'


def is_shared(work_dir: str) -> bool:
    """Whether `work_dir` has the layout of before: one `metadata.sqlite` at its top for every
    pipeline. Only a local directory can have it (a URI's work directory is compiled for
    Kubeflow, whose runs keep no metadata there; reading a store while building a pipeline
    would be a network call)."""
    return '://' not in work_dir and os.path.isfile(os.path.join(work_dir, METADATA_FILE))


def state_dir(work_dir: str, pipeline_name: str) -> str:
    """The folder holding `pipeline_name`'s state in `work_dir` (an absolute path or a URI):
    `<work_dir>/<pipeline_name>`, or `work_dir` itself where it has the shared layout."""
    if is_shared(work_dir):
        return work_dir
    return os.path.join(work_dir, pipeline_name)


def shared_notice(work_dir: str) -> str:
    """What a run in a work directory of the shared layout prints, with the one command that
    gives its pipelines folders of their own."""
    return (
        f'note: {work_dir} has the layout of asynctrain 0.1 (one metadata.sqlite, '
        'pipeline_root and serving_model for every pipeline); it is used as it is, and each '
        'pipeline takes only the models it pushed itself. For a folder per pipeline, move it '
        f'aside (mv {work_dir} {work_dir.rstrip("/")}.shared): the next run starts afresh in '
        f'{os.path.join(work_dir, "<pipeline_name>")}.'
    )
