"""Property tests for ``invoke_workspace_operation`` (spec §3.5-3.10).

Hypothesis generates malformed requests (wrong types at every level, subclasses, extra and
missing keys, bool for int, deep nesting, cycles, hostile keys) and adapter results of any
shape. Whatever it finds, only typed ``WorkspaceOperationError``s may escape, a malformed
request never reaches the adapter, and a well-formed one reaches it exactly once.
"""

from __future__ import annotations

import collections
import math
import types
from collections.abc import Callable, Mapping
from typing import Final, TypeVar, cast

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    AbortController,
    AbortSignal,
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    WorkspaceOperationError,
    WorkspaceOperationMalformedError,
    WorkspaceSnapshot,
    invoke_workspace_operation,
)

MAX_SAFE_INTEGER: Final = 2**53 - 1
MAX_ARRAY_LENGTH: Final = 100_000
MAX_DEPTH: Final = 64
VOCABULARY: Final = frozenset(WORKSPACE_CAPABILITIES)
ALLOWED_KEYS: Final[dict[str, frozenset[str]]] = {
    "read_file": frozenset({"operation", "path"}),
    "list_files": frozenset({"operation", "path"}),
    "write_file": frozenset({"operation", "path", "contents"}),
    "execute": frozenset({"operation", "command"}),
    "diff": frozenset({"operation"}),
    "snapshot": frozenset({"operation"}),
    "dispose": frozenset({"operation"}),
}
REQUIRED_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "read_file": ("path",),
    "list_files": ("path",),
    "write_file": ("path", "contents"),
    "execute": ("command",),
}
COMMAND_KEYS: Final = ("argv", "cwd", "timeout_ms", "signal")

Key = TypeVar("Key")

PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# ------------------------------------------------------------------ adapters


class RecordingWorkspace:
    """Records every call with its arguments and answers each operation with a valid result."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    async def read_file(self, path: str) -> str:
        self.calls.append(("read_file", (path,)))
        return "text"

    async def write_file(self, path: str, contents: str) -> None:
        self.calls.append(("write_file", (path, contents)))

    async def list_files(self, path: str) -> list[str]:
        self.calls.append(("list_files", (path,)))
        return ["a.txt"]

    async def execute(self, command: CommandRequest) -> CommandResult:
        self.calls.append(("execute", (command,)))
        return CommandResult(exit_code=0, stdout="", stderr="")

    async def diff(self) -> str:
        self.calls.append(("diff", ()))
        return ""

    async def snapshot(self) -> WorkspaceSnapshot:
        self.calls.append(("snapshot", ()))
        return WorkspaceSnapshot(id="s", created_at="t")

    async def dispose(self) -> None:
        self.calls.append(("dispose", ()))


class ScriptedWorkspace:
    """Answers every operation with one scripted value."""

    def __init__(self, answer: object) -> None:
        self.answer = answer

    async def read_file(self, path: str) -> object:
        return self.answer

    async def write_file(self, path: str, contents: str) -> object:
        return self.answer

    async def list_files(self, path: str) -> object:
        return self.answer

    async def execute(self, command: CommandRequest) -> object:
        return self.answer

    async def diff(self) -> object:
        return self.answer

    async def snapshot(self) -> object:
        return self.answer

    async def dispose(self) -> object:
        return self.answer


class TripwireWorkspace:
    """Records every attribute lookup; binding a workspace must not start for a bad request."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def __getattr__(self, name: str) -> object:
        self.touched.append(name)
        raise AttributeError(name)


# ------------------------------------------------------------------ odd values


class StrSubclass(str):
    """A ``str`` subclass."""


class IntSubclass(int):
    """An ``int`` subclass."""


class FloatSubclass(float):
    """A ``float`` subclass."""


class DictSubclass(dict[object, object]):
    """A ``dict`` subclass."""


class ListSubclass(list[object]):
    """A ``list`` subclass."""


class TupleSubclass(tuple[object, ...]):
    """A ``tuple`` subclass."""


class LookalikeSignal:
    """Quacks like an ``AbortSignal`` without being one."""

    aborted = False
    reason: object = None


class HostileKey:
    """A key that hashes like ``"operation"`` and, once armed, fails loudly if compared or hashed."""

    def __init__(self) -> None:
        self.armed = False

    def __hash__(self) -> int:
        if self.armed:
            raise AssertionError("caller code ran inside the dispatcher: __hash__")
        return hash("operation")

    def __eq__(self, other: object) -> bool:
        if self.armed:
            raise AssertionError("caller code ran inside the dispatcher: __eq__")
        return self is other


