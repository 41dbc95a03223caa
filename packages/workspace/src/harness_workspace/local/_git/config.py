"""The repository format: the only thing the reader takes from ``.git/config``.

A small parser of git's configuration syntax, working on bytes, that keeps exactly two
things: ``core.repositoryformatversion`` and the ``extensions.*`` keys. Nothing else in the
file (drivers, hooks, ``core.*`` commands, includes) is acted on or even kept, and bytes
that are not UTF-8 are ordinary bytes here, so they can neither crash the parser nor change
what it keeps. Includes are not followed, as git does not follow them for the format check.

Accepted: format version 0 with no extension that needs version 1, or version 1 with only
``objectformat`` (``sha1`` or ``sha256``) and extensions that change nothing about reading
(``noop``, ``preciousobjects``, ``partialclone``, ``worktreeconfig``, ``refstorage = files``).
Anything else (version above 1, ``refstorage = reftable``, an unknown extension, a file that
does not parse) is ``WORKSPACE_GIT_UNSUPPORTED``: the reader refuses rather than guesses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["ConfigSyntaxError", "ObjectFormat", "RepositoryFormat", "parse_repository_format"]

ObjectFormat = Literal["sha1", "sha256"]

_HARMLESS_EXTENSIONS: Final = frozenset({b"noop", b"preciousobjects", b"partialclone", b"worktreeconfig"})
_SPACE: Final = b" \t\r\f\v"
_ESCAPES: Final = {ord("\\"): b"\\", ord('"'): b'"', ord("n"): b"\n", ord("t"): b"\t", ord("b"): b"\b"}


class ConfigSyntaxError(ValueError):
    """``.git/config`` does not parse, or sets a format the reader does not support."""


@dataclass(frozen=True)
class RepositoryFormat:
    """What the reader needs to know about a repository's format."""

    object_format: ObjectFormat


def parse_repository_format(data: bytes) -> RepositoryFormat:
    """Return the repository format ``data`` (the bytes of ``.git/config``) declares.

    Raises:
        ConfigSyntaxError: The file does not parse, or declares an unsupported format.
    """
    version = 0
    extensions: dict[bytes, bytes | None] = {}
    for section, key, value in _entries(data):
        if section == b"core" and key == b"repositoryformatversion":
            version = _integer(value)
        elif section == b"extensions":
            extensions[key] = value
    if version > 1 or version < 0:
        raise ConfigSyntaxError(f"repository format version {version} is not supported")
    object_format: ObjectFormat = "sha1"
    for key, value in extensions.items():
        if key in _HARMLESS_EXTENSIONS:
            continue
        if key == b"objectformat" and value in (b"sha1", b"sha256"):
            object_format = "sha256" if value == b"sha256" else "sha1"
        elif key == b"refstorage" and value == b"files":
            pass
        else:
            shown = key.decode("ascii", "replace")
            raise ConfigSyntaxError(f"extensions.{shown} is not supported")
        if version == 0:
            # Git itself refuses these in a version-0 repository.
            raise ConfigSyntaxError(f"extensions.{key.decode('ascii', 'replace')} needs format version 1")
    return RepositoryFormat(object_format)


def _integer(value: bytes | None) -> int:
    if value is None:
        return 1  # a bare key is boolean true
    text = value.strip()
    negative = text.startswith(b"-")
    digits = text[1:] if negative else text
    if not digits or len(digits) > 18 or not digits.isdigit():
        raise ConfigSyntaxError("core.repositoryformatversion is not an integer")
    return -int(digits) if negative else int(digits)


def _entries(data: bytes) -> list[tuple[bytes, bytes, bytes | None]]:
    """Return ``(section, key, value)`` for every entry; names lower-cased, subsections kept apart.

    A section with a subsection is reported as ``section`` followed by a NUL and the
    subsection, so it never equals a plain section name.
    """
    parser = _Parser(data[3:] if data.startswith(b"\xef\xbb\xbf") else data)
    return parser.entries()


