"""The dataset's spec as a pipeline sees it: `features.yaml` and the schema, read and checked
against the pipeline config, with the label resolved, and the identity the pipeline's models
carry. Imports no TensorFlow or TFX, so that `asynctrain run` refuses a bad spec before it
touches the work directory or loads TensorFlow.
"""

from __future__ import annotations

import dataclasses

from asynctrain.components.shared import feature_types, yaml_config
from asynctrain.components.shared.model_identity import ModelIdentity, schema_fingerprint
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines.config import PipelineConfig


def load(config: PipelineConfig) -> tuple[fc.FeatureConfig, fc.LabelSpec]:
    """The feature config and the resolved label of `config`'s dataset; a ConfigError naming the
    file and field when either, or the blessing metric for the label's task, does not fit."""
    features = fc.load_feature_config(
        config.feature_config_path,
        config.schema_path,
        with_module=bool(config.preprocessing_module),
    )
    label = resolve_label(config, features)
    config.evaluation.metric_for(label.task)
    return features, label


def resolve_label(config: PipelineConfig, features: fc.FeatureConfig) -> fc.LabelSpec:
    """The pipeline config's `label:` if set, else features.yaml's; a ConfigError naming both
    files when neither gives one, or when the config's label does not fit the schema."""
    if config.label is not None:
        label = fc.build_label(dataclasses.asdict(config.label))
        try:
            fc.check_label(label, feature_types.load_schema(config.schema_path), features.names)
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


def model_identity(config: PipelineConfig, label: fc.LabelSpec) -> ModelIdentity:
    """What the pipeline's Trainer writes into its models and its `LatestBlessedModel` looks
    for in a push: the pipeline's name, the label key and the schema's fingerprint."""
    return ModelIdentity(
        pipeline_name=config.pipeline_name,
        label=label.key,
        schema_fingerprint=schema_fingerprint(feature_types.load_schema(config.schema_path)),
    )


def check_drift_settings(config: PipelineConfig) -> None:
    """A ConfigError naming the field when `drift.features` or `drift.accept` names a feature
    the schema does not have."""
    # Here, not at the top: the comparators import TFDV, hence TensorFlow (create_pipeline's
    # check, after `asynctrain run` has checked the rest of the spec).
    from asynctrain.components.drift_validator import comparison

    settings = config.drift
    schema = feature_types.load_schema(config.schema_path)
    try:
        comparison.check_features(
            comparison.Thresholds(
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
