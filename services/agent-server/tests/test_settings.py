"""The settings table is the one list of ``serve``'s settings: every field, every flag, every variable."""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from collections.abc import Iterator

import pytest

from agent_server import ServerConfig
from agent_server._cli import _parser, main  # pyright: ignore[reportPrivateUsage]
from agent_server._config import ServerHooks
from agent_server._environment import read_environment
from agent_server._settings import SECTIONS, SETTINGS, options


def _fields() -> Iterator[str]:
    config = ServerConfig()
    for record in dataclasses.fields(ServerConfig):
        for item in dataclasses.fields(getattr(config, record.name)):
            yield f"{record.name}.{item.name}"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return _flat(capsys.readouterr().out)


def test_every_field_of_the_configuration_has_exactly_one_row() -> None:
    rows = Counter(setting.path for setting in SETTINGS)
    assert set(rows) == set(_fields())
    assert {path for path, count in rows.items() if count != 1} == set()
    assert list(SECTIONS) == [record.name for record in dataclasses.fields(ServerConfig)]


def test_the_test_hooks_are_not_configuration() -> None:
    hooks = {item.name for item in dataclasses.fields(ServerHooks)}
    assert hooks == {"runtime", "now", "new_id"}
    assert {path.partition(".")[2] for path in _fields()} & hooks == set()


def test_a_row_without_options_says_who_sets_its_field() -> None:
    for setting in SETTINGS:
        assert bool(setting.options) != bool(setting.note), setting.path


def test_every_flag_appears_once_in_serve_help_with_its_help_and_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help("serve", capsys)
    flags = Counter(option.flag for _, option in options())
    assert {flag for flag, count in flags.items() if count != 1} == set()
    for _, option in options():
        assert f"{option.flag} " in text or f"{option.flag}\n" in text, option.flag
        assert _flat(option.help) in text, option.flag
        if option.env is not None:
            assert option.env in option.help, option.flag


def test_the_parsers_hold_exactly_the_tables_options() -> None:
    commands: dict[str, argparse.ArgumentParser] = {}
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):  # pyright: ignore[reportPrivateUsage]
            commands = action.choices  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]

    def flags(parser: argparse.ArgumentParser) -> set[str]:
        return {flag for action in parser._actions for flag in action.option_strings} - {"-h", "--help"}

    table = {option.flag for _, option in options()}
    assert flags(commands["serve"]) == table
    assert flags(commands["chat"]) == table | {"--url", "--workspace", "--yes-to"}
    assert flags(commands["acp"]) == {option.flag for _, option in options() if option.acp}


class _Recording(dict[str, str]):
    """An environment that remembers every variable looked up in it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> object:  # pyright: ignore[reportIncompatibleMethodOverride]
        self.asked.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)


def test_every_variable_the_server_reads_is_a_rows_variable() -> None:
    environ = _Recording()
    read_environment(environ, token_variable="HARNESS_AGENT_TOKEN")
    named = {option.env for _, option in options() if option.env is not None}
    # The token variable is named by --token-env (whose default it is); HARNESS_MODEL_ID is refused.
    assert environ.asked - {"HARNESS_AGENT_TOKEN", "HARNESS_MODEL_ID"} == named
