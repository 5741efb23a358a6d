"""The contract of the ExampleBatcher: inputs, output, parameters and the properties it records.
Every key lives here, once."""

from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

EXAMPLES_KEY = standard_component_specs.EXAMPLES_KEY
TRANSFORM_GRAPH_KEY = standard_component_specs.TRANSFORM_GRAPH_KEY
BATCHED_EXAMPLES_KEY = 'batched_examples'

EXAMPLES_PER_RECORD_KEY = 'examples_per_record'
NUM_FILES_KEY = 'num_files'
# Seed of the shuffle: the same inputs and seed write the same bytes.
SEED_KEY = 'seed'
# 1: `examples` are raw (ExampleGen's), transformed here by the transform graph; 0: they are
# Transform's `transformed_examples`.
TRANSFORM_KEY = 'transform'

# Custom properties set on the batched examples artifact.
EXAMPLES_FORMAT_PROPERTY = 'examples_format'
EXAMPLES_PER_RECORD_PROPERTY = 'examples_per_record'
EXAMPLES_SPLIT_PROPERTY_PREFIX = 'examples_'  # + split name, e.g. examples_train.


class ExampleBatcherSpec(ComponentSpec):
    """Examples (raw or transformed) and their transform graph in; the transformed examples,
    pre-batched, out."""

    PARAMETERS = {
        EXAMPLES_PER_RECORD_KEY: ExecutionParameter(type=int),
        NUM_FILES_KEY: ExecutionParameter(type=int),
        SEED_KEY: ExecutionParameter(type=int),
        TRANSFORM_KEY: ExecutionParameter(type=int),
    }
    INPUTS = {
        EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
        TRANSFORM_GRAPH_KEY: ChannelParameter(type=standard_artifacts.TransformGraph),
    }
    OUTPUTS = {
        BATCHED_EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
    }
