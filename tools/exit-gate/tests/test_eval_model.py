"""``harness-eval --model``: a scenario's task on a provider model (a loopback fake provider)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest
import trio
from fake_provider import Reply, fake_provider, sse

from harness_exit_gate._eval_cli import main as eval_main

REPOSITORY = Path(__file__).resolve().parents[3]


def answer(text: str) -> bytes:
    def chunk(delta: dict[str, object], finish: str | None = None) -> str:
        return json.dumps({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    return sse(chunk({"content": text}), chunk({}, "stop"), "[DONE]")


async def test_the_task_runs_on_the_model_and_only_its_status_is_checked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with fake_provider() as provider:
        provider.script(Reply(chunks=[answer("Every event serializes; nothing else to say.")]))
        arguments = [
            "--root",
            str(REPOSITORY),
            "kernel-0001-golden",
            "--model",
            "openai-compatible:local",
            "--base-url",
            provider.url + "/v1",
        ]
        code = await trio.to_thread.run_sync(eval_main, arguments)
        (request,) = provider.requests
    assert code == 0, capsys.readouterr()
    assert "PASS kernel-0001-golden" in capsys.readouterr().out
    body = request.json()
    assert isinstance(body, dict)
    assert body["model"] == "local"


async def test_a_conversation_scenario_steers_and_follows_up_on_the_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with fake_provider() as provider:
        provider.script(
            Reply(chunks=[answer("Probing alpha.")]),
            Reply(chunks=[answer("Taking beta instead.")]),
            Reply(chunks=[answer("The first answer was about alpha.")]),
        )
        arguments = [
            "--root",
            str(REPOSITORY),
            "conversation-0001-steering-golden",
            "--model",
            "openai-compatible:local",
            "--base-url",
            provider.url + "/v1",
        ]
        code = await trio.to_thread.run_sync(eval_main, arguments)
        requests = provider.requests
    assert code == 0, capsys.readouterr()
    assert "PASS conversation-0001-steering-golden" in capsys.readouterr().out
    # The steer stored during the first request came with the second; the follow-up's
    # request holds the whole first turn, then its question.
    contents: list[list[object]] = []
    for request in requests:
        body = request.json()
        assert isinstance(body, dict)
        messages = cast("list[dict[str, object]]", body["messages"])
        contents.append([message["content"] for message in messages])
    assert [len(messages) for messages in contents] == [1, 3, 5]
    assert contents[1][1:] == ["Probing alpha.", "Use the value beta, not alpha."]
    assert contents[2][3:] == ["Taking beta instead.", "What did the first probe answer?"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--model", "gpt-4"], "unknown model"),
        (["--model", "anthropic:claude"], "ANTHROPIC_API_KEY"),
        (["--base-url", "http://127.0.0.1:1/v1"], "need --model"),
        (["--model", "openai-compatible:m", "--base-url", "http://10.1.2.3/v1"], "loopback"),
    ],
)
def test_a_bad_model_choice_is_a_usage_error(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert eval_main(["--root", str(REPOSITORY), *arguments]) == 2
    assert message in capsys.readouterr().err
