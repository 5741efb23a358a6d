"""The contract of LatestBlessedModel: its trigger input, its parameter, its output and the
properties it records. Every key lives here, once."""

from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

EXAMPLES_KEY = standard_component_specs.EXAMPLES_KEY
PUSH_DESTINATION_KEY = standard_component_specs.PUSH_DESTINATION_KEY
MODEL_KEY = standard_component_specs.MODEL_KEY
# This pipeline's `model_identity.ModelIdentity` as JSON: a pushed model is taken only when the
# identity it carries is this pipeline's.
MODEL_IDENTITY_KEY = 'model_identity'

# Custom properties of the output model: where it was copied from ('' when none was pushed yet)
# and that push's version (the Pusher's directory name; -1 when none).
PUSHED_MODEL_PROPERTY = 'pushed_model'
PUSHED_VERSION_PROPERTY = 'pushed_version'
# The newer pushes passed over as another pipeline's, one line each (JSON list of strings).
PASSED_OVER_PROPERTY = 'passed_over'


class LatestBlessedModelSpec(ComponentSpec):
    """Today's examples (the trigger), the push destination and the pipeline's identity in; the
    newest model this pipeline pushed out."""

    PARAMETERS = {
        PUSH_DESTINATION_KEY: ExecutionParameter(type=str),
        MODEL_IDENTITY_KEY: ExecutionParameter(type=str),
    }
    INPUTS = {
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
    }
    OUTPUTS = {
        MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
    }
