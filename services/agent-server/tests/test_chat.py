"""``agent-server chat`` (issue #20 part 2): used as a person and as a script would use it.

The terminal test drives the real command in a real pseudo-terminal (pexpect) against a
loopback fake provider, so the second turn can hang in the model until Ctrl-C cancels it.
The scripted paths pipe stdin into the real command (``--scenario``), against its embedded
server and against a separately started one (``--url``).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pexpect
import pytest
import trio
from fake_provider import Reply, fake_provider, sse
from hypothesis import given
from hypothesis import strategies as st

from agent_server._catalogue import catalogue_provider
from agent_server._chat import PermissionRules
from agent_server._chat_view import Style, Transcript, result_summary, terminal_safe
from agent_server._cli import _parser, main  # pyright: ignore[reportPrivateUsage]
from agent_server._config import DEFAULT_MODEL_NAME
from agent_server._scenario import ScenarioModelFactory
from harness_kernel.models import ScriptedTurn, ToolCall

if TYPE_CHECKING:
    from conftest import ServerFactory

README = "# Demo project\nsecond line\n"
SCRIPT = """\
- toolCalls:
    - id: call-1
      name: fs.read
      arguments: {path: README.md}
- content: "The README says: Demo project."
"""
SGR = re.compile(r"\x1b\[[0-9;]*m")
ASK = "allow? [y/N/a(lways for this run)]"
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def git_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "README.md").write_text(README, encoding="utf-8")
    return path


def child_environment(**extra: str) -> dict[str, str]:
    """This environment without the variables that configure a server, a model or colours."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("HARNESS_", "OPENAI_", "ANTHROPIC_")) and name != "NO_COLOR"
    }
    return kept | {"TERM": "xterm"} | extra


def run_chat(
    cwd: Path, stdin: str, *flags: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_server", "chat", *flags],
        input=stdin,
        cwd=cwd,
        env=env or child_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# ---------------------------------------------------------------- text that reaches the terminal


@given(st.text())
def test_terminal_safe_text_holds_no_control_character(text: str) -> None:
    assert UNSAFE.search(terminal_safe(text)) is None
    assert "\n" not in terminal_safe(text)
    assert UNSAFE.search(terminal_safe(text, multiline=True)) is None


@given(st.text(st.characters(blacklist_categories=("Cc", "Cf"))))
def test_terminal_safe_leaves_printable_text_alone(text: str) -> None:
    assert terminal_safe(text) == text
    assert terminal_safe(text + "\n\tnext", multiline=True) == text + "\n\tnext"


def test_escape_sequences_from_the_server_are_shown_not_obeyed() -> None:
    out = io.StringIO()
    view = Transcript(out, Style(colour=False))
    hostile = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\u202eevil"
    call = {"callId": "c1", "tool": "fs.read", "input": {"path": hostile}}
    view.event({"type": "tool.call", "data": call})
    view.event({"type": "message.delta", "data": {"messageId": "m", "delta": hostile}})
    content = {"path": "x", "content": hostile}
    view.event(
        {"type": "tool.result", "data": {"callId": "c1", "tool": "fs.read", "ok": True, "output": content}}
    )
    written = out.getvalue()
    assert "\x1b" not in written
    assert "\x07" not in written
    assert "\u202e" not in written
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x1b[2J\\u202eevil" in written


def test_result_summaries_say_ok_or_failed_with_a_size_or_first_line() -> None:
    read = {"ok": True, "output": {"path": "a", "content": "\n  first\nsecond\n", "size": 15}}
    assert result_summary(read) == "ok, 16 bytes: first"
    listed = {"ok": True, "output": {"path": ".", "entries": ["a", "b"], "truncated": False}}
    assert result_summary(listed) == "ok, 2 entries"
    ran = {"ok": True, "output": {"exitCode": 3, "stdout": "", "stderr": "boom\nmore"}}
    assert result_summary(ran) == "ok, exit 3: boom"
    echoed = {"ok": True, "output": {"received": {"m": 1}}}
    assert result_summary(echoed) == "ok, 20 bytes of output"
    failed = {"ok": False, "error": {"code": "FS_NOT_FOUND", "message": "no such file\ndetails"}}
    assert result_summary(failed) == "failed: FS_NOT_FOUND: no such file"


def test_permission_rules_allow_only_their_own_actions() -> None:
    rules = PermissionRules(frozenset({"read"}))
    assert rules.rule_for("fs.read") == "--yes-to read"
    assert rules.rule_for("git.diff") == "--yes-to read"
    assert rules.rule_for("fs.write") is None
    assert rules.rule_for("process.exec") is None
    assert rules.rule_for("tool.call") is None
    rules.always.add("process.exec")
    assert rules.rule_for("process.exec") == "always process.exec"
    assert rules.rule_for("fs.write") is None
    assert PermissionRules(frozenset({"all"})).rule_for("anything") == "--yes-to all"
    assert PermissionRules(frozenset({"execute"})).rule_for("process.exec") == "--yes-to execute"


# ---------------------------------------------------------------- flags


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--host", "0.0.0.0"], "--host configure a listening server"),
        (["--port", "9000"], "--port configure a listening server"),
        (["--workspace-root", "/"], "--workspace-root configure a listening server"),
        (["--token-file", "x"], "--token-file are for --url"),
        (["--url", "ws://127.0.0.1:9/acp", "--model", "fake"], "--model configure chat's embedded server"),
        (["--url", "ws://127.0.0.1:9/acp", "--db", "x.sqlite"], "--db configure chat's embedded server"),
        (["--url", "ws://127.0.0.1:9/acp", "--tools", "echo"], "--tools configure chat's embedded server"),
        (["--url", "wss://example.org/acp"], "must be ws://"),
        (["--url", "http://127.0.0.1:9/acp"], "must be ws://"),
        (["--workspace", "does-not-exist"], "is not a directory"),
        (["--tools", "fs.write", "--workspace-adapter", "local"], "need an isolated workspace"),
    ],
)
def test_flags_that_do_not_apply_are_refused_with_exit_2(
    flags: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["chat", *flags]) == 2
    assert message in capsys.readouterr().err