class _Parser:
    __slots__ = ("data", "position")

    def __init__(self, data: bytes) -> None:
        self.data: bytes = data
        self.position: int = 0

    def _peek(self) -> int:
        return self.data[self.position] if self.position < len(self.data) else -1

    def _skip_line(self) -> None:
        end = self.data.find(b"\n", self.position)
        self.position = len(self.data) if end < 0 else end + 1

    def entries(self) -> list[tuple[bytes, bytes, bytes | None]]:
        found: list[tuple[bytes, bytes, bytes | None]] = []
        section: bytes | None = None
        while (byte := self._peek()) >= 0:
            if byte in _SPACE or byte == ord("\n"):
                self.position += 1
            elif byte in (ord("#"), ord(";")):
                self._skip_line()
            elif byte == ord("["):
                self.position += 1
                section = self._section()
            elif chr(byte).isascii() and chr(byte).isalpha():
                if section is None:
                    raise ConfigSyntaxError("a key before any section")
                key = self._name()
                found.append((section, key, self._value_after_key()))
            else:
                raise ConfigSyntaxError(f"unexpected byte {byte:#x}")
        return found

    def _name(self) -> bytes:
        start = self.position
        while (byte := self._peek()) >= 0 and (chr(byte).isascii() and (chr(byte).isalnum() or byte == 45)):
            self.position += 1
        return self.data[start : self.position].lower()

    def _section(self) -> bytes:
        start = self.position
        while (byte := self._peek()) >= 0 and chr(byte).isascii() and (chr(byte).isalnum() or byte in b"-."):
            self.position += 1
        name = self.data[start : self.position].lower()
        if not name:
            raise ConfigSyntaxError("an empty section name")
        byte = self._peek()
        if byte == ord("]"):
            self.position += 1
            # The legacy "[section.subsection]" form names a subsection.
            head, dot, rest = name.partition(b".")
            return head + b"\0" + rest if dot else name
        if byte not in (ord(" "), ord("\t")):
            raise ConfigSyntaxError("a malformed section header")
        while self._peek() in (ord(" "), ord("\t")):
            self.position += 1
        if self._peek() != ord('"'):
            raise ConfigSyntaxError("a malformed subsection")
        self.position += 1
        subsection = bytearray()
        while True:
            byte = self._peek()
            if byte < 0 or byte == ord("\n"):
                raise ConfigSyntaxError("an unterminated subsection")
            self.position += 1
            if byte == ord('"'):
                break
            if byte == ord("\\"):
                byte = self._peek()
                if byte < 0 or byte == ord("\n"):
                    raise ConfigSyntaxError("an unterminated subsection")
                self.position += 1
            subsection.append(byte)
        if self._peek() != ord("]"):
            raise ConfigSyntaxError("a malformed section header")
        self.position += 1
        return name + b"\0" + bytes(subsection)

    def _value_after_key(self) -> bytes | None:
        while self._peek() in (ord(" "), ord("\t")):
            self.position += 1
        byte = self._peek()
        if byte < 0 or byte == ord("\n"):
            return None
        if byte in (ord("#"), ord(";")):
            self._skip_line()
            return None
        if byte != ord("="):
            raise ConfigSyntaxError("a key without '='")
        self.position += 1
        return self._value()

    def _value(self) -> bytes:
        value = bytearray()
        quoted = False
        pending_space = 0
        while True:
            byte = self._peek()
            if byte < 0 or (byte == ord("\n") and not quoted):
                break
            self.position += 1
            if byte == ord("\n"):
                raise ConfigSyntaxError("a newline inside a quoted value")
            if not quoted and byte in (ord("#"), ord(";")):
                self._skip_line()
                break
            if not quoted and byte in _SPACE:
                if value:
                    pending_space += 1
                continue
            if pending_space:
                value.extend(b" " * pending_space)
                pending_space = 0
            if byte == ord('"'):
                quoted = not quoted
            elif byte == ord("\\"):
                escaped = self._peek()
                self.position += 1
                if escaped == ord("\n"):
                    continue  # a continuation line
                if escaped not in _ESCAPES:
                    raise ConfigSyntaxError("an invalid escape in a value")
                value.extend(_ESCAPES[escaped])
            else:
                value.append(byte)
        if quoted:
            raise ConfigSyntaxError("an unterminated quoted value")
        return bytes(value)
