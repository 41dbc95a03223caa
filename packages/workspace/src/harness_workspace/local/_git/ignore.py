"""``.gitignore`` rules, matched in time linear in the path for every pattern.

The syntax and precedence are git's (gitignore(5) and ``dir.c``/``wildmatch.c``): blank
lines and ``#`` comments are skipped; trailing spaces are dropped unless escaped; ``!``
negates; a trailing ``/`` matches directories only; a pattern without a slash matches the
base name at any depth, one with a slash is anchored to its file's directory; ``*`` and
``?`` never match ``/``; ``**`` between slashes (or at either end) matches any number of
directories; ``[...]`` classes take ranges, ``!``/``^`` negation and ``[:alpha:]`` names;
``\\`` escapes. A pattern git would abort on (an unclosed class) matches nothing. Deeper
files win over shallower ones, later lines over earlier ones, and ``.git/info/exclude``
comes last.

A ``.gitignore`` is written by whoever controls the workspace, so matching must not
backtrack: each pattern is compiled to a small automaton whose states are the bits of one
integer, and a path is read once, byte by byte. ``**/a*b*c*d*e`` against a long name costs
what ``abcde`` does.
"""

from __future__ import annotations

import string
from typing import Final

__all__ = ["IgnorePattern", "IgnoreRules", "parse_ignore_file"]

_SLASH: Final = ord("/")
_MAX_CONSUMING_TOKENS: Final = 4096  # a path is shorter, so a longer pattern can never match
_BOM: Final = b"\xef\xbb\xbf"
_WILDCARDS: Final = frozenset(b"*?[\\")

_LITERAL, _ANY, _SET, _STAR, _GLOBSTAR, _GLOBSTAR_SLASH = range(6)


def _class(predicate: str) -> frozenset[int]:
    return frozenset(ord(character) for character in predicate)


_PRINTABLE: Final = frozenset(range(0x20, 0x7F))
_CLASSES: Final[dict[bytes, frozenset[int]]] = {
    b"alnum": _class(string.ascii_letters + string.digits),
    b"alpha": _class(string.ascii_letters),
    b"blank": _class(" \t"),
    b"cntrl": frozenset(range(0x20)) | {0x7F},
    b"digit": _class(string.digits),
    b"graph": _PRINTABLE - {0x20},
    b"lower": _class(string.ascii_lowercase),
    b"print": _PRINTABLE,
    b"punct": _class(string.punctuation),
    b"space": _class(" \t\n\r"),
    b"upper": _class(string.ascii_uppercase),
    b"xdigit": _class(string.hexdigits),
}


class _Never(Exception):
    """The pattern can never match (git's wildmatch would abort on it)."""


