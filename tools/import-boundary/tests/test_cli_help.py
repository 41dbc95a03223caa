"""``harness-import-boundary --help`` reads well; a misspelling names the right option (issue #20)."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from harness_import_boundary._cli import _parser, main  # pyright: ignore[reportPrivateUsage]


def _check_parser() -> argparse.ArgumentParser:
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):  # pyright: ignore[reportPrivateUsage]
            children: dict[str, argparse.ArgumentParser] = action.choices  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            return children["check"]
    raise AssertionError("no check command")


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_every_argument_explains_itself_and_says_its_default() -> None:
    for parser in (_parser(), _check_parser()):
        for action in parser._actions:
            assert action.help, f"{parser.prog} {action.option_strings or action.dest}"
            if action.option_strings and action.default is None:
                assert "default" in action.help, f"{parser.prog} {action.option_strings}"


def test_check_help_groups_options_and_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["check"], capsys)
    assert "\nconfiguration:\n" in text
    assert "\noutput:\n" in text
    flat = " ".join(text.split())
    assert "the report's format (default: text)" in flat
    assert "(default: the nearest one)" in flat


@pytest.mark.parametrize("argv", [[], ["check"]])
def test_help_ends_with_examples_that_parse(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(argv, capsys)
    joined = text[text.index("\nexamples:\n") :].replace("\\\n", " ")
    commands = re.findall(r"^  (harness-import-boundary .*)$", joined, flags=re.MULTILINE)
    assert len(commands) == 2
    for command in commands:
        _parser().parse_args(shlex.split(command)[1:])  # exits 2 if an example is wrong


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["chek"], "invalid choice: 'chek' (choose from 'check'); did you mean 'check'?"),
        (["check", "--formt", "json"], "unrecognized arguments: --formt; did you mean --format?"),
        (["check", "--format", "sarf"], "invalid choice: 'sarf'"),
        (["check", "--format", "sarf"], "did you mean 'sarif'?"),
        (["check", "--ouput=x"], "did you mean --output?"),
    ],
)
def test_a_misspelling_names_the_closest_one_and_exits_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    errors = capsys.readouterr().err
    assert "harness-import-boundary check: error: " in errors or "harness-import-boundary: error: " in errors
    assert message in errors


def test_nothing_close_gets_no_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--colour"]) == 2
    errors = capsys.readouterr().err
    assert "unrecognized arguments: --colour" in errors
    assert "did you mean" not in errors
