"""Stock Transform's executor, with what our Beam executors change on a direct runner: no package of
TFX's source for remote workers, no in-process state cache (`asynctrain.components.shared.
beam_runner`)."""

from tfx.components.transform import executor as transform_executor

from asynctrain.components.shared import beam_runner


class Executor(beam_runner.DirectRunnerExecutor, transform_executor.Executor):
    """TFX's Transform executor; on a direct runner, its Beam arguments as given and its pipelines
    without the in-process state cache."""
