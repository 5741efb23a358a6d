"""`asynctrain docs`: the committed generated pages are what the command writes, and `--check`
finds a stale page without writing it."""

import argparse
import json
import shutil

from asynctrain.docs_generation import docs_command
from tests.repository import REPO_ROOT

DOCS_DIR = str(REPO_ROOT / 'docs')


def test_the_committed_generated_pages_are_current():
    for path, text in docs_command.generated_pages(DOCS_DIR).items():
        with open(path, encoding='utf-8') as f:
            committed = f.read()
        assert committed == text, f'{path} is not current: run `asynctrain docs`'


def test_check_finds_a_stale_table_and_writing_brings_the_new_figure(tmp_path, capsys):
    docs = tmp_path / 'docs'
    shutil.copytree(DOCS_DIR, docs, ignore=shutil.ignore_patterns('*.png'))
    result = json.loads((docs / 'bench_examplegen.json').read_text())
    result['variants']['ours']['rows_per_second'] = 123456
    (docs / 'bench_examplegen.json').write_text(json.dumps(result))
    before = (docs / 'benchmarks.md').read_text()

    stale = docs_command.run(argparse.Namespace(docs_dir=str(docs), check=True))

    assert stale == 1
    assert (docs / 'benchmarks.md').read_text() == before
    assert 'benchmarks.md is not current' in capsys.readouterr().err

    assert docs_command.run(argparse.Namespace(docs_dir=str(docs), check=False)) == 0
    assert '| ours | 3.34 | 123,456 | 981 MB |' in (docs / 'benchmarks.md').read_text()
    assert docs_command.run(argparse.Namespace(docs_dir=str(docs), check=True)) == 0