def ordered_dict(items: Mapping[object, object]) -> object:
    """An ``OrderedDict`` copy of ``items``."""
    return collections.OrderedDict(items)


def dict_subclass(items: Mapping[object, object]) -> object:
    """A ``dict`` subclass copy of ``items``."""
    return DictSubclass(items)


def defaultdict_copy(items: Mapping[object, object]) -> object:
    """A ``defaultdict`` copy of ``items``."""
    return collections.defaultdict[object, object](list, items)


def proxy_copy(items: Mapping[Key, object]) -> object:
    """A read-only proxy over a copy of ``items``."""
    return types.MappingProxyType(dict(items))


def nest(depth: int, leaf: object, *, in_dicts: bool) -> object:
    """Wrap ``leaf`` in ``depth`` one-element lists or one-key dicts."""
    value = leaf
    for _ in range(depth):
        value = {"k": value} if in_dicts else [value]
    return value


def self_containing_list() -> object:
    """A list that contains itself."""
    value: list[object] = [1]
    value.append(value)
    return value


def self_containing_dict() -> object:
    """A dict that contains itself."""
    value: dict[str, object] = {"argv": ["ls"]}
    value["self"] = value
    return value


def pending_signal() -> AbortSignal:
    """A genuine signal that has not been aborted."""
    return AbortController().signal


build_command_request = cast("Callable[..., CommandRequest]", CommandRequest)
build_command_result = cast("Callable[..., CommandResult]", CommandResult)
build_snapshot = cast("Callable[..., WorkspaceSnapshot]", WorkspaceSnapshot)


# ------------------------------------------------------------------ strategies: values of any shape

odd_scalars: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=MAX_SAFE_INTEGER - 2, max_value=2**64),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.builds(StrSubclass, st.text(max_size=4)),
    st.builds(IntSubclass, st.integers()),
    st.builds(FloatSubclass, st.floats(allow_nan=False)),
    st.builds(LookalikeSignal),
    st.builds(object),
    st.builds(bytearray, st.binary(max_size=4)),
    st.frozensets(st.integers(), max_size=2),
    st.sampled_from(
        [CommandResult(exit_code=0, stdout="", stderr=""), WorkspaceSnapshot(id="s", created_at="t")]
    ),
)

non_string_keys: st.SearchStrategy[object] = st.one_of(
    st.integers(),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.binary(max_size=3),
    st.tuples(st.text(max_size=3)),
    st.builds(StrSubclass, st.sampled_from(["operation", "path", "argv", "exit_code", "id"])),
)

odd_keys: st.SearchStrategy[object] = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["operation", "path", "contents", "command", "argv", "cwd", "timeout_ms", "signal"]),
    non_string_keys,
)


