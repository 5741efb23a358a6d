"""`tools/store_read_cost.py`: both ways of reading the store read the same records and the table
names both, on the line that has both (tensorflow-io's `s3://` exists for TF 2.16 only)."""

import subprocess
import sys

import pytest

from tests.repository import REPO_ROOT


@pytest.mark.integration
@pytest.mark.only_line('tfx116', "tensorflow-io, TensorFlow's s3:// filesystem, exists for TF 2.16")
def test_streamed_and_pulled_read_the_same_records_and_the_table_names_both():
    result = subprocess.run(
        [sys.executable, '-m', 'tools.store_read_cost', '--mib', '2', '--files', '2'],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == '512 records, 2 MiB in 2 files; both read the same records'
    assert lines[3].startswith('| tensorflow-io streams s3:// (1.16) | ')
    assert lines[4].startswith('| boto3 pulls, TensorFlow reads the copy (1.21) | ')
    assert lines[5].startswith('ratio pulled/streamed: ')
