"""Code more than one component reads, in one home below the components. The record format the
ExampleBatcher writes and the Trainer reads (`columnar_records`, with its encoder
`example_wire`), the schema's column types (`feature_types`), the task vocabulary (`tasks`),
DriftValidator's output properties the Evaluator reads (`drift_properties`), where a model carries
its training statistics (`model_statistics`), and the process-wide pieces (`console`,
`tf_environment`, `yaml_config`, `protobuf_varints`, `beam_runner`, `forked_child`).

A component imports another component's modules only through here (tools/import_graph.py), and
nothing here imports a component."""
