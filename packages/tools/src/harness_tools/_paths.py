"""The one canonical spelling of a workspace path that a model may send.

Policy judges the path string a tool call carries; the workspace opens a file. The two
agree only if every file has exactly one accepted spelling, so a model-facing path must
already be canonical, and anything else is *refused* (never silently normalised), before
policy is asked. Refusal keeps the ``tool.call`` arguments, the policy subject and the
path handed to the workspace the same string.

A canonical workspace path:

- is an exact ``str`` of 1 to :data:`WORKSPACE_PATH_MAX_CHARS` characters, relative to the
  workspace root: no leading ``/``;
- is ``/``-separated segments, each non-empty (no ``//``, no trailing ``/``), none of them
  ``.`` or ``..``, each at most :data:`WORKSPACE_SEGMENT_MAX_BYTES` bytes in UTF-8;
- holds no backslash (it would be a separator on another platform and a name character
  here) and only printable characters (``str.isprintable``: no NUL or other control
  character, no format character such as a bidirectional override, no lone surrogate, no
  line or paragraph separator, no private-use or unassigned code point, no space other than
  the ASCII space);
- is in Unicode normalisation form C, so that ``café`` has one spelling for globs to match
  (on a normalisation-insensitive filesystem the NFD spelling would otherwise open the file
  a rule written in NFC protects).

The root itself is named ``"."`` (:data:`WORKSPACE_ROOT_PATH`), and only where a caller
allows it (``allow_root=True``, for tools that take a directory); a file path never
starts with ``./``.

Not covered: case. Policy compares paths case-sensitively, so a workspace on a
case-insensitive filesystem can open ``Secrets/key`` for a rule that denies
``secrets/**``; such workspaces need rules that spell every case, or an adapter that
refuses them.
"""

from __future__ import annotations

import unicodedata
from typing import Final

from harness_tools._errors import InvalidWorkspacePathError

__all__ = [
    "WORKSPACE_PATH_MAX_CHARS",
    "WORKSPACE_ROOT_PATH",
    "WORKSPACE_SEGMENT_MAX_BYTES",
    "check_workspace_path",
]

WORKSPACE_PATH_MAX_CHARS: Final = 4096
"""The longest accepted workspace path, in characters."""
WORKSPACE_SEGMENT_MAX_BYTES: Final = 255
"""The longest accepted path segment, in UTF-8 bytes (Linux ``NAME_MAX``)."""
WORKSPACE_ROOT_PATH: Final = "."
"""How the workspace root is named, where a tool accepts it."""

_SHOWN_CHARS: Final = 120


def _shown(path: str) -> str:
    """``path`` for an error message: ``repr``, shortened so that a hostile path stays short."""
    if len(path) <= _SHOWN_CHARS:
        return repr(path)
    return repr(path[:_SHOWN_CHARS]) + f"... ({len(path)} characters)"


def _first_unprintable(path: str) -> str:
    for char in path:
        if not char.isprintable():
            return f"U+{ord(char):04X}"
    return "?"  # unreachable: only called when ``path.isprintable()`` is false


def _problem(path: str, *, allow_root: bool) -> str | None:
    """Why ``path`` is not canonical, or ``None`` when it is. Checks run in a fixed order."""
    if not path:
        return "it is empty"
    if len(path) > WORKSPACE_PATH_MAX_CHARS:
        return f"it is longer than {WORKSPACE_PATH_MAX_CHARS} characters"
    if not path.isprintable():
        return f"it contains the unprintable character {_first_unprintable(path)}"
    if "\\" in path:
        return "it contains a backslash; the separator is '/'"
    if path == WORKSPACE_ROOT_PATH:
        return None if allow_root else "it names the workspace root, not a file"
    if path.startswith("/"):
        return "it is absolute; paths are relative to the workspace root, without a leading '/'"
    for segment in path.split("/"):
        if segment == "..":
            return "it contains '..', which is never allowed"
        if segment == ".":
            return "it contains a '.' segment"
        if not segment:
            return "it contains an empty segment ('//' or a trailing '/')"
        # A code point is at most 4 bytes, so only a long segment needs encoding (and it
        # can, having no lone surrogate).
        if len(segment) > WORKSPACE_SEGMENT_MAX_BYTES // 4 and (
            len(segment.encode("utf-8")) > WORKSPACE_SEGMENT_MAX_BYTES
        ):
            return f"a segment is longer than {WORKSPACE_SEGMENT_MAX_BYTES} bytes in UTF-8"
    if not path.isascii() and not unicodedata.is_normalized("NFC", path):
        return "it is not in Unicode normalisation form C"
    return None


def _suggestion(path: str, *, allow_root: bool) -> str | None:
    """The canonical spelling of the same path, if dropping ``.``, empty segments and
    backslashes and normalising to NFC gives one; ``None`` for ``..`` and absolute paths."""
    if path.startswith(("/", "\\")) or not path.isprintable():
        return None
    segments = unicodedata.normalize("NFC", path.replace("\\", "/")).split("/")
    if ".." in segments:
        return None
    kept = "/".join(segment for segment in segments if segment not in ("", "."))
    candidate = kept or WORKSPACE_ROOT_PATH
    if candidate == path or _problem(candidate, allow_root=allow_root) is not None:
        return None
    return candidate


def check_workspace_path(path: str, *, allow_root: bool = False) -> str:
    """Return ``path`` unchanged if it is a canonical workspace path; refuse it otherwise.

    The rules are in this module's documentation. Nothing is normalised: a tool validates
    its path argument with this before policy sees it, so the policy subject and the path
    the workspace opens are the string the model sent.

    Args:
        path: The path a model sent.
        allow_root: Whether ``"."`` (the workspace root) is accepted, for tools that take
            a directory.

    Raises:
        InvalidWorkspacePathError: ``path`` is not an exact ``str`` or not canonical
            (``TOOL_WORKSPACE_PATH_INVALID``); the message says why and, when the same path
            has a canonical spelling, gives it (also in ``.suggestion``).
    """
    if type(path) is not str:
        raise InvalidWorkspacePathError(f"workspace path must be a string, not {type(path).__name__}")
    problem = _problem(path, allow_root=allow_root)
    if problem is None:
        return path
    suggestion = _suggestion(path, allow_root=allow_root)
    message = f"workspace path {_shown(path)} is not canonical: {problem}"
    if suggestion is not None:
        message += f"; use {_shown(suggestion)}"
    raise InvalidWorkspacePathError(message, suggestion)
