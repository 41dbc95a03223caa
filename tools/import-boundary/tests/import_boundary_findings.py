"""Findings reduced to what the analysis tests pin, and the forbidden table they analyse against.

The configured forbidden entries are the defaults plus two object entries (``trio.run_process``,
``codecs.open``), as in the repository's own table.
"""

from __future__ import annotations

import textwrap
from typing import Final, NamedTuple

import pytest

from harness_import_boundary._analysis import analyze_source
from harness_import_boundary._model import DEFAULT_FORBIDDEN, FilePolicy, Forbidden, parse_forbidden

FORBIDDEN: Final = parse_forbidden([*DEFAULT_FORBIDDEN, "trio.run_process", "codecs.open"])


class Seen(NamedTuple):
    """A finding reduced to what these tests pin: rule, module, form and position."""

    rule: str
    module: str
    form: str
    line: int
    column: int


def ib001(module: str, form: str, line: int, column: int) -> Seen:
    return Seen("IB001", module, form, line, column)


def ib002(form: str, line: int, column: int, module: str = "") -> Seen:
    return Seen("IB002", module, form, line, column)


def findings(source: str, forbidden: Forbidden = FORBIDDEN) -> list[Seen]:
    """Analyse a dedented snippet with the forbidden entries alone; findings in source order.

    These cases pin the deny rules of the specification, so no allow-list applies here
    (``tests/test_allow_list.py`` covers it).
    """
    raw = analyze_source(textwrap.dedent(source).encode(), FilePolicy(forbidden, None, None))
    seen = [Seen(item.rule, item.module, item.form, item.line, item.column) for item in raw]
    return sorted(seen, key=lambda item: (item.line, item.column, item.rule, item.module))


def case(source: str, *expected: Seen, id: str) -> object:
    return pytest.param(source, list(expected), id=id)