def test_chat_defaults_leave_serve_defaults_alone() -> None:
    # argparse parents share their actions: chat's defaults must not become serve's.
    parser = _parser()
    serve, chat = parser.parse_args(["serve"]), parser.parse_args(["chat"])
    assert (serve.tools, serve.workspace_adapter) == ("echo", None)
    assert (chat.tools, chat.workspace_adapter) == ("fs.read,fs.list,git.diff", "local")


def test_an_unknown_yes_to_class_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["chat", "--yes-to", "write"])
    assert exited.value.code == 2
    assert "invalid choice: 'write'" in capsys.readouterr().err


# ---------------------------------------------------------------- scripted: stdin is not a terminal


@pytest.mark.parametrize("from_elsewhere", [False, True])
def test_a_piped_prompt_runs_one_turn_with_plain_output(tmp_path: Path, from_elsewhere: bool) -> None:
    repo = git_repo(tmp_path / "repo")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCRIPT, encoding="utf-8")
    # The session workspace is the current directory, or --workspace DIR.
    cwd, where = (tmp_path, ["--workspace", "repo"]) if from_elsewhere else (repo, [])
    flags = ["--scenario", str(scenario), "--yes-to", "read", *where]
    done = run_chat(cwd, "what is in the readme?\n", *flags)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:5] == [
        "> what is in the readme?",
        "  > fs.read README.md",
        "  ? fs.read README.md",
        "    allow: allowed by chat's --yes-to read",
        "    ok, 27 bytes: # Demo project",
    ]
    assert lines[5] == "The README says: Demo project."
    assert re.fullmatch(r"\[completed; \d+ tokens; session sess-[0-9a-f-]+\]", lines[6])
    assert len(lines) == 7
    assert "\x1b" not in done.stdout + done.stderr
    assert done.stderr == ""


