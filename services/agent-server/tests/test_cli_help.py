"""``agent-server --help`` reads well, and a misspelled option or command names the right one (issue #20)."""

from __future__ import annotations

import argparse
import inspect
import re
import shlex
from pathlib import Path

import pytest

from agent_server import _environment
from agent_server._cli import _parser, main  # pyright: ignore[reportPrivateUsage]

COMMANDS = ("serve", "chat", "acp", "demo", "token")
SERVE_GROUPS = ("network", "storage", "model", "tools and workspace", "limits")
# Each variable the server reads, and the option it stands in for.
ENVIRONMENT_OF_OPTION = {
    "--port": "HARNESS_AGENT_PORT",
    "--token-env": "HARNESS_AGENT_TOKEN",
    "--allow-plaintext-remote": "HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE",
    "--readiness-path": "HARNESS_AGENT_READINESS_PATH",
    "--workspace-adapter": "HARNESS_AGENT_WORKSPACE_ADAPTER",
    "--outbound-stall-ms": "HARNESS_AGENT_OUTBOUND_STALL_MS",
    "--model": "HARNESS_MODEL",
    "--base-url": "HARNESS_MODEL_BASE_URL",
    "--api-key-env": "OPENAI_API_KEY",
    "--api-key-file": "HARNESS_MODEL_API_KEY_FILE",
    "--database-url": "HARNESS_DATABASE_URL",
}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):  # pyright: ignore[reportPrivateUsage]
            choices: dict[str, argparse.ArgumentParser] = action.choices  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            return choices
    return {}


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def _flat(text: str) -> str:
    # The formatter wraps at the terminal's width; the words are what matters.
    return " ".join(text.split())


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if action.option_strings]


def test_every_argument_of_every_command_explains_itself() -> None:
    top = _parser()
    parsers = {"agent-server": top, **_subparsers(top)}
    assert set(parsers) == {"agent-server", *COMMANDS}
    for name, parser in parsers.items():
        for action in parser._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
            assert "\n" not in action.help, f"{name} {action.option_strings}: one line"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_default_is_shown_in_the_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _flat(_help([command], capsys))
    parser = _subparsers(_parser())[command]
    for action in _options(parser):
        default: object = action.default
        if default in (None, False, []) or default is argparse.SUPPRESS:
            continue
        assert f"(default: {default})" in text, action.option_strings


def test_serve_options_without_a_static_default_still_say_what_happens() -> None:
    serve = _subparsers(_parser())["serve"]
    for action in _options(serve):
        if action.default is None:
            help_text = action.help or ""
            assert "default" in help_text or "required" in help_text, action.option_strings
    assert "(default: 8765;" in (next(a for a in _options(serve) if "--port" in a.option_strings).help or "")


def test_each_environment_variable_is_named_beside_its_option() -> None:
    serve = _subparsers(_parser())["serve"]
    # A default is shown as "(default: VALUE)", so a variable that is the default is named too.
    helps = {
        option: f"{action.help} (default: {action.default})"
        for action in _options(serve)
        for option in action.option_strings
    }
    for option, variable in ENVIRONMENT_OF_OPTION.items():
        assert variable in helps[option], option
    # Every HARNESS_* variable the server reads (except the refused ones) is in some option's help.
    source = inspect.getsource(_environment)
    read = set(re.findall(r'"(HARNESS_[A-Z_]*[A-Z])"', source)) - {"HARNESS_MODEL_ID"}
    named = " ".join(helps.values())
    assert read
    assert {variable for variable in read if variable not in named} == set()


def test_serve_options_are_grouped(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["serve"], capsys)
    positions = [text.index(f"\n{title}:\n") for title in SERVE_GROUPS]
    assert positions == sorted(positions)
    serve = _subparsers(_parser())["serve"]
    grouped = {
        group.title: [action.option_strings[0] for action in group._group_actions]
        for group in serve._action_groups
    }
    assert grouped["options"] == ["-h"]  # nothing left ungrouped
    assert "--db" in grouped["storage"]
    assert "--no-db" in grouped["storage"]
    assert "--model" in grouped["model"]
    assert "--tools" in grouped["tools and workspace"]
    assert "--max-sessions" in grouped["limits"]
    assert "--port" in grouped["network"]


@pytest.mark.parametrize(("argv", "count"), [([], 3), (["serve"], 3)])
def test_help_ends_with_examples_that_parse(
    argv: list[str], count: int, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help(argv, capsys)
    examples = text[text.index("\nexamples:\n") :]
    joined = examples.replace("\\\n", " ")  # shell line continuations
    commands = re.findall(r"^  (agent-server .*)$", joined, flags=re.MULTILINE)
    assert len(commands) == count
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "agent-server"
        _parser().parse_args(words[1:])  # exits 2 if an example is wrong


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["serve", "--workspce-root", "x"],
            "unrecognized arguments: --workspce-root x; did you mean --workspace-root?",
        ),
        (["serve", "--tols", "echo"], "did you mean --tools?"),
        (["serve", "--tols=echo"], "did you mean --tools?"),
        (
            ["serv"],
            "invalid choice: 'serv' (choose from 'serve', 'chat', 'acp', 'demo', 'token');"
            " did you mean 'serve'?",
        ),
        (["serve", "--workspace-adapter", "locl"], "did you mean 'local'?"),
    ],
)
def test_a_misspelling_names_the_closest_option_and_exits_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    errors = capsys.readouterr().err
    assert "agent-server: error: " in errors
    assert message in errors


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--frobnicate"],  # close to nothing
        ["demo", "--tols"],  # close to a serve option, but demo has none
        ["zzz"],
    ],
)
def test_no_suggestion_when_nothing_is_close(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    errors = capsys.readouterr().err
    assert "agent-server: error:" in errors
    assert "did you mean" not in errors


def test_the_three_copies_of_the_help_module_are_identical() -> None:
    # agent-server, harness-exit-gate and harness-import-boundary each ship a copy
    # (docs/decisions/045-readable-command-lines.md); in the repository they must not drift.
    root = Path(__file__).resolve().parents[3]
    copies = [
        root / "services/agent-server/src/agent_server/_cli_help.py",
        root / "tools/exit-gate/src/harness_exit_gate/_cli_help.py",
        root / "tools/import-boundary/src/harness_import_boundary/_cli_help.py",
    ]
    if not all(copy.is_file() for copy in copies):
        pytest.skip("not in the repository: the other distributions' sources are absent")
    texts = {copy.read_text(encoding="utf-8") for copy in copies}
    assert len(texts) == 1
