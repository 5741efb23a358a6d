"""docs/support.md lists every test marked `only_line`, with its line, and nothing else: the
table a user reads to know what each line's suite leaves out is the markers themselves."""

import ast
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
LINE_NAMES = {'tfx116': '1.16', 'tfx121': '1.21'}


def _marked() -> dict[str, str]:
    """`path::test` -> line ('1.16', '1.21') of each test function marked `only_line`."""
    found = {}
    for path in sorted((REPO / 'tests').rglob('*.py')):
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith('test_'):
                continue
            for decorator in node.decorator_list:
                if (
                    isinstance(decorator, ast.Call)
                    and isinstance(decorator.func, ast.Attribute)
                    and decorator.func.attr == 'only_line'
                ):
                    line = ast.literal_eval(decorator.args[0])
                    found[f'{path.relative_to(REPO)}::{node.name}'] = LINE_NAMES[line]
    return found


def _listed() -> dict[str, str]:
    text = (REPO / 'docs' / 'support.md').read_text(encoding='utf-8')
    section = text.split('## Tests that apply to one line', 1)[1].split('\n## ', 1)[0]
    return dict(re.findall(r'^\| `([^`]+)` \| (1\.\d+) \|', section, re.MULTILINE))


def test_the_support_page_lists_each_one_line_test_with_its_line():
    marked = _marked()
    assert len(marked) >= 5  # The scan finds the markers (five when this test was written).
    assert _listed() == marked
