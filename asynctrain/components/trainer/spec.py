"""The Trainer's contract: its inputs, outputs and parameters, and their keys, in one place.

The input and output keys are TFX's own (`standard_component_specs`), so the channels line up
with stock Trainer's: stock Evaluator and Pusher consume `model` unchanged.
"""

from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

EXAMPLES_KEY = standard_component_specs.EXAMPLES_KEY
TRANSFORM_GRAPH_KEY = standard_component_specs.TRANSFORM_GRAPH_KEY
SCHEMA_KEY = standard_component_specs.SCHEMA_KEY
BASE_MODEL_KEY = standard_component_specs.BASE_MODEL_KEY
# Optional: the training data's statistics (StatisticsGen's), carried in the exported model
# (`asynctrain.components.shared.model_statistics`) so that a later run can compare its data with them.
STATISTICS_KEY = standard_component_specs.STATISTICS_KEY
MODEL_KEY = standard_component_specs.MODEL_KEY
MODEL_RUN_KEY = standard_component_specs.MODEL_RUN_KEY
# The TrainerConfig as JSON (`config.to_dict`): execution parameters must be primitive or protos.
CONFIG_KEY = 'config'
LABEL_KEY_KEY = 'label_key'
# Optional: the pipeline's `model_identity.ModelIdentity` as JSON, written into the exported
# model so that `LatestBlessedModel` takes only this pipeline's pushes.
MODEL_IDENTITY_KEY = 'model_identity'


class TrainerSpec(ComponentSpec):
    """Parameter-server Trainer: transformed examples in, a serving Model and a ModelRun out."""

    PARAMETERS = {
        CONFIG_KEY: ExecutionParameter(type=str),
        LABEL_KEY_KEY: ExecutionParameter(type=str),
        MODEL_IDENTITY_KEY: ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
        TRANSFORM_GRAPH_KEY: ChannelParameter(type=standard_artifacts.TransformGraph),
        SCHEMA_KEY: ChannelParameter(type=standard_artifacts.Schema),
        BASE_MODEL_KEY: ChannelParameter(type=standard_artifacts.Model, optional=True),
        STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
    }
    OUTPUTS = {
        MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
        MODEL_RUN_KEY: ChannelParameter(type=standard_artifacts.ModelRun),
    }
