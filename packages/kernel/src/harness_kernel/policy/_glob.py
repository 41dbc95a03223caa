"""Anchored globs for permission subjects and task paths.

Two dialects share one matcher. The *path* dialect (every action but ``process.exec``)
is deliberately small: ``**`` matches any run of characters including ``/`` and swallows
one ``/`` directly after it, ``*`` matches any run without ``/``, ``?`` matches one
character other than ``/``, and every other character stands for itself (regex
metacharacters included). The *command* dialect (decision 041) reads a command line, where
``/`` is an ordinary character: ``*`` matches any run of characters, ``?`` any one
character, so ``uv run pytest*`` admits ``uv run pytest tests/test_a.py``. A glob always
matches the whole string, and a newline is an ordinary character.

Matching never backtracks, and costs O(len(subject) * len(pattern) / word size) whatever
the pattern. A glob is compiled once: adjacent stars are merged (``**/*`` means ``**``),
its literal first and last characters become ``startswith``/``endswith`` tests, and what
lies between is tested by the cheapest exact means: nothing for ``**``, one ``find`` for
``*``, a chain of ``find`` calls for literals between ``**``, and otherwise a small
automaton over the glob's own token positions. The automaton reads the subject once,
left to right, carrying the set of positions still alive as one Python ``int`` used as a
bitset (a Thompson-style simulation, the way non-backtracking engines such as RE2 run a
pattern), a handful of integer operations per character. ``**/*-*-*.yaml`` against 4,096
characters now takes microseconds; its regex translation needed hours.

:func:`translate` still renders the regular-expression equivalent of a glob for people
and for compatibility (``CompiledGlob.source``); nothing here evaluates it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final, Literal, TypeAlias

import msgspec

from harness_kernel._json import is_exact_array
from harness_kernel.policy._errors import InvalidPolicyInputError

__all__ = [
    "GLOB_SYNTAXES",
    "CompiledGlob",
    "GlobSyntax",
    "check_changed_paths",
    "compile_glob",
    "match_glob",
    "path_allowed",
    "translate",
]

_DOUBLE_STAR: Final = "**"
_STAR: Final = "*"
_ANY: Final = "?"
# The command dialect's ``?``: one character, ``/`` included. Two characters long, so it
# can never be confused with a one-character literal token.
_ANY_CHARACTER: Final = "?/"
_SLASH: Final = "/"
_WILDCARDS: Final = frozenset((_DOUBLE_STAR, _STAR, _ANY, _ANY_CHARACTER))

GlobSyntax: TypeAlias = Literal["path", "command"]
"""How a glob reads its subject: as a workspace path, or as a command line (decision 041)."""

GLOB_SYNTAXES: Final[tuple[GlobSyntax, ...]] = ("path", "command")
_STARS: Final = frozenset((_DOUBLE_STAR, _STAR))

# A token is one of the three wildcards above or a one-character literal; a literal "*"
# or "?" cannot occur, since the dialect has no escapes.
_Tokens = tuple[str, ...]
# Tests the part of a subject between a glob's literal prefix and literal suffix:
# ``(value, start, end)``.
_MiddleTest = Callable[[str, int, int], bool]


class CompiledGlob(msgspec.Struct, frozen=True, eq=False):
    """A glob compiled once and ready to test many strings.

    Attributes:
        pattern: The glob as written.
        source: The equivalent regular expression (see :func:`translate`), for people and
            for compatibility; matching does not use it.
        test: Whether a string matches the whole glob; equivalent to
            ``match_glob(pattern, value)``. Linear in the string's length.
    """

    pattern: str
    source: str
    test: Callable[[str], bool]


def _require_str(value: object, what: str) -> str:
    if type(value) is not str:
        raise InvalidPolicyInputError(f"{what} must be a str")
    return value


def _require_syntax(syntax: object) -> GlobSyntax:
    if type(syntax) is not str or syntax not in GLOB_SYNTAXES:
        raise InvalidPolicyInputError('glob syntax must be "path" or "command"')
    return syntax


def _tokenize_command(pattern: str) -> _Tokens:
    """A command glob's tokens: every ``*`` crosses ``/`` and ``?`` takes any character."""
    return tuple(
        _DOUBLE_STAR if char == _STAR else _ANY_CHARACTER if char == _ANY else char for char in pattern
    )


