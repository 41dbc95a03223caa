"""The translation of harness events into ACP ``session/update`` payloads, and the adapter in process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from agent_server import (
    LimitsConfig,
    ModelConfig,
    NetworkConfig,
    ServerConfig,
    StorageConfig,
    WorkspaceConfig,
)
from agent_server._acp_stdio import run_acp_stdio
from agent_server._acp_stdio_map import MAX_TOOL_TEXT_CHARS, UpdateMapper, stop_reason, tool_kind
from agent_server._config import DEFAULT_MODEL_NAME
from agent_server._scenario import ScenarioModelFactory
from harness_kernel.models import ScriptedTurn
from harness_kernel.store import MemorySessionStore


@pytest.mark.parametrize(
    ("action", "kind"),
    [
        ("fs.read", "read"),
        ("fs.list", "read"),
        ("git.diff", "read"),
        ("fs.write", "edit"),
        ("process.exec", "execute"),
        ("echo", "other"),
        (None, "other"),
    ],
)
def test_tool_kinds_follow_the_policy_action(action: str | None, kind: str) -> None:
    assert tool_kind(action) == kind


@pytest.mark.parametrize(
    ("status", "finish", "cancelled", "reason"),
    [
        ("completed", "stop", False, "end_turn"),
        ("completed", "length", False, "max_tokens"),
        ("budget_exceeded", "tool_calls", False, "max_turn_requests"),
        ("canceled", "stop", False, "cancelled"),
        ("completed", "stop", True, "cancelled"),
        ("failed", "error", False, None),
        (None, None, False, None),
    ],
)
def test_stop_reasons_follow_the_run_outcome(
    status: str | None, finish: str | None, cancelled: bool, reason: str | None
) -> None:
    assert stop_reason(status, finish, cancelled) == reason


def _event(kind: str, **data: object) -> dict[str, object]:
    return {"type": kind, "data": data}


def test_a_write_becomes_an_edit_with_a_diff_of_the_new_text() -> None:
    mapper = UpdateMapper("/work/project")
    assert (
        mapper.updates(
            _event("tool.call", callId="c1", tool="fs.write", input={"path": "a.py", "contents": "x = 1\n"})
        )
        == []
    )
    (start,) = mapper.updates(_event("policy.decision", callId="c1", action="fs.write", subject="a.py"))
    assert start == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "fs.write: a.py",
        "kind": "edit",
        "status": "pending",
        "rawInput": {"path": "a.py", "contents": "x = 1\n"},
    }
    (done,) = mapper.updates(
        _event("tool.result", callId="c1", tool="fs.write", ok=True, output={"path": "a.py", "size": 6})
    )
    assert done["status"] == "completed"
    assert done["content"][1] == {"type": "diff", "path": "/work/project/a.py", "newText": "x = 1\n"}


def test_a_failed_tool_shows_its_error_code_and_no_diff() -> None:
    mapper = UpdateMapper("/p")
    mapper.updates(_event("tool.call", callId="c1", tool="fs.write", input={"path": "a", "contents": "b"}))
    start, done = mapper.updates(
        _event(
            "tool.result",
            callId="c1",
            tool="fs.write",
            ok=False,
            error={"code": "WS_DENIED", "message": "no"},
        )
    )
    assert start["sessionUpdate"] == "tool_call"  # announced even without a policy event
    assert done["status"] == "failed"
    assert done["content"] == [{"type": "content", "content": {"type": "text", "text": "WS_DENIED: no"}}]


def test_long_tool_output_is_bounded_for_the_editor() -> None:
    mapper = UpdateMapper("/p")
    _, done = mapper.updates(
        _event(
            "tool.result",
            callId="c",
            tool="fs.read",
            ok=True,
            output={"content": "x" * (MAX_TOOL_TEXT_CHARS + 10)},
        )
    )
    text = done["content"][0]["content"]["text"]
    assert text.startswith("x" * MAX_TOOL_TEXT_CHARS)
    assert text.endswith("[... 10 more characters in the session store]")


def test_streamed_text_is_not_sent_twice_and_unstreamed_text_is_sent_once() -> None:
    mapper = UpdateMapper("/p")
    chunk = mapper.updates(_event("message.delta", role="assistant", messageId="m1", delta="hel"))
    assert chunk == [{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hel"}}]
    assert mapper.updates(_event("message.completed", role="assistant", messageId="m1", content="hel")) == []
    whole = mapper.updates(_event("message.completed", role="assistant", messageId="m2", content="all"))
    assert whole == [{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "all"}}]
    assert mapper.updates(_event("message.completed", role="user", messageId="m0", content="hi")) == []


def test_a_replay_sends_the_users_messages_back() -> None:
    mapper = UpdateMapper("/p", replay=True)
    user = mapper.updates(_event("message.completed", role="user", messageId="m0", content="hi"))
    assert user == [{"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}]


# ------------------------------------------------------------- the adapter in process


async def test_a_first_prompt_after_the_servers_idle_timeout_still_runs(tmp_path: Path) -> None:
    """An editor may open a thread and type minutes later; the server cancels idle sessions."""
    store = MemorySessionStore()  # given so the test can watch the harness session end
    config = ServerConfig(
        network=NetworkConfig(port=0),
        storage=StorageConfig(session_store=store),
        model=ModelConfig(models={DEFAULT_MODEL_NAME: ScenarioModelFactory([ScriptedTurn(content="hello")])}),
        workspace=WorkspaceConfig(workspace_root=str(tmp_path)),
        limits=LimitsConfig(created_session_timeout_ms=1000),
    )
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    buffer = b""

    async def call(request_id: int, method: str, params: dict[str, object]) -> dict[str, Any]:
        nonlocal buffer
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await to_agent.send_all((json.dumps(message) + "\n").encode())
        while True:
            while b"\n" not in buffer:
                buffer += await from_agent.receive_some()
            line, buffer = buffer.split(b"\n", 1)
            answer = json.loads(line)
            if answer.get("id") == request_id and "method" not in answer:
                return answer

    async with store, trio.open_nursery() as nursery:
        nursery.start_soon(lambda: run_acp_stdio(config, agent_in, agent_out, session_log=None))
        await call(1, "initialize", {"protocolVersion": 1})
        created = await call(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        # The idle timeout cancels the first harness session before the editor's first prompt.
        with trio.fail_after(30):
            while [listing.record.status for listing in await store.list()] != ["closed"]:  # noqa: ASYNC110
                await trio.sleep(0.01)
        prompt = [{"type": "text", "text": "hi"}]
        answer = await call(
            3, "session/prompt", {"sessionId": created["result"]["sessionId"], "prompt": prompt}
        )
        await to_agent.aclose()
    assert answer["result"] == {"stopReason": "end_turn"}
