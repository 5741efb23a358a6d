"""Stock Transform (its spec, parameters and outputs) run by `executor.Executor`, which differs from
stock's only in leaving out TFX's source package on a direct runner. Named `Transform` as stock's
is, so the pipeline's node id stays `Transform`."""

from tfx.components.transform import component as transform_component
from tfx.dsl.components.base import executor_spec

from asynctrain.components.transform import executor


class Transform(transform_component.Transform):
    """TFX's Transform component with this package's executor."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
