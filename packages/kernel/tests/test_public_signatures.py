"""Pins the signatures of harness-kernel's public callables.

A changed signature is a change downstream code depends on: make it on purpose, with the
version and the changelog (ARCHITECTURE.md, "Versioning of the contract").
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

EXPECTED = {
    "harness_kernel.events:create_event": (
        "(type: 'EventType', data: 'EventData | dict[str, object]', *, "
        "event_id: 'str | None' = None, at: 'str | None' = None, "
        "actor: 'str | None' = None) -> 'Event'"
    ),
    "harness_kernel.events:serialize_event": "(event: 'Event') -> 'bytes'",
    "harness_kernel.events:deserialize_event": ("(raw: 'bytes | str | dict[str, object]') -> 'Event'"),
    "harness_kernel.events:redact_value": "(value: 'object') -> 'object'",
    "harness_kernel.events:redact_event": "(event: 'Event') -> 'Event'",
    "harness_kernel.events:is_event_type": "(value: 'object') -> 'TypeGuard[EventType]'",
    "harness_kernel.policy:decide": (
        "(permissions: 'PermissionMap | None', action: 'str', subject: 'str | None' = None) -> 'Decision'"
    ),
    "harness_kernel.policy:compile_rules": ("(permissions: 'PermissionMap | None') -> 'CompiledRules'"),
    "harness_kernel.policy:compile_glob": (
        "(pattern: 'str', *, syntax: 'GlobSyntax' = 'path') -> 'CompiledGlob'"
    ),
    "harness_kernel.policy:path_allowed": "(allowed: 'Sequence[str]', path: 'str') -> 'bool'",
    "harness_kernel.policy:translate": "(pattern: 'str', *, syntax: 'GlobSyntax' = 'path') -> 'str'",
    "harness_kernel.models:adapt_model": "(model: 'ModelAdapter | Model') -> 'ModelAdapter'",
    "harness_kernel.models:normalize_model_text_deltas": (
        "(chunks: collections.abc.Iterable[str]) -> tuple[str, ...]"
    ),
    "harness_kernel.legacy:run_agent": "(options: 'RunOptions') -> 'RunResult'",
    "harness_kernel.legacy:normalize_tool_json": "(value: 'object') -> 'tuple[JsonValue, bytes]'",
    "harness_kernel.runtime:MinimalAgentRuntime.run": "(self, input: 'RunInput') -> 'RunStream'",
    "harness_kernel.runtime:MinimalAgentRuntime.steer": ("(self, run_id: 'str', text: 'str') -> 'None'"),
    "harness_kernel.runtime:MinimalAgentRuntime.cancel": "(self, run_id: 'str') -> 'None'",
    "harness_kernel.store:SqliteSessionStore.__init__": (
        "(self, path: 'str | PurePath', *, now: 'Callable[[], datetime] | None' = None, "
        "synchronous: 'Synchronous' = 'FULL') -> 'None'"
    ),
    "harness_kernel.store:SqliteSessionStore.append": (
        "(self, session_id: 'str', event: 'Event', *, owner_id: 'str | None' = None) -> 'SequencedEvent'"
    ),
    "harness_kernel.store:SqliteSessionStore.read": (
        "(self, session_id: 'str', *, after_seq: 'int' = -1, limit: 'int' = 100) -> 'SessionEventPage'"
    ),
    "harness_kernel.store:SqliteSessionStore.create": (
        "(self, session_id: 'str | None' = None, *, task_id: 'str | None' = None, "
        "created_at: 'str | None' = None, metadata: 'dict[str, "
        "object] | FrozenDict | None' = None, owner_id: 'str | None' = None, "
        "lease_ms: 'int | None' = None) -> 'SessionRecord'"
    ),
    "harness_kernel.store:SqliteSessionStore.renew_lease": (
        "(self, session_id: 'str', owner_id: 'str', *, lease_ms: 'int') -> 'SessionLease'"
    ),
    "harness_kernel.store:MemorySessionStore.__init__": (
        "(self, *, now: 'Callable[[], datetime] | None' = None) -> 'None'"
    ),
    "harness_kernel.store:SessionEventLog.__init__": (
        "(self, store: 'SessionStore', session_id: 'str', *, owner_id: 'str | None' = None) -> 'None'"
    ),
    "harness_kernel.store:SqliteSessionStore.recover_interrupted": (
        "(self, session_id: 'str', event: 'Event', *, closed_at: 'str | None' = None, "
        "expected_metadata: 'dict[str, "
        "object] | FrozenDict | None' = None) -> 'RecoverInterruptedResult'"
    ),
    "harness_kernel.store:SqliteSessionStore.reopen": (
        "(self, session_id: 'str', *, owner_id: 'str', lease_ms: 'int', "
        "expected_metadata: 'dict[str, object] | FrozenDict | None' = None) -> 'SessionRecord'"
    ),
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
