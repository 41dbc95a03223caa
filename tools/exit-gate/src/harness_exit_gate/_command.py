"""Test-command parsing (exit-gate.md §7): one string gives both the policy subject and the argv."""

from __future__ import annotations

from typing import Final

from harness_exit_gate._errors import CommandParseError

__all__ = ["parse_command"]

_FORBIDDEN: Final = frozenset(";&|<>`\x00\r\n")
_DOUBLE_QUOTE_ESCAPES: Final = frozenset('"\\')


def _double_quoted(text: str, index: int) -> tuple[str, int]:
    """The content of a double-quoted run starting at ``index``, and the index after its close."""
    parts: list[str] = []
    while index < len(text):
        character = text[index]
        if character == '"':
            return "".join(parts), index + 1
        if character == "\\" and index + 1 < len(text) and text[index + 1] in _DOUBLE_QUOTE_ESCAPES:
            parts.append(text[index + 1])
            index += 2
        else:
            parts.append(character)
            index += 1
    raise CommandParseError("command has an unterminated double quote")


def parse_command(text: str) -> tuple[str, ...]:
    """Split a command line into an argv, without a shell.

    Single quotes are literal; inside double quotes ``\\"`` and ``\\\\`` are escapes; outside
    quotes a backslash escapes the next character. The characters ``; & | < > `` ` and NUL,
    CR and LF are refused anywhere, even quoted.

    Raises:
        CommandParseError: a refused character, an unterminated quote, a trailing backslash
            or an empty result.
    """
    if type(text) is not str:
        raise CommandParseError(f"command must be a str, got {type(text).__name__}")
    for character in text:
        if character in _FORBIDDEN:
            raise CommandParseError(f"command contains the refused character {character!r}")
    words: list[str] = []
    current: list[str] = []
    in_word = False
    index = 0
    length = len(text)
    while index < length:
        character = text[index]
        if character == "'":
            end = text.find("'", index + 1)
            if end < 0:
                raise CommandParseError("command has an unterminated single quote")
            current.append(text[index + 1 : end])
            in_word = True
            index = end + 1
        elif character == '"':
            quoted, index = _double_quoted(text, index + 1)
            current.append(quoted)
            in_word = True
        elif character == "\\":
            if index + 1 >= length:
                raise CommandParseError("command ends with a backslash")
            current.append(text[index + 1])
            in_word = True
            index += 2
        elif character.isspace():
            if in_word:
                words.append("".join(current))
                current = []
                in_word = False
            index += 1
        else:
            current.append(character)
            in_word = True
            index += 1
    if in_word:
        words.append("".join(current))
    if not words:
        raise CommandParseError("command is empty")
    return tuple(words)