def test_the_prompts_of_one_chat_are_turns_of_one_conversation(tmp_path: Path) -> None:
    """Issue #23: one session for the chat; its one model plays the script on across the turns."""
    repo = git_repo(tmp_path / "repo")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("- content: first answer\n- content: second answer\n", encoding="utf-8")
    done = run_chat(repo, "one\ntwo\n", "--scenario", str(scenario))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [lines[0], lines[1], lines[3], lines[4]] == ["> one", "first answer", "> two", "second answer"]
    sessions = re.findall(r"session (sess-[0-9a-f-]+)\]", done.stdout)
    assert len(sessions) == 2
    assert sessions[0] == sessions[1]


async def test_a_chat_whose_session_ended_starts_a_new_one_and_says_so(running: ServerFactory) -> None:
    script = (ScriptedTurn(content="first answer"), ScriptedTurn(content="second answer"))
    options = {
        "models": {DEFAULT_MODEL_NAME: ScenarioModelFactory(script)},
        "created_session_timeout_ms": 1000,
    }
    async with (
        running.session_store() as store,
        running(db_path=None, session_store=store, **options) as handle,
    ):
        assert handle.token is not None
        command = [sys.executable, "-m", "agent_server", "chat", "--url", handle.url, "--workspace", "ws"]
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=child_environment(HARNESS_AGENT_TOKEN=handle.token),
        )
        assert process.stdin is not None
        assert process.stdout is not None
        output = b""
        await process.stdin.send_all(b"one\n")
        with trio.fail_after(30):
            while (first := re.search(rb"session (sess-[0-9a-f-]+)\]", output)) is None:
                output += await process.stdout.receive_some()
        # The chat waits at its prompt while the server's idle timeout ends the session.
        await running.wait_for_closed_row(store, first[1].decode())
        await process.stdin.send_all(b"two\n")
        await process.stdin.aclose()
        with trio.fail_after(30):
            while chunk := await process.stdout.receive_some():
                output += chunk
        assert await process.wait() == 0
    text = output.decode()
    assert "[the session had ended; a new one starts without the earlier turns]" in text
    # A new session, with a new model: its script starts again.
    assert text.count("first answer") == 2
    sessions = re.findall(r"session (sess-[0-9a-f-]+)\]", text)
    assert len(sessions) == 2
    assert sessions[0] != sessions[1]


def test_without_a_yes_to_rule_a_piped_chat_denies_and_says_so_on_stderr(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCRIPT, encoding="utf-8")
    done = run_chat(repo, "read it\n", "--scenario", str(scenario), "--yes-to", "edit")
    assert done.returncode == 0
    assert "agent-server chat: denied fs.read README.md: no --yes-to rule allows fs.read" in done.stderr
    assert "    failed: TOOL_PERMISSION_DENIED: denied by chat" in done.stdout
    assert "# Demo project" not in done.stdout


