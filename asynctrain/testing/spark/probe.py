"""A small Beam pipeline that exercises what TFX's Beam stages do, to check a cluster runs them.

It reads GZIP TFRecords (`key:value` strings), parses them in a DoFn with a `setup`, groups by key,
summarises each key and writes GZIP TFRecords of JSON; each summary also names the SDK worker
processes (pid, parent pid) that ran the two DoFns for that key. Run under any runner (the
DirectRunner's output is the reference for a cluster's). `sleep_s` slows the per-key step and
`progress_dir` gets one file per key processed, so a test can act while the job is mid-way.
"""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import time
from collections.abc import Iterable, Iterator

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.tfrecordio import _TFRecordUtil
from apache_beam.options.pipeline_options import PipelineOptions

OUTPUT_PREFIX = 'summaries'


def input_records(num_records: int, num_keys: int) -> list[bytes]:
    """The input's records: `key-<k>:<value>` with values 0..num_records-1 spread over the keys."""
    return [f'key-{value % num_keys:03d}:{value}'.encode() for value in range(num_records)]


# TFRecord framing without TensorFlow: SDK workers import this module to unpickle the DoFns, and
# an import of TensorFlow would add seconds to every worker's start.
def write_input(path: pathlib.Path, records: Iterable[bytes]) -> None:
    """Writes `records` as one GZIP TFRecord file."""
    with gzip.open(path, 'wb') as out:
        for record in records:
            _TFRecordUtil.write_record(out, record)


def read_summaries(output_dir: pathlib.Path) -> list[dict]:
    """The pipeline's summaries, sorted by key."""
    summaries = []
    for path in sorted(pathlib.Path(output_dir).glob(f'{OUTPUT_PREFIX}*.gz')):
        with gzip.open(path, 'rb') as records:
            while (record := _TFRecordUtil.read_record(records)) is not None:
                summaries.append(json.loads(record))
    return sorted(summaries, key=lambda summary: summary['key'])


def without_processes(summaries: list[dict]) -> list[dict]:
    """The summaries' data alone (the same under any runner), without the `processes` field."""
    return [
        {key: value for key, value in summary.items() if key != 'processes'}
        for summary in summaries
    ]


class ParseRecord(beam.DoFn):
    """`key:value` bytes to (key, (value, pid, parent pid)): the SDK worker process that parsed it
    rides along with the value to the summary."""

    def setup(self) -> None:
        self._process = (os.getpid(), os.getppid())

    def process(self, record: bytes) -> Iterator[tuple[str, tuple[int, int, int]]]:
        key, value = record.decode().split(':')
        yield key, (int(value), *self._process)


class SummarizeKey(beam.DoFn):
    """(key, values) to a JSON summary: count, sum, sorted values, and `processes`, the sorted
    (pid, parent pid) pairs of the SDK workers that parsed the key's records and summarised it.
    Sleeps `sleep_s` first; touches `progress_dir/<key>` after."""

    def __init__(self, sleep_s: float, progress_dir: str | None):
        self._sleep_s = sleep_s
        self._progress_dir = progress_dir

    def setup(self) -> None:
        self._process = (os.getpid(), os.getppid())

    def process(self, element: tuple[str, Iterable[tuple[int, int, int]]]) -> Iterator[str]:
        key, parsed = element
        time.sleep(self._sleep_s)
        parsed = list(parsed)
        values = sorted(value for value, _, _ in parsed)
        processes = sorted({(pid, ppid) for _, pid, ppid in parsed} | {self._process})
        yield json.dumps(
            {
                'key': key,
                'count': len(values),
                'sum': sum(values),
                'values': values,
                'processes': processes,
            }
        )
        if self._progress_dir:
            pathlib.Path(self._progress_dir, key).touch()


def run(
    input_pattern: str,
    output_dir: str,
    pipeline_args: list[str],
    sleep_s: float = 0.0,
    progress_dir: str | None = None,
) -> None:
    """Runs the probe pipeline on `input_pattern` and waits for it; writes under `output_dir`."""
    with beam.Pipeline(options=PipelineOptions(pipeline_args)) as pipeline:
        _ = (
            pipeline
            | 'ReadRecords'
            >> beam.io.ReadFromTFRecord(input_pattern, compression_type=CompressionTypes.GZIP)
            | 'ParseRecords' >> beam.ParDo(ParseRecord())
            | 'GroupByKey' >> beam.GroupByKey()
            | 'SummarizeKeys' >> beam.ParDo(SummarizeKey(sleep_s, progress_dir))
            | 'Encode' >> beam.Map(str.encode)
            | 'WriteSummaries'
            >> beam.io.WriteToTFRecord(
                os.path.join(output_dir, OUTPUT_PREFIX),
                compression_type=CompressionTypes.GZIP,
                file_name_suffix='.gz',
            )
        )
