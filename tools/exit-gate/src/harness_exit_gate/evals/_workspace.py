"""A golden scenario's workspace and tools (exit-gate.md; decision 041).

A scenario may give its run an in-memory workspace: ``workspace.files`` (path → text) and
``workspace.commands``, scripted answers matched by the whole argv. ``tools`` picks what the
run registers beside ``echo``: ``dev`` (the five development tools) or a list of names. The
decoding here is as strict as the rest of the scenario format; building the workspace only
uses ``MemoryWorkspace``, so a scenario never reaches the host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from harness_exit_gate.manifest._yaml import describe_kind, join_path
from harness_tools import (
    DEVELOPMENT_TOOL_NAMES,
    Tool,
    ToolRegistry,
    create_development_tools,
    create_echo_tool,
)
from harness_workspace import CommandHandler, CommandRequest, CommandResult, MemoryWorkspace

__all__ = [
    "SCENARIO_WORKSPACE_ROOT",
    "ScenarioCommand",
    "ScenarioWorkspace",
    "build_tools",
    "build_workspace",
    "decode_tools",
    "decode_workspace",
    "file_failures",
]

SCENARIO_WORKSPACE_ROOT: Final = "/workspace"
"""The boundary metadata the development tools of a scenario carry."""

_ECHO: Final = "echo"
_KNOWN_TOOLS: Final = (_ECHO, *DEVELOPMENT_TOOL_NAMES)
_DEV: Final = "dev"
_COMMAND_KEYS: Final = ("argv", "exitCode", "stdout", "stderr", "timedOut")


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioCommand:
    """A scripted answer to one command, matched by its whole argv."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioWorkspace:
    """The files a scenario's memory workspace starts with, and its scripted commands."""

    files: tuple[tuple[str, str], ...] = ()
    commands: tuple[ScenarioCommand, ...] = ()


class _Decoder(Protocol):
    """The parts of the scenario decoder this module uses (``harness_exit_gate.evals``)."""

    def issue(self, path: str, message: str) -> None: ...

    def any_mapping(self, value: object, path: str) -> dict[object, object] | None: ...

    def mapping(self, value: object, path: str, allowed: tuple[str, ...]) -> dict[str, object] | None: ...

    def sequence(self, value: object, path: str, *, minimum: int = 0) -> list[object] | None: ...

    def text(self, value: object, path: str, *, kebab: bool = False, empty: bool = False) -> str | None: ...


def decode_texts(decoder: _Decoder, value: object, path: str) -> tuple[tuple[str, str], ...] | None:
    """A mapping of non-empty path → text (the text may be empty)."""
    mapping = decoder.any_mapping(value, path)
    if mapping is None:
        return None
    texts: list[tuple[str, str]] = []
    valid = True
    for key, item in mapping.items():
        name = decoder.text(key, path)
        text = None if name is None else decoder.text(item, join_path(path, name), empty=True)
        if name is None or text is None:
            valid = False
        else:
            texts.append((name, text))
    return tuple(texts) if valid else None


def _command(decoder: _Decoder, value: object, path: str) -> ScenarioCommand | None:
    mapping = decoder.mapping(value, path, _COMMAND_KEYS)
    if mapping is None:
        return None
    argv_path = join_path(path, "argv")
    if "argv" not in mapping:
        decoder.issue(argv_path, "is required")
    items = decoder.sequence(mapping.get("argv"), argv_path, minimum=1) if "argv" in mapping else None
    argv = [
        decoder.text(item, join_path(argv_path, str(i)), empty=True) for i, item in enumerate(items or ())
    ]
    code_path = join_path(path, "exitCode")
    code = mapping.get("exitCode")
    if "exitCode" not in mapping:
        decoder.issue(code_path, "is required")
    elif code is not None and type(code) is not int:
        decoder.issue(code_path, f"expected an integer or null, got {describe_kind(code)}")
    streams = [
        decoder.text(mapping.get(key, ""), join_path(path, key), empty=True) for key in ("stdout", "stderr")
    ]
    timed_out = mapping.get("timedOut")
    if timed_out is not None and type(timed_out) is not bool:
        decoder.issue(join_path(path, "timedOut"), f"expected a bool, got {describe_kind(timed_out)}")
    valid = items is not None and None not in argv and None not in streams
    if not valid or "exitCode" not in mapping or (code is not None and type(code) is not int):
        return None
    return ScenarioCommand(
        argv=tuple(item for item in argv if item is not None),
        exit_code=code if type(code) is int else None,
        stdout=streams[0] or "",
        stderr=streams[1] or "",
        timed_out=timed_out if type(timed_out) is bool else None,
    )


