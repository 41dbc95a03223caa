"""Line and column of a few chosen nodes, without resolving positions for the whole tree.

libcst's ``PositionProvider`` records a range for every node, which costs more than parsing
the file. The checker needs the start of only the nodes it reports, so it runs libcst's
code generation once with a state that counts lines and columns and records the start of
just those nodes, stopping as soon as the last of them is reached (with the allow-list most
files report something, most often their imports near the top). Code generation is libcst's
own, so the positions are libcst's; a test
compares them with ``PositionProvider`` on real files. The code-generation state is libcst
internal API, so the dependency is pinned below libcst 2.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState

__all__ = ["start_positions"]


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


def start_positions(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, tuple[int, int]]:
    """Return ``{id(node): (line, column)}``, 1-based, for the given nodes of ``module``."""
    targets = frozenset(id(node) for node in nodes)
    if not targets:
        return {}
    state = _StartRecordingState(
        default_indent=module.default_indent, default_newline=module.default_newline, targets=targets
    )
    with contextlib.suppress(_AllFoundError):
        module._codegen(state)  # pyright: ignore[reportPrivateUsage]
    return state.starts
