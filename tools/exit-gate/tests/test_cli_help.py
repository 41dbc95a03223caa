"""``harness-exit-gate`` and ``harness-eval``: readable help, did-you-mean on a misspelling (issue #20)."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable, Sequence

import pytest

from harness_exit_gate import _cli, _eval_cli

Main = Callable[[Sequence[str] | None], int]
PROGRAMS: dict[str, tuple[Main, Callable[[], argparse.ArgumentParser]]] = {
    "harness-exit-gate": (_cli.main, _cli._parser),  # pyright: ignore[reportPrivateUsage]
    "harness-eval": (_eval_cli.main, _eval_cli._parser),  # pyright: ignore[reportPrivateUsage]
}


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):  # pyright: ignore[reportPrivateUsage]
            children: dict[str, argparse.ArgumentParser] = action.choices  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            found.extend(children.values())
    return found


def _help(program: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    main, _ = PROGRAMS[program]
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_argument_explains_itself_and_shows_its_default(program: str) -> None:
    _, build = PROGRAMS[program]
    for parser in _parsers(build()):
        for action in parser._actions:
            assert action.help, f"{parser.prog} {action.option_strings or action.dest}"
            default: object = action.default
            if (
                action.option_strings
                and default not in (None, False, [])
                and action.help != argparse.SUPPRESS
            ):
                continue  # the formatter appends it: checked in the rendered help below
            if action.option_strings and default is None and action.help != argparse.SUPPRESS:
                assert "default" in action.help, f"{parser.prog} {action.option_strings}"


@pytest.mark.parametrize(
    ("program", "argv", "shown"),
    [
        ("harness-exit-gate", ["run"], ["(default: uv run --frozen pytest)", "(default: 300000)"]),
        ("harness-eval", [], ["(default: .)"]),
    ],
)
def test_static_defaults_are_rendered(
    program: str, argv: list[str], shown: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    text = " ".join(_help(program, argv, capsys).split())
    for fragment in shown:
        assert fragment in text


def test_environment_variables_are_named_beside_their_options(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_help("harness-exit-gate", ["run"], capsys).split())
    assert re.search(r"--pr-url URL [^-]*HARNESS_PULL_REQUEST_URL", text)
    text = " ".join(_help("harness-eval", [], capsys).split())
    assert re.search(r"--api-key-env VARIABLE [^-]*OPENAI_API_KEY or ANTHROPIC_API_KEY", text)


def test_options_are_grouped(capsys: pytest.CaptureFixture[str]) -> None:
    run = _help("harness-exit-gate", ["run"], capsys)
    for title in ("changes:", "CI mode", "tests:", "report:"):
        assert f"\n{title}" in run
    assert "\nmodel (needs harness-models" in _help("harness-eval", [], capsys)


@pytest.mark.parametrize(
    ("program", "argv", "count"),
    [
        ("harness-exit-gate", [], 3),
        ("harness-exit-gate", ["run"], 2),
        ("harness-exit-gate", ["validate"], 1),
        ("harness-eval", [], 3),
    ],
)
def test_help_ends_with_examples_that_parse(
    program: str, argv: list[str], count: int, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help(program, argv, capsys)
    joined = text[text.index("\nexamples:\n") :].replace("\\\n", " ")
    commands = re.findall(rf"^  ({program}(?: .*)?)$", joined, flags=re.MULTILINE)
    assert len(commands) == count
    _, build = PROGRAMS[program]
    for command in commands:
        build().parse_args(shlex.split(command)[1:])  # raises UsageError if an example is wrong


@pytest.mark.parametrize(
    ("program", "argv", "message"),
    [
        ("harness-exit-gate", ["run", "m.yaml", "--tset-cmd", "x"], "did you mean --test-cmd?"),
        (
            "harness-exit-gate",
            ["rn"],
            "invalid choice: 'rn' (choose from 'validate', 'run'); did you mean 'run'?",
        ),
        ("harness-exit-gate", ["validat", "m.yaml"], "did you mean 'validate'?"),
        (
            "harness-eval",
            ["--modl", "openai:x"],
            "unrecognized arguments: --modl; did you mean --model?",
        ),
        ("harness-eval", ["--rot=."], "did you mean --root?"),
    ],
)
def test_a_misspelling_names_the_closest_option_and_exits_2(
    program: str, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main, _ = PROGRAMS[program]
    assert main(argv) == 2
    errors = capsys.readouterr().err
    assert errors.startswith(f"{program}: error: ")
    assert message in errors


@pytest.mark.parametrize(
    ("program", "argv"),
    [
        ("harness-exit-gate", ["run", "m.yaml", "--brnch", "x"]),  # --branch is hidden and refused
        ("harness-exit-gate", ["validate", "--test-cmd", "x"]),  # a run option, not validate's
        ("harness-eval", ["--frobnicate"]),
    ],
)
def test_no_suggestion_of_hidden_options_or_another_commands(
    program: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    main, _ = PROGRAMS[program]
    assert main(argv) == 2
    errors = capsys.readouterr().err
    assert errors.startswith(f"{program}: error: unrecognized arguments")
    assert "did you mean" not in errors
