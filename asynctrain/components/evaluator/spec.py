"""The contract of asynctrain's Evaluator: inputs, outputs and parameters. Every key lives here,
once.

Stock Evaluator's keys are reused as they are (`examples`, `model`, `baseline_model`,
`eval_config`, `evaluation`, `blessing`), so Pusher, `LatestBlessedModelStrategy` and anything
else that reads an Evaluator's outputs read these unchanged.
"""

from tensorflow_model_analysis.proto import config_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter
from tfx.types.system_executions import Evaluate

EXAMPLES_KEY = standard_component_specs.EXAMPLES_KEY
MODEL_KEY = standard_component_specs.MODEL_KEY
BASELINE_MODEL_KEY = standard_component_specs.BASELINE_MODEL_KEY
EVAL_CONFIG_KEY = standard_component_specs.EVAL_CONFIG_KEY
EVALUATION_KEY = standard_component_specs.EVALUATION_KEY
BLESSING_KEY = standard_component_specs.BLESSING_KEY
# JSON list of the splits evaluated together (stock's key; stock's default, ["eval"]).
EXAMPLE_SPLITS_KEY = standard_component_specs.EXAMPLE_SPLITS_KEY
# Optional: DriftValidator's anomalies; with unaccepted drift (its `blocking` property) and the
# `no_push` action, the model is not blessed whatever its metrics.
DRIFT_ANOMALIES_KEY = 'drift_anomalies'
# Serialized examples per signature call.
BATCH_SIZE_KEY = 'batch_size'


class EvaluatorSpec(ComponentSpec):
    """Raw examples and the exported model (and the baseline model) in; evaluation and blessing out."""

    PARAMETERS = {
        EVAL_CONFIG_KEY: ExecutionParameter(type=config_pb2.EvalConfig),
        EXAMPLE_SPLITS_KEY: ExecutionParameter(type=str),
        BATCH_SIZE_KEY: ExecutionParameter(type=int),
    }
    INPUTS = {
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
        MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
        BASELINE_MODEL_KEY: ChannelParameter(type=standard_artifacts.Model, optional=True),
        DRIFT_ANOMALIES_KEY: ChannelParameter(
            type=standard_artifacts.ExampleAnomalies, optional=True
        ),
    }
    OUTPUTS = {
        EVALUATION_KEY: ChannelParameter(type=standard_artifacts.ModelEvaluation),
        BLESSING_KEY: ChannelParameter(type=standard_artifacts.ModelBlessing),
    }
    TYPE_ANNOTATION = Evaluate
