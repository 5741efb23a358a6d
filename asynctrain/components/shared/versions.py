"""What differs between asynctrain's two supported lines, in one place.

The interpreter picks the line (pyproject.toml's markers): TFX 1.16 / TensorFlow 2.16 / Beam 2.59
on Python 3.10, and TFX 1.21 / TensorFlow 2.21 / Beam 2.70 on Python 3.11-3.13 (issue 46). Code
that must behave differently on the two reads a named fact from here, each with the release note
or source file that explains it; no other module compares versions.
"""

from __future__ import annotations

import importlib.metadata
from typing import Final, Literal

Line = Literal['tfx116', 'tfx121']


def _installed_line() -> Line:
    """The line of the installed TFX (read from its metadata: importing TFX takes seconds)."""
    major, minor = (int(part) for part in importlib.metadata.version('tfx').split('.')[:2])
    return 'tfx116' if (major, minor) < (1, 21) else 'tfx121'


LINE: Final[Line] = _installed_line()
# The line as people write it, for messages: 'TFX 1.16' or 'TFX 1.21'.
LINE_NAME: Final[str] = {'tfx116': 'TFX 1.16', 'tfx121': 'TFX 1.21'}[LINE]

# TensorFlow's `s3://` filesystem. TensorFlow 2.6 moved it out into tensorflow-io, whose last
# release (0.37.1, 2024) is built against TensorFlow 2.16 and ships no wheel for Python 3.13 or
# TensorFlow 2.21 (https://pypi.org/project/tensorflow-io/0.37.1/#files): on the 1.21 line
# TensorFlow cannot open `s3://` at all, so only the 1.16 line registers it.
HAS_TENSORFLOW_S3: Final[bool] = LINE == 'tfx116'

# The module of TensorBoard's profile plugin that converts a captured trace (XSpace) for its tools
# (`xspace_to_tool_data`), which tests use to open `trainer.profile`'s traces as TensorBoard would.
# tensorboard-plugin-profile 2.17 (the 1.16 lock) holds it; from 2.19 the plugin is a shim over
# `xprof` (its tensorboard_plugin_profile/__init__.py: "Passthrough __init__.py pointing to
# xprof"), where it lives as xprof/convert/raw_to_tool_data.py (2.22.1 in the 1.21 lock).
PROFILE_CONVERTER_MODULE: Final[str] = {
    'tfx116': 'tensorboard_plugin_profile.convert.raw_to_tool_data',
    'tfx121': 'xprof.convert.raw_to_tool_data',
}[LINE]

# Each line's image (kubeflow/): the Dockerfile that builds it, and the suffix of the local tag
# that `asynctrain compile` names when no `--image` is given, so that a pipeline compiled on one
# line never runs in the other line's image. The 1.21 image is not built on tensorflow/tfx:1.21.0,
# which carries Python 3.10 (kubeflow/Dockerfile.tfx121 says why).
DOCKERFILE: Final[str] = {'tfx116': 'kubeflow/Dockerfile', 'tfx121': 'kubeflow/Dockerfile.tfx121'}[
    LINE
]
IMAGE_TAG_SUFFIX: Final[str] = {'tfx116': '', 'tfx121': '-tfx121'}[LINE]
