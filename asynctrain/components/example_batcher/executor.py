"""The ExampleBatcher's executor: artifacts in, plain paths out, then every split written in the
seeded layout (`shared/shuffled_shards`) by the Beam pipeline of `batching.WriteBatchedSplit`,
or, on a direct runner, by the same functions in this process (faster, and memory bounded by a
shard: measured, see ONE_PROCESS_MAX_SOURCE_BYTES). Raw examples are transformed on the way by
the transform graph's `transform_features_layer()`, the function the serving model applies. Both
paths write the same bytes for the same seed."""

from __future__ import annotations

import os
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils

from asynctrain.components.example_batcher import batching, spec
from asynctrain.components.shared import beam_runner, columnar_records, shuffled_shards

# On a direct runner, the splits are written in this process unless their source (GZIP
# TFRecords, all splits together) reaches this many bytes; None: always. The same files either
# way. Measured with `asynctrain bench batcher --rows N` (taxi examples, both splits, 2 shared
# cores; 2026-12-04), this process against the Beam DirectRunner (in memory):
#   100,000 rows (5.7 MB):  1.6 s, 1.5 CPU s, 0.9 GB peak RSS against 5.2 s, 3.1 CPU s, 1.1 GB;
#   1,000,000 rows (57 MB): 15.5 s, 10.0 CPU s, 1.0 GB against 14.9 s, 14.0 CPU s, 3.3 GB.
# The wall times meet near 1M rows, but the DirectRunner holds its whole GroupByKey in memory
# (3.3 GB at 1M rows, growing with the split) where this process holds one shard (1.1 GB at 5M
# rows): no size makes the DirectRunner the better choice, so a direct runner always writes
# here, and a distributed runner always runs the pipeline.
ONE_PROCESS_MAX_SOURCE_BYTES: int | None = None


def uses_beam(beam_pipeline_args: list[str], source_bytes: int) -> bool:
    """Whether the splits are written by the Beam pipeline: always on a distributed runner; on a
    direct one only from ONE_PROCESS_MAX_SOURCE_BYTES of source."""
    if not beam_runner.is_direct(beam_pipeline_args):
        return True
    limit = ONE_PROCESS_MAX_SOURCE_BYTES
    return limit is not None and source_bytes >= limit


class Executor(beam_runner.DirectRunnerExecutor, base_beam_executor.BaseBeamExecutor):
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
        examples_per_record = int(exec_properties[spec.EXAMPLES_PER_RECORD_KEY])
        num_files = int(exec_properties[spec.NUM_FILES_KEY])
        seed = int(exec_properties[spec.SEED_KEY])
        transform = bool(exec_properties.get(spec.TRANSFORM_KEY))
        features = columnar_records.feature_dtypes(
            tft.TFTransformOutput(transform_graph).transformed_feature_spec()
        )
        splits = {}
        for split in split_names:
            files = shuffled_shards.source_files(
                os.path.join(artifact_utils.get_split_uri([examples], split), '*.gz')
            )
            size = shuffled_shards.source_bytes(files)
            splits[split] = (files, size, shuffled_shards.num_shards(size, num_files))
        output_dirs = {s: columnar_records.split_dir(batched.uri, s) for s in split_names}
        if uses_beam(self._beam_pipeline_args, sum(size for _, size, _ in splits.values())):
            with self._make_beam_pipeline() as pipeline:
                for split, (files, _, shards) in splits.items():
                    _ = pipeline | f'Write[{split}]' >> batching.WriteBatchedSplit(
                        files,
                        output_dirs[split],
                        transform_graph,
                        transform,
                        features,
                        examples_per_record,
                        shards,
                        seed,
                    )
        else:
            decode = batching.load_decoder(transform_graph, transform)
            for split, (files, _, shards) in splits.items():
                stats = shuffled_shards.write_split(
                    files, decode, output_dirs[split], examples_per_record, shards, seed
                )
                columnar_records.write_metadata(
                    output_dirs[split],
                    shuffled_shards.split_metadata(
                        stats, features, examples_per_record, shards, seed, columnar_records.FORMAT
                    ),
                )
        for split in split_names:
            metadata = columnar_records.read_metadata(os.path.join(output_dirs[split], '*.gz'))
            batched.set_int_custom_property(
                spec.EXAMPLES_SPLIT_PROPERTY_PREFIX + split, metadata['examples']
            )
        batched.split_names = artifact_utils.encode_split_names(split_names)
        batched.set_string_custom_property(spec.EXAMPLES_FORMAT_PROPERTY, columnar_records.FORMAT)
        batched.set_int_custom_property(spec.EXAMPLES_PER_RECORD_PROPERTY, examples_per_record)
