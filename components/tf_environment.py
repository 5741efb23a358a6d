"""The environment every asynctrain process sets before TensorFlow is imported, in one place.

Entry points (`asynctrain`, `asynctrain train`, the cluster's server and coordinator processes,
benchmarks, tests) call `configure()` first; child processes and TFJob replicas get the same
`VARIABLES`. These are the standard variables of the TensorFlow ecosystem, not settings of ours.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

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
