"""`executor_inputs`: a component's execution properties with its protos as the JSON an executor
parses, everything else as the component holds it."""

import json
import types

from tfx.proto import range_config_pb2
from tfx.utils import proto_utils

from asynctrain.components.example_gen import component
from asynctrain.testing import executor_inputs


def test_a_proto_property_becomes_the_json_of_the_same_message_and_the_rest_is_kept():
    static = range_config_pb2.RangeConfig(
        static_range=range_config_pb2.StaticRange(start_span_number=2, end_span_number=5)
    )
    holder = types.SimpleNamespace(exec_properties={'range_config': static, 'num': 3, 'none': None})

    props = executor_inputs.exec_properties(holder)

    assert isinstance(props['range_config'], str)
    assert (
        proto_utils.json_to_proto(props['range_config'], range_config_pb2.RangeConfig()) == static
    )
    assert (props['num'], props['none']) == (3, None)


def test_csv_example_gen_properties_are_the_components_for_that_input_and_schema():
    gen = component.CsvExampleGen(input_base='/data/in', schema_path='/data/schema.pbtxt')

    props = executor_inputs.csv_example_gen_properties('/data/in', '/data/schema.pbtxt')

    assert props == gen.exec_properties
    assert (props['input_base'], props['schema_path']) == ('/data/in', '/data/schema.pbtxt')
    assert json.loads(props['input_config']) == {
        'splits': [{'name': 'single_split', 'pattern': '*'}]
    }
    assert executor_inputs.csv_example_gen_properties('/data/in')['schema_path'] is None
