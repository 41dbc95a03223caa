"""Per-file analysis: how could this module obtain host authority?

One pass over the libcst tree collects scopes, bindings and the references that can matter
(names, attribute chains, calls, subscripts, pathlib write accesses). Resolution happens
after the pass, flow-insensitively per scope, as the specification asks: a name bound
anywhere in a scope is that scope's name. Only the nodes that end up reported get a
position (see ``_positions``). No libcst metadata provider runs. The walk lives in
``_collect``, the rules in ``_resolve``, what they share in ``_syntax``; this module is the
guarded entry point.

The function is pure and never raises for any input bytes: what cannot be parsed or
walked safely is an IB004 finding.
"""

from __future__ import annotations

import ast
import io
import sys
import threading
import tokenize
import warnings
from collections.abc import Callable
from typing import Final

import libcst as cst

from harness_import_boundary._collect import Collector
from harness_import_boundary._model import FilePolicy, RawFinding
from harness_import_boundary._positions import positions_by_statement, start_positions, statement_starts
from harness_import_boundary._resolve import Resolver
from harness_import_boundary._syntax import PendingFinding

__all__ = ["MAX_SOURCE_BYTES", "analyze_source"]

MAX_SOURCE_BYTES: Final = 4 * 1024 * 1024

# libcst's tree conversion and code generation are recursive. Long chains (the standard
# library's pydoc topics concatenate thousands of strings) exceed Python's default
# recursion limit, so parsing and walking run in a thread with a large stack and a raised
# limit; a RecursionError is still caught and reported.
_WALK_RECURSION_LIMIT: Final = 20_000
_GUARD_RECURSION_LIMIT: Final = 1_000  # CPython's default
_WALK_STACK_BYTES: Final = 512 * 1024 * 1024


def _unparsable(message: str, line: int = 1, column: int = 1) -> list[RawFinding]:
    return [RawFinding("IB004", max(line, 1), max(column, 1), "", "unparsable-source", message)]


def _decode(source: bytes) -> str | list[RawFinding]:
    """Decode like the interpreter does (BOM, PEP 263 declaration, else UTF-8)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except (SyntaxError, LookupError) as error:
        return _unparsable(f"source cannot be decoded: {error}")
    try:
        return source.decode(encoding)
    except UnicodeDecodeError as error:
        line_start = source.rfind(b"\n", 0, error.start) + 1
        column = len(source[line_start : error.start].decode(encoding, "replace")) + 1
        line = source.count(b"\n", 0, error.start) + 1
        return _unparsable(f"source is not valid {encoding}: {error.reason}", line, column)


def _guard(source: bytes) -> list[RawFinding] | ast.Module:
    """Refuse input that could crash libcst's native parser; the interpreter's tree when safe.

    The text is decoded first, so syntax-error columns count characters, not bytes.
    ``ast.parse`` runs at CPython's default recursion limit, whatever the caller set: input
    deeper than CPython accepts by default never reaches libcst, whose native parser can
    crash on it and slows down sharply on deep chains. Warnings are silenced (an invalid
    escape sequence is a DeprecationWarning, which ``-W error`` would turn into an error).
    """
    if len(source) > MAX_SOURCE_BYTES:
        return _unparsable("source file exceeds 4 MiB")
    text = _decode(source)
    if not isinstance(text, str):
        return text
    nul = text.find("\x00")
    if nul >= 0:
        line_start = text.rfind("\n", 0, nul) + 1
        return _unparsable("source contains a NUL byte", text.count("\n", 0, nul) + 1, nul - line_start + 1)
    caller_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_GUARD_RECURSION_LIMIT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except SyntaxError as error:
        return _unparsable(f"syntax error: {error.msg}", error.lineno or 1, error.offset or 1)
    except (RecursionError, MemoryError):
        return _unparsable("source is nested too deeply to parse safely")
    except ValueError as error:
        return _unparsable(f"source cannot be parsed: {error}")
    finally:
        sys.setrecursionlimit(caller_limit)
    return tree


def _analyze(source: bytes, policy: FilePolicy) -> list[RawFinding]:
    tree = _guard(source)
    if not isinstance(tree, ast.Module):
        return tree
    caller_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(caller_limit, _WALK_RECURSION_LIMIT))
    try:
        return _parse_and_walk(source, policy, tree)
    finally:
        sys.setrecursionlimit(caller_limit)


def _positions(
    module: cst.Module, pending: list[PendingFinding], tree: ast.Module
) -> dict[int, tuple[int, int]]:
    """Where each pending finding's node starts: statement by statement when the trees match."""
    if not pending:
        return {}
    groups: dict[int, list[cst.CSTNode]] = {}
    for item in pending:
        groups.setdefault(item.statement, []).append(item.node)
    starts = statement_starts(module, tree)
    positions = None if starts is None else positions_by_statement(module, groups, starts)
    return positions if positions is not None else start_positions(module, (item.node for item in pending))


def _place_parsed_strings(pending: list[PendingFinding], alias: dict[int, cst.CSTNode]) -> None:
    """Findings inside a string that was parsed as code are placed at the string."""
    for item in pending:
        item.node = alias.get(id(item.node), item.node)


def _parse_and_walk(source: bytes, policy: FilePolicy, tree: ast.Module) -> list[RawFinding]:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        return _unparsable(f"syntax error: {error.message}", error.raw_line, error.raw_column + 1)
    except (UnicodeDecodeError, LookupError, SyntaxError, ValueError) as error:
        return _unparsable(f"source cannot be decoded: {error}")
    try:
        collector = Collector(policy)
        collector.walk(module)
        Resolver(collector).run()
        _place_parsed_strings(collector.pending, collector.position_alias)
        positions = _positions(module, collector.pending, tree)
    except RecursionError:
        return _unparsable("source is nested too deeply to analyse")
    findings: list[RawFinding] = []
    for pending in collector.pending:
        line, column = positions.get(id(pending.node), (1, 1))
        findings.append(RawFinding(pending.rule, line, column, pending.module, pending.form, pending.message))
    return findings


def _run_with_deep_stack(function: Callable[[], list[RawFinding]]) -> list[RawFinding]:
    """Run ``function`` in a thread with a large C stack (the libcst walk is recursive)."""
    outcome: list[list[RawFinding]] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(function())
        except BaseException as error:  # re-raised in the calling thread
            failure.append(error)

    previous = threading.stack_size(_WALK_STACK_BYTES)
    try:
        worker = threading.Thread(target=target, name="harness-import-boundary-walk")
        worker.start()
    finally:
        threading.stack_size(previous)
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]


def analyze_source(source: bytes, policy: FilePolicy) -> list[RawFinding]:
    """Analyse one file's bytes; return its raw findings (IB001, IB002, IB004), unsorted.

    Pure: no I/O. Never raises for any input bytes: unparsable input is an IB004 finding.

    Args:
        source: The file's bytes.
        policy: The forbidden entries, the file's allow-list and its package.
    """
    return _run_with_deep_stack(lambda: _analyze(source, policy))
