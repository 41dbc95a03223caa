"""``start_positions`` gives libcst's own starts, without resolving positions for the whole tree.

The reference is ``MetadataWrapper(module).resolve(PositionProvider)``: for every ``Name`` and
``Attribute`` node of real standard-library files, and of copies rewritten with CRLF or lone
CR line endings and tab indentation, the start must be the provider's (line, column + 1).
"""

from __future__ import annotations

import ast
import re
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Final

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from harness_import_boundary._positions import positions_by_statement, start_positions, statement_starts

STDLIB: Final = Path(sysconfig.get_paths()["stdlib"])
LEADING_SPACES: Final = re.compile(rb"(?m)^((?:    )+)")


def with_crlf(source: bytes) -> bytes:
    return source.replace(b"\n", b"\r\n")


def with_lone_cr(source: bytes) -> bytes:
    return source.replace(b"\n", b"\r")


def with_tabs(source: bytes) -> bytes:
    """Indent with one tab per four leading spaces."""
    return LEADING_SPACES.sub(lambda match: b"\t" * (len(match.group(1)) // 4), source)


def mismatches(source: bytes) -> tuple[int, list[tuple[str, str, tuple[int, int], tuple[int, int] | None]]]:
    """Compare with ``PositionProvider``: the number of nodes, and every node that disagrees."""
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    reference = wrapper.resolve(PositionProvider)
    nodes = [node for node in reference if isinstance(node, cst.Name | cst.Attribute)]
    starts = start_positions(module, nodes)
    disagreements: list[tuple[str, str, tuple[int, int], tuple[int, int] | None]] = []
    for node in nodes:
        start = reference[node].start
        expected = (start.line, start.column + 1)
        if starts.get(id(node)) != expected:
            snippet = module.code_for_node(node)[:40]
            disagreements.append((type(node).__name__, snippet, expected, starts.get(id(node))))
    return len(nodes), disagreements


def unchanged(source: bytes) -> bytes:
    return source


def with_tabs_and_crlf(source: bytes) -> bytes:
    return with_crlf(with_tabs(source))


REAL_FILES: Final = [
    pytest.param("json/encoder.py", unchanged, id="json/encoder.py"),
    # The largest file: seconds of libcst work per test, left to the full run.
    pytest.param("argparse.py", unchanged, id="argparse.py", marks=pytest.mark.slow),
    pytest.param("string.py", unchanged, id="string.py"),
    pytest.param("textwrap.py", unchanged, id="textwrap.py"),
    pytest.param("json/encoder.py", with_crlf, id="json/encoder.py with CRLF"),
    pytest.param("json/decoder.py", with_lone_cr, id="json/decoder.py with lone CR"),
    pytest.param("textwrap.py", with_tabs, id="textwrap.py indented with tabs"),
    pytest.param("shlex.py", with_tabs_and_crlf, id="shlex.py with tabs and CRLF"),
]


@pytest.mark.parametrize(("relative", "rewrite"), REAL_FILES)
def test_starts_agree_with_position_provider_on_standard_library_files(
    relative: str, rewrite: Callable[[bytes], bytes]
) -> None:
    count, disagreements = mismatches(rewrite((STDLIB / relative).read_bytes()))

    assert count > 300
    assert disagreements == []


SNIPPETS: Final = [
    pytest.param(b"x\t=\t(a\t.b,\tc)\nif x:\n\ty = z\t.w\n", id="tabs inside lines"),
    pytest.param(b"if a:\n\tif b:\n\t\tc = d.e\n\telse:\n\t\tf.g\n", id="nested tab indentation"),
    pytest.param(b"x = a.b \\\n    .c\nif x:\r\n    y = \\\r\n        z.w\r\n", id="backslash continuations"),
    pytest.param("ä = 'ö'; ü = ß.ç\n".encode(), id="non-ASCII names and strings"),
    pytest.param(b"handler = (open)\nvalue = ((name))\ny = (\n    inner\n)\n", id="parenthesized names"),
    pytest.param(
        b"x = (a).b\ny = ((a.b)).c\nz = (a)(b).c\nw = (\n  a\n).b\nv = (a.b)\nu = [(a), (b.c)]\n",
        id="parenthesized attributes and their values",
    ),
    pytest.param(b"return_ = (sep or ' ').join(parts)\n", id="an attribute of a parenthesized expression"),
    pytest.param(b"# comment\n\n\n@decorator.attr\ndef f(a: T.U = (v)) -> W.X:\n    pass\n", id="decorators"),
]


@pytest.mark.parametrize("source", SNIPPETS)
def test_starts_agree_with_position_provider_on_tricky_layouts(source: bytes) -> None:
    _, disagreements = mismatches(source)

    assert disagreements == []


def test_only_the_requested_nodes_get_a_position() -> None:
    module = cst.parse_module(b"import os\nx = os.path.join(a, b)\n")
    wanted = [node for node in module.body[1].children if isinstance(node, cst.Assign)]

    assert start_positions(module, []) == {}
    assert start_positions(module, wanted) == {id(wanted[0]): (2, 1)}


def nodes_by_statement(module: cst.Module, every: int) -> dict[int, list[cst.CSTNode]]:
    """Every ``every``-th Name or Attribute node of each top-level statement, by statement."""
    groups: dict[int, list[cst.CSTNode]] = {}

    class Gather(cst.CSTVisitor):
        def __init__(self, index: int) -> None:
            self.index = index
            self.seen = 0

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.Name | cst.Attribute):
                if self.seen % every == 0:
                    groups.setdefault(self.index, []).append(node)
                self.seen += 1
            return True

    for index, statement in enumerate(module.body):
        statement.visit(Gather(index))
    return groups


def expected_starts(module: cst.Module, groups: dict[int, list[cst.CSTNode]]) -> dict[int, tuple[int, int]]:
    reference = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return {
        id(node): (reference[node].start.line, reference[node].start.column + 1)
        for nodes in groups.values()
        for node in nodes
    }


@pytest.mark.parametrize("every", [1, 7])
@pytest.mark.parametrize(("relative", "rewrite"), REAL_FILES)
def test_statement_by_statement_starts_agree_with_position_provider(
    relative: str, rewrite: Callable[[bytes], bytes], every: int
) -> None:
    source = rewrite((STDLIB / relative).read_bytes())
    module = cst.parse_module(source)
    groups = nodes_by_statement(module, every)
    starts = statement_starts(module, ast.parse(source))
    assert starts is not None

    positions = positions_by_statement(module, groups, starts)

    assert positions == expected_starts(module, groups)


LAYOUTS: Final = [
    pytest.param(b"#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n\n\nimport a.b\n", id="a header"),
    pytest.param(b"x = 1; y = a.b; z = c.d\nw = e.f\n", id="semicolons"),
    pytest.param(b"def f():\n    return a.b\n    # footer comment\n\n\nx = c.d\n", id="a block footer"),
    pytest.param(
        b"# c\n@d.e\n# between\n@f.g(\n    h.i)\n\ndef j(): k.l\nm.n\n", id="decorators and comments"
    ),
    pytest.param(b"if a.b:\r\n    c.d\r\nelse:\r\n    e.f\r\ng.h\r\n", id="CRLF"),
    pytest.param(b"class A:\n    '''doc\n    string'''\n    x = b.c\ny = d.e\n", id="a multi-line string"),
    pytest.param(b"x = (a.b +\n     c.d)\ny = \\\n  e.f\n", id="continuations"),
    pytest.param(b"\xef\xbb\xbfimport a.b\nc.d\n", id="a byte order mark"),
    pytest.param(b"x = a.b\n\n# trailing comment\n", id="a module footer"),
    pytest.param(b"x = a.b", id="no final newline"),
]


@pytest.mark.parametrize("source", LAYOUTS)
def test_statement_starts_hold_on_tricky_layouts(source: bytes) -> None:
    module = cst.parse_module(source)
    groups = nodes_by_statement(module, 1)
    starts = statement_starts(module, ast.parse(source))
    assert starts is not None

    positions = positions_by_statement(module, groups, starts)

    assert positions == expected_starts(module, groups)


@pytest.mark.parametrize(
    "source",
    [b"@(\n    decorator\n)\ndef f():\n    pass\n", b"@\\\ndecorator\ndef f():\n    pass\n"],
    ids=["a parenthesized decorator", "a continued decorator"],
)
def test_decorators_that_may_leave_their_line_make_the_caller_use_the_whole_module(source: bytes) -> None:
    assert statement_starts(cst.parse_module(source), ast.parse(source)) is None
