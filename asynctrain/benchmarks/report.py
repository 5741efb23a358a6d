"""What every benchmark writes: its progress lines as it runs, and at the end the machine it ran
on, `result.json` and a PNG chart."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from asynctrain.components.shared import console


def progress(bench: str, stderr: bool = False) -> Callable[[str], None]:
    """The bench's progress printer: `[bench NAME HH:MM:SS] message`, flushed at once, on stdout
    (or stderr), looked up at each call: a test's capture sees it."""

    def log(message: str) -> None:
        stream = sys.stderr if stderr else sys.stdout
        print(f'[bench {bench} {time.strftime("%H:%M:%S")}] {message}', file=stream, flush=True)

    return log


@contextlib.contextmanager
def libraries_to_log(log: Callable[[str], None], log_path: str) -> Iterator[None]:
    """The bench's console keeps its own lines: makes `log_path`'s folder, says where the rest goes
    (`log`, the bench's progress printer), then points descriptor 2 there until the block ends, so
    that TensorFlow's, TFX's and Beam's lines, and the bench's subprocesses', go to the log."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    log(f'log {log_path} (TensorFlow, TFX and Beam)')
    with console.stderr_to_log(log_path):
        yield


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