class IgnorePattern:
    """One compiled line of an ignore file.

    Attributes:
        negative: A ``!`` line: a match re-includes.
        directory_only: A trailing ``/``: only directories match.
        anchored: The pattern holds a slash and matches the path relative to its file's
            directory; otherwise it matches the base name.
    """

    __slots__ = (
        "_any",
        "_globstar",
        "_globstar_slash",
        "_literal",
        "_literals",
        "_never",
        "_sets",
        "_skip",
        "_skip_on_entry",
        "_star",
        "_suffix",
        "_width",
        "anchored",
        "directory_only",
        "negative",
    )

    def __init__(self, pattern: bytes, *, negative: bool, directory_only: bool, anchored: bool) -> None:
        self.negative = negative
        self.directory_only = directory_only
        self.anchored = anchored
        self._literal: bytes | None = None
        self._suffix: bytes | None = None
        self._never = False
        self._literals: dict[int, int] = {}
        self._sets: list[tuple[int, frozenset[int]]] = []
        self._any = self._star = self._globstar = self._globstar_slash = 0
        self._skip = self._skip_on_entry = 0
        self._width = 0
        if not _WILDCARDS.intersection(pattern):
            self._literal = pattern
            return
        if not anchored and pattern.startswith(b"*") and not _WILDCARDS.intersection(pattern[1:]):
            self._suffix = pattern[1:]  # "*.log": the most common shape, matched directly
            return
        try:
            self._compile(_tokens(pattern))
        except _Never:
            self._never = True

    def _compile(self, tokens: list[tuple[int, object]]) -> None:
        consuming = sum(kind in (_LITERAL, _ANY, _SET) for kind, _ in tokens)
        if consuming > _MAX_CONSUMING_TOKENS:
            raise _Never
        for position, (kind, argument) in enumerate(tokens):
            bit = 1 << position
            if kind == _LITERAL:
                assert isinstance(argument, int)
                self._literals[argument] = self._literals.get(argument, 0) | bit
            elif kind == _ANY:
                self._any |= bit
            elif kind == _SET:
                assert isinstance(argument, frozenset)
                self._sets.append((bit, argument))  # pyright: ignore[reportUnknownArgumentType]
            elif kind == _STAR:
                self._star |= bit
                self._skip |= bit
            elif kind == _GLOBSTAR:
                self._globstar |= bit
                self._skip |= bit
            else:
                self._globstar_slash |= bit
                self._skip_on_entry |= bit
        self._width = len(tokens)

    def matches(self, text: bytes) -> bool:
        """Whether the pattern matches ``text`` (a relative path or a base name) whole."""
        if self._literal is not None:
            return text == self._literal
        if self._suffix is not None:
            return text.endswith(self._suffix)
        if self._never:
            return False
        states = self._closure(1, 1)
        literals, sets = self._literals, self._sets
        for byte in text:
            advance = literals.get(byte, 0)
            if byte == _SLASH:
                stay = self._globstar | self._globstar_slash
                advance |= self._globstar_slash
            else:
                stay = self._star | self._globstar | self._globstar_slash
                advance |= self._any
                for bit, members in sets:
                    if byte in members:
                        advance |= bit
            moved = (states & advance) << 1
            states = self._closure(moved | (states & stay), moved)
            if not states:
                return False
        return bool(states >> self._width & 1)

    def _closure(self, states: int, entered: int) -> int:
        # "*" and a final "**" may stop matching at any point: a state on one also stands
        # on the token after it. "**/" may match nothing, but once it has matched a byte
        # it must end with "/": only a state that has just entered it may skip it.
        while True:
            added = ((states & self._skip) << 1) | ((entered & self._skip_on_entry) << 1)
            grown = states | added
            if grown == states:
                return states
            entered |= added & ~states
            states = grown


def _tokens(pattern: bytes) -> list[tuple[int, object]]:
    tokens: list[tuple[int, object]] = []
    position, length = 0, len(pattern)
    while position < length:
        byte = pattern[position]
        if byte == ord("\\"):
            position += 1
            if position >= length:
                raise _Never  # a trailing backslash never matches
            tokens.append((_LITERAL, pattern[position]))
            position += 1
        elif byte == ord("?"):
            tokens.append((_ANY, None))
            position += 1
        elif byte == ord("["):
            members, position = _bracket(pattern, position + 1)
            tokens.append((_SET, members))
        elif byte == ord("*"):
            end = position
            while end < length and pattern[end] == ord("*"):
                end += 1
            at_boundary = position == 0 or pattern[position - 1] == _SLASH
            before_slash = end == length or pattern[end] == _SLASH or pattern[end : end + 2] == b"\\/"
            if end - position >= 2 and at_boundary and before_slash:
                if end < length and pattern[end] == _SLASH:
                    # "**/" matches nothing, or anything that ends with a slash.
                    if not tokens or tokens[-1][0] != _GLOBSTAR_SLASH:
                        tokens.append((_GLOBSTAR_SLASH, None))
                    position = end + 1
                    continue
                tokens.append((_GLOBSTAR, None))
            else:
                tokens.append((_STAR, None))
            position = end
        else:
            tokens.append((_LITERAL, byte))
            position += 1
    return tokens


