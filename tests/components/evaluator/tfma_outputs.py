"""Stock TFMA run on the same examples and models as ours, and the assertion that both wrote the
same evaluation (`asynctrain.benchmarks.evaluation_outputs.differences`: slices, metric keys,
values within 1e-6, which metrics have intervals, plots, failed checks)."""

import tensorflow_model_analysis as tfma

from asynctrain.benchmarks.evaluation_outputs import (  # noqa: F401 (re-exported for the tests)
    differences,
    failures,
    intervals,
    plots,
    values,
)


def assert_same(stock_dir, ours_dir, not_compared=()):
    """Both evaluations agree (see `differences`); returns ours' {slice key: {MetricKey: value}}."""
    assert differences(stock_dir, ours_dir, not_compared=not_compared) == []
    return values(ours_dir)


def run_stock(
    eval_config, model_paths: dict, data_location: str, output_path: str, seed: int | None = None
) -> None:
    """Stock TFMA (`tfma.run_model_analysis`, the engine inside TFX's Evaluator) on the same
    examples and models: `model_paths` maps each model spec's name ('' for a single model) to its
    SavedModel directory; `seed` fixes TFMA's bootstrap draws (its `random_seed_for_testing`)."""
    shared = [
        tfma.default_eval_shared_model(path, eval_config=eval_config, model_name=name)
        for name, path in model_paths.items()
    ]
    tfma.run_model_analysis(
        eval_shared_model=shared[0] if len(shared) == 1 else shared,
        eval_config=eval_config,
        data_location=data_location,
        output_path=output_path,
        random_seed_for_testing=seed,
    )
