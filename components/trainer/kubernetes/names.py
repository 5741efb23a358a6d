"""The naming rule Kubernetes applies to what the Training Operator creates for a TFJob.

The operator names a headless Service `<job>-<type>-<i>` for every replica pod, and a Service name
must be a DNS-1035 label: lower-case letters, digits and `-`, starting with a letter, ending with
a letter or digit, at most 63 characters. The TFJob manifest (`tfjob.py`) and the trainer config
(`components/trainer/config.py`, the job name prefix and the namespace) check names against it.
Imports nothing from the project, so that any module can use it without an import cycle.
"""

from __future__ import annotations

import re

# https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#rfc-1035-label-names
DNS_1035_LABEL = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')
# The longest label (a Service name, a namespace) Kubernetes accepts.
MAX_DNS_LABEL_LENGTH = 63
