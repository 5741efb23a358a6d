"""asynctrain's ExampleBatcher: Transform's output rewritten once, shuffled and pre-batched
(many examples per record, column by column), so that the Trainer parses a few records per step
instead of hundreds of protos. `component.ExampleBatcher` is the TFX component;
`batching` its Beam pipeline; `shared.columnar_records` and `shared.shuffled_shards` the format
and layout it and the Trainer share."""
