"""Stock TFX components standing in for asynctrain's own ExampleGen and Trainer until they land."""

from __future__ import annotations

from tfx import v1 as tfx

from benchmarks import reference_trainer


def example_gen(data_dir, *, input_config, output_config, settings, schema_path):
    del settings, schema_path  # Stock CsvExampleGen infers types and has no dead-letter output.
    return tfx.components.CsvExampleGen(
        input_base=data_dir, input_config=input_config, output_config=output_config)


def trainer(*, transformed_examples, transform_graph, schema, config, label_key):
    return tfx.components.Trainer(
        run_fn='benchmarks.reference_trainer.run_fn',
        examples=transformed_examples, transform_graph=transform_graph, schema=schema,
        train_args=tfx.proto.TrainArgs(num_steps=config.training.train_steps),
        eval_args=tfx.proto.EvalArgs(num_steps=max(config.training.eval_steps, 1)),
        custom_config={reference_trainer.LABEL_KEY: label_key})
