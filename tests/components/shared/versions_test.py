"""The supported line is the installed TFX's, and it is the one pyproject.toml's markers pick for
this interpreter (TFX 1.16 on Python 3.10, TFX 1.21 from 3.11)."""

import sys

import tfx

from asynctrain.components.shared import versions
from tests.repository import REPO_ROOT


def test_the_line_is_the_installed_tfxs_and_the_one_this_python_selects():
    expected = (
        ('tfx116', 'TFX 1.16', '1.16.')
        if sys.version_info < (3, 11)
        else ('tfx121', 'TFX 1.21', '1.21.')
    )

    assert (versions.LINE, versions.LINE_NAME) == expected[:2]
    assert tfx.__version__.startswith(expected[2])
    assert versions.HAS_TENSORFLOW_S3 == (versions.LINE == 'tfx116')


def test_each_line_names_its_own_dockerfile_and_image_tag():
    # kubeflow/Dockerfile builds the 1.16 image, kubeflow/Dockerfile.tfx121 the 1.21 one; the tag
    # a compile names without --image says the line, so the two images never mix.
    expected = {
        'tfx116': ('kubeflow/Dockerfile', ''),
        'tfx121': ('kubeflow/Dockerfile.tfx121', '-tfx121'),
    }
    assert (versions.DOCKERFILE, versions.IMAGE_TAG_SUFFIX) == expected[versions.LINE]
    assert (REPO_ROOT / versions.DOCKERFILE).is_file()
