"""Property tests for the adapter results ``invoke_workspace_operation`` returns (spec §3.8-3.10).

Any result yields a contract-shaped value or a typed MALFORMED error; well-formed results and
metadata reach the caller equal to their source, normalised and read-only.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from typing import Final, cast

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from workspace_dispatch_fixtures import (
    MAX_SAFE_INTEGER,
)
from workspace_dispatch_strategies import (
    MAX_ARRAY_LENGTH,
    MAX_DEPTH,
    PROPERTY_SETTINGS,
    ListSubclass,
    ScriptedWorkspace,
    any_value,
    build_command_result,
    build_snapshot,
    cyclic,
    is_safe_integer,
    nest,
    non_dict_values,
    non_string_keys,
    odd_keys,
    odd_scalars,
    proxy_copy,
)

from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    CommandResult,
    WorkspaceOperationMalformedError,
    WorkspaceSnapshot,
    invoke_workspace_operation,
)

# ------------------------------------------------------------------ strategies: adapter results

valid_json_leaves: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)


def extend_valid_json(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Well-formed JSON containers, including the read-only forms the dispatcher emits."""
    keys = st.one_of(st.text(max_size=5), st.sampled_from(["__proto__", "__class__"]))
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=3),
        st.dictionaries(keys, children, max_size=3).map(proxy_copy),
    )


valid_json: st.SearchStrategy[object] = st.recursive(valid_json_leaves, extend_valid_json, max_leaves=10)

json_leaves: st.SearchStrategy[object] = st.one_of(
    valid_json_leaves,
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(),
    odd_scalars,
)


def extend_json(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """JSON containers, mostly well-formed, sometimes with a non-string key or a subclass."""
    keys = st.one_of(st.text(max_size=5), st.sampled_from(["__proto__", "__class__"]), odd_keys)
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=5), children, max_size=3),
        st.dictionaries(keys, children, max_size=3),
        st.dictionaries(st.text(max_size=5), children, max_size=3).map(proxy_copy),
        st.lists(children, max_size=2).map(ListSubclass),
    )


json_like: st.SearchStrategy[object] = st.recursive(json_leaves, extend_json, max_leaves=8)


def wrap_deep(value: object) -> object:
    return {"deep": value}


metadata_values: st.SearchStrategy[object] = st.one_of(
    st.dictionaries(st.text(max_size=5), valid_json, max_size=4),
    st.dictionaries(st.text(max_size=5), valid_json, max_size=4).map(proxy_copy),
    json_like,
    st.dictionaries(st.text(max_size=5), json_like, max_size=4),
    st.builds(nest, st.integers(min_value=55, max_value=75), valid_json_leaves, in_dicts=st.booleans()).map(
        wrap_deep
    ),
    st.builds(nest, st.integers(min_value=0, max_value=2_000), json_like, in_dicts=st.booleans()).map(
        wrap_deep
    ),
    cyclic.map(wrap_deep),
)


@st.composite
def record_fields(
    draw: st.DrawFn, fields: Mapping[str, tuple[st.SearchStrategy[object], st.SearchStrategy[object]]]
) -> dict[str, object]:
    """A record as a dict: each field usually present and valid, sometimes missing or invalid.

    ``fields`` maps each name to ``(valid values, invalid values)``; sometimes an extra key is added.
    """
    record: dict[object, object] = {}
    for name, (valid, invalid) in fields.items():
        presence = draw(st.integers(0, 9))
        if presence == 0:
            continue
        record[name] = draw(invalid if presence <= 2 else valid)
    if draw(st.integers(0, 9)) == 0:
        record[draw(st.one_of(st.text(max_size=6), non_string_keys))] = draw(any_value)
    return cast("dict[str, object]", record)


COMMAND_RESULT_FIELDS: Final[dict[str, tuple[st.SearchStrategy[object], st.SearchStrategy[object]]]] = {
    "exit_code": (
        st.one_of(st.none(), st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)),
        st.one_of(
            st.booleans(),
            st.booleans(),
            st.integers(min_value=2**53, max_value=2**64),
            st.integers(max_value=-(2**53)),
            st.floats(),
            odd_scalars,
        ).filter(lambda value: value is not None and not is_safe_integer(value)),
    ),
    "stdout": (st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=3), odd_scalars)),
    "stderr": (st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=3), odd_scalars)),
    "timed_out": (
        st.one_of(st.none(), st.booleans()),
        st.one_of(st.integers(), st.text(max_size=3), st.floats()),
    ),
}

