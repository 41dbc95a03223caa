"""One request, one parse: a call through views is validated once on its way to the adapter.

A view's granted method builds its request and hands it to the dispatcher; the dispatcher,
given a view, checks each view's grant itself and calls the adapter's captured method, so
neither the request nor the result is parsed again per layer (issue #16). These tests spy
on the dispatcher's two validation steps; the refusals and results the other view tests pin
are unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Final

import pytest

from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    CommandRequest,
    MemoryWorkspace,
    Workspace,
    WorkspaceOperationUnsupportedError,
    bind_workspace,
    invoke_workspace_operation,
    restrict_workspace,
)

_DISPATCH: Final = importlib.import_module("harness_workspace._dispatch")
_VALIDATION: Final = importlib.import_module("harness_workspace._validation")

REQUESTS: Final[dict[str, dict[str, object]]] = {
    "read_file": {"operation": "read_file", "path": "a.txt"},
    "write_file": {"operation": "write_file", "path": "b.txt", "contents": "beta"},
    "list_files": {"operation": "list_files", "path": "."},
    "execute": {"operation": "execute", "command": {"argv": ["make", "test"]}},
    "diff": {"operation": "diff"},
    "snapshot": {"operation": "snapshot"},
    "dispose": {"operation": "dispose"},
}

LAYERS: Final[dict[str, Callable[[Workspace, str], Workspace]]] = {
    "view": restrict_workspace,
    "view-of-bound": lambda adapter, capability: restrict_workspace(bind_workspace(adapter), capability),
    "view-of-view": lambda adapter, capability: restrict_workspace(
        restrict_workspace(adapter, capability), capability
    ),
    "three-views": lambda adapter, capability: restrict_workspace(
        restrict_workspace(restrict_workspace(adapter, capability), capability), capability
    ),
}


class Counts:
    """How often the dispatcher parsed a request and validated a result."""

    def __init__(self) -> None:
        self.parsed: list[object] = []
        self.validated: list[str] = []


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counts:
    seen = Counts()
    parse = _DISPATCH.parse_request

    def counting_parse(request: object) -> object:
        seen.parsed.append(request)
        return parse(request)

    monkeypatch.setattr(_DISPATCH, "parse_request", counting_parse)
    for name, rule in _VALIDATION.OPERATIONS.items():
        validate = rule.validate_result

        def counting_validate(result: object, name: str = name, validate: Callable[..., object] = validate):
            seen.validated.append(name)
            return validate(result)

        monkeypatch.setattr(rule, "validate_result", counting_validate)
    return seen


def memory() -> MemoryWorkspace:
    return MemoryWorkspace({"a.txt": "alpha"}, clock=lambda: "2026-01-01T00:00:00Z")


@pytest.mark.parametrize("layers", list(LAYERS))
@pytest.mark.parametrize("capability", WORKSPACE_CAPABILITIES)
async def test_the_dispatcher_parses_a_request_through_views_once(
    counts: Counts, capability: str, layers: str
) -> None:
    adapter = memory()
    view = LAYERS[layers](adapter, capability)
    await invoke_workspace_operation(view, REQUESTS[capability])
    assert counts.parsed == [REQUESTS[capability]]
    assert counts.validated == [capability]
    assert [name for name, _ in adapter.calls] == [capability]


@pytest.mark.parametrize("layers", list(LAYERS))
async def test_a_views_own_method_parses_its_request_once(counts: Counts, layers: str) -> None:
    adapter = memory()
    view = LAYERS[layers](adapter, "execute")
    await view.execute(CommandRequest(argv=("make", "test")))
    assert len(counts.parsed) == 1
    assert counts.validated == ["execute"]
    assert [name for name, _ in adapter.calls] == ["execute"]


async def test_an_inner_view_still_refuses_with_its_own_grant_after_one_parse(counts: Counts) -> None:
    adapter = memory()
    outer = restrict_workspace(restrict_workspace(adapter, "diff"), "read_file")
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await invoke_workspace_operation(outer, REQUESTS["read_file"])
    assert str(caught.value) == "workspace view grants diff, not read_file"
    assert caught.value.operation == "read_file"
    assert len(counts.parsed) == 1
    assert counts.validated == []
    assert adapter.calls == []
