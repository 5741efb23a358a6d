"""Test-wide setup: the environment every asynctrain entry point sets before TensorFlow loads."""

import os

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
os.environ.setdefault('GRPC_FAIL_FAST', 'use_caller')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
