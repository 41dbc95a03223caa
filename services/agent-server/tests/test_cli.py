"""``agent-server serve | demo``: configuration validation, environment rules and signals (spec §9)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from agent_server import (
    LimitsConfig,
    ModelConfig,
    NetworkConfig,
    ServerConfig,
    ServerHandle,
    StorageConfig,
    WorkspaceConfig,
    serve,
)
from agent_server._cli import _parser, build_config, main  # pyright: ignore[reportPrivateUsage]
from agent_server.client import AcpClientError
from harness_kernel.runtime import ContextPolicy, InvalidRunInputError
from harness_kernel.runtime._context import check_context_policy as kernel_check


def test_remote_host_without_token_is_refused(tmp_path: Path) -> None:
    config = ServerConfig(
        network=NetworkConfig(host="0.0.0.0", port=0), workspace=WorkspaceConfig(workspace_root=str(tmp_path))
    )
    with pytest.raises(ValueError, match="requires an auth token"):
        config.check_serving()
    tokened = ServerConfig(
        network=NetworkConfig(host="0.0.0.0", port=0, auth_token="t" * 32),
        workspace=WorkspaceConfig(workspace_root=str(tmp_path)),
    )
    with pytest.raises(ValueError, match="requires allow_plaintext_remote"):
        tokened.check_serving()
    with pytest.raises(ValueError, match="positive"):
        ServerConfig(limits=LimitsConfig(permission_timeout_ms=0))
    with pytest.raises(ValueError, match="allow_plaintext_remote must be a bool"):
        ServerConfig(network=NetworkConfig(allow_plaintext_remote="true"))  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize("value", ["docker", "", "LOCAL", True, ("local",)])
def test_config_refuses_an_unknown_workspace_adapter(value: object) -> None:
    with pytest.raises(ValueError, match='workspace_adapter must be "local" or "sandbox" or None'):
        ServerConfig(workspace=WorkspaceConfig(workspace_adapter=value))  # pyright: ignore[reportArgumentType]
    assert ServerConfig().workspace.workspace_adapter is None
    assert (
        ServerConfig(workspace=WorkspaceConfig(workspace_adapter="local")).workspace.workspace_adapter
        == "local"
    )


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {"HARNESS_DATABASE_URL": "mysql://user:hunter2@db/x"},
            "HARNESS_DATABASE_URL: database_url must start with postgresql:// or postgres://",
        ),
        ({"HARNESS_SANDBOX_IMAGE": "x"}, "HARNESS_SANDBOX_* and HARNESS_DOCKER_* variables are not read"),
        ({"HARNESS_DOCKER_HOST": "x"}, "HARNESS_SANDBOX_* and HARNESS_DOCKER_* variables are not read"),
        ({"HARNESS_MODEL_ID": "gpt"}, "HARNESS_MODEL_ID is not read; set HARNESS_MODEL"),
        ({"HARNESS_MODEL_BASE_URL": "http://x"}, "need a provider model"),
        ({"HARNESS_MODEL": "gpt-4"}, "unknown model 'gpt-4'"),
        ({"HARNESS_MODEL": "openai:gpt-4.1"}, "OPENAI_API_KEY"),
        ({"HARNESS_MODEL": "anthropic:claude"}, "ANTHROPIC_API_KEY"),
        ({"HARNESS_MODEL": "   "}, "HARNESS_MODEL must be non-empty when set"),
        ({"HARNESS_AGENT_TOKEN": "   "}, "HARNESS_AGENT_TOKEN must be non-empty when set"),
        ({"HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE": "1"}, 'must be exactly "true" or "false"'),
        ({"HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE": "TRUE"}, 'must be exactly "true" or "false"'),
        ({"HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE": " true"}, 'must be exactly "true" or "false"'),
        ({"HARNESS_AGENT_READINESS_PATH": " "}, "HARNESS_AGENT_READINESS_PATH must be non-empty"),
        ({"HARNESS_AGENT_PORT": "70000"}, "HARNESS_AGENT_PORT must be an integer"),
        ({"HARNESS_AGENT_WORKSPACE_ADAPTER": ""}, 'HARNESS_AGENT_WORKSPACE_ADAPTER must be exactly "local"'),
        (
            {"HARNESS_AGENT_WORKSPACE_ADAPTER": "LOCAL"},
            'HARNESS_AGENT_WORKSPACE_ADAPTER must be exactly "local"',
        ),
        (
            {"HARNESS_AGENT_WORKSPACE_ADAPTER": " local"},
            'HARNESS_AGENT_WORKSPACE_ADAPTER must be exactly "local"',
        ),
        (
            {"HARNESS_AGENT_WORKSPACE_ADAPTER": "docker"},
            'HARNESS_AGENT_WORKSPACE_ADAPTER must be exactly "local"',
        ),
    ],
)
def test_serve_refuses_invalid_environment_with_exit_2(
    variables: dict[str, str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "--port", "0", "--no-db", "--workspace-root", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


_WINDOW_100 = ("--context-window-tokens", "100")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--port", "70000"], "port must be an integer"),
        (["--max-message-bytes", "0"], "must be a positive integer"),
        (["--tools", "rm_rf"], "unknown tool"),
        (["--tools", "echo,echo"], "named twice"),
        (["--host", "0.0.0.0"], "requires an auth token"),
        (["--workspace-root", "/nonexistent/root"], "must be an existing directory"),
        (["--scenario", "/nonexistent/scenario.yaml"], "cannot read scenario"),
        (["--db", "x.sqlite", "--no-db"], "not allowed with argument"),
        (["--bogus"], "unrecognized arguments"),
        (["--workspace-adapter", "docker"], "argument --workspace-adapter: invalid choice: 'docker'"),
        (["--workspace-adapter", ""], "argument --workspace-adapter: invalid choice: ''"),
        (["--context-window-tokens", "1000"], "give --context-window-tokens and --context-threshold-tokens"),
        (["--context-threshold-tokens", "10"], "give --context-window-tokens and --context-threshold-tokens"),
        (["--context-tail-messages", "4"], "--context-tail-messages and --context-reserve-tokens need"),
        (["--context-reserve-tokens", "4"], "--context-tail-messages and --context-reserve-tokens need"),
        (["--context-window-tokens", "0"], "must be a positive integer"),
        (["--context-tail-messages", "-1"], "must be a non-negative integer"),
        (
            [*_WINDOW_100, "--context-threshold-tokens", "200"],
            "threshold_tokens (--context-threshold-tokens) must be an integer from 1 to 100",
        ),
        (
            [*_WINDOW_100, "--context-threshold-tokens", "50", "--context-reserve-tokens", "100"],
            "reserve_tokens (--context-reserve-tokens) must be an integer from 0 to 99",
        ),
        (
            [*_WINDOW_100, "--context-threshold-tokens", "50", "--context-tail-messages", "10001"],
            "tail_messages (--context-tail-messages) must be an integer from 0 to 10000",
        ),
        (["--resume-interrupted"], "resume_interrupted needs a persistent session store"),
    ],
)
def test_serve_refuses_invalid_flags_with_exit_2(
    arguments: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--workspace-root", str(tmp_path), *arguments]
    try:
        status = main(argv if "--db" in arguments else [*argv, "--no-db"])
    except SystemExit as parse_error:  # argparse exits by itself
        status = parse_error.code
    assert status == 2
    assert message in capsys.readouterr().err


def test_context_and_resume_flags_configure_every_turn_and_the_start_up(tmp_path: Path) -> None:
    flags = ["--context-window-tokens", "8000", "--context-threshold-tokens", "6000"]
    serve = ["serve", "--workspace-root", str(tmp_path)]
    arguments = _parser().parse_args([*serve, *flags, "--resume-interrupted"])
    config = build_config(arguments, {})
    assert config.model.context_policy == ContextPolicy(window_tokens=8000, threshold_tokens=6000)
    assert config.storage.resume_interrupted is True
    tuned = [*flags, "--context-tail-messages", "0", "--context-reserve-tokens", "1000"]
    arguments = _parser().parse_args([*serve, *tuned])
    config = build_config(arguments, {})
    assert config.model.context_policy == ContextPolicy(
        window_tokens=8000, threshold_tokens=6000, tail_messages=0, reserve_tokens=1000
    )
    assert config.storage.resume_interrupted is False
    plain = build_config(_parser().parse_args(serve), {})
    assert plain.model.context_policy is None
    # The editor adapter takes the model's window too; start-up resumption is serve's alone.
    acp = build_config(_parser().parse_args(["acp", "--workspace-root", str(tmp_path), *flags]), {})
    assert acp.model.context_policy == ContextPolicy(window_tokens=8000, threshold_tokens=6000)
    assert acp.storage.resume_interrupted is False


_SIZES = st.one_of(st.integers(min_value=-3, max_value=300), st.sampled_from([2**53 - 1, 2**53]))


@given(window=_SIZES, threshold=_SIZES, tail=_SIZES | st.just(10_001), reserve=_SIZES)
def test_the_server_accepts_exactly_the_context_policies_the_runtime_admits(
    window: int, threshold: int, tail: int, reserve: int
) -> None:
    """The server checks the policy once at start-up with the runtime's own rules (kernel.md §8.15)."""
    policy = ContextPolicy(
        window_tokens=window, threshold_tokens=threshold, tail_messages=tail, reserve_tokens=reserve
    )
    try:
        kernel_check(policy)
    except InvalidRunInputError:
        admitted = False
    else:
        admitted = True
    try:
        ServerConfig(model=ModelConfig(context_policy=policy))
    except ValueError:
        accepted = False
    else:
        accepted = True
    assert accepted == admitted


