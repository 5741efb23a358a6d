"""The arguments `asynctrain init` parses, for tests that call `init_command.run` directly."""

from __future__ import annotations

import argparse


def init_args(data, label: str, output, **overrides) -> argparse.Namespace:
    """init's defaults (no flag given) for `data`, `label` and `output`, then `overrides`."""
    values = dict(
        data=str(data),
        label=label,
        output=str(output),
        task='auto',
        delimiter=',',
        null_marker=[],
        positive=None,
        max_rows=None,
    )
    return argparse.Namespace(**{**values, **overrides})