def extend_containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Containers of every kind the contract rejects or accepts, around ``children``."""
    mappings = st.dictionaries(odd_keys, children, max_size=3)
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        mappings,
        st.lists(children, max_size=3).map(ListSubclass),
        st.lists(children, max_size=3).map(TupleSubclass),
        mappings.map(dict_subclass),
        mappings.map(ordered_dict),
        mappings.map(proxy_copy),
    )


anything: st.SearchStrategy[object] = st.recursive(odd_scalars, extend_containers, max_leaves=6)

deeply_nested: st.SearchStrategy[object] = st.builds(
    nest, st.integers(min_value=1, max_value=1_500), anything, in_dicts=st.booleans()
)

cyclic: st.SearchStrategy[object] = st.one_of(
    st.builds(self_containing_list), st.builds(self_containing_dict)
)

any_value: st.SearchStrategy[object] = st.one_of(anything, deeply_nested, cyclic)

non_dict_values: st.SearchStrategy[object] = st.one_of(
    odd_scalars,
    st.lists(anything, max_size=3),
    st.lists(anything, max_size=3).map(tuple),
    st.dictionaries(odd_keys, anything, max_size=3).map(dict_subclass),
    st.dictionaries(odd_keys, anything, max_size=3).map(ordered_dict),
    st.dictionaries(odd_keys, anything, max_size=3).map(proxy_copy),
    st.builds(nest, st.integers(min_value=1, max_value=1_500), anything, in_dicts=st.just(False)),
    st.builds(self_containing_list),
)


# ------------------------------------------------------------------ strategies: requests


def is_safe_integer(value: object) -> bool:
    return type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def is_valid_path(value: object) -> bool:
    return type(value) is str and value != ""


def is_valid_contents(value: object) -> bool:
    return type(value) is str


def is_valid_argv(value: object) -> bool:
    if type(value) is not list and type(value) is not tuple:
        return False
    items = cast("list[object] | tuple[object, ...]", value)
    if not 1 <= len(items) <= MAX_ARRAY_LENGTH:
        return False
    return is_valid_path(items[0]) and all(type(item) is str for item in items[1:])


def is_valid_cwd(value: object) -> bool:
    return value is None or is_valid_path(value)


def is_valid_timeout(value: object) -> bool:
    return value is None or (type(value) is int and 0 <= value <= MAX_SAFE_INTEGER)


def is_valid_signal(value: object) -> bool:
    return value is None or type(value) is AbortSignal


COMMAND_FIELD_CHECKS: Final[dict[str, Callable[[object], bool]]] = {
    "argv": is_valid_argv,
    "cwd": is_valid_cwd,
    "timeout_ms": is_valid_timeout,
    "signal": is_valid_signal,
}


def argv_with_a_bad_argument(items: tuple[str, list[str], object, int]) -> object:
    """A valid argv with one argument after the program replaced by a non-string."""
    program, arguments, bad, position = items
    rest: list[object] = list(arguments)
    rest.insert(position % (len(rest) + 1), bad)
    return [program, *rest]


def program_then_arguments(items: tuple[object, list[str]]) -> object:
    """An argv list from a (possibly invalid) program and its arguments."""
    program, arguments = items
    return [program, *arguments]


INVALID_COMMAND_FIELDS: Final[dict[str, st.SearchStrategy[object]]] = {
    "argv": st.one_of(
        st.sampled_from([[], (), [""], "ls -l", b"ls", None, {"0": "ls"}, ["ls", 1], ["ls", "-l", None]]),
        st.builds(ListSubclass, st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=3)),
        st.builds(TupleSubclass, st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=3)),
        st.tuples(
            st.one_of(
                st.just(""),
                st.builds(StrSubclass, st.text(min_size=1, max_size=3)),
                odd_scalars.filter(lambda value: type(value) is not str),
            ),
            st.lists(st.text(max_size=3), max_size=3),
        ).map(program_then_arguments),
        st.tuples(
            st.text(min_size=1, max_size=4),
            st.lists(st.text(max_size=3), max_size=3),
            odd_scalars.filter(lambda value: type(value) is not str),
            st.integers(0, 5),
        ).map(argv_with_a_bad_argument),
    ),
    "cwd": st.one_of(
        st.just(""),
        st.builds(StrSubclass, st.text(min_size=1, max_size=3)),
        odd_scalars.filter(lambda value: value is not None and type(value) is not str),
    ),
    "timeout_ms": st.one_of(
        st.booleans(),
        st.integers(max_value=-1),
        st.integers(min_value=MAX_SAFE_INTEGER + 1),
        st.floats(),
        st.builds(IntSubclass, st.integers(0, 1_000)),
        st.sampled_from(["5", 5.0, 0.0]),
    ),
    "signal": st.one_of(
        st.builds(LookalikeSignal),
        st.builds(AbortController),
        st.sampled_from(["signal", True, 0, AbortSignal]),
        odd_scalars.filter(lambda value: value is not None),
    ),
}


genuine_signals: st.SearchStrategy[AbortSignal] = st.one_of(
    st.builds(pending_signal), st.builds(AbortSignal.aborted_with, st.text(max_size=4))
)


@st.composite
def valid_command_fields(draw: st.DrawFn) -> dict[str, object]:
    """The fields of a well-formed command (optional ones present or absent, ``None`` or set)."""
    argv = [draw(st.text(min_size=1, max_size=6)), *draw(st.lists(st.text(max_size=6), max_size=4))]
    fields: dict[str, object] = {"argv": tuple(argv) if draw(st.booleans()) else argv}
    if draw(st.booleans()):
        fields["cwd"] = draw(st.one_of(st.none(), st.text(min_size=1, max_size=6)))
    if draw(st.booleans()):
        fields["timeout_ms"] = draw(
            st.one_of(st.none(), st.integers(0, 60_000), st.integers(0, MAX_SAFE_INTEGER))
        )
    if draw(st.booleans()):
        fields["signal"] = draw(st.one_of(st.none(), genuine_signals))
    return fields


def command_in_form(fields: dict[str, object], as_struct: bool) -> object:
    """The command as a plain dict or as an exact ``CommandRequest``."""
    return build_command_request(**fields) if as_struct else dict(fields)


@st.composite
def valid_requests(draw: st.DrawFn) -> dict[str, object]:
    """A well-formed request for any of the seven operations."""
    operation = draw(st.sampled_from(WORKSPACE_CAPABILITIES))
    request: dict[str, object] = {"operation": operation}
    if operation in ("read_file", "list_files", "write_file"):
        request["path"] = draw(st.text(min_size=1, max_size=10))
    if operation == "write_file":
        request["contents"] = draw(st.text(max_size=10))
    if operation == "execute":
        request["command"] = command_in_form(draw(valid_command_fields()), draw(st.booleans()))
    return request


@st.composite
def malformed_commands(draw: st.DrawFn) -> object:
    """A command that breaks exactly one rule of §3.7 (and possibly more)."""
    fields = draw(valid_command_fields())
    mutation = draw(
        st.sampled_from(["field", "field", "field", "bool-for-int", "extra-key", "non-str-key", "container"])
    )
    if mutation == "field":
        key = draw(st.sampled_from(COMMAND_KEYS))
        check = COMMAND_FIELD_CHECKS[key]
        candidates = any_value if draw(st.integers(0, 3)) == 0 else INVALID_COMMAND_FIELDS[key]
        fields[key] = draw(candidates.filter(lambda value: not check(value)))
        return command_in_form(fields, draw(st.booleans()))
    if mutation == "bool-for-int":
        fields["timeout_ms"] = draw(st.booleans())
        return command_in_form(fields, draw(st.booleans()))
    if mutation == "extra-key":
        extra = draw(st.text(max_size=8).filter(lambda key: key not in COMMAND_KEYS))
        return {**fields, extra: draw(any_value)}
    if mutation == "non-str-key":
        return {**fields, draw(non_string_keys): draw(any_value)}
    wrap = draw(st.sampled_from([ordered_dict, dict_subclass, defaultdict_copy, proxy_copy]))
    return wrap(cast("dict[object, object]", fields))


def is_valid_field(key: str, value: object) -> bool:
    if key == "path":
        return is_valid_path(value)
    if key == "contents":
        return is_valid_contents(value)
    return type(value) is CommandRequest or type(value) is dict


@st.composite
def malformed_requests(draw: st.DrawFn) -> object:
    """A request that violates the envelope or a field rule of §3.6-3.7."""
    request = draw(valid_requests())
    operation = cast("str", request["operation"])
    fields = REQUIRED_FIELDS.get(operation, ())
    mutations = ["not-a-dict", "dict-subclass", "non-str-key", "hostile-key", "name", "extra-key", "cycle"]
    if fields:
        mutations += ["missing-field", "wrong-field", "deep-field"]
    if operation == "execute":
        mutations += ["bad-command"]
    mutation = draw(st.sampled_from(mutations))

    if mutation == "not-a-dict":
        return draw(non_dict_values)
    if mutation == "dict-subclass":
        wrap = draw(st.sampled_from([ordered_dict, dict_subclass, defaultdict_copy, proxy_copy]))
        return wrap(cast("dict[object, object]", request))
    if mutation == "non-str-key":
        return {**request, draw(non_string_keys): draw(any_value)}
    if mutation == "hostile-key":
        # The hostile key goes first, so any lookup of "operation" would have to compare it.
        hostile = HostileKey()
        with_hostile_key: dict[object, object] = {hostile: 1, **request}
        hostile.armed = True
        return with_hostile_key
    if mutation == "name":
        name = draw(
            st.one_of(
                any_value,
                st.sampled_from(["readFile", "writeFile", "listFiles", "READ_FILE", "Diff", "", None]),
            ).filter(lambda value: type(value) is not str or value not in VOCABULARY)
        )
        return {**request, "operation": name}
    if mutation == "extra-key":
        allowed = ALLOWED_KEYS[operation]
        extra = draw(
            st.one_of(st.text(max_size=8), st.sampled_from(["path", "command", "timeoutMs", "Path"])).filter(
                lambda key: key not in allowed
            )
        )
        return {**request, extra: draw(st.one_of(st.none(), any_value))}
    if mutation == "cycle":
        key = draw(st.sampled_from(fields)) if fields else "self"
        cyclic_request: dict[str, object] = dict(request)
        cyclic_request[key] = cyclic_request
        return cyclic_request
    if mutation == "missing-field":
        missing = draw(st.sampled_from(fields))
        return {key: value for key, value in request.items() if key != missing}
    if mutation == "wrong-field":
        key = draw(st.sampled_from(fields))
        candidates = non_dict_values if key == "command" else any_value
        value = draw(candidates.filter(lambda value: not is_valid_field(key, value)))
        return {**request, key: value}
    if mutation == "deep-field":
        key = draw(st.sampled_from(fields))
        return {**request, key: draw(deeply_nested)}
    return {**request, "command": draw(malformed_commands())}


# ------------------------------------------------------------------ properties: requests


@PROPERTY_SETTINGS
@given(candidate=malformed_requests())
async def test_malformed_request_raises_only_a_typed_workspace_error(candidate: object) -> None:
    with pytest.raises(WorkspaceOperationError):
        await invoke_workspace_operation(MemoryWorkspace({"a": "b"}), candidate)


@PROPERTY_SETTINGS
@given(candidate=malformed_requests())
async def test_malformed_request_never_reaches_the_adapter(candidate: object) -> None:
    memory = MemoryWorkspace({"a": "b"})
    with pytest.raises(WorkspaceOperationError) as with_adapter:
        await invoke_workspace_operation(memory, candidate)
    assert memory.calls == []

    tripwire = TripwireWorkspace()
    with pytest.raises(WorkspaceOperationError) as with_tripwire:
        await invoke_workspace_operation(tripwire, candidate)
    assert tripwire.touched == []

    with pytest.raises(WorkspaceOperationError) as without_workspace:
        await invoke_workspace_operation(None, candidate)

    for other in (with_tripwire.value, without_workspace.value):
        assert type(other) is type(with_adapter.value)
        assert (other.code, str(other), other.operation) == (
            with_adapter.value.code,
            str(with_adapter.value),
            with_adapter.value.operation,
        )


@PROPERTY_SETTINGS
@given(candidate=st.one_of(any_value, valid_requests(), malformed_requests()))
async def test_any_request_is_either_refused_with_a_typed_error_or_reaches_the_adapter_once(
    candidate: object,
) -> None:
    adapter = RecordingWorkspace()
    try:
        await invoke_workspace_operation(adapter, candidate)
    except WorkspaceOperationError as error:
        event(f"refused: {error.code}")
        assert adapter.calls == []
    else:
        event("accepted")
        assert len(adapter.calls) == 1


@PROPERTY_SETTINGS
@given(command=malformed_commands())
async def test_malformed_command_raises_only_a_typed_error_and_never_reaches_the_adapter(
    command: object,
) -> None:
    memory = MemoryWorkspace()
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        await invoke_workspace_operation(memory, {"operation": "execute", "command": command})
    assert caught.value.operation == "execute"
    assert memory.calls == []


def assert_received_command_matches(received: object, sent: object) -> None:
    """The adapter's command is a new ``CommandRequest`` equal to what the caller sent."""
    assert type(received) is CommandRequest
    assert received is not sent
    fields = (
        {key: getattr(sent, key) for key in COMMAND_KEYS}
        if type(sent) is CommandRequest
        else cast("dict[str, object]", sent)
    )
    assert type(received.argv) is tuple
    assert received.argv == tuple(cast("list[str]", fields["argv"]))
    assert received.cwd == fields.get("cwd")
    assert received.timeout_ms == fields.get("timeout_ms")
    sent_signal = fields.get("signal")
    if sent_signal is None:
        assert received.signal is None
        return
    assert type(sent_signal) is AbortSignal
    assert type(received.signal) is AbortSignal
    assert received.signal is not sent_signal
    assert received.signal.aborted == sent_signal.aborted
    assert received.signal.reason is sent_signal.reason


@PROPERTY_SETTINGS
@given(candidate=valid_requests())
async def test_well_formed_request_reaches_the_adapter_exactly_once_with_equal_arguments(
    candidate: dict[str, object],
) -> None:
    adapter = RecordingWorkspace()
    await invoke_workspace_operation(adapter, candidate)
    assert len(adapter.calls) == 1
    operation, arguments = adapter.calls[0]
    assert operation == candidate["operation"]
    if operation in ("read_file", "list_files"):
        assert arguments == (candidate["path"],)
        assert arguments[0] is candidate["path"]
    elif operation == "write_file":
        assert arguments == (candidate["path"], candidate["contents"])
        assert arguments[0] is candidate["path"]
        assert arguments[1] is candidate["contents"]
    elif operation == "execute":
        assert len(arguments) == 1
        assert_received_command_matches(arguments[0], candidate["command"])
    else:
        assert arguments == ()


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
