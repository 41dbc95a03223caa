"""Snapshot metadata: validation, copy and detachment (spec §3.10).

Metadata is arbitrary JSON chosen by the adapter. It reaches the caller only as a fresh,
read-only copy: a ``MappingProxyType`` over a new dict, with tuples for arrays.
"""

from __future__ import annotations

import collections
import decimal
import enum
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple, cast

import msgspec
import pytest
import trio

from harness_workspace import (
    CommandRequest,
    JsonValue,
    WorkspaceOperationMalformedError,
    WorkspaceSnapshot,
    invoke_workspace_operation,
)

MAX_SAFE_INTEGER = 2**53 - 1

NON_OBJECT = "snapshot returned a snapshot with non-object metadata"
NON_JSON = "snapshot returned a snapshot containing non-JSON metadata"
CYCLIC = "snapshot returned a snapshot containing cyclic metadata"
NON_STRING_KEYS = "snapshot returned a snapshot containing non-string metadata keys"


# ------------------------------------------------------------------ helpers


class SnapshotWorkspace:
    """An adapter whose ``snapshot`` returns a scripted value; the other operations are inert."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.snapshots = 0

    async def read_file(self, path: str) -> str:
        return ""

    async def write_file(self, path: str, contents: str) -> None:
        return None

    async def list_files(self, path: str) -> list[str]:
        return []

    async def execute(self, command: CommandRequest) -> object:
        return {"exit_code": 0, "stdout": "", "stderr": ""}

    async def diff(self) -> str:
        return ""

    async def snapshot(self) -> object:
        self.snapshots += 1
        return self.answer

    async def dispose(self) -> None:
        return None


build_snapshot = cast("Callable[..., WorkspaceSnapshot]", WorkspaceSnapshot)
"""``WorkspaceSnapshot`` called with metadata of any type (msgspec does not validate it)."""


async def snapshot_of(answer: object) -> WorkspaceSnapshot:
    """Dispatch ``snapshot`` to an adapter returning ``answer``; return the caller's snapshot."""
    adapter = SnapshotWorkspace(answer)
    result = await invoke_workspace_operation(adapter, {"operation": "snapshot"})
    assert adapter.snapshots == 1
    assert type(result) is WorkspaceSnapshot
    return result


async def normalised(metadata: object) -> Mapping[str, JsonValue] | None:
    """Return the metadata the caller sees when the adapter's snapshot dict carries ``metadata``."""
    snapshot = await snapshot_of({"id": "snap-1", "created_at": "2026-01-01T00:00:00Z", "metadata": metadata})
    return snapshot.metadata


def is_proxy(value: object) -> bool:
    """Whether ``value`` is exactly a ``MappingProxyType`` (the read-only form of an object)."""
    return type(value) is types.MappingProxyType


async def normalised_object(metadata: object) -> Mapping[str, JsonValue]:
    """Like :func:`normalised`, for metadata that must come back as an object."""
    result = await normalised(metadata)
    assert result is not None
    assert is_proxy(result)
    return result


async def metadata_rejection(metadata: object) -> WorkspaceOperationMalformedError:
    """Assert that ``metadata`` is refused, in both the dict and the Struct form of a snapshot."""
    errors: list[WorkspaceOperationMalformedError] = []
    for answer in (
        {"id": "snap-1", "created_at": "t", "metadata": metadata},
        build_snapshot(id="snap-1", created_at="t", metadata=metadata),
    ):
        adapter = SnapshotWorkspace(answer)
        with pytest.raises(WorkspaceOperationMalformedError) as caught:
            await invoke_workspace_operation(adapter, {"operation": "snapshot"})
        error = caught.value
        assert type(error) is WorkspaceOperationMalformedError
        assert error.code == "WORKSPACE_OPERATION_MALFORMED"
        assert error.operation == "snapshot"
        errors.append(error)
    assert str(errors[0]) == str(errors[1])
    return errors[0]


async def assert_metadata_rejected(metadata: object, message: str) -> None:
    """Assert that ``metadata`` is refused with exactly ``message``."""
    error = await metadata_rejection(metadata)
    assert str(error) == message


