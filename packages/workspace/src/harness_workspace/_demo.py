"""The runnable example behind ``python -m harness_workspace``.

It uses only the public surface and the in-memory fake, so it runs anywhere the
distribution is installed, with nothing else present.
"""

from __future__ import annotations

import sys
from typing import TextIO

import trio

from harness_workspace._dispatch import bind_workspace, invoke_workspace_operation, restrict_workspace
from harness_workspace._errors import WorkspaceOperationError
from harness_workspace._memory import MemoryWorkspace
from harness_workspace._signals import AbortController
from harness_workspace._types import CommandRequest, CommandResult
from harness_workspace._version import WORKSPACE_CONTRACT_VERSION, __version__

__all__ = ["main", "run_demo"]

DEMO_FILES = {
    "README.md": "# demo\n",
    "src/app.py": "print('hello')\n",
    "src/util.py": "VALUE = 1\n",
}


def _greet(command: CommandRequest) -> CommandResult:
    return CommandResult(exit_code=0, stdout=f"hello from {' '.join(command.argv)}\n", stderr="")


async def run_demo(out: TextIO) -> int:
    """Walk through binding, dispatch, a one-operation view and typed refusals."""

    def say(line: str) -> None:
        print(line, file=out)

    say(f"harness-workspace {__version__} (contract {WORKSPACE_CONTRACT_VERSION})")
    adapter = MemoryWorkspace(DEMO_FILES, commands={"greet": _greet})
    workspace = bind_workspace(adapter)

    text = await invoke_workspace_operation(workspace, {"operation": "read_file", "path": "README.md"})
    say(f"read_file README.md -> {text!r}")
    names = await invoke_workspace_operation(workspace, {"operation": "list_files", "path": "src"})
    say(f"list_files src -> {names}")

    controller = AbortController()
    result = await invoke_workspace_operation(
        workspace,
        {"operation": "execute", "command": {"argv": ["greet", "world"], "signal": controller.signal}},
    )
    say(f"execute greet world -> exit {result.exit_code}, stdout {result.stdout!r}")

    view = restrict_workspace(adapter, "read_file")
    say(f"view granting read_file reads README.md -> {await view.read_file('README.md')!r}")
    refused = 0
    try:
        await view.write_file("README.md", "overwritten")
    except WorkspaceOperationError as error:
        refused += 1
        say(f"view refuses write_file -> {error.code}: {error}")
    try:
        await invoke_workspace_operation(workspace, {"operation": "readFile", "path": "README.md"})
    except WorkspaceOperationError as error:
        refused += 1
        say(f"camelCase operation name -> {error.code}: {error}")
    try:
        await invoke_workspace_operation(workspace, {"operation": "execute", "command": {"argv": "rm -rf /"}})
    except WorkspaceOperationError as error:
        refused += 1
        say(f"shell string instead of argv -> {error.code}: {error}")

    snapshot = await invoke_workspace_operation(workspace, {"operation": "snapshot"})
    say(f"snapshot -> id {snapshot.id}, metadata {dict(snapshot.metadata or {})}")
    unchanged = (await workspace.read_file("README.md")) == DEMO_FILES["README.md"]
    say(f"README.md unchanged after the refused write: {unchanged}")
    await invoke_workspace_operation(workspace, {"operation": "dispose"})
    ok = refused == 3 and unchanged
    say("demo finished: ok" if ok else "demo finished: UNEXPECTED RESULT")
    return 0 if ok else 1


def main() -> int:
    """Run the demo on stdout; return the process exit status."""
    return trio.run(run_demo, sys.stdout)