SNAPSHOT_FIELDS: Final[dict[str, tuple[st.SearchStrategy[object], st.SearchStrategy[object]]]] = {
    "id": (st.text(min_size=1, max_size=6), st.one_of(st.just(""), st.none(), odd_scalars)),
    "created_at": (st.text(min_size=1, max_size=6), st.one_of(st.just(""), st.none(), odd_scalars)),
    "metadata": (st.one_of(st.none(), metadata_values), st.one_of(non_dict_values, odd_scalars)),
}


def as_command_result_struct(fields: dict[str, object]) -> object:
    """The same fields as an exact ``CommandResult`` when its constructor can take them."""
    if {"exit_code", "stdout", "stderr"} <= fields.keys() <= {"exit_code", "stdout", "stderr", "timed_out"}:
        return build_command_result(**fields)
    return fields


def as_snapshot_struct(fields: dict[str, object]) -> object:
    """The same fields as an exact ``WorkspaceSnapshot`` when its constructor can take them."""
    if {"id", "created_at"} <= fields.keys() <= {"id", "created_at", "metadata"}:
        return build_snapshot(**fields)
    return fields


def path_lists(items: list[object]) -> st.SearchStrategy[object]:
    return st.sampled_from([items, tuple(items)])


def command_results(fields: dict[str, object]) -> st.SearchStrategy[object]:
    return st.sampled_from([fields, as_command_result_struct(fields)])


def snapshots(fields: dict[str, object]) -> st.SearchStrategy[object]:
    return st.sampled_from([fields, as_snapshot_struct(fields)])


SHAPED_RESULTS: Final[dict[str, st.SearchStrategy[object]]] = {
    "read_file": st.text(max_size=8),
    "diff": st.text(max_size=8),
    "write_file": st.none(),
    "dispose": st.none(),
    "list_files": st.lists(
        st.one_of(st.text(max_size=5), st.text(max_size=5), odd_scalars), max_size=4
    ).flatmap(path_lists),
    "execute": record_fields(COMMAND_RESULT_FIELDS).flatmap(command_results),
    "snapshot": record_fields(SNAPSHOT_FIELDS).flatmap(snapshots),
}


@st.composite
def adapter_results(draw: st.DrawFn) -> tuple[str, object]:
    """An operation and a value the adapter returns for it: valid, nearly valid or nonsense."""
    operation = draw(st.sampled_from(WORKSPACE_CAPABILITIES))
    if draw(st.integers(0, 3)) == 0:
        return operation, draw(any_value)
    return operation, draw(SHAPED_RESULTS[operation])


REQUEST_FOR: Final[dict[str, dict[str, object]]] = {
    "read_file": {"operation": "read_file", "path": "a.txt"},
    "write_file": {"operation": "write_file", "path": "a.txt", "contents": ""},
    "list_files": {"operation": "list_files", "path": "."},
    "execute": {"operation": "execute", "command": {"argv": ["ls"]}},
    "diff": {"operation": "diff"},
    "snapshot": {"operation": "snapshot"},
    "dispose": {"operation": "dispose"},
}


def is_container(value: object) -> bool:
    """Whether ``value`` is an exact ``dict`` or ``list``."""
    return type(value) is dict or type(value) is list


def is_proxy(value: object) -> bool:
    """Whether ``value`` is exactly a ``MappingProxyType``."""
    return type(value) is types.MappingProxyType


def assert_typed_malformed(error: WorkspaceOperationMalformedError, operation: str) -> None:
    """The result failure is exactly MALFORMED and names the operation."""
    assert type(error) is WorkspaceOperationMalformedError
    assert error.code == "WORKSPACE_OPERATION_MALFORMED"
    assert error.operation == operation


def assert_normalised_json(value: object, depth: int) -> None:
    """``value`` is read-only JSON: proxies with exact ``str`` keys, tuples, finite primitives."""
    if value is None or type(value) is str or type(value) is bool or is_safe_integer(value):
        return
    if type(value) is float:
        assert math.isfinite(value)
        return
    assert depth <= MAX_DEPTH
    if type(value) is tuple:
        items = cast("tuple[object, ...]", value)
        assert len(items) <= MAX_ARRAY_LENGTH
        for item in items:
            assert_normalised_json(item, depth + 1)
        return
    assert is_proxy(value)
    for key, item in cast("Mapping[object, object]", value).items():
        assert type(key) is str
        assert_normalised_json(item, depth + 1)


