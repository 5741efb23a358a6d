"""Runs the pipeline on this machine with TFX's LocalDagRunner (ML Metadata in SQLite, cache on).

Adds only what is local: the metadata path under the work directory, a progress line per
component (with a line when the log shows trouble, see `console`), and a summary read back from ML
Metadata when the run ends.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import TextIO

from absl import logging as absl_logging
from tfx import v1 as tfx

from pipelines import console, run_summary
from pipelines.config import PipelineConfig
from pipelines.pipeline import create_pipeline
from pipelines.work_dir_lock import exclusive_work_dir


class PipelineRunError(RuntimeError):
    """A component failed; the message names it and the cause."""

    def __init__(
        self,
        component: str | None,
        cause: BaseException,
        log_path: str | None = None,
        log_offset: int = 0,
    ):
        self.component = component
        self.cause = cause
        self.log_path = log_path
        # Where the failing component's part of the log starts.
        self.log_offset = log_offset
        where = f'component {component}' if component else 'the pipeline'
        super().__init__(f'{where} failed: {type(cause).__name__}: {cause}')


class ComponentProgress(logging.Handler):
    """Turns LocalDagRunner's 'Component X is running/finished' log lines into progress lines."""

    def __init__(self, component_ids: list[str], out: TextIO, log_path: str | None = None):
        super().__init__(level=logging.INFO)
        self._ids = component_ids
        self._out = out
        self._log_path = log_path
        self._started: dict[str, float] = {}
        self.current: str | None = None
        # Where the current component's part of the log starts.
        self.log_offset = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg not in ('Component %s is running.', 'Component %s is finished.'):
            return
        node_id = record.args[0]
        index = self._ids.index(node_id) + 1 if node_id in self._ids else 0
        prefix = f'[{index}/{len(self._ids)}] {node_id}'
        if record.msg.endswith('running.'):
            self.current = node_id
            self._started[node_id] = time.monotonic()
            self.log_offset = console.log_size(self._log_path) if self._log_path else 0
            print(f'{prefix}: running...', file=self._out, flush=True)
        else:
            seconds = time.monotonic() - self._started.get(node_id, time.monotonic())
            print(f'{prefix}: done in {seconds:.1f}s', file=self._out, flush=True)
            if self._log_path:
                line = console.trouble_line(
                    console.scan(self._log_path, self.log_offset), self._log_path
                )
                if line:
                    print(line, file=self._out, flush=True)
            self.current = None


@contextlib.contextmanager
def _component_logs(log_path: str, progress: ComponentProgress, verbose: bool = False):
    """Sends TFX's and TensorFlow's logs to `log_path` (and, `verbose`, to stderr too); only
    progress lines reach the terminal otherwise."""
    file_handler = logging.FileHandler(log_path)
    formatter = logging.Formatter('%(asctime)s %(levelname)s %(name)s: %(message)s')
    file_handler.setFormatter(formatter)
    handlers: list[logging.Handler] = [file_handler]
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
        handlers[-1].setFormatter(formatter)
    loggers = [
        absl_logging.get_absl_logger(),
        logging.getLogger('tensorflow'),
        logging.getLogger('apache_beam'),
    ]
    saved = [(lg, lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO)
        lg.propagate = False
        lg.handlers = list(handlers)
        # Executors (Transform's, through the libraries it loads) lower these loggers to WARNING
        # mid-run, which would silence the 'Component X is running' lines the progress reads.
        lg.setLevel = lambda level: None
    loggers[0].addHandler(progress)
    try:
        yield
    finally:
        for lg, level, propagate, handlers in saved:
            del lg.setLevel
            lg.setLevel(level)
            lg.propagate = propagate
            lg.handlers = handlers
        file_handler.close()


def run_local(
    config: PipelineConfig,
    out: TextIO | None = None,
    log_path: str | None = None,
    verbose: bool = False,
) -> run_summary.RunSummary:
    """Runs the whole pipeline; returns what it produced.

    Args:
      config: The pipeline configuration.
      out: Where progress lines go (stdout by default).
      log_path: The run's log file (a new one under `<work_dir>/logs/` by default). Unless
        `verbose`, file descriptor 2 points at it while the pipeline runs (`console`).
      verbose: Show everything on the console as well.

    Raises:
      WorkDirBusyError: another run holds the work directory.
      PipelineRunError: a component failed (it published no artifact).
    """
    # Resolved per call, not at import: the caller may have redirected stdout since.
    out = out or sys.stdout
    # Built first: a bad schema or feature config fails before the work directory is touched.
    pipeline = create_pipeline(config)
    with exclusive_work_dir(config.work_dir):
        # TFX's helper creates the database's directory, so it comes only once the lock is held.
        pipeline.metadata_connection_config = (
            tfx.orchestration.metadata.sqlite_metadata_connection_config(config.metadata_path)
        )
        log_path = log_path or console.new_log_path(config.work_dir)
        stderr = contextlib.nullcontext() if verbose else console.stderr_to_log(log_path)
        with stderr:
            return _run_locked(config, pipeline, out, log_path, verbose)


def _run_locked(
    config: PipelineConfig, pipeline, out: TextIO, log_path: str, verbose: bool
) -> run_summary.RunSummary:
    ids = [component.id for component in pipeline.components]
    progress = ComponentProgress(ids, out, log_path)
    print(f'            log {log_path}', file=out, flush=True)
    started = time.time()
    with _component_logs(log_path, progress, verbose):
        try:
            tfx.orchestration.LocalDagRunner().run(pipeline)
        except Exception as e:  # Re-raised with the failing component named.
            raise PipelineRunError(progress.current, e, log_path, progress.log_offset) from e
        return run_summary.read_summary(config, started)