def nested_objects(levels: int, leaf: object) -> object:
    """Wrap ``leaf`` in ``levels`` single-key dicts, so it sits ``levels`` below the outermost one."""
    value = leaf
    for _ in range(levels):
        value = {"k": value}
    return value


def nested_arrays(levels: int, leaf: object) -> object:
    """Wrap ``leaf`` in ``levels`` single-item lists."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def descend(metadata: Mapping[str, JsonValue], levels: int) -> object:
    """Follow ``"k"`` keys down ``levels`` levels of a normalised copy, checking every container."""
    value: object = metadata
    for _ in range(levels):
        assert is_proxy(value)
        value = cast("Mapping[str, object]", value)["k"]
    return value


class StrSubclass(str):
    """A ``str`` subclass; only exact ``str`` is JSON here."""


class IntSubclass(int):
    """An ``int`` subclass; only exact ``int`` is JSON here."""


class FloatSubclass(float):
    """A ``float`` subclass; only exact ``float`` is JSON here."""


class Colour(enum.IntEnum):
    """An ``IntEnum`` member is an ``int`` subclass."""

    RED = 1


class DictSubclass(dict[str, object]):
    """A ``dict`` subclass."""


class ListSubclass(list[object]):
    """A ``list`` subclass."""


class Pair(NamedTuple):
    """A namedtuple is a ``tuple`` subclass."""

    left: int
    right: int


class Point(msgspec.Struct):
    """A msgspec Struct."""

    x: int
    y: int


@dataclass
class Box:
    """A dataclass."""

    size: int


class CountingMapping(Mapping[str, object]):
    """A mapping that counts how often its keys and values are read, failing on a second pass."""

    def __init__(self, data: dict[str, object]) -> None:
        self._data = data
        self.passes = 0
        self.lookups: collections.Counter[str] = collections.Counter()

    def __getitem__(self, key: str) -> object:
        self.lookups[key] += 1
        if self.lookups[key] > 1:
            raise AssertionError(f"value {key!r} was read twice")
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        self.passes += 1
        if self.passes > 1:
            raise AssertionError("the mapping's items were read twice")
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


# ------------------------------------------------------------------ presence and the top level


async def test_absent_metadata_is_none() -> None:
    snapshot = await snapshot_of({"id": "s", "created_at": "t"})
    assert snapshot.metadata is None


async def test_none_metadata_is_none() -> None:
    assert await normalised(None) is None


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param([], id="list"),
        pytest.param([("files", 1)], id="list-of-pairs"),
        pytest.param((), id="tuple"),
        pytest.param("files=1", id="str"),
        pytest.param(1, id="int"),
        pytest.param(True, id="bool"),
        pytest.param(False, id="False"),
        pytest.param(1.5, id="float"),
        pytest.param(b"{}", id="bytes"),
        pytest.param(frozenset({"files"}), id="frozenset"),
        pytest.param(collections.OrderedDict[str, object](files=1), id="OrderedDict"),
        pytest.param(collections.defaultdict(int, {"files": 1}), id="defaultdict"),
        pytest.param(collections.UserDict({"files": 1}), id="UserDict"),
        pytest.param(DictSubclass(files=1), id="dict-subclass"),
        pytest.param(Point(x=1, y=2), id="Struct"),
        pytest.param(Box(size=1), id="dataclass"),
        pytest.param(WorkspaceSnapshot(id="s", created_at="t"), id="WorkspaceSnapshot"),
    ],
)
async def test_top_level_metadata_that_is_not_a_dict_or_proxy_is_non_object(metadata: object) -> None:
    await assert_metadata_rejected(metadata, NON_OBJECT)


async def test_empty_metadata_becomes_an_empty_read_only_mapping() -> None:
    metadata = await normalised_object({})
    assert dict(metadata) == {}


async def test_top_level_mapping_proxy_is_accepted_and_copied() -> None:
    source = {"files": 2}
    proxy = types.MappingProxyType(source)
    metadata = await normalised_object(proxy)
    assert metadata == {"files": 2}
    assert metadata is not proxy
    source["files"] = 3
    assert metadata["files"] == 2


# ------------------------------------------------------------------ primitives


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="None"),
        pytest.param("", id="empty-str"),
        pytest.param("text é \ud800", id="str"),
        pytest.param(True, id="True"),
        pytest.param(False, id="False"),
        pytest.param(0, id="zero"),
        pytest.param(-1, id="negative-int"),
        pytest.param(MAX_SAFE_INTEGER, id="2**53-1"),
        pytest.param(-MAX_SAFE_INTEGER, id="minus-2**53-1"),
        pytest.param(0.0, id="zero-float"),
        pytest.param(-0.0, id="negative-zero"),
        pytest.param(1.5, id="float"),
        pytest.param(5e-324, id="smallest-subnormal"),
        pytest.param(1.7976931348623157e308, id="largest-float"),
        pytest.param(float(2**60), id="large-integral-float"),
    ],
)
async def test_json_primitive_is_kept_with_its_exact_type(value: object) -> None:
    metadata = await normalised_object({"value": value, "list": [value]})
    assert metadata["value"] == value
    assert type(metadata["value"]) is type(value)
    assert metadata["list"] == (value,)
    assert type(cast("tuple[object, ...]", metadata["list"])[0]) is type(value)


NON_JSON_VALUES = [
    pytest.param(lambda: float("nan"), id="NaN"),
    pytest.param(lambda: float("inf"), id="infinity"),
    pytest.param(lambda: float("-inf"), id="minus-infinity"),
    pytest.param(lambda: 2**53, id="2**53"),
    pytest.param(lambda: -(2**53), id="minus-2**53"),
    pytest.param(lambda: 10**400, id="huge-int"),
    pytest.param(lambda: b"bytes", id="bytes"),
    pytest.param(lambda: bytearray(b"bytes"), id="bytearray"),
    pytest.param(lambda: {1, 2}, id="set"),
    pytest.param(lambda: frozenset({1}), id="frozenset"),
    pytest.param(lambda: 1j, id="complex"),
    pytest.param(lambda: decimal.Decimal("1.5"), id="Decimal"),
    pytest.param(lambda: Point(x=1, y=2), id="Struct"),
    pytest.param(lambda: WorkspaceSnapshot(id="s", created_at="t"), id="WorkspaceSnapshot"),
    pytest.param(lambda: Box(size=1), id="dataclass"),
    pytest.param(lambda: DictSubclass(a=1), id="dict-subclass"),
    pytest.param(lambda: collections.OrderedDict[str, object](a=1), id="OrderedDict"),
    pytest.param(lambda: collections.defaultdict[str, int](int), id="defaultdict"),
    pytest.param(lambda: collections.UserDict({"a": 1}), id="UserDict"),
    pytest.param(lambda: ListSubclass([1]), id="list-subclass"),
    pytest.param(lambda: collections.UserList([1]), id="UserList"),
    pytest.param(lambda: Pair(1, 2), id="namedtuple"),
    pytest.param(lambda: StrSubclass("text"), id="str-subclass"),
    pytest.param(lambda: IntSubclass(1), id="int-subclass"),
    pytest.param(lambda: Colour.RED, id="IntEnum"),
    pytest.param(lambda: FloatSubclass(1.5), id="float-subclass"),
    pytest.param(lambda: iter([1]), id="iterator"),
    pytest.param(lambda: range(3), id="range"),
    pytest.param(object, id="object"),
    pytest.param(lambda: print, id="function"),
    pytest.param(lambda: int, id="class"),
]


@pytest.mark.parametrize("make_value", NON_JSON_VALUES)
async def test_non_json_value_in_an_object_is_rejected(make_value: Callable[[], object]) -> None:
    await assert_metadata_rejected({"value": make_value()}, NON_JSON)


@pytest.mark.parametrize("make_value", NON_JSON_VALUES)
async def test_non_json_value_in_an_array_is_rejected(make_value: Callable[[], object]) -> None:
    await assert_metadata_rejected({"values": [1, "two", make_value()]}, NON_JSON)


# ------------------------------------------------------------------ keys


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param({1: "a"}, id="int-key"),
        pytest.param({None: "a"}, id="None-key"),
        pytest.param({b"a": 1}, id="bytes-key"),
        pytest.param({("a",): 1}, id="tuple-key"),
        pytest.param({True: 1}, id="bool-key"),
        pytest.param({StrSubclass("a"): 1}, id="str-subclass-key"),
        pytest.param({"outer": {1: "b"}}, id="nested-int-key"),
        pytest.param({"outer": [{"ok": 1}, {2: "b"}]}, id="key-inside-array"),
        pytest.param(types.MappingProxyType({1: "a"}), id="top-level-proxy"),
        pytest.param({"outer": types.MappingProxyType({1: "a"})}, id="nested-proxy"),
    ],
)
async def test_object_with_a_non_string_key_is_rejected(metadata: object) -> None:
    await assert_metadata_rejected(metadata, NON_STRING_KEYS)


async def test_keys_are_checked_before_any_value_of_the_same_object() -> None:
    metadata: dict[object, object] = {"first": float("nan"), 1: "later key"}
    await assert_metadata_rejected(metadata, NON_STRING_KEYS)


async def test_proto_and_class_are_ordinary_keys() -> None:
    source = {"__proto__": {"polluted": True}, "__class__": "str", "__dict__": [1]}
    metadata = await normalised_object(source)
    assert list(metadata) == ["__proto__", "__class__", "__dict__"]
    assert metadata["__proto__"] == {"polluted": True}
    assert is_proxy(metadata["__proto__"])
    assert metadata["__class__"] == "str"
    assert metadata["__dict__"] == (1,)
    assert is_proxy(metadata)
    assert "polluted" not in metadata


async def test_snapshot_fields_cannot_be_overwritten_through_metadata_keys() -> None:
    source = {"id": "forged", "created_at": "forged", "metadata": None}
    snapshot = await snapshot_of({"id": "snap-1", "created_at": "t", "metadata": source})
    assert (snapshot.id, snapshot.created_at) == ("snap-1", "t")
    assert snapshot.metadata == source


# ------------------------------------------------------------------ depth


@pytest.mark.parametrize(
    ("levels", "leaf"),
    [
        pytest.param(64, {}, id="empty-object-at-depth-64"),
        pytest.param(64, [], id="empty-array-at-depth-64"),
        pytest.param(64, {"leaf": "x"}, id="object-at-depth-64-holding-a-primitive"),
        pytest.param(65, 1, id="int-at-depth-65"),
        pytest.param(65, None, id="None-at-depth-65"),
        pytest.param(65, "deep", id="str-at-depth-65"),
    ],
)
async def test_containers_through_depth_64_and_primitives_at_depth_65_are_accepted(
    levels: int, leaf: object
) -> None:
    metadata = await normalised_object(nested_objects(levels, leaf))
    innermost = descend(metadata, levels)
    if isinstance(leaf, list):
        assert innermost == ()
    else:
        assert innermost == leaf


@pytest.mark.parametrize(
    ("levels", "leaf"),
    [
        pytest.param(65, {}, id="empty-object-at-depth-65"),
        pytest.param(65, [], id="empty-array-at-depth-65"),
        pytest.param(66, 1, id="object-at-depth-65-holding-a-primitive"),
        pytest.param(65, float("nan"), id="NaN-at-depth-65"),
    ],
)
async def test_container_at_depth_65_is_rejected_as_non_json(levels: int, leaf: object) -> None:
    await assert_metadata_rejected(nested_objects(levels, leaf), NON_JSON)


async def test_depth_limit_applies_to_arrays_too() -> None:
    # The top-level object is depth 0, so the outermost list is depth 1.
    accepted = await normalised_object({"k": nested_arrays(63, [])})
    innermost: object = accepted["k"]
    for _ in range(63):
        assert type(innermost) is tuple
        innermost = cast("tuple[object, ...]", innermost)[0]
    assert innermost == ()
    await assert_metadata_rejected({"k": nested_arrays(64, [])}, NON_JSON)
    await normalised_object({"k": nested_arrays(64, 1)})


async def test_very_deep_metadata_is_rejected_without_exhausting_the_stack() -> None:
    await assert_metadata_rejected(nested_objects(100_000, "bottom"), NON_JSON)
    await assert_metadata_rejected({"k": nested_arrays(100_000, "bottom")}, NON_JSON)


# ------------------------------------------------------------------ cycles and sharing


def self_referencing_dict() -> object:
    """{"self": <itself>}."""
    value: dict[str, object] = {}
    value["self"] = value
    return value


def self_referencing_list() -> object:
    """{"items": [<the list itself>]}."""
    items: list[object] = []
    items.append(items)
    return {"items": items}


def cycle_through_two_levels() -> object:
    """An object and an array that refer to each other."""
    outer: dict[str, object] = {}
    inner: list[object] = [1, outer]
    outer["inner"] = inner
    return {"start": outer}


def cycle_through_a_nested_proxy() -> object:
    """A proxy whose underlying dict holds the proxy itself."""
    underlying: dict[str, object] = {}
    proxy = types.MappingProxyType(underlying)
    underlying["again"] = proxy
    return {"proxy": proxy}


def cycle_through_the_top_level_proxy() -> object:
    """The top-level proxy is reachable from inside itself."""
    underlying: dict[str, object] = {}
    proxy = types.MappingProxyType(underlying)
    underlying["list"] = [proxy]
    return proxy


def cycle_back_to_the_root() -> object:
    """The innermost object refers back to the metadata object itself."""
    root: dict[str, object] = {}
    root["child"] = {"grandchild": {"root": root}}
    return root


@pytest.mark.parametrize(
    "make_metadata",
    [
        pytest.param(self_referencing_dict, id="dict-to-itself"),
        pytest.param(self_referencing_list, id="list-to-itself"),
        pytest.param(cycle_through_two_levels, id="dict-and-list"),
        pytest.param(cycle_through_a_nested_proxy, id="nested-MappingProxyType"),
        pytest.param(cycle_through_the_top_level_proxy, id="top-level-MappingProxyType"),
        pytest.param(cycle_back_to_the_root, id="back-to-the-root"),
    ],
)
async def test_cyclic_metadata_is_rejected(make_metadata: Callable[[], object]) -> None:
    await assert_metadata_rejected(make_metadata(), CYCLIC)


def chain_with_a_back_reference(innermost_depth: int) -> object:
    """A chain of objects whose innermost one (at ``innermost_depth``) refers back to the root."""
    root: dict[str, object] = {}
    current = root
    for _ in range(innermost_depth):
        child: dict[str, object] = {}
        current["next"] = child
        current = child
    current["back"] = root
    return root


async def test_cycle_reached_at_depth_64_is_reported_as_cyclic() -> None:
    await assert_metadata_rejected(chain_with_a_back_reference(63), CYCLIC)


async def test_depth_is_checked_before_cycles() -> None:
    # The root is reached again at depth 65: too deep is reported before cyclic.
    await assert_metadata_rejected(chain_with_a_back_reference(64), NON_JSON)


async def test_shared_acyclic_references_are_allowed() -> None:
    shared: dict[str, object] = {"x": 1, "tags": ["a", "b"]}
    metadata = await normalised_object({"a": shared, "b": shared, "c": [shared, shared], "d": {"e": shared}})
    expected = {"x": 1, "tags": ("a", "b")}
    assert metadata["a"] == expected
    assert metadata["b"] == expected
    assert metadata["c"] == (expected, expected)
    assert metadata["d"] == {"e": expected}


async def test_shared_list_is_allowed_as_sibling_items() -> None:
    shared = [1, 2]
    metadata = await normalised_object({"pairs": [shared, shared, shared]})
    assert metadata["pairs"] == ((1, 2), (1, 2), (1, 2))


def binary_dag(levels: int) -> list[object]:
    """Each level is a list holding the next level twice: 2**levels paths, ``levels + 1`` lists."""
    level: list[object] = []
    for _ in range(levels):
        level = [level, level]
    return level


def normalise_in_a_fresh_trio_run(metadata: object) -> Mapping[str, JsonValue] | None:
    """Run :func:`normalised` on this (worker) thread, so a runaway copy can be abandoned."""
    return trio.run(normalised, metadata)


async def test_large_shared_dag_is_copied_quickly() -> None:
    dag = binary_dag(60)
    with trio.fail_after(20):
        metadata = await trio.to_thread.run_sync(
            normalise_in_a_fresh_trio_run, {"dag": dag}, abandon_on_cancel=True
        )
    assert metadata is not None
    node: object = metadata["dag"]
    for _ in range(60):
        assert type(node) is tuple
        pair = cast("tuple[object, object]", node)
        assert len(pair) == 2
        assert pair[0] == pair[1]
        node = pair[0]
    assert node == ()


def counting_dag(levels: int) -> tuple[object, list[CountingMapping]]:
    """Like :func:`binary_dag`, but each level is a proxy over a mapping that counts its reads."""
    mappings: list[CountingMapping] = []
    level: object = types.MappingProxyType[str, object]({})
    for _ in range(levels):
        mapping = CountingMapping({"left": level, "right": level})
        mappings.append(mapping)
        level = types.MappingProxyType(mapping)
    return level, mappings


async def test_shared_proxy_in_a_dag_has_its_items_read_exactly_once() -> None:
    dag, mappings = counting_dag(60)
    metadata = await normalised_object({"dag": dag})
    assert [mapping.passes for mapping in mappings] == [1] * 60
    node: object = metadata["dag"]
    for _ in range(60):
        assert is_proxy(node)
        node = cast("Mapping[str, object]", node)["left"]
    assert node == {}


async def test_proxy_items_are_read_exactly_once() -> None:
    mapping = CountingMapping({"a": 1, "b": [2]})
    metadata = await normalised_object(types.MappingProxyType(mapping))
    assert metadata == {"a": 1, "b": (2,)}
    assert mapping.passes == 1
    assert all(count <= 1 for count in mapping.lookups.values())


SHARED_LEVELS = 10
"""The shared value below is 10 nested objects: its outermost object may sit no deeper than 55."""


def shared_chain() -> object:
    return nested_objects(SHARED_LEVELS, "leaf")


async def test_shared_value_reached_again_at_the_deepest_allowed_depth_is_accepted() -> None:
    shared = shared_chain()
    # "deep" is at depth 1, so the shared value sits 54 levels further down, at depth 55.
    metadata = await normalised_object({"shallow": shared, "deep": nested_objects(54, shared)})
    assert descend(cast("Mapping[str, JsonValue]", metadata["shallow"]), SHARED_LEVELS) == "leaf"
    deep = descend(cast("Mapping[str, JsonValue]", metadata["deep"]), 54)
    assert descend(cast("Mapping[str, JsonValue]", deep), SHARED_LEVELS) == "leaf"


async def test_unshared_value_one_level_too_deep_is_rejected() -> None:
    await assert_metadata_rejected({"deep": nested_objects(55, shared_chain())}, NON_JSON)


async def test_shared_value_reached_again_deeper_still_obeys_the_depth_limit() -> None:
    shared = shared_chain()
    # First met at depth 1, where it fits; met again at depth 56, where it does not.
    await assert_metadata_rejected({"shallow": shared, "deep": nested_objects(55, shared)}, NON_JSON)


async def test_shared_value_met_too_deep_first_is_rejected() -> None:
    shared = shared_chain()
    await assert_metadata_rejected({"deep": nested_objects(55, shared), "shallow": shared}, NON_JSON)


async def test_shared_array_reached_again_deeper_still_obeys_the_depth_limit() -> None:
    shared = nested_arrays(SHARED_LEVELS, 0)
    await normalised_object({"shallow": shared, "deep": nested_objects(54, shared)})
    await assert_metadata_rejected({"shallow": shared, "deep": nested_objects(55, shared)}, NON_JSON)


# ------------------------------------------------------------------ array length


async def test_array_of_100000_items_is_accepted_as_a_tuple() -> None:
    metadata = await normalised_object({"items": [0] * 100_000})
    items = metadata["items"]
    assert type(items) is tuple
    assert len(cast("tuple[object, ...]", items)) == 100_000


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param({"items": [0] * 100_001}, id="list"),
        pytest.param({"items": (0,) * 100_001}, id="tuple"),
        pytest.param({"outer": [[0] * 100_001]}, id="nested"),
    ],
)
async def test_array_longer_than_100000_items_is_rejected(metadata: object) -> None:
    await metadata_rejection(metadata)


# ------------------------------------------------------------------ the copy


async def test_output_is_a_read_only_mapping_proxy_with_tuples_for_arrays() -> None:
    source: dict[str, object] = {"files": 2, "names": ["a", "b"], "nested": {"list": [[1], {}]}}
    metadata = await normalised_object(source)
    assert metadata == {"files": 2, "names": ("a", "b"), "nested": {"list": ((1,), {})}}
    nested = metadata["nested"]
    assert is_proxy(nested)
    inner_list = cast("Mapping[str, object]", nested)["list"]
    assert type(inner_list) is tuple
    assert is_proxy(cast("tuple[object, ...]", inner_list)[1])
    assert type(metadata["names"]) is tuple


async def test_output_item_assignment_raises_type_error() -> None:
    metadata = await normalised_object({"files": 2, "nested": {"a": 1}, "names": ["a"]})
    writable = cast("dict[str, object]", metadata)
    with pytest.raises(TypeError):
        writable["files"] = 3
    with pytest.raises(TypeError):
        writable["added"] = 1
    with pytest.raises(TypeError):
        del writable["files"]
    with pytest.raises(TypeError):
        cast("dict[str, object]", metadata["nested"])["a"] = 2
    with pytest.raises(TypeError):
        cast("list[object]", metadata["names"])[0] = "b"
    assert metadata == {"files": 2, "nested": {"a": 1}, "names": ("a",)}


async def test_snapshot_metadata_attribute_cannot_be_replaced() -> None:
    snapshot = await snapshot_of({"id": "s", "created_at": "t", "metadata": {"a": 1}})
    with pytest.raises(AttributeError):
        snapshot.metadata = {}  # pyright: ignore[reportAttributeAccessIssue]


async def test_output_keeps_source_key_order() -> None:
    metadata = await normalised_object({"b": 1, "a": 2, "c": {"z": 1, "y": 2}})
    assert list(metadata) == ["b", "a", "c"]
    assert list(cast("Mapping[str, object]", metadata["c"])) == ["z", "y"]


async def test_output_is_detached_from_later_adapter_mutation() -> None:
    names = ["a.txt"]
    counts: dict[str, object] = {"files": 1}
    source: dict[str, object] = {"names": names, "counts": counts}
    metadata = await normalised_object(source)
    names.append("injected.txt")
    counts["files"] = 99
    source["added"] = True
    del source["names"]
    assert metadata == {"names": ("a.txt",), "counts": {"files": 1}}


async def test_output_shares_no_container_with_proxies_the_adapter_returned() -> None:
    inner = types.MappingProxyType({"a": 1})
    items = (1, 2)
    source = types.MappingProxyType({"inner": inner, "items": items})
    metadata = await normalised_object(source)
    assert metadata is not source
    assert metadata["inner"] is not inner
    assert metadata == {"inner": {"a": 1}, "items": (1, 2)}


async def test_already_normalised_snapshot_re_validates() -> None:
    first = await snapshot_of(
        {
            "id": "s",
            "created_at": "t",
            "metadata": {"files": 2, "names": ["a", "b"], "nested": {"deep": [{"x": None}]}},
        }
    )
    assert first.metadata is not None
    second = await snapshot_of(first)
    assert second is not first
    assert second == first
    assert second.metadata is not first.metadata
    assert is_proxy(second.metadata)


async def test_metadata_in_a_snapshot_struct_is_validated_like_the_dict_form() -> None:
    snapshot = await snapshot_of(build_snapshot(id="s", created_at="t", metadata={"a": [1, {"b": 2.5}]}))
    assert snapshot.metadata == {"a": (1, {"b": 2.5})}
    assert is_proxy(snapshot.metadata)
