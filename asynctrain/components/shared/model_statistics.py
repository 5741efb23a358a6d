"""Where a model carries the statistics of the data it was trained on.

The Trainer copies its train split's statistics (StatisticsGen's `FeatureStats.pb`) into the
serving model's `assets.extra`, which travels with the SavedModel through the Pusher and which
TensorFlow Serving ignores. A later run that finds the served model (`LatestBlessedModel`) finds
those statistics with it, on any orchestrator: DriftValidator compares today's data with them.
"""

from __future__ import annotations

import os

from asynctrain.components.shared import object_store

# Relative to the serving model directory.
MODEL_STATISTICS_PATH = os.path.join('assets.extra', 'statistics', 'FeatureStats.pb')
# The split whose statistics a model carries: the one it trained on.
SPLIT = 'train'


def attach(statistics_file: str, serving_model_dir: str) -> str:
    """Copies `statistics_file` (a binary DatasetFeatureStatisticsList) into the model; returns
    where it now lies. Either may be on the store (the Trainer's `tfjob` mode)."""
    target = os.path.join(serving_model_dir, MODEL_STATISTICS_PATH)
    object_store.copy(statistics_file, target)
    return target
