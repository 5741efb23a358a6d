"""A pipeline config's dataset, read and checked once at the edge: the schema, `features.yaml`
against it, the label resolved, the drift settings checked, and the identity the pipeline's
models carry. `create_pipeline` wires from what `load` returns and reads no file itself.

Imports no TensorFlow or TFX, so that `asynctrain run` refuses a bad dataset before it touches the
work directory or loads TensorFlow.
"""

from __future__ import annotations

import dataclasses

from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.drift_validator import thresholds
from asynctrain.components.shared import feature_types, yaml_config
from asynctrain.components.shared.model_identity import ModelIdentity, schema_fingerprint
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines.config import PipelineConfig


@dataclasses.dataclass(frozen=True)
class Dataset:
    """What the pipeline is built from, beside its config.

    Attributes:
      schema: The schema at `config.schema_path`, read once.
      features: `features.yaml` validated against it (empty with a preprocessing module and no
        file).
      label: The config's `label:` if set, else features.yaml's.
      identity: What the Trainer writes into its models and `LatestBlessedModel` looks for in a
        push: the pipeline's name, the label key and the schema's fingerprint.
    """

    schema: schema_pb2.Schema
    features: fc.FeatureConfig
    label: fc.LabelSpec
    identity: ModelIdentity


def load(config: PipelineConfig) -> Dataset:
    """The dataset of `config`; a ConfigError naming the file and field when the schema, the
    feature config, the label, the blessing metric for the label's task or (with drift on) the
    drift settings do not fit."""
    schema = feature_types.load_schema(config.schema_path)
    features = fc.read_feature_config(
        config.feature_config_path, schema, with_module=bool(config.preprocessing_module)
    )
    label = resolve_label(config, features, schema)
    config.evaluation.metric_for(label.task)
    if config.drift.enabled:
        check_drift_settings(config, schema)
    identity = ModelIdentity(
        pipeline_name=config.pipeline_name,
        label=label.key,
        schema_fingerprint=schema_fingerprint(schema),
    )
    return Dataset(schema=schema, features=features, label=label, identity=identity)


def resolve_label(
    config: PipelineConfig, features: fc.FeatureConfig, schema: schema_pb2.Schema
) -> fc.LabelSpec:
    """The pipeline config's `label:` if set, else features.yaml's; a ConfigError naming both
    files when neither gives one, or when the config's label does not fit the schema."""
    if config.label is not None:
        label = fc.build_label(dataclasses.asdict(config.label))
        try:
            fc.check_label(label, schema, features.names)
        except yaml_config.ConfigError as e:
            raise yaml_config.ConfigError(
                f'pipeline config: {e} (schema: {config.schema_path})'
            ) from None
        return label
    if features.label is None:
        yaml_config.fail(
            'label',
            f'no label: give `label: {{column: NAME, task: binary|multiclass|regression}}` in '
            f'{config.feature_config_path} or in the pipeline config',
        )
    return features.label


def check_drift_settings(config: PipelineConfig, schema: schema_pb2.Schema) -> None:
    """A ConfigError naming the field when `drift.features` or `drift.accept` names a feature
    the schema does not have."""
    settings = config.drift
    try:
        thresholds.check_features(
            thresholds.Thresholds(
                numeric=settings.numeric_threshold,
                categorical=settings.categorical_threshold,
                features=settings.features,
            ),
            schema,
        )
    except ValueError as e:
        raise yaml_config.ConfigError(f'drift.features: {e} ({config.schema_path})') from None
    known = {feature.name for feature in schema.feature}
    unknown = [name for name in settings.accept if name != 'all' and name not in known]
    if unknown:
        raise yaml_config.ConfigError(
            f'drift.accept: {unknown} not in the schema {config.schema_path}; '
            f'its features: {sorted(known)}'
        )