def _tokens(pattern: str, syntax: GlobSyntax) -> _Tokens:
    return _tokenize_command(pattern) if syntax == "command" else _tokenize(pattern)


def _tokenize(pattern: str) -> _Tokens:
    """The glob's tokens, with the ``/`` that each ``**`` swallows already removed."""
    tokens: list[str] = []
    index = 0
    length = len(pattern)
    while index < length:
        char = pattern[index]
        if char == _STAR and index + 1 < length and pattern[index + 1] == _STAR:
            tokens.append(_DOUBLE_STAR)
            index += 2
            # ``a/**/b`` must also match ``a/b``: the slash belongs to the ``**``.
            if index < length and pattern[index] == _SLASH:
                index += 1
            continue
        tokens.append(char)
        index += 1
    return tuple(tokens)


def translate(pattern: str, *, syntax: GlobSyntax = "path") -> str:
    """Translate a glob into the source of an equivalent regular expression.

    The result is meant for :func:`re.fullmatch`; it carries its own ``(?s:…)`` group so
    that ``**`` also crosses newlines. It documents what a glob means; the matcher behind
    :func:`match_glob` and :func:`compile_glob` never runs it, because a backtracking
    engine needs time that grows like a power of the subject's length, one degree per
    star (``*a*a*a*a*a*b`` against 1,200 characters: days).

    Args:
        pattern: The glob.
        syntax: ``"path"`` (the default) or ``"command"``, the dialect of the glob.

    Raises:
        InvalidPolicyInputError: ``pattern`` is not an exact ``str``, or ``syntax`` is not
            a known dialect.
    """
    _require_str(pattern, "glob pattern")
    parts: list[str] = []
    for token in _tokens(pattern, _require_syntax(syntax)):
        if token == _DOUBLE_STAR:
            parts.append(".*")
        elif token == _STAR:
            parts.append("[^/]*")
        elif token == _ANY:
            parts.append("[^/]")
        elif token == _ANY_CHARACTER:
            parts.append(".")
        else:
            parts.append(re.escape(token))
    return "(?s:" + "".join(parts) + ")"


def _merge_star_runs(tokens: _Tokens) -> _Tokens:
    """Replace each run of adjacent stars by one star that means the same.

    A run holding a ``**`` matches any text, like ``**`` alone (``.*[^/]*`` is ``.*``); a
    run of ``*`` only matches any text without ``/``, like ``*`` alone.
    """
    merged: list[str] = []
    for token in tokens:
        if token in _STARS and merged and merged[-1] in _STARS:
            if token == _DOUBLE_STAR:
                merged[-1] = _DOUBLE_STAR
            continue
        merged.append(token)
    return tuple(merged)


def _any_text(value: str, start: int, end: int) -> bool:
    return True


def _text_without_slash(value: str, start: int, end: int) -> bool:
    return value.find(_SLASH, start, end) == -1


def _literals_in_order(chunks: tuple[str, ...]) -> _MiddleTest:
    """The middle ``** C1 ** C2 … **``: each chunk found after the previous one.

    The leftmost occurrence of each chunk is always a safe choice, because the ``**``
    after it accepts whatever lies between; every ``find`` is linear.
    """

    def test(value: str, start: int, end: int) -> bool:
        for chunk in chunks:
            found = value.find(chunk, start, end)
            if found == -1:
                return False
            start = found + len(chunk)
        return True

    return test