def assert_contract_shape(operation: str, result: object, answer: object) -> None:
    """The successful result of ``operation`` has exactly the shape §3.9 promises."""
    if operation in ("read_file", "diff"):
        assert type(result) is str
        assert result is answer
    elif operation in ("write_file", "dispose"):
        assert result is None
    elif operation == "list_files":
        assert type(result) is list
        assert result is not answer
        assert all(type(path) is str for path in cast("list[object]", result))
    elif operation == "execute":
        assert type(result) is CommandResult
        assert result is not answer
        assert result.exit_code is None or is_safe_integer(result.exit_code)
        assert type(result.stdout) is str
        assert type(result.stderr) is str
        assert result.timed_out is None or type(result.timed_out) is bool
    else:
        assert type(result) is WorkspaceSnapshot
        assert result is not answer
        assert type(result.id) is str
        assert result.id
        assert type(result.created_at) is str
        assert result.created_at
        if result.metadata is not None:
            assert is_proxy(result.metadata)
            assert_normalised_json(result.metadata, 0)


# ------------------------------------------------------------------ properties: adapter results


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(case=adapter_results())
async def test_any_adapter_result_yields_a_contract_shaped_value_or_a_typed_malformed_error(
    case: tuple[str, object],
) -> None:
    operation, answer = case
    try:
        result = await invoke_workspace_operation(ScriptedWorkspace(answer), REQUEST_FOR[operation])
    except WorkspaceOperationMalformedError as error:
        event(f"{operation}: refused")
        assert_typed_malformed(error, operation)
    else:
        event(f"{operation}: accepted")
        assert_contract_shape(operation, result, answer)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(metadata=metadata_values)
async def test_any_snapshot_metadata_is_either_normalised_json_or_a_typed_malformed_error(
    metadata: object,
) -> None:
    answer = {"id": "s", "created_at": "t", "metadata": metadata}
    try:
        result = await invoke_workspace_operation(ScriptedWorkspace(answer), {"operation": "snapshot"})
    except WorkspaceOperationMalformedError as error:
        event(str(error))
        assert_typed_malformed(error, "snapshot")
    else:
        event("accepted")
        assert_contract_shape("snapshot", result, answer)


def metadata_with_a_cycle(case: tuple[dict[str, object], int, bool]) -> object:
    """Well-formed metadata plus a chain of ``length`` containers whose innermost holds the root."""
    metadata, length, through_lists = case
    root = dict(metadata)
    chain: object = root
    for _ in range(length):
        chain = [chain] if through_lists else {"next": chain}
    root["chain"] = chain
    return root


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(
    case=st.tuples(
        st.dictionaries(st.text(max_size=5), valid_json, max_size=3), st.integers(0, 40), st.booleans()
    )
)
async def test_metadata_with_a_cycle_within_the_depth_limit_is_rejected_as_cyclic(
    case: tuple[dict[str, object], int, bool],
) -> None:
    answer = {"id": "s", "created_at": "t", "metadata": metadata_with_a_cycle(case)}
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        await invoke_workspace_operation(ScriptedWorkspace(answer), {"operation": "snapshot"})
    assert_typed_malformed(caught.value, "snapshot")
    assert str(caught.value) == "snapshot returned a snapshot containing cyclic metadata"


def thawed(value: object) -> object:
    """The plain-JSON form a normalised copy must equal: arrays as tuples, objects as dicts."""
    if type(value) is list or type(value) is tuple:
        return tuple(thawed(item) for item in cast("tuple[object, ...]", value))
    if type(value) is dict or is_proxy(value):
        return {key: thawed(item) for key, item in cast("Mapping[str, object]", value).items()}
    return value


@st.composite
def well_formed_metadata(draw: st.DrawFn) -> object:
    """Valid metadata, sometimes with a chain reaching the deepest allowed container (depth 64)."""
    metadata: dict[str, object] = draw(st.dictionaries(st.text(max_size=5), valid_json, max_size=3))
    if draw(st.booleans()):
        leaves: list[object] = [{}, [], "leaf", 0, None]
        leaf = draw(st.sampled_from(leaves))
        # The chain's outermost container is at depth 1, so a container leaf may sit at most
        # 63 levels below it and a primitive leaf 64.
        limit = MAX_DEPTH - 1 if is_container(leaf) else MAX_DEPTH
        levels = draw(st.one_of(st.just(limit), st.integers(0, limit)))
        metadata["deep"] = nest(levels, leaf, in_dicts=draw(st.booleans()))
    return proxy_copy(metadata) if draw(st.booleans()) else metadata


