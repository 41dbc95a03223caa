"""``agent-server demo``: one scripted session against an ephemeral loopback server (spec §9.2)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from typing import Any, Final

import trio

from agent_server._catalogue import TOOL_CATALOGUE
from agent_server._config import DEFAULT_MODEL_NAME, ServerConfig, ToolProviderContext
from agent_server._scenario import ScenarioModelFactory
from agent_server._server import ServerHandle, serve
from agent_server.client import AcpClient, AcpClientError, JsonObject, connect
from harness_kernel.models import ScriptedTurn, ToolCall
from harness_tools import Tool

__all__ = ["run_demo"]

_SCRIPT: Final = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "echo", {"message": "hello from the demo"})]),
    ScriptedTurn(content="The echo tool answered; the demo session is complete."),
)
_PLAIN: Final = "project"
_WITH_FILES: Final = "project-with-files"


def _demo_tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
    # The pure echo tool everywhere; the workspace tool read_file is also offered in the
    # second workspace, where the M8 admission rule must refuse the whole session.
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
        "tool.result": lambda: f"{data.get('tool')} ok={data.get('ok')} output={data.get('output')}",
        "agent.stopped": lambda: f"status={data.get('status')} steps={data.get('steps')}",
    }.get(kind)
    return f"{kind:<22} {details() if details else ''}".rstrip()


async def _follow(client: AcpClient, session_id: str) -> None:
    async for note in client.notifications:
        params: JsonObject = note["params"]
        event: JsonObject = params["event"]
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


async def _session(handle: ServerHandle) -> None:
    async with connect(handle.url) as client:
        hello = await client.initialize()
        print(f"connected: {hello['agentName']} {hello['agentVersion']} speaking {hello['protocolVersion']}")
        print(f"models: {', '.join(hello['models'])}; durable sessions: {hello['capabilities']['sessions']}")
        created = await client.request("session/new", {"workspace": _PLAIN})
        session_id: str = created["sessionId"]
        print(f"\nsession {session_id} (tools: echo)")
        print("  seq  actor         event")
        outcome: list[JsonObject] = []

        async def prompt() -> None:
            outcome.append(
                await client.request("session/prompt", {"sessionId": session_id, "content": "Say hello."})
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(_follow, client, session_id)
            nursery.start_soon(prompt)
        result = outcome[0]
        usage = result["usage"]
        print(f"result: {result['status']}: {result['finalText']!r} (tokens: {usage['totalTokens']})")
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


async def run_demo() -> int:
    """Start a server on an ephemeral loopback port, run one session, print it, stop. Returns 0."""
    with tempfile.TemporaryDirectory(prefix="agent-server-demo-") as scratch:
        root = os.path.join(scratch, "workspaces")
        for name in (_PLAIN, _WITH_FILES):
            os.makedirs(os.path.join(root, name))
        config = ServerConfig(
            host="127.0.0.1",
            port=0,
            workspace_root=root,
            db_path=os.path.join(scratch, "state", "sessions.sqlite"),
            models={DEFAULT_MODEL_NAME: ScenarioModelFactory(_SCRIPT)},
            tools=_demo_tools,
        )
        async with trio.open_nursery() as nursery:
            handle: ServerHandle = await nursery.start(serve, config)
            print(f"agent-server: {handle.url}")
            try:
                await _session(handle)
            finally:
                await handle.aclose()
    print("\ndemo finished")
    return 0
