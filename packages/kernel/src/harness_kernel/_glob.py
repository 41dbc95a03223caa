"""Anchored globs for permission subjects and task paths.

The dialect is deliberately small: ``**`` matches any run of characters including ``/``
and swallows one ``/`` directly after it, ``*`` matches any run without ``/``, ``?``
matches one character other than ``/``, and every other character stands for itself
(regex metacharacters included). A glob always matches the whole string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from harness_kernel._json import is_exact_array
from harness_kernel._policy_errors import InvalidPolicyInputError

__all__ = [
    "CompiledGlob",
    "check_changed_paths",
    "compile_glob",
    "match_glob",
    "path_allowed",
    "translate",
]

# ``**`` may match newlines too: a subject is any string, not a line.
_FLAGS: Final = re.DOTALL


class CompiledGlob(msgspec.Struct, frozen=True, eq=False):
    """A glob translated once and ready to test many strings.

    Attributes:
        pattern: The glob as written.
        source: The regular expression it translates to (see :func:`translate`).
        test: Whether a string matches the whole glob; equivalent to
            ``match_glob(pattern, value)``.
    """

    pattern: str
    source: str
    test: Callable[[str], bool]


def _require_str(value: object, what: str) -> str:
    if type(value) is not str:
        raise InvalidPolicyInputError(f"{what} must be a str")
    return value


def translate(pattern: str) -> str:
    """Translate a glob into the source of an equivalent regular expression.

    The result is meant for :func:`re.fullmatch`; it carries its own ``(?s:…)`` group so
    that ``**`` also crosses newlines.

    Raises:
        InvalidPolicyInputError: ``pattern`` is not an exact ``str``.
    """
    _require_str(pattern, "glob pattern")
    parts: list[str] = []
    index = 0
    length = len(pattern)
    while index < length:
        char = pattern[index]
        if char == "*":
            if index + 1 < length and pattern[index + 1] == "*":
                parts.append(".*")
                index += 2
                # ``a/**/b`` must also match ``a/b``: the slash belongs to the ``**``.
                if index < length and pattern[index] == "/":
                    index += 1
                continue
            parts.append("[^/]*")
        elif char == "?":
            parts.append("[^/]")
        else:
            parts.append(re.escape(char))
        index += 1
    return "(?s:" + "".join(parts) + ")"


def match_glob(pattern: str, value: str) -> bool:
    """Whether ``value`` matches the whole of ``pattern``.

    Raises:
        InvalidPolicyInputError: ``pattern`` or ``value`` is not an exact ``str``.
    """
    source = translate(pattern)
    _require_str(value, "glob subject")
    return re.fullmatch(source, value, _FLAGS) is not None


def compile_glob(pattern: str) -> CompiledGlob:
    """Translate ``pattern`` once; the result's ``test`` is equivalent to :func:`match_glob`.

    Raises:
        InvalidPolicyInputError: ``pattern`` is not an exact ``str``.
    """
    source = translate(pattern)
    fullmatch = re.compile(source, _FLAGS).fullmatch

    def test(value: str) -> bool:
        _require_str(value, "glob subject")
        return fullmatch(value) is not None

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
