"""The checkpoint format, and why a checkpoint restores into any number of parameter servers.

The Trainer checkpoints `tf.train.Checkpoint(model=..., optimizer=...)` with TensorFlow's own
format, unchanged: no layout-independent copy of our own is needed, because TF 2.16 already
writes one. A `ShardedVariable` saves each shard as a slice of one full tensor
(`ShardedVariable._gather_saveables_for_checkpoint`: a `SaveSliceInfo` with the full name, the
full shape and the shard's offset), so the checkpoint holds each embedding table whole, under one
key, whatever the sharding it was trained with (`tf.train.load_checkpoint(...).get_tensor(key)`
returns the full table), and a restore reads into each shard of the new layout the rows it
covers. The optimizer's slots follow: tf_keras 2.16's optimizer gathers the slots of a sharded
variable's shards into one `ShardedVariable` per slot (`Optimizer.add_variable_from_reference`,
`_trackable_children`), saved the same way. TensorFlow's parameter-server tutorial warns that
sharded slots cannot be resharded; that holds for the legacy optimizers
(`tf.keras.optimizers.legacy`, whose slots are plain per-shard variables), not the ones the
Trainer builds. The test `tests/components/trainer/training/sharded_tables_test.py` restores
a 10^6-row table and every slot across 1 -> 2 -> 1 -> 3 parameter servers and finds them equal
to what was saved.

A whole variable (one shard) and a one-shard-per-server variable share the same key too, so a
run on one server resumes a run on several and back. A warm start reads a previous serving
export (plain variables) by name into a plain build of the model, then `transfer_weights` copies
it into the sharded one through a checkpoint, which reshards it the same way.
"""

from __future__ import annotations

import os

import tensorflow as tf


def transfer_weights(source: tf.keras.Model, target: tf.keras.Model, scratch_dir: str) -> None:
    """Copies weights between two builds of the same model, sharded or not, via a checkpoint: a
    checkpoint stores each ShardedVariable as one full tensor and restores into any sharding."""
    path = tf.train.Checkpoint(model=source).write(os.path.join(scratch_dir, 'weights'))
    tf.train.Checkpoint(model=target).read(path).expect_partial()
