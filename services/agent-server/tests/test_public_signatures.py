"""Pins the signatures of agent-server's public callables.

A changed signature is a change downstream code depends on: make it on purpose, with the
version and the changelog (ARCHITECTURE.md, "Versioning of the contract").
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

EXPECTED = {
    "agent_server:serve": (
        "(config: 'ServerConfig', *, "
        "task_status: 'trio.TaskStatus[ServerHandle]' = TASK_STATUS_IGNORED) -> 'None'"
    ),
    "agent_server:embedded_server": "(config: 'ServerConfig') -> 'AsyncGenerator[ServerHandle]'",
    "agent_server:AcpError.__init__": ("(self, code: 'int', data_code: 'str', message: 'str') -> 'None'"),
}


def _resolve(target: str) -> object:
    module_name, dotted = target.split(":")
    value: object = importlib.import_module(module_name)
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_public_callable_keeps_its_signature(target: str) -> None:
    rendered = re.sub(r" at 0x[0-9a-f]+", "", str(inspect.signature(_resolve(target))))  # pyright: ignore[reportArgumentType]
    assert rendered == EXPECTED[target]
