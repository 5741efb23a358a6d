"""The LatestBlessedModel executor: the newest SavedModel under the push destination, copied
into the output Model artifact, or an empty artifact when nothing was pushed yet."""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf
from absl import logging
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils

from asynctrain.components.latest_blessed_model import spec


def latest_pushed_version(push_destination: str) -> tuple[int, str] | None:
    """The newest push under `push_destination`: (version, directory), or None when there is none.

    A push is a directory whose name is an integer (the Pusher's version, unix seconds) and that
    holds a SavedModel; anything else there (a half-written copy, a stray file) is skipped.
    """
    if not fileio.exists(push_destination):
        return None
    versions = []
    for name in fileio.listdir(push_destination):
        name = name.rstrip('/')
        if not name.isdigit():
            continue
        directory = os.path.join(push_destination, name)
        if tf.saved_model.contains_saved_model(directory):
            versions.append((int(name), directory))
    return max(versions) if versions else None


def copy_serving_model(source: str, model_uri: str) -> str:
    """Copies the SavedModel directory `source` into the Model artifact at `model_uri`."""
    destination = path_utils.serving_model_path(model_uri)
    io_utils.copy_dir(source, destination)
    return destination


class Executor(base_executor.BaseExecutor):
    """Copies the newest pushed model into the `model` output."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        push_destination = exec_properties[spec.PUSH_DESTINATION_KEY]
        model = artifact_utils.get_single_instance(output_dict[spec.MODEL_KEY])
        latest = latest_pushed_version(push_destination)
        if latest is None:
            fileio.makedirs(model.uri)
            model.set_string_custom_property(spec.PUSHED_MODEL_PROPERTY, '')
            model.set_int_custom_property(spec.PUSHED_VERSION_PROPERTY, -1)
            logging.info('No model pushed to %s yet: the output model is empty.', push_destination)
            return
        version, directory = latest
        copied = copy_serving_model(directory, model.uri)
        model.set_string_custom_property(spec.PUSHED_MODEL_PROPERTY, directory)
        model.set_int_custom_property(spec.PUSHED_VERSION_PROPERTY, version)
        logging.info(
            'Latest blessed model: %s (version %d), copied to %s.', directory, version, copied
        )