def _bracket(pattern: bytes, position: int) -> tuple[frozenset[int], int]:
    """Parse a ``[...]`` class starting after its ``[``; return its members and the next position."""
    length = len(pattern)
    if position >= length:
        raise _Never
    negated = pattern[position] in b"!^"
    if negated:
        position += 1
    members: set[int] = set()
    previous: int | None = None
    while True:  # the first member is taken even if it is "]"
        if position >= length:
            raise _Never
        byte = pattern[position]
        if byte == ord("\\"):
            position += 1
            if position >= length:
                raise _Never
            members.add(pattern[position])
            previous = pattern[position]
        elif (
            byte == ord("-")
            and previous is not None
            and position + 1 < length
            and pattern[position + 1] != ord("]")
        ):
            position += 1
            high = pattern[position]
            if high == ord("\\"):
                position += 1
                if position >= length:
                    raise _Never
                high = pattern[position]
            members.update(range(previous, high + 1))
            previous = None
        elif byte == ord("[") and pattern[position + 1 : position + 2] == b":":
            end = pattern.find(b"]", position + 2)
            if end < 0:
                raise _Never
            if end - (position + 2) - 1 < 0 or pattern[end - 1] != ord(":"):
                members.add(byte)  # no ":]": an ordinary "["
                previous = byte
            else:
                named = _CLASSES.get(pattern[position + 2 : end - 1])
                if named is None:
                    raise _Never
                members.update(named)
                previous = None
                position = end
        else:
            members.add(byte)
            previous = byte
        position += 1
        if position < length and pattern[position] == ord("]"):
            break
    chosen = frozenset(range(256)) - members if negated else frozenset(members)
    return chosen - {_SLASH}, position + 1


def parse_ignore_file(data: bytes) -> list[IgnorePattern]:
    """Compile every pattern line of an ignore file's bytes, in order."""
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    patterns: list[IgnorePattern] = []
    for raw in data.split(b"\n"):
        line = raw[:-1] if raw.endswith(b"\r") else raw
        line = line.split(b"\0", 1)[0]  # git reads each line as a C string
        if not line or line.startswith(b"#"):
            continue
        line = _trim_trailing_spaces(line)
        negative = line.startswith(b"!")
        if negative:
            line = line[1:]
        directory_only = line.endswith(b"/")
        if directory_only:
            line = line[:-1]
        if not line:
            continue
        anchored = b"/" in line
        if line.startswith(b"/"):
            line = line[1:]
        patterns.append(
            IgnorePattern(line, negative=negative, directory_only=directory_only, anchored=anchored)
        )
    return patterns


def _trim_trailing_spaces(line: bytes) -> bytes:
    last_space: int | None = None
    position = 0
    while position < len(line):
        byte = line[position]
        if byte == ord(" "):
            if last_space is None:
                last_space = position
        elif byte == ord("\\"):
            position += 1
            if position >= len(line):
                return line
            last_space = None
        else:
            last_space = None
        position += 1
    return line if last_space is None else line[:last_space]


class IgnoreRules:
    """The ignore files in force at one point of the walk, innermost last.

    Args:
        exclude: The patterns of ``.git/info/exclude`` (lowest precedence, rooted at the top).
    """

    __slots__ = ("_exclude", "_groups")

    def __init__(self, exclude: list[IgnorePattern]) -> None:
        self._exclude = exclude
        self._groups: list[tuple[int, list[IgnorePattern]]] = []

    def push(self, base: bytes, patterns: list[IgnorePattern]) -> None:
        """Enter a directory (``base``, with its trailing slash, or ``b""``) and its patterns."""
        self._groups.append((len(base), patterns))

    def pop(self) -> None:
        """Leave the directory entered last."""
        self._groups.pop()

    def excluded(self, path: bytes, *, directory: bool) -> bool:
        """Whether ``path`` (relative to the root) is ignored by the last pattern matching it."""
        basename = path[path.rfind(b"/") + 1 :]
        for base_length, patterns in reversed(self._groups):
            found = _last_match(patterns, path[base_length:], basename, directory)
            if found is not None:
                return not found.negative
        found = _last_match(self._exclude, path, basename, directory)
        return found is not None and not found.negative


def _last_match(
    patterns: list[IgnorePattern], relative: bytes, basename: bytes, directory: bool
) -> IgnorePattern | None:
    for pattern in reversed(patterns):
        if pattern.directory_only and not directory:
            continue
        if pattern.matches(relative if pattern.anchored else basename):
            return pattern
    return None
