"""Line and column of a few chosen nodes, without resolving positions for the whole tree.

libcst's ``PositionProvider`` records a range for every node, which costs more than parsing
the file. The checker needs the start of only the nodes it reports, so it runs libcst's
code generation once with a state that counts lines and columns and records the start of
just those nodes, stopping as soon as the last of them is reached. With the allow-list most
files report something, so the analysis places nodes statement by statement: the interpreter's
own tree (which the crash guard builds anyway) says on which line each top-level statement
begins, and only the statements holding reported nodes are generated. Code generation is
libcst's own, so the positions are libcst's; a test
compares them with ``PositionProvider`` on real files. The code-generation state is libcst
internal API, so the dependency is pinned below libcst 2.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState

__all__ = ["positions_by_statement", "start_positions", "statement_starts"]


class _AllFoundError(Exception):
    """Every requested start is known: code generation stops early."""


@dataclass
class _StartRecordingState(CodegenState):
    targets: frozenset[int] = frozenset()
    starts: dict[int, tuple[int, int]] = field(default_factory=dict[int, tuple[int, int]])
    line: int = 1
    column: int = 0
    # A node's syntactic start excludes its own parentheses (as in libcst's PositionProvider):
    # the start of a parenthesized target is taken after its last own "(" is written.
    after_paren: dict[int, int] = field(default_factory=dict[int, int])

    def _advance(self, value: str) -> None:
        newlines = value.count("\n")
        if newlines:
            self.line += newlines
            self.column = len(value) - value.rfind("\n") - 1
        elif "\r" in value:  # a lone carriage return ends a line too
            self.line += value.count("\r")
            self.column = len(value) - value.rfind("\r") - 1
        else:
            self.column += len(value)

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self._advance(token)

    def add_token(self, value: str) -> None:
        self._advance(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key not in self.targets or key in self.starts:
            return
        own_parentheses: Sequence[cst.LeftParen] = getattr(node, "lpar", ())
        if own_parentheses:
            self.after_paren[id(own_parentheses[-1])] = key
        else:
            self._record(key)

    def after_codegen(self, node: cst.CSTNode) -> None:
        target = self.after_paren.pop(id(node), None)
        if target is not None:
            self._record(target)

    def _record(self, key: int) -> None:
        self.starts[key] = (self.line, self.column + 1)
        if len(self.starts) == len(self.targets):
            # Nothing after the last reported node moves a recorded start: skip the rest.
            raise _AllFoundError

    def pop_trailing_newline(self) -> None:
        pass  # nothing follows the last token, so no recorded position depends on it


def _generate(node: cst.CSTNode, state: _StartRecordingState) -> None:
    """Run libcst's code generation for ``node`` until every target of ``state`` is placed."""
    with contextlib.suppress(_AllFoundError):
        node._codegen(state)  # pyright: ignore[reportPrivateUsage]


def start_positions(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, tuple[int, int]]:
    """Return ``{id(node): (line, column)}``, 1-based, for the given nodes of ``module``."""
    targets = frozenset(id(node) for node in nodes)
    if not targets:
        return {}
    state = _StartRecordingState(
        default_indent=module.default_indent, default_newline=module.default_newline, targets=targets
    )
    _generate(module, state)
    return state.starts


def statement_starts(module: cst.Module, tree: ast.Module) -> list[int] | None:
    """The line where the code of each top-level statement of ``module`` begins, or ``None``.

    The interpreter's own tree of the same text knows on which line each statement's first
    token is; libcst's statement begins with its leading lines (one line each) and, for a
    decorated definition, the first decorator's. ``None`` when the two trees cannot be
    matched statement by statement, or when a decorator's ``@`` may sit on another line than
    its expression (a parenthesized or continued decorator): then positions come from the
    whole module instead.
    """
    body = tree.body
    starts: list[int] = []
    index = 0
    for statement in module.body:
        count = len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        if index + count > len(body):
            return None
        first: ast.stmt = body[index]
        index += count
        line = first.lineno
        decorators: Sequence[cst.Decorator] = getattr(statement, "decorators", ())
        if decorators:
            leading = decorators[0]
            parenthesized = bool(getattr(leading.decorator, "lpar", ()))
            ast_decorators: list[ast.expr] = getattr(first, "decorator_list", [])
            if parenthesized or "\\" in leading.whitespace_after_at.value or not ast_decorators:
                return None
            line = ast_decorators[0].lineno - len(leading.leading_lines)
        starts.append(line - len(statement.leading_lines))
    return starts if index == len(body) else None


def positions_by_statement(
    module: cst.Module, groups: Mapping[int, Sequence[cst.CSTNode]], starts: Sequence[int]
) -> dict[int, tuple[int, int]] | None:
    """Like :func:`start_positions`, generating only the top-level statements that hold nodes.

    Args:
        module: The parsed module.
        groups: The nodes to place, by the index of the top-level statement that holds them.
        starts: Each top-level statement's first line, from :func:`statement_starts`.

    Returns:
        The starts, or ``None`` when some node was not found in the statement said to hold it.
    """
    positions: dict[int, tuple[int, int]] = {}
    for index, nodes in groups.items():
        targets = frozenset(id(node) for node in nodes)
        if not 0 <= index < len(starts) or not targets:
            return None
        state = _StartRecordingState(
            default_indent=module.default_indent,
            default_newline=module.default_newline,
            targets=targets,
            line=starts[index],
        )
        _generate(module.body[index], state)
        if len(state.starts) != len(targets):
            return None
        positions.update(state.starts)
    return positions
