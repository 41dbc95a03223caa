"""Scripted FakeModel factories from scenario files (spec §9.2 ``--scenario``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from harness_kernel.evals import ScenarioParseError, ScenarioTurn, load_scenario
from harness_kernel.models import FakeModel, Model, ScriptedTurn, ToolCall

__all__ = ["ScenarioModelFactory", "read_script"]


def _scripted(turn: ScenarioTurn) -> ScriptedTurn:
    calls = None
    if turn.tool_calls is not None:
        calls = [ToolCall(call.id, call.name, cast(Any, call.arguments)) for call in turn.tool_calls]
    return ScriptedTurn(content=turn.content, finish_reason=turn.finish_reason, tool_calls=calls)


def read_script(text: str) -> tuple[ScriptedTurn, ...]:
    """The script of a scenario file, or of a file holding only a YAML list of turns.

    Raises:
        ValueError: the text is neither.
    """
    try:
        return tuple(_scripted(turn) for turn in load_scenario(text).script)
    except ScenarioParseError as error:
        failure = error
    # A bare list of turns becomes the script of a minimal scenario document.
    indented = "".join(f"  {line}" for line in text.splitlines(keepends=True))
    wrapped = (
        "id: agent-server-script\nuses_tasks: [agent-server-script]\n"
        "expect:\n  run: {status: completed}\nscript:\n" + indented
    )
    if not text.lstrip().startswith("-"):
        raise ValueError(f"invalid scenario: {failure}")
    try:
        scenario = load_scenario(wrapped)
    except ScenarioParseError as error:
        raise ValueError(f"invalid scenario script: {error}") from None
    return tuple(_scripted(turn) for turn in scenario.script)


class ScenarioModelFactory:
    """Builds a fresh :class:`FakeModel` playing the same script for every session."""

    def __init__(self, script: Sequence[ScriptedTurn]) -> None:
        self._script = tuple(script)

    def __call__(self) -> Model:
        return FakeModel(self._script)
