"""The ExampleBatcher's executor: artifacts in, plain paths and the transformed feature spec out,
then `columnar_records.write_split` per split (plain tf.data and NumPy, streaming through shuffle
buckets). Raw examples are transformed on the way by the transform graph's
`transform_features_layer()`, the function the serving model applies."""

from __future__ import annotations

import os
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils

from asynctrain.components.example_batcher import spec
from asynctrain.components.shared import columnar_records


class Executor(base_executor.BaseExecutor):
    """Writes every split of the examples, transformed, as shuffled, pre-batched records."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        import tensorflow_transform as tft

        self._log_startup(input_dict, output_dict, exec_properties)
        examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES_KEY])
        transform_graph = artifact_utils.get_single_uri(input_dict[spec.TRANSFORM_GRAPH_KEY])
        batched = artifact_utils.get_single_instance(output_dict[spec.BATCHED_EXAMPLES_KEY])
        split_names = artifact_utils.decode_split_names(examples.split_names)
        if not split_names:
            raise ValueError(f'examples {examples.uri}: the artifact records no split_names')
        transform_output = tft.TFTransformOutput(transform_graph)
        feature_spec = transform_output.transformed_feature_spec()
        examples_per_record = int(exec_properties[spec.EXAMPLES_PER_RECORD_KEY])
        transforming = {}
        if exec_properties.get(spec.TRANSFORM_KEY):
            transforming = dict(
                transform=transform_output.transform_features_layer(),
                parse_spec=transform_output.raw_feature_spec(),
            )
        for split in split_names:
            metadata = columnar_records.write_split(
                os.path.join(artifact_utils.get_split_uri([examples], split), '*.gz'),
                feature_spec,
                columnar_records.split_dir(batched.uri, split),
                examples_per_record=examples_per_record,
                num_files=int(exec_properties[spec.NUM_FILES_KEY]),
                seed=int(exec_properties[spec.SEED_KEY]),
                **transforming,
            )
            batched.set_int_custom_property(
                spec.EXAMPLES_SPLIT_PROPERTY_PREFIX + split, metadata['examples']
            )
        batched.split_names = artifact_utils.encode_split_names(split_names)
        batched.set_string_custom_property(spec.EXAMPLES_FORMAT_PROPERTY, columnar_records.FORMAT)
        batched.set_int_custom_property(spec.EXAMPLES_PER_RECORD_PROPERTY, examples_per_record)
