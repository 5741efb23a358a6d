"""Stock Transform's executor, with one change: on a direct runner it builds no package of TFX's
source for remote workers (`asynctrain.components.shared.beam_runner`)."""

from tfx.components.transform import executor as transform_executor

from asynctrain.components.shared import beam_runner


class Executor(beam_runner.NoStagingOnDirectRunner, transform_executor.Executor):
    """TFX's Transform executor; its Beam arguments as given on a direct runner."""
