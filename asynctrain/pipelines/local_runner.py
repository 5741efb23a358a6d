"""Runs the pipeline on this machine with TFX's LocalDagRunner (ML Metadata in SQLite, cache on).

Adds only what is local: the metadata path in the pipeline's folder of the work directory
(`work_dir_layout`), a progress line when each component starts and ends (its time, whether it
came from the cache, ExampleGen's row counts, and a line when the log shows trouble, see
`console`), the elapsed time while a Beam component runs, and a summary read back from ML
Metadata when the run ends.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import TextIO

from absl import logging as absl_logging

# Not `tfx.v1`, which also imports the Vertex AI client and every extension (seconds of start-up).
from tfx.dsl.components.base.base_beam_component import BaseBeamComponent
from tfx.orchestration import metadata
from tfx.orchestration.local.local_dag_runner import LocalDagRunner

from asynctrain.components.example_gen.spec import ROWS_RECORD_ATTRIBUTE
from asynctrain.components.shared import console
from asynctrain.pipelines import dataset, run_summary
from asynctrain.pipelines.config import PipelineConfig
from asynctrain.pipelines.pipeline import create_pipeline
from asynctrain.pipelines.work_dir_lock import exclusive_work_dir


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
    """Turns LocalDagRunner's 'Component X is running/finished' log lines into progress lines.

    A component's end line says how long it took, `(from cache)` when TFX reused an earlier
    execution, and the row counts a component logged with `ROWS_RECORD_ATTRIBUTE` (ExampleGen).
    While a component of `beam_ids` runs, a `console.ElapsedLine` shows its elapsed time.
    """

    _RUNNING = 'Component %s is running.'
    _FINISHED = 'Component %s is finished.'
    _CACHED = 'A cached execution %d is used.'

    def __init__(
        self,
        component_ids: list[str],
        out: TextIO,
        log_path: str | None = None,
        beam_ids: tuple[str, ...] | list[str] = (),
        interactive: bool | None = None,
        elapsed_interval: float = 30.0,
    ):
        super().__init__(level=logging.INFO)
        self._ids = component_ids
        self._out = out
        self._log_path = log_path
        self._beam_ids = set(beam_ids)
        self._interactive = interactive
        self._elapsed_interval = elapsed_interval
        self._started: dict[str, float] = {}
        self._elapsed: console.ElapsedLine | None = None
        self._cached = False
        self._rows: dict | None = None
        self.current: str | None = None
        # Where the current component's part of the log starts.
        self.log_offset = 0

    def emit(self, record: logging.LogRecord) -> None:
        rows = getattr(record, ROWS_RECORD_ATTRIBUTE, None)
        if isinstance(rows, dict) and self.current:
            self._rows = rows
            return
        if record.msg == self._CACHED and self.current:
            self._cached = True
            return
        if record.msg not in (self._RUNNING, self._FINISHED):
            return
        node_id = record.args[0]
        index = self._ids.index(node_id) + 1 if node_id in self._ids else 0
        prefix = f'[{index}/{len(self._ids)}] {node_id}'
        if record.msg == self._RUNNING:
            self.current = node_id
            self._cached, self._rows = False, None
            self._started[node_id] = time.monotonic()
            self.log_offset = console.log_size(self._log_path) if self._log_path else 0
            print(f'{prefix}: running...', file=self._out, flush=True)
            if node_id in self._beam_ids:
                self._elapsed = console.ElapsedLine(
                    prefix, self._out, self._elapsed_interval, self._interactive
                )
        else:
            self.stop_elapsed()
            seconds = time.monotonic() - self._started.get(node_id, time.monotonic())
            done = f'{prefix}: done in {seconds:.1f}s'
            if self._cached:
                done += ' (from cache)'
            if self._rows:
                done += f', rows {run_summary.rows_text(self._rows)}'
            print(done, file=self._out, flush=True)
            if self._log_path:
                line = console.trouble_line(
                    console.scan(self._log_path, self.log_offset), self._log_path
                )
                if line:
                    print(line, file=self._out, flush=True)
            self.current = None

    def stop_elapsed(self) -> None:
        """Ends the running component's elapsed-time line, if any (also when the run fails)."""
        if self._elapsed is not None:
            self._elapsed.close()
            self._elapsed = None


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


def beam_component_ids(pipeline) -> list[str]:
    """The ids of the pipeline's components that run on Beam: those whose elapsed time shows."""
    return [c.id for c in pipeline.components if isinstance(c, BaseBeamComponent)]


def run_local(
    config: PipelineConfig,
    out: TextIO | None = None,
    log_path: str | None = None,
    verbose: bool = False,
    loaded: dataset.Dataset | None = None,
) -> run_summary.RunSummary:
    """Runs the whole pipeline; returns what it produced.

    Args:
      config: The pipeline configuration.
      out: Where progress lines go (stdout by default).
      log_path: The run's log file (a new one under `<config.state_dir>/logs/` by default). Unless
        `verbose`, file descriptor 2 points at it while the pipeline runs (`console`).
      verbose: Show everything on the console as well.
      loaded: `config`'s dataset, where the caller loaded it already (`dataset.load(config)`).

    Raises:
      WorkDirBusyError: another run holds the work directory.
      PipelineRunError: a component failed (it published no artifact).
    """
    # Resolved per call, not at import: the caller may have redirected stdout since.
    out = out or sys.stdout
    # Built first: a bad schema or feature config fails before the work directory is touched.
    pipeline = create_pipeline(config, loaded or dataset.load(config))
    # The pipeline's lock: two pipelines of one work directory keep their states apart.
    with exclusive_work_dir(config.state_dir):
        # TFX's helper creates the database's directory, so it comes only once the lock is held.
        pipeline.metadata_connection_config = metadata.sqlite_metadata_connection_config(
            config.metadata_path
        )
        log_path = log_path or console.new_log_path(config.state_dir)
        with console.quiet(log_path, verbose):
            return _run_locked(config, pipeline, out, log_path, verbose)


def _run_locked(
    config: PipelineConfig, pipeline, out: TextIO, log_path: str, verbose: bool
) -> run_summary.RunSummary:
    ids = [component.id for component in pipeline.components]
    progress = ComponentProgress(ids, out, log_path, beam_component_ids(pipeline))
    print(f'            log {log_path}', file=out, flush=True)
    started = time.time()
    with _component_logs(log_path, progress, verbose):
        try:
            LocalDagRunner().run(pipeline)
        except Exception as e:  # Re-raised with the failing component named.
            raise PipelineRunError(progress.current, e, log_path, progress.log_offset) from e
        finally:
            progress.stop_elapsed()
        return run_summary.read_summary(config, started)
