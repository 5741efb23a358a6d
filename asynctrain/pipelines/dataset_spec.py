"""The dataset's spec as a pipeline sees it: `features.yaml` and the schema, read and checked
against the pipeline config, with the label resolved. Imports no TensorFlow or TFX, so that
`asynctrain run` refuses a bad spec before it touches the work directory or loads TensorFlow.
"""

from __future__ import annotations

import dataclasses

from asynctrain.components.shared import yaml_config
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
            fc.check_label(label, fc.load_schema(config.schema_path), features.names)
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
