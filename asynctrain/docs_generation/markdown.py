"""GitHub's Markdown anchors: the `#fragment` a heading gets, for generated links and their test."""

from __future__ import annotations

import re

_NOT_IN_ANCHOR = re.compile(r'[^\w\- ]')
_HEADING = re.compile(r'^(#{1,6}) +(.+?) *#*$')
_FENCE = re.compile(r'^ {0,3}(```|~~~)')


def anchor(heading: str) -> str:
    """The fragment GitHub gives a heading's text: lower case, punctuation (backticks, dots,
    colons, parentheses) dropped, each space a hyphen."""
    return _NOT_IN_ANCHOR.sub('', heading.strip().lower()).replace(' ', '-')


def anchors(text: str) -> set[str]:
    """Every heading fragment of a Markdown document (a repeated heading gets `-1`, `-2`, ... as on
    GitHub), plus explicit `<a id="...">` targets; lines inside code fences are not headings."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = _HEADING.match(line)
        if match:
            base = anchor(match.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f'{base}-{n}')
        found.update(re.findall(r'<a id="([^"]+)"', line))
    return found
