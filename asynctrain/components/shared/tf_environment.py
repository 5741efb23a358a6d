"""The environment every asynctrain process sets before TensorFlow is imported, in one place.

Entry points (`asynctrain`, `asynctrain train`, the cluster's server and coordinator processes,
benchmarks, tests) call `configure()` first; child processes and TFJob replicas get the same
`VARIABLES`. These are the standard variables of the TensorFlow ecosystem, not settings of ours.

`configure_autograph()` is the one setting made after the import: code that traces Keras models
into `tf.function`s (the Trainer's loop and export) calls it first. `register_filesystems(values)`
gives TensorFlow the object-store filesystems that the URIs a process was handed need.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, MutableMapping

VARIABLES = {
    # Keras 3 cannot train under ParameterServerStrategy: select Keras 2 (tf-keras). Read when
    # TensorFlow is first imported, so it must be set before that.
    'TF_USE_LEGACY_KERAS': '1',
    # Each gRPC call follows its caller's fail-fast flag. The ClusterCoordinator's calls ask to
    # fail fast, so a lost worker or parameter server is seen at once (the closure is rescheduled,
    # or the loss raised) instead of the call waiting for the task to come back.
    'GRPC_FAIL_FAST': 'use_caller',
}


def configure(environ: MutableMapping[str, str] | None = None) -> MutableMapping[str, str]:
    """Sets each of `VARIABLES` that is unset, in `environ` (default: this process's); returns it.
    A value the user set wins."""
    environ = os.environ if environ is None else environ
    for name, value in VARIABLES.items():
        environ.setdefault(name, value)
    return environ


def configure_autograph() -> None:
    """Makes AutoGraph leave tf-keras' own code unconverted, as it leaves `keras`'s.

    TensorFlow's conversion rules (`autograph/core/config.py`) skip the `tensorflow` and `keras`
    packages, but Keras 2 now comes as `tf_keras`, which no rule names. So every `tf.function`
    that calls a model also converted tf-keras' layer `__call__`, functional model and optimizer
    code, source file by source file: about half of the Trainer's time outside the steps
    themselves (a 300-step run: 25-29 s in the Trainer's child process, 14 s with this rule).
    A model's own code is still converted: `Layer.__call__` converts each layer's `call` itself
    (`tf_convert`), and the rule only spares the modules under `tf_keras`.
    Idempotent; affects this process only.
    """
    from tensorflow.python.autograph.core import config, config_lib

    if not any(
        isinstance(r, config_lib.DoNotConvert) and r._prefix == 'tf_keras'  # noqa: SLF001
        for r in config.CONVERSION_RULES
    ):
        config.CONVERSION_RULES = (config_lib.DoNotConvert('tf_keras'), *config.CONVERSION_RULES)


def register_filesystems(values: Iterable[str]) -> bool:
    """Registers TensorFlow's `s3://` filesystem when any of `values` (paths, URIs, arguments,
    serialized inputs) names an `s3://` URI; returns whether it did. TensorFlow 2.16 no longer
    has it built in: tensorflow-io's plugin provides it, reading the standard `S3_ENDPOINT`,
    `S3_USE_HTTPS` and `AWS_*` variables. A process that used it aborts at exit ("pure virtual
    method called"), so its entry point must end with `os._exit` (as `asynctrain train` and the
    Kubeflow steps' entrypoint do). `gs://` is built into TensorFlow.

    Raises:
      ValueError: on the TFX 1.21 line, which has no `s3://` filesystem for TensorFlow
        (`versions.HAS_TENSORFLOW_S3`), so that the step fails at once with the reason rather
        than at its first read with TensorFlow's "File system scheme 's3' not implemented".
    """
    if not any('s3://' in value for value in values):
        return False
    from asynctrain.components.shared import versions

    if not versions.HAS_TENSORFLOW_S3:
        raise ValueError(
            f'an s3:// URI was given, but on the {versions.LINE_NAME} line '
            'TensorFlow has no s3:// filesystem (tensorflow-io, which provides it, stops at '
            'TensorFlow 2.16): use a local, gs:// or mounted path there, or the TFX 1.16 line'
        )
    import tensorflow_io  # noqa: F401 (its import registers the filesystem)

    return True
