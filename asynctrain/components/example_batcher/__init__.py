"""asynctrain's ExampleBatcher: Transform's output rewritten once, shuffled and pre-batched
(many examples per record, column by column), so that the Trainer parses a few records per step
instead of hundreds of protos. `component.ExampleBatcher` is the TFX component;
`shared.columnar_records` the writer and reader it and the Trainer share."""
