"""Scripted FakeModel factories from scenario files (spec §9.2 ``--scenario``)."""

from __future__ import annotations

from collections.abc import Sequence

from harness_exit_gate.evals import ScenarioParseError, load_script
from harness_kernel.models import FakeModel, Model, ScriptedTurn

__all__ = ["ScenarioModelFactory", "read_script"]


def read_script(text: str) -> tuple[ScriptedTurn, ...]:
    """The script of a scenario file, or of a file holding only a list of turns (any YAML style).

    Raises:
        ValueError: the text is neither; the message names each position at fault.
    """
    try:
        return load_script(text)
    except ScenarioParseError as error:
        raise ValueError(str(error)) from None


class ScenarioModelFactory:
    """Builds a fresh :class:`FakeModel` playing the same script for every session."""

    def __init__(self, script: Sequence[ScriptedTurn]) -> None:
        self._script = tuple(script)

    def __call__(self) -> Model:
        return FakeModel(self._script)
