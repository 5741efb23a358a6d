"""The contract of DriftValidator: its inputs, parameters, output and where a model carries the
statistics of its training data. Every key lives here, once; the properties it records on its
output, which the Evaluator and the runners read too, live in `shared.drift_properties`."""

from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from asynctrain.components.shared import model_statistics

STATISTICS_KEY = standard_component_specs.STATISTICS_KEY
SCHEMA_KEY = standard_component_specs.SCHEMA_KEY
BASELINE_MODEL_KEY = 'baseline_model'
ANOMALIES_KEY = standard_component_specs.ANOMALIES_KEY

NUMERIC_THRESHOLD_KEY = 'numeric_threshold'
CATEGORICAL_THRESHOLD_KEY = 'categorical_threshold'
# JSON object, feature name -> threshold.
FEATURE_THRESHOLDS_KEY = 'feature_thresholds'
ACTION_KEY = 'action'
# JSON list of feature names whose drift is accepted for this run; `ACCEPT_ALL` accepts all.
ACCEPTED_FEATURES_KEY = 'accepted_features'

# What unaccepted drift does: stop the run (the executor fails after writing its output), or
# let it go on and have the Evaluator withhold its blessing (`drift_properties.BLOCKING_PROPERTY`).
STOP = 'stop'
NO_PUSH = 'no_push'
ACTIONS = (STOP, NO_PUSH)
ACCEPT_ALL = 'all'

# The split compared (what the model trains on), and where a model carries the statistics of
# its training data relative to its serving model directory (`asynctrain.components.shared.model_statistics`).
SPLIT = model_statistics.SPLIT
MODEL_STATISTICS_PATH = model_statistics.MODEL_STATISTICS_PATH
# A stopped run's anomalies are also written beside the output, in `<output uri>` + this: TFX's
# local launcher deletes a failed execution's output directories.
STOPPED_SUFFIX = '-stopped'
# The output's file in each split directory, as ExampleValidator names it (TFDV's Anomalies).
ANOMALIES_FILE_NAME = 'SchemaDiff.pb'


class DriftValidatorSpec(ComponentSpec):
    """Today's statistics, the schema and the served model in; TFDV's anomalies out."""

    PARAMETERS = {
        NUMERIC_THRESHOLD_KEY: ExecutionParameter(type=float),
        CATEGORICAL_THRESHOLD_KEY: ExecutionParameter(type=float),
        FEATURE_THRESHOLDS_KEY: ExecutionParameter(type=str),
        ACTION_KEY: ExecutionParameter(type=str),
        ACCEPTED_FEATURES_KEY: ExecutionParameter(type=str),
    }
    INPUTS = {
        STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics),
        SCHEMA_KEY: ChannelParameter(type=standard_artifacts.Schema),
        BASELINE_MODEL_KEY: ChannelParameter(type=standard_artifacts.Model, optional=True),
    }
    OUTPUTS = {
        ANOMALIES_KEY: ChannelParameter(type=standard_artifacts.ExampleAnomalies),
    }