def test_resume_needs_a_store_and_says_how_to_get_one(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    done = run_chat(repo, "/resume sess-1\n/quit\nnever sent\n")
    assert "error: session persistence is disabled" in done.stdout
    assert "(a chat without --url keeps sessions only with --db PATH)" in done.stdout
    assert "never sent" not in done.stdout


async def test_chat_with_url_runs_turns_and_resumes_them_on_a_running_server(running: ServerFactory) -> None:
    script = (
        ScriptedTurn(tool_calls=[ToolCall("call-1", "fs.read", {"path": "README.md"})]),
        ScriptedTurn(content="Read."),
    )
    options = {
        "tools": catalogue_provider(["fs.read"]),
        "workspace_adapter": "local",
        "models": {DEFAULT_MODEL_NAME: ScenarioModelFactory(script)},
    }
    (running.workspace / "README.md").write_text(README, encoding="utf-8")
    async with running(**options) as handle:
        assert handle.token is not None
        command = [sys.executable, "-m", "agent_server", "chat", "--url", handle.url, "--workspace", "ws"]
        environment = child_environment(HARNESS_AGENT_TOKEN=handle.token)

        async def chat(stdin: str, *flags: str) -> subprocess.CompletedProcess[bytes]:
            return await trio.run_process(
                [*command, *flags],
                stdin=stdin.encode(),
                capture_stdout=True,
                capture_stderr=True,
                env=environment,
            )

        first = await chat("read the readme\n", "--yes-to", "read")
        output = first.stdout.decode()
        assert "    ok, 27 bytes: # Demo project" in output, first.stderr
        session = re.findall(r"session (sess-[0-9a-f-]+)\]", output)[0]
        second = await chat(f"/resume {session}\n")
        timeline = second.stdout.decode().splitlines()
        assert timeline[0] == f"> /resume {session}"
        assert timeline[1] == "> read the readme"
        assert "  > fs.read README.md" in timeline
        assert "    allowed (allowed by chat's --yes-to read)" in timeline
        assert "    ok, 27 bytes: # Demo project" in timeline
        assert "Read." in timeline
        assert timeline[-1] == f"[session {session}: completed; replay only]"
        refused = await trio.run_process(
            [*command, "--yes-to", "read"],
            stdin=b"hello\n",
            capture_stdout=True,
            capture_stderr=True,
            env=child_environment(HARNESS_AGENT_TOKEN="x" * 43),
            check=False,
        )
    assert refused.returncode == 1
    assert b"upgrade rejected with HTTP 403 (give --token-file" in refused.stderr


# ---------------------------------------------------------------- a person at a terminal


def _chunk(delta: dict[str, object], finish: str | None = None) -> str:
    return json.dumps({"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _echo_calls(*texts: str) -> bytes:
    """A streamed answer calling ``echo`` once per text (the provider sees the tool by its alias)."""
    starts: list[dict[str, object]] = []
    pieces: list[dict[str, object]] = []
    for index, text in enumerate(texts):
        function = {"name": "echo", "arguments": ""}
        starts.append({"index": index, "id": f"call_{index}", "type": "function", "function": function})
        pieces.append({"index": index, "function": {"arguments": json.dumps({"text": text})}})
    opened = _chunk({"role": "assistant", "tool_calls": starts})
    return sse(opened, _chunk({"tool_calls": pieces}), _chunk({}, "tool_calls"), "[DONE]")


def _provider_replies() -> list[Reply]:
    answer = [sse(_chunk({"content": "Echo "})), sse(_chunk({"content": "said hello."}), _chunk({}, "stop"))]
    return [
        Reply(chunks=[_echo_calls("hello")]),
        Reply(chunks=[*answer, sse("[DONE]")], pause_s=0.2),
        Reply(chunks=[_echo_calls("one", "two")]),
        Reply(chunks=[sse(_chunk({"content": "Twice."}), _chunk({}, "stop"), "[DONE]")]),
        # The third turn: some text, then the model hangs until the client gives up.
        Reply(chunks=[sse(_chunk({"content": "Thinking it over"}))], stall=True),
    ]


class Screen:
    """A pexpect child with typed waits (the pexpect stubs leave ``timeout`` untyped)."""

    def __init__(self, child: pexpect.spawn[str]) -> None:
        self.child = child

    def shows(self, text: str) -> None:
        self.child.expect_exact(text)  # pyright: ignore[reportUnknownMemberType]

    def matches(self, pattern: str) -> None:
        self.child.expect(pattern)  # pyright: ignore[reportUnknownMemberType]

    def ends(self) -> None:
        self.child.expect(pexpect.EOF)  # pyright: ignore[reportUnknownMemberType]


def _converse(child: pexpect.spawn[str]) -> None:
    """Allow once with ``y``, always with ``a``, cancel the third turn with Ctrl-C, ``/quit``."""
    screen = Screen(child)
    screen.shows("you> ")
    child.sendline("say hello through echo")
    screen.shows('> echo {"text":"hello"}')
    screen.shows("? tool.call echo")
    screen.shows(ASK)
    child.sendline("y")
    screen.shows("allow: allowed by the operator")
    screen.matches(r"ok, \d+ bytes of output")
    screen.shows("Echo said hello.")
    screen.matches(r"\[completed; \d+ tokens; session sess-")
    screen.shows("you> ")
    child.sendline("echo twice")
    screen.shows('> echo {"text":"one"}')
    screen.shows(ASK)
    child.sendline("a")
    screen.shows("allow: allowed by the operator, always tool.call for this chat run")
    screen.shows('> echo {"text":"two"}')
    screen.shows("allow: allowed by chat's always tool.call")  # not asked again
    screen.shows("Twice.")
    screen.shows("you> ")
    child.sendline("take your time")
    screen.shows("Thinking it over")  # streamed while the model's answer is still open
    child.sendintr()
    screen.shows("^C: canceling the turn (Ctrl-C again exits)")
    screen.shows("turn canceled; session sess-")
    screen.shows("you> ")
    child.sendline("/quit")
    screen.ends()


def _spawn_chat(repo: Path, *flags: str, environment: dict[str, str]) -> pexpect.spawn[str]:
    return pexpect.spawn(
        sys.executable,
        ["-m", "agent_server", "chat", *flags],
        cwd=str(repo),
        env=environment,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 160),
    )


@pytest.mark.parametrize("no_color", [False, True])
async def test_a_person_prompts_allows_a_call_and_cancels_a_turn_in_a_terminal(
    tmp_path: Path, no_color: bool
) -> None:
    repo = git_repo(tmp_path / "repo")
    extra = {"NO_COLOR": "1"} if no_color else {}
    transcript = io.StringIO()
    async with fake_provider() as provider:
        provider.script(*_provider_replies())
        # echo, not fs.read: harness_models' OpenAI encoder fails on the dev tools' schemas (a
        # FrozenList it cannot encode; reported), and echo asks permission just the same.
        flags = ["--model", "openai-compatible:local", "--base-url", provider.url + "/v1", "--tools", "echo"]
        child = _spawn_chat(repo, *flags, environment=child_environment(**extra))
        child.logfile_read = transcript
        try:
            await trio.to_thread.run_sync(_converse, child)
        finally:
            child.close()
        assert child.exitstatus == 0
        assert provider.unused_replies == 0
        with trio.fail_after(10):
            await provider.connections[-1].closed.wait()  # the cancel reached the model request
    # Colours on a terminal, none with NO_COLOR (the positive case shows the check can fail).
    assert (SGR.search(transcript.getvalue()) is None) == no_color


def test_ctrl_c_at_an_idle_prompt_exits_130(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    child = _spawn_chat(repo, environment=child_environment(NO_COLOR="1"))
    screen = Screen(child)
    try:
        screen.shows("you> ")
        child.sendintr()
        screen.shows("^C: exiting")
        screen.ends()
    finally:
        child.close()
    assert child.exitstatus == 130


def _cancel_at_the_question(child: pexpect.spawn[str]) -> None:
    screen = Screen(child)
    screen.shows("you> ")
    child.sendline("say hello through echo")
    screen.shows(ASK)
    child.sendintr()
    screen.shows("^C: canceling the turn (Ctrl-C again exits)")
    screen.shows("turn canceled; session sess-")
    screen.shows("you> ")
    # The interrupted question's read is still waiting: the next line goes to the prompt, not lost.
    child.sendline("/quit")
    screen.ends()


async def test_ctrl_c_at_a_permission_question_cancels_the_turn_and_keeps_the_next_line(
    tmp_path: Path,
) -> None:
    repo = git_repo(tmp_path / "repo")
    async with fake_provider() as provider:
        provider.script(Reply(chunks=[_echo_calls("hello")]))
        flags = ["--model", "openai-compatible:local", "--base-url", provider.url + "/v1", "--tools", "echo"]
        child = _spawn_chat(repo, *flags, environment=child_environment(NO_COLOR="1"))
        try:
            await trio.to_thread.run_sync(_cancel_at_the_question, child)
        finally:
            child.close()
    assert child.exitstatus == 0
