"""Former home of `components.trainer.tfjob`, kept as an alias for old imports.

The TFJob code moved next to the Trainer's executor, which submits the job (components/ never
imports pipelines/). `tests/reliability/security_test.py` still imports `load_tfjob_settings`
from here; once it imports `components.trainer.tfjob`, this module can go. New code imports
`components.trainer.tfjob`.
"""

from components.trainer.tfjob import *  # noqa: F401,F403
from components.trainer.tfjob import load_tfjob_settings  # noqa: F401
