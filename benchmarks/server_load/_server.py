"""The server under test: its in-process configuration and its subprocess form."""

from __future__ import annotations

import os
import resource
import secrets
import subprocess
import sys
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import trio

from agent_server import (
    LimitsConfig,
    ModelConfig,
    NetworkConfig,
    ServerConfig,
    StorageConfig,
    ToolProviderContext,
    WorkspaceConfig,
)
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_tools import Tool, create_echo_tool

TOOL_TURNS = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "echo", {"message": "hi"})]),
    ScriptedTurn(content="done"),
)
PLAIN_TURNS = (ScriptedTurn(content="done"),)
SIGTERM_SECONDS: Final = 10.0
SCENARIO_SCRIPT: Final = """\
- toolCalls:
    - {id: call-1, name: echo, arguments: {message: hi}}
- content: done
"""
POSTGRES: Final = "postgres"
"""The levels' server's ``DB`` argument that selects PostgreSQL at ``HARNESS_DATABASE_URL``."""
# The stalled phase's server is this benchmark's own entry point with --serve-stalled.
ENTRY_SCRIPT: Final = Path(__file__).resolve().parent.parent / "agent_server_load.py"


def echo_tools(context: ToolProviderContext) -> list[Tool[Any]]:
    """The in-process server's tools: ``echo`` alone."""
    return [create_echo_tool()]


def tool_model() -> FakeModel:
    """A model that calls ``echo`` once (a permission round trip), then answers."""
    return FakeModel(TOOL_TURNS)


def plain_model() -> FakeModel:
    """A model that answers at once."""
    return FakeModel(PLAIN_TURNS)


def levels_config(
    directory: Path, db: Path | None, *, connections: int, sessions: int, database_url: str | None = None
) -> ServerConfig:
    """The levels' server: SQLite at ``db`` (or PostgreSQL at ``database_url``), two models, ``echo``.

    The same configuration serves in this process (``--clients in-process``, the idle, mixed
    and tasks phases) and in the levels' server subprocess (``--serve-levels``).
    """
    return ServerConfig(
        network=NetworkConfig(port=0),
        storage=StorageConfig(db_path=None if db is None else str(db), database_url=database_url),
        model=ModelConfig(models={"plain": plain_model, "tool": tool_model}),
        workspace=WorkspaceConfig(workspace_root=str(directory / "root"), tools=echo_tools),
        limits=LimitsConfig(
            max_connections=connections, max_sessions=sessions, max_pending_connections=sessions
        ),
    )


def _serve_command(directory: Path, db: Path, token_file: Path) -> list[str]:
    scenario = directory / "scenario.yaml"
    scenario.write_text(SCENARIO_SCRIPT)
    return [
        sys.executable,
        "-m",
        "agent_server",
        "serve",
        "--port",
        "0",
        "--workspace-root",
        str(directory / "root"),
        "--db",
        str(db),
        "--scenario",
        str(scenario),
        "--tools",
        "echo",
        "--token-file",
        str(token_file),
    ]


async def _read_url(process: trio.Process) -> str:
    """The first line the server prints, without its ``agent-server: `` prefix."""
    assert process.stdout is not None
    line = b""
    with trio.fail_after(30):
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            if not chunk:
                raise RuntimeError("the server exited before printing its URL")
            line += chunk
    return line.decode().strip().removeprefix("agent-server: ")


@asynccontextmanager
async def server_process(
    directory: Path,
    name: str,
    *,
    entry: Callable[[Path], list[str]] | None = None,
    descriptor_limit: int | None = None,
    environment: dict[str, str] | None = None,
) -> AsyncGenerator[tuple[trio.Process, str, Path]]:
    """``python -m agent_server serve`` on an ephemeral port; yields ``(process, url, db path)``.

    With ``entry`` (given the db path, the arguments of this benchmark's own entry script), the
    server is that script instead: a server the CLI cannot configure (``--serve-stalled``'s run
    seam, ``--serve-levels``' two models), commanded through its stdin. ``environment`` is
    added to this process's for the server (a database URL stays out of the process list).
    """
    db = directory / f"{name}.sqlite"
    token = secrets.token_urlsafe(32)
    token_file = directory / f"{name}.token"
    token_file.write_text(f"{token}\n")
    token_file.chmod(0o600)
    command = _serve_command(directory, db, token_file)
    if entry is not None:
        command = [sys.executable, str(ENTRY_SCRIPT), *entry(db)]
    log = (directory / f"{name}.log").open("wb")
    stdin = subprocess.PIPE if entry is not None else None

    def limit_descriptors() -> None:
        if descriptor_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (descriptor_limit, descriptor_limit))

    process = await trio.lowlevel.open_process(
        command,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=log,
        preexec_fn=limit_descriptors,
        env=None if environment is None else {**os.environ, **environment},
    )
    try:
        url = await _read_url(process)
        yield process, url if entry is not None else f"{url}?token={token}", db
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        log.close()
        logged = (directory / f"{name}.log").read_text(errors="replace").count("Traceback")
        print(f"  server subprocess logged {logged} tracebacks (aborted runs answer -32603 and are logged)")
