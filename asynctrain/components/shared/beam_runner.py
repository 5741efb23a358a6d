"""Which Beam runner a component's `beam_pipeline_args` name, and the base our Beam executors share
(`DirectRunnerExecutor`): on a direct runner it leaves out TFX's package of its own source for
remote workers, and runs the pipeline without Beam's in-process state cache.

Given any Beam argument, TFX's `BaseBeamExecutor` builds an sdist of the installed TFX
(`tfx.utils.dependency_utils.build_ephemeral_package`: a copy of its 48 MB install, then
`setup.py sdist` in a child process, left in the temporary directory) and adds it as
`--extra_package`, so that a remote runner's workers can import TFX. A direct runner's workers are
the executor's own process or its children, on the same interpreter and installation: they never
read the package. Measured on this project's 2-core machines (TFX 1.16, 2026-12-06): 4.2 s of CPU
and 6.1 s of wall time per package, `python -c "from tfx.utils import dependency_utils;
dependency_utils.build_ephemeral_package()"`; a pipeline run with `--direct_num_workers=2` built
one per Beam component, every run. On any other runner, TFX's behaviour is kept as it is.

The direct runner's in-process worker caches side inputs and state in a 100 MB `StateCache`
(`apache_beam/runners/portability/fn_api_runner/worker_handlers.py`, `STATE_CACHE_SIZE_MB`, which
no pipeline option reaches; `--max_cache_memory_usage_mb` sizes only separate SDK workers' caches).
The cache weighs every value it loads with `objsize.get_deep_size`
(`apache_beam/runners/worker/statecache.py`), which first walks the globals of every loaded module
to exclude them: with TensorFlow, TFX and Beam loaded, that walk was 10.6% of the bundled
pipeline's in-process CPU samples (py-spy, 183 of 1,727; Transform's analysis most of it). In
process, a side input read without the cache is a lookup in the runner's own memory. Measured
(2026-12-07, TFX 1.16, `asynctrain run` on the bundled data, alternated): 45.2 and 44.4 s with the
cache, 39.9 and 41.6 s without.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Sequence

# The runners that run the pipeline in the executor's own process or its children (Beam's names).
DIRECT_RUNNERS = ('DirectRunner', 'direct', 'BundleBasedDirectRunner', 'SwitchingDirectRunner')


def runner(beam_pipeline_args: Sequence[str]) -> str:
    """The runner `beam_pipeline_args` name (the last `--runner`), DirectRunner when none."""
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    return PipelineOptions(list(beam_pipeline_args)).view_as(StandardOptions).runner or (
        'DirectRunner'
    )


def is_direct(beam_pipeline_args: Sequence[str]) -> bool:
    """Whether `beam_pipeline_args` name a direct runner (or none)."""
    return runner(beam_pipeline_args) in DIRECT_RUNNERS


class DirectRunnerExecutor:
    """Put first among an executor's bases, before TFX's Beam executor class: with a direct
    runner, the executor keeps its Beam arguments as given, without TFX's `--extra_package`, and
    its pipelines run without the in-process state cache (see the module docstring)."""

    def __init__(self, context=None) -> None:
        beam_pipeline_args = list(getattr(context, 'beam_pipeline_args', None) or ())
        self._direct = is_direct(beam_pipeline_args)
        if not beam_pipeline_args or not self._direct:
            super().__init__(context)
            return
        unstaged = copy.copy(context)
        unstaged.beam_pipeline_args = None
        super().__init__(unstaged)
        self._beam_pipeline_args = beam_pipeline_args
        # The rest of what TFX's constructor does with the arguments: absl flags named among
        # them take effect (its telemetry labels are for Dataflow's console, not a direct runner).
        from absl import flags

        flags.FLAGS(sys.argv + beam_pipeline_args, known_only=True)

    def _make_beam_pipeline(self):
        pipeline = super()._make_beam_pipeline()
        if self._direct:
            run = pipeline.run

            def run_without_state_cache(*args, **kwargs):
                with without_in_process_state_cache():
                    return run(*args, **kwargs)

            # `Pipeline.__exit__` runs the pipeline through this attribute.
            pipeline.run = run_without_state_cache
        return pipeline


@contextlib.contextmanager
def without_in_process_state_cache():
    """While inside, a direct runner's in-process worker has no state cache (a size of 0 turns
    Beam's `StateCache` off); the size is restored after."""
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    size = worker_handlers.STATE_CACHE_SIZE_MB
    worker_handlers.STATE_CACHE_SIZE_MB = 0
    try:
        yield
    finally:
        worker_handlers.STATE_CACHE_SIZE_MB = size