def _automaton(tokens: _Tokens) -> _MiddleTest:
    """A bit-parallel simulation of the glob's automaton, reading the text once.

    Bit ``k`` of the state means "the first ``k`` tokens match the text read so far"; bit
    ``len(tokens)`` is acceptance. A literal or ``?`` token at ``k`` moves bit ``k`` to
    ``k + 1`` on a character it accepts; a star token at ``k`` keeps bit ``k`` on a
    character it accepts and, since it also matches the empty run, lights ``k + 1`` at once
    (the closure).
    """
    advance_on: dict[str, int] = {}
    any_char = stars = double_stars = 0
    for index, token in enumerate(tokens):
        bit = 1 << index
        if token == _DOUBLE_STAR:
            double_stars |= bit
            stars |= bit
        elif token == _STAR:
            stars |= bit
        elif token == _ANY:
            any_char |= bit
        elif token == _ANY_CHARACTER:
            # Advances on every character, ``/`` included.
            any_char |= bit
            advance_on[_SLASH] = advance_on.get(_SLASH, 0) | bit
        else:
            advance_on[token] = advance_on.get(token, 0) | bit
    # ``?`` advances on every character but ``/``; on a ``/`` only ``**`` stays (and the
    # command dialect's ``?``, which put itself among the ``/`` literals above).
    on_slash = advance_on.pop(_SLASH, 0)
    advance = {char: mask | any_char for char, mask in advance_on.items()}
    accept = 1 << len(tokens)
    # The closure, written out where it is used: adjacent stars were merged, so each star
    # bit only has to light the bit above it. ``(state & stars) << 1`` does that in one
    # integer operation, whatever the pattern's length.
    start_state = 1 | ((1 & stars) << 1)

    def test(value: str, start: int, end: int) -> bool:
        state = start_state
        advance_from = advance.get
        for char in value[start:end]:
            if char == "/":
                state = ((state & on_slash) << 1) | (state & double_stars)
            else:
                state = ((state & advance_from(char, any_char)) << 1) | (state & stars)
            if not state:
                return False
            state |= (state & stars) << 1
        return bool(state & accept)

    return test


def _in_last_segment(tail: _Tokens) -> _MiddleTest:
    """The middle ``** X`` where ``X`` has no ``**`` and no ``/``: only the last segment counts.

    ``X`` cannot match text holding a ``/``, so it matches a suffix of the text after the
    last ``/``, and ``**`` takes everything before; inside one segment ``**`` and ``*`` are
    the same. So ``*X`` is run over the last segment alone (``**/.env*`` reads ``.env``
    rather than the whole path).
    """
    segment = _automaton((_STAR, *tail))

    def test(value: str, start: int, end: int) -> bool:
        slash = value.rfind(_SLASH, start, end)
        return segment(value, start if slash == -1 else slash + 1, end)

    return test


def _middle_test(core: _Tokens) -> _MiddleTest:
    """The cheapest exact test for the tokens between the literal prefix and suffix."""
    if core == (_DOUBLE_STAR,):
        return _any_text
    if core == (_STAR,):
        return _text_without_slash
    tail = core[1:]
    # A tail that may match a ``/`` (the command dialect's ``?``) can reach past the last
    # segment, so the shortcut below does not hold for it.
    crosses_slash = _DOUBLE_STAR in tail or _SLASH in tail or _ANY_CHARACTER in tail
    if core[0] == _DOUBLE_STAR and not crosses_slash:
        return _in_last_segment(tail)
    if _STAR not in core and _ANY not in core and _ANY_CHARACTER not in core:
        # Only ``**`` and literals, starting and ending with ``**`` (the literal ends were
        # taken off as prefix and suffix).
        chunks: list[str] = []
        for token in core:
            if token == _DOUBLE_STAR:
                chunks.append("")
            else:
                chunks[-1] += token
        return _literals_in_order(tuple(chunk for chunk in chunks if chunk))
    return _automaton(core)


