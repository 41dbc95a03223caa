"""Pins the signatures of harness-exit-gate's public callables.

A changed signature is a change downstream code depends on: make it on purpose, with the
version and the changelog (ARCHITECTURE.md, "Versioning of the contract").
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

EXPECTED = {
    "harness_exit_gate:main": "(argv: 'Sequence[str] | None' = None) -> 'int'",
    "harness_exit_gate:parse_command": "(text: 'str') -> 'tuple[str, ...]'",
    "harness_exit_gate:load_task_manifest_file": ("(path: 'str | os.PathLike[str]') -> 'TaskManifest'"),
    "harness_exit_gate:validate_run_report": (
        "(report: 'Mapping[str, object] | str | bytes') -> 'RunReport'"
    ),
    "harness_exit_gate:validate_run_preflight_report": (
        "(report: 'Mapping[str, object] | str | bytes') -> 'RunPreflightReport'"
    ),
    "harness_exit_gate:validate_report_artifact": (
        "(report: 'Mapping[str, "
        "object] | str | bytes') -> 'RunReport | RunPreflightReport | Mapping[str, "
        "object]'"
    ),
    "harness_exit_gate.manifest:decode_task_manifest": "(doc: 'object') -> 'TaskManifest'",
    "harness_exit_gate.manifest:load_task_manifest": "(yaml_text: 'str | bytes') -> 'TaskManifest'",
    "harness_exit_gate.evals:load_scenario": "(text: 'str') -> 'Scenario'",
    "harness_exit_gate.evals:decode_scenario": "(obj: 'object') -> 'Scenario'",
    "harness_exit_gate.manifest:manifest_permissions": ("(manifest: 'TaskManifest') -> 'PermissionMap'"),
    "harness_exit_gate.evals:assert_known_event_types": (
        "(invariants: 'Sequence[EventInvariant]') -> 'list[str]'"
    ),
    "harness_exit_gate.evals:stream_satisfies": (
        "(events: 'Sequence[Event]', invariants: 'Sequence[EventInvariant]') -> 'list[str]'"
    ),
    "harness_exit_gate.evals:execute_scenario": (
        "(scenario: 'Scenario', manifests: 'Mapping[str, TaskManifest]', *, "
        "report: 'Mapping[str, object] | None' = None, "
        "model: 'tuple[str, ModelAdapter] | None' = None, "
        "attest_workspace: 'Callable[[MemoryWorkspace], object] | None' = None) -> 'ScenarioOutcome'"
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
