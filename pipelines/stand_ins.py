"""The stock TFX Trainer standing in for asynctrain's own Trainer until it lands."""

from __future__ import annotations

from tfx import v1 as tfx

from benchmarks import reference_trainer


def trainer(*, transformed_examples, transform_graph, schema, base_model, config, label_key):
    return tfx.components.Trainer(
        run_fn='benchmarks.reference_trainer.run_fn',
        examples=transformed_examples, transform_graph=transform_graph, schema=schema,
        base_model=base_model,
        train_args=tfx.proto.TrainArgs(num_steps=config.training.train_steps),
        eval_args=tfx.proto.EvalArgs(num_steps=max(config.training.eval_steps, 1)),
        custom_config={reference_trainer.LABEL_KEY: label_key})
