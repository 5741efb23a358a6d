"""Which pipeline a model belongs to, carried in the model itself.

The Trainer writes its pipeline's identity into the serving model's `assets.extra` (beside its
training data's statistics, `model_statistics`): it travels with the SavedModel through the
Pusher into every push, on any orchestrator, and TensorFlow Serving ignores it. Before
`LatestBlessedModel` hands on a pushed model (DriftValidator's reference, the Trainer's warm
start, the Evaluator's baseline), it compares that identity with its own pipeline's:

- the pipeline name and the label key must be the same. Another pipeline's model was trained
  for other data, often another label: judging today's data against it, or scoring it as a
  baseline, fails or means nothing (an Evaluator baseline without the label among its
  `transform_features` outputs stops the run). A model pushed before identities were recorded
  carries none, and is not taken either: nothing says it is this pipeline's.
- the schema's fingerprint is recorded and compared, but a difference alone does not refuse
  the model: a reviewed schema edit (a feature added, a domain tightened) is the same
  pipeline's evolution, and the drift check against the previous model is what judges the
  data then. Warm start copies weights by name, so it takes what still fits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.shared import feature_types, object_store

# Relative to the serving model directory.
MODEL_IDENTITY_PATH = os.path.join('assets.extra', 'pipeline_identity.json')


@dataclasses.dataclass(frozen=True)
class ModelIdentity:
    """What a model records of the pipeline that trained it.

    Attributes:
      pipeline_name: The pipeline's name (`PipelineConfig.pipeline_name`).
      label: The label key the model was trained for (the transformed label feature).
      schema_fingerprint: `schema_fingerprint` of the raw data's schema.
    """

    pipeline_name: str
    label: str
    schema_fingerprint: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelIdentity:
        """The identity `to_json` wrote; ValueError when `text` is not one."""
        try:
            fields = json.loads(text)
            return cls(**{f.name: str(fields[f.name]) for f in dataclasses.fields(cls)})
        except (TypeError, KeyError, json.JSONDecodeError) as e:
            raise ValueError(f'not a model identity: {text[:200]!r}') from e

    def describe(self) -> str:
        return f'pipeline {self.pipeline_name!r} (label {self.label!r})'


def schema_fingerprint(schema: schema_pb2.Schema) -> str:
    """16 hex digits of the SHA-256 of the schema's deterministic serialization: the same for
    the same schema whatever its text's comments and layout."""
    data = schema.SerializeToString(deterministic=True)
    return hashlib.sha256(data).hexdigest()[:16]


def schema_file_fingerprint(schema_path: str) -> str:
    """`schema_fingerprint` of a text-proto schema file (read by `feature_types.load_schema`)."""
    return schema_fingerprint(feature_types.load_schema(schema_path))


def attach(identity: ModelIdentity, serving_model_dir: str) -> str:
    """Writes `identity` into the model; returns where it lies (the model may be on the store)."""
    target = os.path.join(serving_model_dir, MODEL_IDENTITY_PATH)
    object_store.write_text(target, identity.to_json())
    return target


def refusal(expected: ModelIdentity, found: ModelIdentity | None) -> str | None:
    """Why a model that carries `found` (None: no identity) is not `expected`'s pipeline's, or
    None when it is."""
    if found is None:
        return 'it carries no pipeline identity (pushed before asynctrain recorded one)'
    if found.pipeline_name != expected.pipeline_name:
        return f'it was pushed by pipeline {found.pipeline_name!r} (label {found.label!r})'
    if found.label != expected.label:
        return f'it was trained for label {found.label!r}'
    return None
