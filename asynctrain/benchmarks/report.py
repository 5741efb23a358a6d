"""What every benchmark writes: its progress lines as it runs, and at the end the machine it ran
on, `result.json` and a PNG chart."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any


def progress(bench: str, stderr: bool = False) -> Callable[[str], None]:
    """The bench's progress printer: `[bench NAME HH:MM:SS] message`, flushed at once, on stdout
    (or stderr), looked up at each call: a test's capture sees it."""

    def log(message: str) -> None:
        stream = sys.stderr if stderr else sys.stdout
        print(f'[bench {bench} {time.strftime("%H:%M:%S")}] {message}', file=stream, flush=True)

    return log


def machine() -> dict[str, Any]:
    """The machine a figure was measured on, recorded beside the figure."""
    return {
        'cpus': os.cpu_count(),
        'platform': platform.platform(),
        'python': platform.python_version(),
    }


def finished_at() -> str:
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


def write_result(
    output: str,
    result: dict[str, Any],
    chart_name: str,
    write_chart: Callable[[dict[str, Any], str], None],
) -> tuple[str, str]:
    """Writes `<output>/result.json` and the chart `<output>/<chart_name>`; returns both paths."""
    result_path = os.path.join(output, 'result.json')
    with open(result_path, 'w', encoding='utf-8') as f:
        json.dump(result, f, indent=2)
    chart_path = os.path.join(output, chart_name)
    write_chart(result, chart_path)
    return result_path, chart_path
