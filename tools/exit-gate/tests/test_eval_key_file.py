"""``harness-eval --api-key-file``: the provider key from a private file, not the environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from fake_provider import Reply, fake_provider, sse

from harness_exit_gate._eval_cli import main as eval_main

REPOSITORY = Path(__file__).resolve().parents[3]
KEY = "sk-eval-from-a-file-0123456789"


def answer(text: str) -> bytes:
    def chunk(delta: dict[str, object], finish: str | None = None) -> str:
        return json.dumps({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    return sse(chunk({"content": text}), chunk({}, "stop"), "[DONE]")


def key_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "provider.key"
    path.write_text(KEY + "\n")
    path.chmod(mode)
    return path


async def test_the_key_file_is_sent_as_the_bearer_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = key_file(tmp_path, 0o600)
    async with fake_provider() as provider:
        provider.script(Reply(chunks=[answer("Every event serializes; nothing else to say.")]))
        arguments = ["--root", str(REPOSITORY), "kernel-0001-golden", "--model", "openai:gpt-test"]
        arguments += ["--base-url", provider.url + "/v1", "--api-key-file", str(path)]
        code = await trio.to_thread.run_sync(eval_main, arguments)
        (request,) = provider.requests
    assert code == 0, capsys.readouterr()
    assert request.header("authorization") == f"Bearer {KEY}"


def test_a_key_file_open_to_others_is_a_usage_error_naming_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = key_file(tmp_path, 0o644)
    arguments = ["--root", str(REPOSITORY), "--model", "openai:gpt-test", "--api-key-file", str(path)]
    assert eval_main(arguments) == 2
    errors = capsys.readouterr().err
    assert f"the API key file '{path}' is open to group or others" in errors
    assert KEY not in errors
    assert eval_main(["--root", str(REPOSITORY), "--api-key-file", str(path)]) == 2
    assert "need --model" in capsys.readouterr().err
