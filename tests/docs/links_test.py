"""Every relative link in the README, the project's top-level pages and docs/ resolves: the file
or folder exists and, when the link names an `#anchor`, the target has that heading. The README
stays one screen to a first run: at most 250 lines, with its map of the docs near the top."""

import pathlib
import re

import pytest

from asynctrain.docs_generation import markdown

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGES = sorted(
    [REPO / 'README.md', REPO / 'CONTRIBUTING.md', REPO / 'CHANGELOG.md']
    + list((REPO / 'docs').glob('*.md'))
)
# [text](target) and ![alt](target), outside code spans; a target ends at a space or `)`.
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
CODE = re.compile(r'```.*?```|`[^`\n]*`', re.DOTALL)


def broken_links(page: pathlib.Path) -> list[str]:
    """`target: why` for each relative link of `page` that does not resolve."""
    text = CODE.sub('', page.read_text(encoding='utf-8'))
    broken = []
    for target in LINK.findall(text):
        if re.match(r'^[a-z][a-z0-9+.-]*:', target):  # https:, mailto:
            continue
        path, _, fragment = target.partition('#')
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f'{target}: no such file')
        elif fragment and resolved.suffix == '.md':
            if fragment not in markdown.anchors(resolved.read_text(encoding='utf-8')):
                broken.append(f'{target}: no heading #{fragment}')
    return broken


@pytest.mark.parametrize('page', PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_pages_are_all_there():
    names = {p.relative_to(REPO).as_posix() for p in PAGES}

    assert {
        'README.md',
        'CONTRIBUTING.md',
        'CHANGELOG.md',
        'docs/getting-started.md',
        'docs/own-data.md',
        'docs/configuration.md',
        'docs/architecture.md',
        'docs/benchmarks.md',
        'docs/reliability.md',
        'docs/troubleshooting.md',
    } <= names
    assert (REPO / 'LICENSE').read_text().split('\n')[1].strip() == 'Apache License'


def test_the_readme_is_short_and_maps_the_docs_in_its_first_screenful():
    lines = (REPO / 'README.md').read_text(encoding='utf-8').splitlines()
    first_screen = '\n'.join(lines[:50])

    assert len(lines) <= 250
    for page in ('getting-started', 'own-data', 'configuration', 'kubeflow', 'architecture'):
        assert f'(docs/{page}.md)' in first_screen
    for page in ('benchmarks', 'reliability', 'troubleshooting'):
        assert f'(docs/{page}.md)' in first_screen


def test_a_missing_file_and_a_missing_heading_are_reported(tmp_path):
    (tmp_path / 'other.md').write_text(
        '# Other\n\n## A `code` heading: here\n\n```\n# not a heading\n```\n'
    )
    page = tmp_path / 'page.md'
    page.write_text(
        '# Page\n\n'
        '[ok](other.md#a-code-heading-here) [self](#page) [web](https://example.com/x)\n'
        '[gone](missing.md) [no anchor](other.md#not-a-heading) `[in code](nowhere.md)`\n'
    )

    assert broken_links(page) == [
        'missing.md: no such file',
        'other.md#not-a-heading: no heading #not-a-heading',
    ]


def test_anchors_follow_github_and_number_repeated_headings():
    text = "# Title\n## The Trainer's defaults\n## Again\n## Again\n### config.yaml: `trainer.training`\n"

    assert markdown.anchors(text) == {
        'title',
        'the-trainers-defaults',
        'again',
        'again-1',
        'configyaml-trainertraining',
    }