def _compile_matcher(pattern: str, syntax: GlobSyntax) -> Callable[[str], bool]:
    """Compile ``pattern`` into a linear-time whole-string test.

    A match must start with the glob's leading literal characters and end with its trailing
    ones, so those are plain ``startswith``/``endswith`` tests, and only the part in between
    reaches :func:`_middle_test`.
    """
    tokens = _merge_star_runs(_tokens(pattern, syntax))
    wildcards = [index for index, token in enumerate(tokens) if token in _WILDCARDS]
    if not wildcards:
        return pattern.__eq__
    prefix = "".join(tokens[: wildcards[0]])
    suffix = "".join(tokens[wildcards[-1] + 1 :])
    middle = _middle_test(tokens[wildcards[0] : wildcards[-1] + 1])
    fixed = len(prefix) + len(suffix)
    skip = len(prefix)

    def test(value: str) -> bool:
        if len(value) < fixed or not value.startswith(prefix) or not value.endswith(suffix):
            return False
        return middle(value, skip, len(value) - len(suffix))

    return test


def match_glob(pattern: str, value: str, *, syntax: GlobSyntax = "path") -> bool:
    """Whether ``value`` matches the whole of ``pattern``; linear in ``len(value)``.

    Args:
        pattern: The glob.
        value: The subject.
        syntax: ``"path"`` (the default) or ``"command"`` (``*`` and ``?`` cross ``/``).

    Raises:
        InvalidPolicyInputError: ``pattern`` or ``value`` is not an exact ``str``, or
            ``syntax`` is not a known dialect.
    """
    matcher = _compile_matcher(_require_str(pattern, "glob pattern"), _require_syntax(syntax))
    return matcher(_require_str(value, "glob subject"))


def compile_glob(pattern: str, *, syntax: GlobSyntax = "path") -> CompiledGlob:
    """Compile ``pattern`` once; the result's ``test`` is equivalent to :func:`match_glob`.

    Args:
        pattern: The glob.
        syntax: ``"path"`` (the default) or ``"command"`` (``*`` and ``?`` cross ``/``).

    Raises:
        InvalidPolicyInputError: ``pattern`` is not an exact ``str``, or ``syntax`` is not
            a known dialect.
    """
    source = translate(pattern, syntax=syntax)
    matcher = _compile_matcher(pattern, syntax)

    def test(value: str) -> bool:
        if type(value) is not str:
            raise InvalidPolicyInputError("glob subject must be a str")
        return matcher(value)

    return CompiledGlob(pattern=pattern, source=source, test=test)


def _allowed_patterns(allowed: Sequence[str]) -> tuple[CompiledGlob, ...]:
    if not is_exact_array(allowed):
        raise InvalidPolicyInputError("allowed paths must be a list or tuple of str")
    return tuple(compile_glob(_require_str(pattern, "allowed path pattern")) for pattern in allowed)


def _admits(patterns: tuple[CompiledGlob, ...], path: str) -> bool:
    for glob in patterns:
        # A pattern ending in "/" names a folder: everything below it is admitted, and
        # the check is a plain prefix test, so ``packages/events/`` never admits
        # ``packages/events-2/x``.
        if glob.test(path) or (glob.pattern.endswith("/") and path.startswith(glob.pattern)):
            return True
    return False


def path_allowed(allowed: Sequence[str], path: str) -> bool:
    """Whether some pattern in ``allowed`` admits ``path``.

    A pattern admits a path when the glob matches it, or when the pattern ends in ``/``
    and is a prefix of the path.

    Raises:
        InvalidPolicyInputError: ``allowed`` is not a list or tuple of exact ``str``, or
            ``path`` is not an exact ``str``.
    """
    patterns = _allowed_patterns(allowed)
    return _admits(patterns, _require_str(path, "path"))


def check_changed_paths(allowed: Sequence[str], paths: Sequence[str]) -> tuple[bool, tuple[str, ...]]:
    """Check every changed path against ``allowed``.

    Returns:
        ``(ok, violations)``: the paths no pattern admits, in input order, and whether
        there are none.

    Raises:
        InvalidPolicyInputError: either argument is not a list or tuple of exact ``str``.
    """
    patterns = _allowed_patterns(allowed)
    if not is_exact_array(paths):
        raise InvalidPolicyInputError("changed paths must be a list or tuple of str")
    checked = [_require_str(path, "path") for path in paths]
    violations = tuple(path for path in checked if not _admits(patterns, path))
    return not violations, violations
