"""Connecting this process to a cluster: the `ParameterServerStrategy`, its variable partitioner,
and what must go before it when the process has trained on another cluster already."""

from __future__ import annotations

import gc

import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import process_pool


def make_partitioner(distribution: config_lib.DistributionConfig, num_ps: int):
    """The variable partitioner: embedding tables (and every other variable) are split along
    their first axis over the parameter servers, so no single server holds a whole table."""
    partitioners = tf.distribute.experimental.partitioners
    if distribution.partitioner == 'fixed_shards':
        return partitioners.FixedShardsPartitioner(distribution.num_shards or num_ps)
    return partitioners.MinSizePartitioner(
        min_shard_bytes=distribution.min_shard_bytes, max_shards=distribution.max_shards or num_ps
    )


def release_earlier_cluster_objects() -> None:
    """Frees, before this process connects to a new cluster, what it still holds of an earlier
    one (a Trainer that is garbage but not yet collected: Keras models are reference cycles).

    When a `tf.function` dies, TensorFlow removes it from every remote of the cluster the process
    is connected to *now* (`EagerContext::RemoveFunction` in tensorflow/core/common_runtime/
    eager/context.cc, an Enqueue to each remote context). An earlier cluster's functions collected
    during a later cluster's training send removals to servers that never had them ("Tried to
    remove non-existent function"), into the same streams as the new cluster's closures: 948
    failed calls in 6 rounds of two in-process clusters each, none with this collection
    (`python -m tools.stress_sequential_clusters`). Collected here, their removals go to the
    cluster that registered them."""
    gc.collect()


def connect(cluster, distribution: config_lib.DistributionConfig):
    """A `ParameterServerStrategy` on `cluster` (a `cluster.servers.Cluster`), variables split by
    `make_partitioner`, after releasing what an earlier cluster left in this process; the
    coordinator's own server, if it is the process's first, sizes the pool as
    `process_pool.coordinator_server` says."""
    release_earlier_cluster_objects()
    with process_pool.coordinator_server():
        return tf.distribute.experimental.ParameterServerStrategy(
            cluster.resolver,
            variable_partitioner=make_partitioner(distribution, cluster.num_ps),
        )