@st.composite
def well_formed_results(draw: st.DrawFn) -> tuple[str, object, object]:
    """An operation, a valid adapter result for it, and the value the caller must receive."""
    operation = draw(st.sampled_from(WORKSPACE_CAPABILITIES))
    if operation in ("read_file", "diff"):
        text = draw(st.text(max_size=8))
        return operation, text, text
    if operation in ("write_file", "dispose"):
        return operation, None, None
    if operation == "list_files":
        paths = draw(st.lists(st.text(max_size=5), max_size=5))
        return operation, (tuple(paths) if draw(st.booleans()) else paths), list(paths)
    if operation == "execute":
        fields: dict[str, object] = {
            "exit_code": draw(st.one_of(st.none(), st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER))),
            "stdout": draw(st.text(max_size=5)),
            "stderr": draw(st.text(max_size=5)),
        }
        if draw(st.booleans()):
            fields["timed_out"] = draw(st.one_of(st.none(), st.booleans()))
        expected = build_command_result(**{"timed_out": None, **fields})
        return operation, draw(command_results(fields)), expected
    snapshot_fields: dict[str, object] = {
        "id": draw(st.text(min_size=1, max_size=5)),
        "created_at": draw(st.text(min_size=1, max_size=5)),
    }
    if draw(st.booleans()):
        snapshot_fields["metadata"] = draw(st.one_of(st.none(), well_formed_metadata()))
    metadata = snapshot_fields.get("metadata")
    expected_snapshot = build_snapshot(
        id=snapshot_fields["id"],
        created_at=snapshot_fields["created_at"],
        metadata=None if metadata is None else thawed(metadata),
    )
    return operation, draw(snapshots(snapshot_fields)), expected_snapshot


@PROPERTY_SETTINGS
@given(case=well_formed_results())
async def test_well_formed_adapter_result_reaches_the_caller_with_an_equal_value(
    case: tuple[str, object, object],
) -> None:
    operation, answer, expected = case
    result = await invoke_workspace_operation(ScriptedWorkspace(answer), REQUEST_FOR[operation])
    assert_contract_shape(operation, result, answer)
    assert result == expected


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(metadata=well_formed_metadata())
async def test_well_formed_metadata_is_accepted_and_equal_to_its_source(metadata: object) -> None:
    answer = {"id": "s", "created_at": "t", "metadata": metadata}
    result = await invoke_workspace_operation(ScriptedWorkspace(answer), {"operation": "snapshot"})
    assert_contract_shape("snapshot", result, answer)
    assert result.metadata == thawed(metadata)


def is_valid_command_result(fields: Mapping[str, object]) -> bool:
    """An independent statement of §3.9's rule for an execute result given as a dict."""
    if not all(type(key) is str for key in fields):
        return False
    if not fields.keys() <= {"exit_code", "stdout", "stderr", "timed_out"} or "exit_code" not in fields:
        return False
    exit_code = fields["exit_code"]
    timed_out = fields.get("timed_out")
    return (
        (exit_code is None or is_safe_integer(exit_code))
        and type(fields.get("stdout")) is str
        and type(fields.get("stderr")) is str
        and (timed_out is None or type(timed_out) is bool)
    )


@PROPERTY_SETTINGS
@given(fields=record_fields(COMMAND_RESULT_FIELDS), as_struct=st.booleans())
async def test_command_result_is_accepted_exactly_when_every_field_is_valid(
    fields: dict[str, object], as_struct: bool
) -> None:
    answer = as_command_result_struct(fields) if as_struct else fields
    expected_valid = is_valid_command_result(fields)
    try:
        result = await invoke_workspace_operation(ScriptedWorkspace(answer), REQUEST_FOR["execute"])
    except WorkspaceOperationMalformedError as error:
        event("refused")
        assert_typed_malformed(error, "execute")
        assert not expected_valid
    else:
        event("accepted")
        assert expected_valid
        assert_contract_shape("execute", result, answer)
        assert result == build_command_result(**{"timed_out": None, **fields})
