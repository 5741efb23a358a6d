"""`package_tree`: docs/architecture.md's tree from the package's folders, docstrings and data;
every module of the package is on the committed page."""

import pathlib

from asynctrain.docs_generation import package_tree
from tests.repository import REPO_ROOT


def _write(root: pathlib.Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_render_lists_each_package_by_its_first_sentence_its_modules_and_its_data(tmp_path):
    root = tmp_path / 'pkg'
    _write(
        root,
        {
            '__init__.py': '"""The package. More detail that stays out of the tree."""\n',
            'runner.py': '"""Runs."""\n',
            'components/__init__.py': (
                '"""Components, one folder each, with a first sentence long enough to be wrapped '
                'onto the next line of the tree.\n\nA second paragraph."""\n'
            ),
            'components/spec.py': '',
            'components/__pycache__/spec.cpython-310.pyc': '',
            'schemas/taxi/schema.pbtxt': '',
            'schemas/taxi/features.yaml': '',
        },
    )

    assert package_tree.render(root).splitlines() == [
        '```',
        'pkg/                      The package.',
        '                          runner.py',
        '  components/             Components, one folder each, with a first sentence long enough to be',
        '                          wrapped onto the next line of the tree.',
        '                          spec.py',
        '  schemas/                data: taxi/features.yaml, taxi/schema.pbtxt',
        '```',
    ]


def test_fill_replaces_only_what_is_between_the_markers(tmp_path):
    _write(tmp_path / 'pkg', {'__init__.py': '"""The package."""\n'})
    page = f'# Title\n\nProse.\n\n{package_tree.BEGIN}\nstale\n{package_tree.END}\n\nMore prose.\n'

    filled = package_tree.fill(page, tmp_path / 'pkg')

    assert filled == (
        f'# Title\n\nProse.\n\n{package_tree.BEGIN}\n```\npkg/'
        + ' ' * 22
        + f'The package.\n```\n{package_tree.END}\n\nMore prose.\n'
    )
    assert package_tree.fill(filled, tmp_path / 'pkg') == filled


def test_the_architecture_page_names_every_module_and_folder_of_the_package():
    page = (REPO_ROOT / 'docs' / 'architecture.md').read_text()
    tree = page[page.index(package_tree.BEGIN) : page.index(package_tree.END)]
    package = package_tree.package_dir()

    for path in package.rglob('*.py'):
        if path.name != '__init__.py' and '__pycache__' not in path.parts:
            assert path.name in tree, path
    for path in package.rglob('*'):
        if path.is_dir() and path.name != '__pycache__':
            assert f' {path.name}/' in tree, path
