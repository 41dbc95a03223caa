"""Issue #19 end to end: agent-server on a provider model, against a loopback fake provider.

``serve --model openai-compatible:MODEL --base-url http://127.0.0.1:…/v1`` is built by the
CLI's own code; a session makes a tool call through the durable loop (the provider sees the
tool under its alias, the events and the store see the canonical name) and answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fake_provider import Reply, fake_provider, sse

from agent_server._catalogue import catalogue_provider
from agent_server._cli import _parser as parser  # pyright: ignore[reportPrivateUsage]
from agent_server._cli import build_config
from agent_server.client import JsonObject

if TYPE_CHECKING:
    from conftest import ServerFactory

MODEL = "openai-compatible:local-model"


def chunk(delta: dict[str, object], finish: str | None = None) -> str:
    return json.dumps({"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def tool_call_stream() -> bytes:
    call = {"index": 0, "id": "call_7", "type": "function", "function": {"name": "echo", "arguments": ""}}
    return sse(
        chunk({"role": "assistant", "tool_calls": [call]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"text": "hé'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'llo"}'}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )


def answer_stream() -> bytes:
    return sse(chunk({"content": "The echo "}), chunk({"content": "answered."}), chunk({}, "stop"), "[DONE]")


def events_of(notes: list[JsonObject], kind: str) -> list[Any]:
    return [note["params"]["event"]["data"] for note in notes if note["params"]["event"]["type"] == kind]


async def test_a_session_on_an_openai_compatible_server_calls_a_tool_and_answers(
    running: ServerFactory, tmp_path: Path
) -> None:
    async with fake_provider() as provider:
        provider.script(Reply(chunks=[tool_call_stream()]), Reply(chunks=[answer_stream()]))
        flags = ["--model", MODEL, "--base-url", provider.url + "/v1"]
        arguments = parser().parse_args(["serve", "--no-db", "--workspace-root", str(tmp_path), *flags])
        config = build_config(arguments, {})
        async with (
            running(models=config.model.models, tools=catalogue_provider(["echo"])) as handle,
            handle.connect() as client,
        ):
            hello = await client.initialize()
            assert hello["models"] == [MODEL]
            session = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            result, notes = await client.prompt(session, "say hello through echo")
        assert result["status"] == "completed"
        assert result["finalText"] == "The echo answered."
        (call,) = events_of(notes, "tool.call")
        assert (call["tool"], call["input"]) == ("echo", {"text": "héllo"})
        (output,) = events_of(notes, "tool.result")
        assert output["ok"] is True
        first, second = provider.requests
    assert first.path == second.path == "/v1/chat/completions"
    assert first.header("authorization") is None  # a local server needs no key, and none was set
    body: Any = second.json()
    assert body["model"] == "local-model"
    replayed = [message for message in body["messages"] if message["role"] == "tool"]
    assert [message["tool_call_id"] for message in replayed] == ["call_7"]
    assert json.loads(replayed[0]["content"])["received"] == {"text": "héllo"}


def test_provider_flags_are_checked_at_start_up(tmp_path: Path) -> None:
    def config(*flags: str, environ: dict[str, str] | None = None) -> object:
        arguments = parser().parse_args(["serve", "--no-db", "--workspace-root", str(tmp_path), *flags])
        return build_config(arguments, environ or {})

    local = ["--model", MODEL, "--base-url", "http://127.0.0.1:9/v1"]
    config(*local, "--model-timeouts", "1,2.5,30")
    for timeouts, message in (("1,2", "three numbers"), ("1,x,3", "three numbers"), ("0,1,1", "connect_s")):
        with pytest.raises(ValueError, match=message):
            config(*local, "--model-timeouts", timeouts)
    with pytest.raises(ValueError, match="need a provider model"):
        config("--model-timeouts", "1,2,3")
    with pytest.raises(ValueError, match="OPENAI_API_KEY") as refused:
        config("--model", "openai:gpt-4.1")
    with pytest.raises(ValueError, match="MY_KEY"):
        config(
            "--model", "openai:gpt-4.1", "--api-key-env", "MY_KEY", environ={"OPENAI_API_KEY": "sk-abcdefgh"}
        )
    assert "sk-" not in str(refused.value)
    with pytest.raises(ValueError, match="loopback"):
        config("--model", MODEL, "--base-url", "http://203.0.113.9/v1")
    config("--model", MODEL, "--base-url", "http://203.0.113.9/v1", "--allow-insecure-http")
    with pytest.raises(ValueError, match="does not go with a provider"):
        config(*local, "--scenario", str(tmp_path / "script.yaml"))
