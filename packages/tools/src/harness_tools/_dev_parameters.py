"""The arguments of the five development tools: strict, camelCase, checked before any effect.

Each Struct is converted strictly by the runtime's gate (no float for an int, no string
number, no extra key), and ``__post_init__`` refuses what a JSON schema cannot say (a
canonical path, a NUL in an argument, the UTF-8 size of a file's contents), so every refusal
is invalid input: the call never reaches policy or the workspace. The classes carry no
docstring on purpose: msgspec would show it to the model as the schema's description.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from harness_tools._paths import WORKSPACE_PATH_MAX_CHARS, check_workspace_path

__all__ = [
    "EXEC_ARGUMENT_MAX_CHARS",
    "EXEC_ARGV_MAX_ITEMS",
    "EXEC_TIMEOUT_MAX_MS",
    "READ_MAX_LINES",
    "WRITE_MAX_BYTES",
    "FsListParameters",
    "FsReadParameters",
    "FsWriteParameters",
    "GitDiffParameters",
    "ProcessExecParameters",
]

READ_MAX_LINES: Final = 400
"""The most lines one ranged ``fs.read`` returns."""
WRITE_MAX_BYTES: Final = 131_072
"""The largest file ``fs.write`` writes, in UTF-8 bytes (128 KiB)."""
EXEC_ARGV_MAX_ITEMS: Final = 128
EXEC_ARGUMENT_MAX_CHARS: Final = 8_192
EXEC_TIMEOUT_MAX_MS: Final = 30_000
"""The longest a ``process.exec`` command may run, and its default."""

_Path = Annotated[str, msgspec.Meta(min_length=1, max_length=WORKSPACE_PATH_MAX_CHARS)]


def _utf8_bytes(text: str) -> int:
    # Every code point is at least one byte, so ASCII (O(1) to test) needs no encoding.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class FsReadParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    path: _Path
    start_line: Annotated[int, msgspec.Meta(ge=1)] | msgspec.UnsetType = msgspec.UNSET
    max_lines: Annotated[int, msgspec.Meta(ge=1, le=READ_MAX_LINES)] | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        check_workspace_path(self.path)

    @property
    def ranged(self) -> bool:
        """Whether a line range was asked for (either bound given)."""
        return self.start_line is not msgspec.UNSET or self.max_lines is not msgspec.UNSET


class FsListParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    path: _Path

    def __post_init__(self) -> None:
        check_workspace_path(self.path, allow_root=True)


class FsWriteParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    path: _Path
    contents: str

    def __post_init__(self) -> None:
        check_workspace_path(self.path)
        size = _utf8_bytes(self.contents)
        if size > WRITE_MAX_BYTES:
            raise ValueError(f"contents are {size} UTF-8 bytes; fs.write writes at most {WRITE_MAX_BYTES}")


class ProcessExecParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    argv: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=EXEC_ARGUMENT_MAX_CHARS)]],
        msgspec.Meta(min_length=1, max_length=EXEC_ARGV_MAX_ITEMS),
    ]
    cwd: _Path | msgspec.UnsetType = msgspec.UNSET
    timeout_ms: Annotated[int, msgspec.Meta(ge=1, le=EXEC_TIMEOUT_MAX_MS)] = EXEC_TIMEOUT_MAX_MS

    def __post_init__(self) -> None:
        if not self.argv[0]:
            raise ValueError("argv[0] must name a program")
        for index, argument in enumerate(self.argv):
            if "\x00" in argument:
                raise ValueError(f"argv[{index}] contains a NUL character")
        if self.cwd is not msgspec.UNSET:
            check_workspace_path(self.cwd, allow_root=True)


class GitDiffParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pass
