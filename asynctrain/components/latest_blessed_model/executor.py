"""The LatestBlessedModel executor: the newest SavedModel this pipeline pushed under the push
destination, copied into the output Model artifact, or an empty artifact when there is none."""

from __future__ import annotations

import json
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
from asynctrain.components.shared import model_identity
from asynctrain.components.shared.model_identity import ModelIdentity


def pushed_versions(push_destination: str) -> list[tuple[int, str]]:
    """Every push under `push_destination`, newest first: (version, directory).

    A push is a directory whose name is an integer (the Pusher's version, unix seconds) and that
    holds a SavedModel; anything else there (a half-written copy, a stray file) is skipped.
    """
    if not fileio.exists(push_destination):
        return []
    versions = []
    for name in fileio.listdir(push_destination):
        name = name.rstrip('/')
        if not name.isdigit():
            continue
        directory = os.path.join(push_destination, name)
        if tf.saved_model.contains_saved_model(directory):
            versions.append((int(name), directory))
    return sorted(versions, reverse=True)


def latest_pushed_version(push_destination: str) -> tuple[int, str] | None:
    """The newest push under `push_destination`, whichever pipeline made it, or None."""
    versions = pushed_versions(push_destination)
    return versions[0] if versions else None


def read_identity(model_dir: str) -> ModelIdentity | None:
    """The pipeline identity the model at `model_dir` carries, or None when it carries none."""
    path = os.path.join(model_dir, model_identity.MODEL_IDENTITY_PATH)
    if not fileio.exists(path):
        return None
    with fileio.open(path, 'r') as f:
        text = f.read()
    try:
        return ModelIdentity.from_json(text)
    except ValueError:
        return None


def latest_own_push(
    push_destination: str, identity: ModelIdentity
) -> tuple[tuple[int, str] | None, list[str]]:
    """The newest push whose model carries `identity`'s pipeline and label, or None; and, for
    each newer push passed over, a line naming it, its pipeline and this one."""
    passed_over = []
    for version, directory in pushed_versions(push_destination):
        reason = model_identity.refusal(identity, read_identity(directory))
        if reason is None:
            return (version, directory), passed_over
        passed_over.append(
            f'not using the pushed model {directory}: {reason}, and this is {identity.describe()}'
        )
    return None, passed_over


def copy_serving_model(source: str, model_uri: str) -> str:
    """Copies the SavedModel directory `source` into the Model artifact at `model_uri`."""
    destination = path_utils.serving_model_path(model_uri)
    io_utils.copy_dir(source, destination)
    return destination


class Executor(base_executor.BaseExecutor):
    """Copies the newest model this pipeline pushed into the `model` output."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        push_destination = exec_properties[spec.PUSH_DESTINATION_KEY]
        identity = ModelIdentity.from_json(exec_properties[spec.MODEL_IDENTITY_KEY])
        model = artifact_utils.get_single_instance(output_dict[spec.MODEL_KEY])
        latest, passed_over = latest_own_push(push_destination, identity)
        for line in passed_over:
            logging.warning('LatestBlessedModel: %s.', line)
        model.set_string_custom_property(spec.PASSED_OVER_PROPERTY, json.dumps(passed_over))
        if latest is None:
            fileio.makedirs(model.uri)
            model.set_string_custom_property(spec.PUSHED_MODEL_PROPERTY, '')
            model.set_int_custom_property(spec.PUSHED_VERSION_PROPERTY, -1)
            logging.info(
                'No model of %s pushed to %s yet: the output model is empty.',
                identity.describe(),
                push_destination,
            )
            return
        version, directory = latest
        found = read_identity(directory)
        if found is not None and found.schema_fingerprint != identity.schema_fingerprint:
            # Taken all the same: a reviewed schema edit is this pipeline's own (model_identity).
            logging.info(
                'The schema changed since %s was pushed (fingerprint %s, now %s).',
                directory,
                found.schema_fingerprint,
                identity.schema_fingerprint,
            )
        copied = copy_serving_model(directory, model.uri)
        model.set_string_custom_property(spec.PUSHED_MODEL_PROPERTY, directory)
        model.set_int_custom_property(spec.PUSHED_VERSION_PROPERTY, version)
        logging.info(
            'Latest blessed model of %s: %s (version %d), copied to %s.',
            identity.describe(),
            directory,
            version,
            copied,
        )