def decode_workspace(decoder: _Decoder, value: object) -> ScenarioWorkspace | None:
    """The scenario's ``workspace:`` (``files`` and ``commands``, both optional)."""
    mapping = decoder.mapping(value, "workspace", ("files", "commands"))
    if mapping is None:
        return None
    files: tuple[tuple[str, str], ...] | None = ()
    if "files" in mapping:
        files = decode_texts(decoder, mapping["files"], "workspace.files")
    commands: list[ScenarioCommand | None] = []
    items = decoder.sequence(mapping.get("commands", []), "workspace.commands")
    seen: set[tuple[str, ...]] = set()
    for index, item in enumerate(items or ()):
        path = join_path("workspace.commands", str(index))
        command = _command(decoder, item, path)
        if command is not None and command.argv in seen:
            decoder.issue(join_path(path, "argv"), "repeats the argv of an earlier command")
            command = None
        if command is not None:
            seen.add(command.argv)
        commands.append(command)
    if files is None or items is None or None in commands:
        return None
    return ScenarioWorkspace(files=files, commands=tuple(item for item in commands if item is not None))


def decode_tools(decoder: _Decoder, value: object) -> tuple[str, ...] | None:
    """``tools:``: ``dev`` (echo and the development tools) or a list of known tool names."""
    if value == _DEV and type(value) is str:
        return _KNOWN_TOOLS
    if type(value) is str:
        decoder.issue("tools", f"must be {_DEV} or a list of tool names")
        return None
    items = decoder.sequence(value, "tools", minimum=1)
    if items is None:
        return None
    names: list[str] = []
    for index, item in enumerate(items):
        path = join_path("tools", str(index))
        name = decoder.text(item, path)
        if name is not None and name not in _KNOWN_TOOLS:
            decoder.issue(path, f"unknown tool; known: {', '.join(_KNOWN_TOOLS)}")
        elif name is not None and name in names:
            decoder.issue(path, "is listed twice")
        elif name is not None:
            names.append(name)
    return tuple(names) if len(names) == len(items) else None


def _answer(commands: Mapping[tuple[str, ...], ScenarioCommand]) -> CommandHandler:
    def handler(request: CommandRequest) -> CommandResult:
        command = commands.get(tuple(request.argv))
        if command is None:
            # As MemoryWorkspace answers an unknown program: a shell's "not found".
            return CommandResult(exit_code=127, stdout="", stderr=f"{request.argv[0]}: not available\n")
        return CommandResult(
            exit_code=command.exit_code,
            stdout=command.stdout,
            stderr=command.stderr,
            timed_out=command.timed_out,
        )

    return handler


def build_workspace(workspace: ScenarioWorkspace) -> MemoryWorkspace:
    """A fresh memory workspace with the scenario's files and scripted commands."""
    by_argv = {command.argv: command for command in workspace.commands}
    handler = _answer(by_argv)
    programs = {command.argv[0] for command in workspace.commands}
    return MemoryWorkspace(dict(workspace.files), commands=dict.fromkeys(programs, handler))


def build_tools(names: tuple[str, ...] | None) -> ToolRegistry:
    """``echo`` alone by default; otherwise the named tools, in the order given."""
    if names is None:
        return ToolRegistry([create_echo_tool()])
    available: dict[str, Tool[Any]] = {_ECHO: create_echo_tool()}
    if any(name in DEVELOPMENT_TOOL_NAMES for name in names):
        available.update((tool.name, tool) for tool in create_development_tools(SCENARIO_WORKSPACE_ROOT))
    return ToolRegistry([available[name] for name in names])


def file_failures(
    wanted: tuple[tuple[str, str], ...], files: Mapping[str, str], show: Callable[[object], str]
) -> list[str]:
    """``files.<path>: wanted …, saw …`` for each expected file whose final text differs."""
    absent = object()
    failures: list[str] = []
    for name, text in wanted:
        seen = files.get(name, absent)
        if seen != text:
            shown = "nothing" if seen is absent else show(seen)
            failures.append(f"files.{name}: wanted {show(text)}, saw {shown}")
    return failures
