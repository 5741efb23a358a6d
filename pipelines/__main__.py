"""`python -m pipelines` is the `asynctrain` command."""

import sys

from pipelines.cli import main

sys.exit(main())