def test_the_context_policy_must_be_the_runtimes_type() -> None:
    with pytest.raises(ValueError, match=r"context_policy must be a harness_kernel\.runtime\.ContextPolicy"):
        ServerConfig(model=ModelConfig(context_policy={"window_tokens": 10}))  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="resume_interrupted must be a bool"):
        ServerConfig(storage=StorageConfig(resume_interrupted="yes"))  # pyright: ignore[reportArgumentType]


def test_remote_host_is_allowed_with_token_and_plaintext_opt_in(tmp_path: Path) -> None:
    arguments = _parser().parse_args(["serve", "--host", "0.0.0.0", "--workspace-root", str(tmp_path)])
    token = "0123456789abcdef" * 2
    environ = {"HARNESS_AGENT_TOKEN": f" {token} ", "HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE": "true"}
    config = build_config(arguments, environ)
    assert (config.network.auth_token, config.network.allow_plaintext_remote) == (token, True)
    assert config.network.port == 8765
    moved = build_config(arguments, {**environ, "HARNESS_AGENT_PORT": "9001"})
    assert moved.network.port == 9001


async def test_scenario_and_tools_flags_configure_the_model_and_catalogue(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    scenario = tmp_path / "turns.yaml"
    scenario.write_text("- content: scripted hello\n")
    argv = ["serve", "--port", "0", "--no-db", "--workspace-root", str(tmp_path), "--scenario", str(scenario)]
    config = build_config(_parser().parse_args(argv), {})
    refusing = build_config(_parser().parse_args([*argv, "--tools", "echo,read_file"]), {})
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, config)
        async with handle.connect() as client:
            await client.initialize()
            session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            result, _ = await client.prompt(session_id, "hi")
            assert result["finalText"] == "scripted hello"
        await handle.aclose()
        handle = await nursery.start(serve, refusing)
        async with handle.connect() as client:
            await client.initialize()
            with pytest.raises(AcpClientError, match='tool "read_file"'):
                await client.request("session/new", {"workspace": "ws"})
        await handle.aclose()


