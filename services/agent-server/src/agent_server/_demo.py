"""``agent-server demo``: scripted sessions against ephemeral loopback servers (spec §9.2).

The first server has no workspace adapter: one echo session, then ``read_file`` refused at
``session/new``. The second is started with ``workspace_adapter="local"``: ``read_file`` reads
a real file from a temporary folder, and a path leaving the workspace is refused before policy
is asked, with a typed error code (a path must be canonical: no ``..``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import trio

from agent_server._catalogue import TOOL_CATALOGUE
from agent_server._config import (
    DEFAULT_MODEL_NAME,
    ModelConfig,
    ServerConfig,
    StorageConfig,
    ToolProviderContext,
    WorkspaceConfig,
)
from agent_server._embedded import embedded_server
from agent_server._scenario import ScenarioModelFactory
from agent_server._server import ServerHandle
from agent_server.client import AcpClient, AcpClientError, JsonObject
from harness_kernel.models import ScriptedTurn, ToolCall
from harness_tools import Tool

__all__ = ["run_demo"]

_SCRIPT: Final = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "echo", {"message": "hello from the demo"})]),
    ScriptedTurn(content="The echo tool answered; the first turn is complete."),
    ScriptedTurn(content="A follow-up turn of the same session: the first turn's messages came with it."),
)
_PLAIN: Final = "project"
_WITH_FILES: Final = "project-with-files"
_NOTE_PATH: Final = "notes/hello.txt"
_NOTE_TEXT: Final = "Hello from a real file in a temporary folder.\n"
_ESCAPE_PATH: Final = "../outside.txt"
_LOCAL_SCRIPT: Final = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "read_file", {"path": _NOTE_PATH})]),
    ScriptedTurn(tool_calls=[ToolCall("call-2", "read_file", {"path": _ESCAPE_PATH})]),
    ScriptedTurn(content="I read the note; the file outside the workspace stayed out of reach."),
)


def _demo_tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
    # The pure echo tool everywhere; the workspace tool read_file is also offered in the
    # second workspace, where the fail-closed admission rule must refuse the whole session.
    names = ["echo", "read_file"] if os.path.basename(context.workspace) == _WITH_FILES else ["echo"]
    return [TOOL_CATALOGUE[name](context) for name in names]


def _describe(event: JsonObject) -> str:
    data: JsonObject = event.get("data", {})
    kind = event["type"]
    details = {
        "session.created": lambda: f"workspace={data.get('workspace')}",
        "agent.started": lambda: f"model={data.get('model')}",
        "model.response": lambda: f"finish={data.get('finishReason')}",
        "tool.call": lambda: f"{data.get('tool')} input={data.get('input')}",
        "policy.decision": lambda: f"{data.get('action')} {data.get('subject')} -> {data.get('effect')}",
        "permission.requested": lambda: f"{data.get('action')} {data.get('subject')} (asking the operator)",
        "permission.resolved": lambda: f"{data.get('decision')} note={data.get('note')!r}",
        "tool.result": lambda: _describe_result(data),
        "agent.stopped": lambda: f"status={data.get('status')} steps={data.get('steps')}",
    }.get(kind)
    return f"{kind:<22} {details() if details else ''}".rstrip()


def _describe_result(data: JsonObject) -> str:
    if data.get("ok"):
        return f"{data.get('tool')} ok=True output={data.get('output')}"
    error: JsonObject = data.get("error", {})
    return f"{data.get('tool')} ok=False error={error.get('code')}: {error.get('message')}"


async def _follow(client: AcpClient, session_id: str, events: list[JsonObject]) -> None:
    async for note in client.notifications:
        params: JsonObject = note["params"]
        event: JsonObject = params["event"]
        events.append(event)
        actor = event.get("actor", "-")
        print(f"  {params['seq']:>3}  {actor:<13} {_describe(event)}", flush=True)
        if event["type"] == "permission.requested":
            await client.request(
                "permission/respond",
                {
                    "sessionId": session_id,
                    "permissionId": event["data"]["permissionId"],
                    "decision": "allow",
                    "note": "approved by the demo operator",
                },
            )
        if event["type"] == "agent.stopped":
            return


async def _prompt(client: AcpClient, session_id: str, content: str) -> tuple[JsonObject, list[JsonObject]]:
    """Prompt the session, print its timeline live, approve its permission requests."""
    print("  seq  actor         event")
    outcome: list[JsonObject] = []
    events: list[JsonObject] = []

    async def prompt() -> None:
        outcome.append(await client.request("session/prompt", {"sessionId": session_id, "content": content}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_follow, client, session_id, events)
        nursery.start_soon(prompt)
    return outcome[0], events


async def _session(handle: ServerHandle) -> None:
    async with handle.connect() as client:
        hello = await client.initialize()
        print(f"connected: {hello['agentName']} {hello['agentVersion']} speaking {hello['protocolVersion']}")
        print(f"models: {', '.join(hello['models'])}; durable sessions: {hello['capabilities']['sessions']}")
        created = await client.request("session/new", {"workspace": _PLAIN})
        session_id: str = created["sessionId"]
        print(f"\nsession {session_id} (tools: echo)")
        result, _ = await _prompt(client, session_id, "Say hello.")
        usage = result["usage"]
        print(f"result: {result['status']}: {result['finalText']!r} (tokens: {usage['totalTokens']})")
        print("\nthe same session, a follow-up prompt (a session is a conversation):")
        result, _ = await _prompt(client, session_id, "And what happened?")
        usage = result["usage"]
        print(f"result: {result['status']}: {result['finalText']!r} (session tokens: {usage['totalTokens']})")
        await client.request("session/close", {"sessionId": session_id})
        replay = await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
        print(f"restore from -1: {replay['replayedEvents']} stored events, status {replay['status']}")
        while True:
            try:
                client.notifications.receive_nowait()
            except trio.WouldBlock:
                break
        print("\nsession/new offering echo and read_file:")
        try:
            await client.request("session/new", {"workspace": _WITH_FILES})
        except AcpClientError as error:
            print(f"  refused: {error.code} {error.data_code}: {error.message}")
        else:
            raise RuntimeError("the workspace tool was admitted")


def _read_file_only(context: ToolProviderContext) -> Iterable[Tool[Any]]:
    return [TOOL_CATALOGUE["read_file"](context)]


async def _local_session(handle: ServerHandle) -> None:
    async with handle.connect() as client:
        await client.initialize()
        created = await client.request("session/new", {"workspace": _PLAIN})
        session_id: str = created["sessionId"]
        print(f"\nsession {session_id} (tools: read_file)")
        result, events = await _prompt(client, session_id, f"Read {_NOTE_PATH}.")
        print(f"result: {result['status']}: {result['finalText']!r}")
        read, escape = (event["data"] for event in events if event["type"] == "tool.result")
        if not read["ok"] or escape["ok"]:
            raise RuntimeError("the local workspace did not read the note and refuse the escape")
        print(f"content of {_NOTE_PATH}: {read['output']['content']!r}")
        print(f"{_ESCAPE_PATH} refused before policy: {escape['error']['code']}")


def _local_root(scratch: str) -> str:
    """A server root whose workspace holds the note, with a file just outside the workspace."""
    root = os.path.join(scratch, "local")
    os.makedirs(os.path.join(root, _PLAIN, "notes"))
    with open(os.path.join(root, _PLAIN, _NOTE_PATH), "w", encoding="utf-8") as note:
        note.write(_NOTE_TEXT)
    # Inside the server root but next to the workspace: reachable by path, not by the adapter.
    with open(os.path.join(root, "outside.txt"), "w", encoding="utf-8") as outside:
        outside.write("not for the model\n")
    return root


async def _with_server(config: ServerConfig, body: Callable[[ServerHandle], Awaitable[None]]) -> None:
    async with embedded_server(config) as handle:
        print(f"agent-server: {handle.url}")
        await body(handle)


async def run_demo() -> int:
    """Start the two demo servers on ephemeral loopback ports, run their sessions, print them. Returns 0."""
    with tempfile.TemporaryDirectory(prefix="agent-server-demo-") as scratch:
        root = os.path.join(scratch, "workspaces")
        for name in (_PLAIN, _WITH_FILES):
            os.makedirs(os.path.join(root, name))
        config = ServerConfig(
            storage=StorageConfig(db_path=os.path.join(scratch, "state", "sessions.sqlite")),
            model=ModelConfig(models={DEFAULT_MODEL_NAME: ScenarioModelFactory(_SCRIPT)}),
            workspace=WorkspaceConfig(workspace_root=root, tools=_demo_tools),
        )
        await _with_server(config, _session)

        local_root = _local_root(scratch)
        print("\nwith workspace_adapter='local' (agent-server serve --workspace-adapter local):")
        local_config = ServerConfig(
            storage=StorageConfig(db_path=os.path.join(scratch, "state", "local.sqlite")),
            model=ModelConfig(models={DEFAULT_MODEL_NAME: ScenarioModelFactory(_LOCAL_SCRIPT)}),
            workspace=WorkspaceConfig(
                workspace_root=local_root, workspace_adapter="local", tools=_read_file_only
            ),
        )
        await _with_server(local_config, _local_session)
    print("\ndemo finished")
    return 0
