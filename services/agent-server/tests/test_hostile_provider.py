"""agent-server against a hostile provider on loopback: an endless answer, an echoed key, and a
key that never has to be in the server's environment.

- A provider that streams without end fails the turn with ``MODEL_STREAM_TOO_LARGE`` once the
  response passes its limit; the server serves the next session as before.
- A provider that echoes the key, split over many deltas, reaches neither the client's
  ``session/event``\\ s, nor the prompt's answer, nor the store: what the client received and
  what was stored are the same events.
- ``serve --api-key-file`` sends the key in the ``Authorization`` header while the process's
  environment (``/proc/<pid>/environ``, which a command it runs could read) holds none.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
from fake_provider import Reply, fake_provider, sse

from agent_server._cli import _parser as parser  # pyright: ignore[reportPrivateUsage]
from agent_server._cli import build_config
from agent_server.client import JsonObject, connect
from harness_kernel.events import REDACTED, serialize_event
from harness_kernel.store import MemorySessionStore
from harness_models import MODEL_STREAM_TOO_LARGE, ModelSpec, StreamLimits, model_factory

if TYPE_CHECKING:
    from conftest import ServerFactory

MODEL = "openai-compatible:local-model"
KEY = "sk-proj-hostileEcho0123456789abcdef"
TOKEN = "server-token-0123456789abcdef-0123456789abcdef"


def chunk(delta: dict[str, object], finish: str | None = None) -> str:
    return json.dumps({"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def answer(*pieces: str) -> bytes:
    return sse(*(chunk({"content": piece}) for piece in pieces), chunk({}, "stop"), "[DONE]")


def events_of(notes: list[JsonObject], kind: str) -> list[Any]:
    return [note["params"]["event"]["data"] for note in notes if note["params"]["event"]["type"] == kind]


def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "provider.key"
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    return path


async def test_an_endless_answer_fails_the_turn_as_too_large_and_the_server_serves_on(
    running: ServerFactory,
) -> None:
    limits = StreamLimits(max_text_bytes=256 * 1024)
    async with fake_provider() as provider:
        provider.script(
            Reply(chunks=[sse(chunk({"role": "assistant"}))], forever=sse(chunk({"content": "ä" * 2000}))),
            Reply(chunks=[answer("Still ", "here.")]),
        )
        spec = ModelSpec(
            provider="openai-compatible",
            model="local-model",
            base_url=provider.url + "/v1",
            stream_limits=limits,
        )
        async with running(models={MODEL: model_factory(spec, {})}) as handle, handle.connect() as client:
            await client.initialize()
            endless = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            result, notes = await client.prompt(endless, "talk forever")
            assert result["status"] == "failed"
            (completed,) = events_of(notes, "turn.completed")
            assert (completed["status"], completed["note"]) == (
                "failed",
                f"model stream failed: {MODEL_STREAM_TOO_LARGE}",
            )
            streamed = "".join(delta["delta"] for delta in events_of(notes, "message.delta"))
            assert len(streamed.encode()) <= limits.max_text_bytes
            # The server is as healthy as before: the next session is answered in full.
            after = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            result, _ = await client.prompt(after, "are you there?")
            assert (result["status"], result["finalText"]) == ("completed", "Still here.")


async def test_a_key_the_provider_echoes_reaches_neither_client_nor_store_and_both_see_the_same_events(
    running: ServerFactory, tmp_path: Path
) -> None:
    said = f"Here is the key you sent me: {KEY} - keep it safe."
    pieces = [said[index : index + 3] for index in range(0, len(said), 3)]  # as tokens arrive
    async with fake_provider() as provider, MemorySessionStore() as store:
        provider.script(Reply(chunks=[answer(*pieces)]))
        spec = ModelSpec(
            provider="openai-compatible",
            model="local-model",
            base_url=provider.url + "/v1",
            api_key_env="LOCAL_MODEL_KEY",
        )
        models = {MODEL: model_factory(spec, {"LOCAL_MODEL_KEY": KEY})}
        async with (
            running(models=models, db_path=None, session_store=store) as handle,
            handle.connect() as client,
        ):
            await client.initialize()
            session = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            result, notes = await client.prompt(session, "repeat my key")
        stored = (await store.read(session, limit=1000)).events
    assert provider.requests[0].header("authorization") == f"Bearer {KEY}"
    expected = said.replace(KEY, REDACTED)
    assert "".join(delta["delta"] for delta in events_of(notes, "message.delta")) == expected
    assert result["finalText"] == expected
    received = [(note["params"]["seq"], note["params"]["event"]) for note in notes]
    assert received == [(item.seq, json.loads(serialize_event(item.event))) for item in stored]
    assert KEY not in json.dumps(notes)
    assert KEY not in json.dumps(result)
    assert all(KEY not in serialize_event(item.event).decode() for item in stored)


async def test_the_prompts_answer_is_redacted_as_its_stored_message(running: ServerFactory) -> None:
    async with fake_provider() as provider:
        provider.script(Reply(chunks=[answer("Log in with password=hunter2-secret now.")]))
        spec = ModelSpec(provider="openai-compatible", model="local-model", base_url=provider.url + "/v1")
        async with running(models={MODEL: model_factory(spec, {})}) as handle, handle.connect() as client:
            await client.initialize()
            session = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            result, notes = await client.prompt(session, "how do I log in?")
    (message,) = [data for data in events_of(notes, "message.completed") if data["role"] == "assistant"]
    assert message["content"] == f"Log in with password={REDACTED} now."
    assert result["finalText"] == message["content"]


async def test_serve_with_a_key_file_sends_the_key_and_keeps_it_out_of_its_environment(
    tmp_path: Path,
) -> None:
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("HARNESS_") and not name.endswith("_API_KEY")
    }
    environ |= {"HARNESS_AGENT_TOKEN": TOKEN, "XDG_STATE_HOME": str(tmp_path / "state")}
    (tmp_path / "ws").mkdir()
    async with fake_provider() as provider:
        provider.script(Reply(chunks=[answer("Hello ", "there.")]))
        command = [sys.executable, "-m", "agent_server", "serve", "--port", "0", "--no-db"]
        command += ["--workspace-root", str(tmp_path), "--model", "openai:gpt-test"]
        command += ["--base-url", provider.url + "/v1", "--api-key-file", str(key_file(tmp_path))]
        process = await trio.lowlevel.open_process(command, env=environ, stdout=-1, stderr=-1)
        try:
            assert process.stdout is not None
            first = b""
            with trio.fail_after(60):
                while not first.endswith(b"\n"):
                    byte = await process.stdout.receive_some(1)
                    assert byte, "the server exited before it listened"
                    first += byte
            url = first.decode().split()[1]
            assert url.startswith("ws://127.0.0.1:"), first
            process_environment = await trio.Path(f"/proc/{process.pid}/environ").read_bytes()
            assert KEY.encode() not in process_environment
            assert KEY.encode() not in (await trio.Path(f"/proc/{process.pid}/cmdline").read_bytes())
            async with connect(url, token=TOKEN) as client:
                await client.initialize()
                session = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
                result, _ = await client.prompt(session, "hello")
        finally:
            process.terminate()
            with trio.move_on_after(20):
                await process.wait()
    assert (result["status"], result["finalText"]) == ("completed", "Hello there.")
    (sent,) = provider.requests
    assert sent.header("authorization") == f"Bearer {KEY}"


def test_a_bad_key_file_stops_start_up_naming_the_path_never_the_content(tmp_path: Path) -> None:
    def config(*flags: str, environ: dict[str, str] | None = None) -> object:
        local = ["--model", "openai:gpt-test", "--base-url", "http://127.0.0.1:9/v1"]
        arguments = parser().parse_args(
            ["serve", "--no-db", "--workspace-root", str(tmp_path), *local, *flags]
        )
        return build_config(arguments, environ or {})

    path = key_file(tmp_path)
    config("--api-key-file", str(path))
    config(environ={"HARNESS_MODEL_API_KEY_FILE": str(path)})  # the variable names the file
    path.chmod(0o644)
    for flags, environ, message in (
        (["--api-key-file", str(path)], {}, "is open to group or others (mode 0644)"),
        ([], {"HARNESS_MODEL_API_KEY_FILE": str(path)}, "is open to group or others"),
        (["--api-key-file", str(tmp_path / "missing")], {}, "cannot be opened"),
        (["--api-key-file", str(path), "--api-key-env", "OPENAI_API_KEY"], {}, "one way"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)) as refused:
            config(*flags, environ=environ)
        assert KEY not in str(refused.value)
    path.chmod(0o600)
    path.write_text("")
    with pytest.raises(ValueError, match=re.escape(f"the API key file '{path}' is empty")):
        config("--api-key-file", str(path))
    arguments = parser().parse_args(["serve", "--no-db", "--api-key-file", str(path)])
    with pytest.raises(ValueError, match="need a provider model"):
        build_config(arguments, {})