@pytest.mark.parametrize(
    "text",
    [
        '[{"content": "scripted hello"}]',
        "[{content: scripted hello}]",
        "- content: scripted hello\n",
    ],
)
def test_scenario_flag_accepts_a_json_flow_or_block_list_of_turns(text: str, tmp_path: Path) -> None:
    scenario = tmp_path / "turns.yaml"
    scenario.write_text(text)
    argv = ["serve", "--no-db", "--workspace-root", str(tmp_path), "--scenario", str(scenario)]
    config = build_config(_parser().parse_args(argv), {})
    model = config.model.models["fake-model/v1"]()
    assert type(model).__name__ == "FakeModel"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[{content: hi}, 3]", "script.1 expected a mapping, got int"),
        ("id: only-an-id\n", "script is required"),
    ],
)
def test_scenario_flag_refuses_what_is_not_a_script_naming_the_position(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "turns.yaml"
    scenario.write_text(text)
    argv = ["serve", "--no-db", "--workspace-root", str(tmp_path), "--scenario", str(scenario)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


async def test_workspace_adapter_flag_or_variable_admits_read_file(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "note.txt").write_text("from the CLI\n")
    scenario = tmp_path / "turns.yaml"
    scenario.write_text(
        "- toolCalls: [{id: call-1, name: read_file, arguments: {path: note.txt}}]\n- content: done\n"
    )
    argv = ["serve", "--port", "0", "--no-db", "--workspace-root", str(tmp_path), "--tools", "echo,read_file"]
    argv += ["--scenario", str(scenario)]
    assert build_config(_parser().parse_args(argv), {}).workspace.workspace_adapter is None
    from_variable = build_config(_parser().parse_args(argv), {"HARNESS_AGENT_WORKSPACE_ADAPTER": "local"})
    assert from_variable.workspace.workspace_adapter == "local"
    config = build_config(_parser().parse_args([*argv, "--workspace-adapter", "local"]), {})
    assert config.workspace.workspace_adapter == "local"
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, config)
        async with handle.connect() as client:
            await client.initialize()
            session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            result, notes = await client.prompt(session_id, "read")
            assert result["status"] == "completed"
            outputs = [
                n["params"]["event"]["data"] for n in notes if n["params"]["event"]["type"] == "tool.result"
            ]
            assert outputs[0]["output"]["content"] == "from the CLI\n"
        await handle.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_serve_exits_zero_on_sigint_and_sigterm(signal_number: int, tmp_path: Path) -> None:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("HARNESS_")}
    environ["XDG_STATE_HOME"] = str(tmp_path / "state")  # the default token file goes there
    with subprocess.Popen(
        [sys.executable, "-m", "agent_server", "serve", "--port", "0", "--no-db"],
        cwd=tmp_path,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("agent-server: ws://127.0.0.1:"), line
        process.send_signal(signal_number)
        _, errors = process.communicate(timeout=20)
    assert process.returncode == 0, errors


@pytest.mark.slow
def test_demo_command_exits_zero_shows_the_refusal_and_the_local_workspace_run() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent_server", "demo"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "agent.stopped" in result.stdout
    assert 'refused: -32602 ACP_INVALID_PARAMS: tool "read_file"' in result.stdout
    # The second server opts into LocalWorkspace: a real file is read, an escape is refused.
    assert "content of notes/hello.txt: 'Hello from a real file in a temporary folder.\\n'" in result.stdout
    assert "read_file ok=False error=TOOL_BAD_INPUT" in result.stdout
    assert "../outside.txt refused before policy: TOOL_BAD_INPUT" in result.stdout
    assert "not for the model" not in result.stdout
    # Two turns of the first session (a follow-up, issue #23), one of the local workspace's.
    assert result.stdout.count("status=completed") == 3
    assert "A follow-up turn of the same session" in result.stdout
