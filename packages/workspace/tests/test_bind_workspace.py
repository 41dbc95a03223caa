"""``bind_workspace``: receiver-bound frozen facades over an adapter (spec §3.3 and §2)."""

from __future__ import annotations

import collections
import enum
import functools
import types
from collections.abc import Awaitable, Callable, Iterator
from typing import NamedTuple, NoReturn

import pytest
import trio

from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    WORKSPACE_OPERATION_MALFORMED,
    WORKSPACE_OPERATION_REQUIRED,
    WORKSPACE_OPERATION_UNSUPPORTED,
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    Workspace,
    WorkspaceOperationError,
    WorkspaceOperationMalformedError,
    WorkspaceOperationRequiredError,
    WorkspaceOperationUnsupportedError,
    WorkspaceSnapshot,
    bind_workspace,
    invoke_workspace_operation,
    restrict_workspace,
)

# ------------------------------------------------------------------ helpers


class RecordingAdapter:
    """A complete adapter whose state (``files``) and call log stay observable."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files: dict[str, str] = dict(files or {})
        self.calls: list[str] = []

    async def read_file(self, path: str) -> str:
        self.calls.append("read_file")
        return self.files[path]

    async def write_file(self, path: str, contents: str) -> None:
        self.calls.append("write_file")
        self.files[path] = contents

    async def list_files(self, path: str) -> list[str]:
        self.calls.append("list_files")
        return sorted(self.files)

    async def execute(self, command: CommandRequest) -> CommandResult:
        self.calls.append("execute")
        return CommandResult(exit_code=0, stdout=" ".join(command.argv), stderr="")

    async def diff(self) -> str:
        self.calls.append("diff")
        return ""

    async def snapshot(self) -> WorkspaceSnapshot:
        self.calls.append("snapshot")
        return WorkspaceSnapshot(id="rec-1", created_at="2026-01-01T00:00:00Z")

    async def dispose(self) -> None:
        self.calls.append("dispose")


async def _async_noop(*arguments: object) -> None:
    del arguments


def namespace_with(capabilities: Iterator[str] | tuple[str, ...]) -> types.SimpleNamespace:
    """An object carrying a callable for each of ``capabilities`` and nothing else."""
    return types.SimpleNamespace(**dict.fromkeys(capabilities, _async_noop))


def instance_of_class(name: str, namespace: dict[str, object]) -> object:
    """Build a class from ``namespace`` and return a new instance of it."""
    built: type = type(name, (), namespace)
    instance: object = built()
    return instance


def complete_namespace(**overrides: object) -> dict[str, object]:
    """A class namespace with an ``async`` method per capability, then ``overrides``."""
    namespace: dict[str, object] = dict.fromkeys(WORKSPACE_CAPABILITIES, _async_noop)
    namespace.update(overrides)
    return namespace


def raising_property(error: BaseException) -> property:
    def getter(self: object) -> NoReturn:
        raise error

    return property(getter)


class SevenMethods:
    """Mix-in giving any class the seven operations, to show that data stays data."""

    async def read_file(self, path: str) -> str:
        return "mixed-in"

    async def write_file(self, path: str, contents: str) -> None:
        return None

    async def list_files(self, path: str) -> list[str]:
        return []

    async def execute(self, command: CommandRequest) -> CommandResult:
        return CommandResult(exit_code=0, stdout="", stderr="")

    async def diff(self) -> str:
        return ""

    async def snapshot(self) -> WorkspaceSnapshot:
        return WorkspaceSnapshot(id="mixed", created_at="now")

    async def dispose(self) -> None:
        return None


class StrWithMethods(SevenMethods, str):
    pass


class DictWithMethods(SevenMethods, dict[str, str]):
    pass


class ListWithMethods(SevenMethods, list[str]):
    pass


class IntWithMethods(SevenMethods, int):
    pass


class Colour(enum.IntEnum):
    RED = 1


class Pair(NamedTuple):
    left: int
    right: int


def plain_function() -> None:
    return None


def function_with_capabilities() -> Callable[[], None]:
    def carrier() -> None:
        return None

    for capability in WORKSPACE_CAPABILITIES:
        setattr(carrier, capability, _async_noop)
    return carrier


def assert_unsupported(error: WorkspaceOperationUnsupportedError, capability: str) -> None:
    assert error.code == WORKSPACE_OPERATION_UNSUPPORTED
    assert error.operation == capability
    assert str(error) == f"workspace does not support operation: {capability}"


# ------------------------------------------------------------------ step 1: None


def test_binding_none_raises_required_with_the_default_message() -> None:
    with pytest.raises(WorkspaceOperationRequiredError) as caught:
        bind_workspace(None)
    assert caught.value.code == WORKSPACE_OPERATION_REQUIRED
    assert caught.value.operation is None
    assert str(caught.value) == "workspace capability is required"


# ------------------------------------------------------------------ step 2: data and routines

DATA_VALUES = [
    pytest.param("workspace", id="str"),
    pytest.param("", id="empty-str"),
    pytest.param(b"workspace", id="bytes"),
    pytest.param(bytearray(b"workspace"), id="bytearray"),
    pytest.param(0, id="int"),
    pytest.param(1.5, id="float"),
    pytest.param(2j, id="complex"),
    pytest.param(True, id="bool"),
    pytest.param(False, id="false"),
    pytest.param(["read_file"], id="list"),
    pytest.param(("read_file",), id="tuple"),
    pytest.param({"read_file": _async_noop}, id="dict"),
    pytest.param({"read_file"}, id="set"),
    pytest.param(frozenset({"read_file"}), id="frozenset"),
    pytest.param(Colour.RED, id="int-enum-member"),
    pytest.param(Pair(1, 2), id="namedtuple"),
    pytest.param(collections.OrderedDict[str, object](read_file=_async_noop), id="ordered-dict"),
    pytest.param(collections.defaultdict[str, int](int), id="defaultdict"),
    pytest.param(collections.Counter("abc"), id="counter"),
    pytest.param(StrWithMethods("text"), id="str-subclass-with-all-seven-methods"),
    pytest.param(DictWithMethods(), id="dict-subclass-with-all-seven-methods"),
    pytest.param(ListWithMethods(), id="list-subclass-with-all-seven-methods"),
    pytest.param(IntWithMethods(3), id="int-subclass-with-all-seven-methods"),
]

ROUTINE_VALUES = [
    pytest.param(RecordingAdapter, id="adapter-class"),
    pytest.param(MemoryWorkspace, id="memory-workspace-class"),
    pytest.param(object, id="builtin-class"),
    pytest.param(plain_function, id="function"),
    pytest.param(lambda: None, id="lambda"),
    pytest.param(function_with_capabilities(), id="function-with-all-seven-attributes"),
    pytest.param(RecordingAdapter().read_file, id="bound-method"),
    pytest.param(MemoryWorkspace().dispose, id="bound-method-of-memory-workspace"),
    pytest.param(len, id="builtin-function"),
    pytest.param(list[int]().append, id="builtin-method"),
    pytest.param(str.upper, id="method-descriptor"),
]


@pytest.mark.parametrize("value", DATA_VALUES + ROUTINE_VALUES)
def test_binding_data_or_a_routine_raises_malformed_must_be_an_object(value: object) -> None:
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        bind_workspace(value)
    assert caught.value.code == WORKSPACE_OPERATION_MALFORMED
    assert caught.value.operation is None
    assert str(caught.value) == "workspace capability must be an object"


# ------------------------------------------------------------------ step 3: capabilities


def test_an_object_with_no_capability_reports_read_file_as_unsupported() -> None:
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        bind_workspace(object())
    assert_unsupported(caught.value, "read_file")


def test_a_module_object_without_capabilities_reports_read_file_as_unsupported() -> None:
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        bind_workspace(types.ModuleType("not_a_workspace"))
    assert_unsupported(caught.value, "read_file")


@pytest.mark.parametrize("missing", WORKSPACE_CAPABILITIES)
def test_the_only_missing_capability_is_reported_as_unsupported(missing: str) -> None:
    value = namespace_with(cap for cap in WORKSPACE_CAPABILITIES if cap != missing)
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        bind_workspace(value)
    assert_unsupported(caught.value, missing)


@pytest.mark.parametrize("first_missing_index", range(len(WORKSPACE_CAPABILITIES)))
def test_only_the_first_missing_capability_in_canonical_order_is_reported(first_missing_index: int) -> None:
    present = WORKSPACE_CAPABILITIES[:first_missing_index]
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        bind_workspace(namespace_with(present))
    assert_unsupported(caught.value, WORKSPACE_CAPABILITIES[first_missing_index])


@pytest.mark.parametrize("capability", WORKSPACE_CAPABILITIES)
@pytest.mark.parametrize(
    "non_callable",
    [
        pytest.param(None, id="None"),
        pytest.param("method", id="str"),
        pytest.param(42, id="int"),
        pytest.param({"__call__": _async_noop}, id="dict-with-call-key"),
    ],
)
def test_a_non_callable_capability_is_reported_as_unsupported(capability: str, non_callable: object) -> None:
    value = instance_of_class("Adapter", complete_namespace(**{capability: non_callable}))
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        bind_workspace(value)
    assert_unsupported(caught.value, capability)


@pytest.mark.parametrize("capability", WORKSPACE_CAPABILITIES)
def test_a_getter_raising_attribute_error_counts_as_absent(capability: str) -> None:
    getter = raising_property(AttributeError(f"no {capability} here"))
    value = instance_of_class("Adapter", complete_namespace(**{capability: getter}))
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        bind_workspace(value)
    assert_unsupported(caught.value, capability)


@pytest.mark.parametrize("capability", WORKSPACE_CAPABILITIES)
@pytest.mark.parametrize(
    "error_class", [RuntimeError, ValueError, KeyError, TypeError, WorkspaceOperationUnsupportedError]
)
def test_a_getter_raising_another_exception_is_malformed_with_the_original_as_cause(
    capability: str, error_class: Callable[[str], Exception]
) -> None:
    original = error_class(capability)
    value = instance_of_class("Adapter", complete_namespace(**{capability: raising_property(original)}))
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        bind_workspace(value)
    assert caught.value.code == WORKSPACE_OPERATION_MALFORMED
    assert caught.value.operation == capability
    assert str(caught.value) == f"workspace capability {capability} could not be inspected"
    assert caught.value.__cause__ is original


def test_a_failing_getter_later_in_canonical_order_is_not_reached_when_an_earlier_one_fails() -> None:
    first = RuntimeError("first")
    value = instance_of_class(
        "Adapter",
        complete_namespace(
            list_files=raising_property(first), snapshot=raising_property(RuntimeError("second"))
        ),
    )
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        bind_workspace(value)
    assert caught.value.operation == "list_files"
    assert caught.value.__cause__ is first


def test_a_dunder_getattr_raising_a_non_attribute_error_is_malformed_for_read_file() -> None:
    original = LookupError("dynamic lookup failed")

    class Dynamic:
        def __getattr__(self, name: str) -> object:
            raise original

    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        bind_workspace(Dynamic())
    assert caught.value.operation == "read_file"
    assert str(caught.value) == "workspace capability read_file could not be inspected"
    assert caught.value.__cause__ is original


def test_a_dunder_getattr_raising_attribute_error_reports_read_file_as_unsupported() -> None:
    class Dynamic:
        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        bind_workspace(Dynamic())
    assert_unsupported(caught.value, "read_file")


async def test_a_dunder_getattr_that_supplies_every_capability_binds() -> None:
    class Dynamic:
        def __getattr__(self, name: str) -> object:
            if name not in WORKSPACE_CAPABILITIES:
                raise AttributeError(name)

            async def operation(*arguments: object) -> object:
                return f"dynamic {name}"

            return operation

    workspace = bind_workspace(Dynamic())
    assert await workspace.read_file("anything") == "dynamic read_file"


def test_a_dunder_getattribute_raising_everywhere_is_malformed_not_an_untyped_crash() -> None:
    original = RuntimeError("getattribute exploded")

    class Hostile:
        def __getattribute__(self, name: str) -> object:
            raise original

    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        bind_workspace(Hostile())
    assert caught.value.operation == "read_file"
    assert caught.value.__cause__ is original


# ------------------------------------------------------------------ BaseException propagation


async def capture_real_cancelled() -> trio.Cancelled:
    """Return a genuine ``trio.Cancelled`` instance raised by a cancelled checkpoint."""
    captured: list[trio.Cancelled] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as cancelled:
            captured.append(cancelled)
            raise
    assert scope.cancelled_caught
    return captured[0]


class CustomBaseException(BaseException):
    """A ``BaseException`` that is not an ``Exception``, like ``trio.Cancelled``."""


@pytest.mark.parametrize(
    "make_error",
    [
        pytest.param(KeyboardInterrupt, id="keyboard-interrupt"),
        pytest.param(lambda: SystemExit(3), id="system-exit"),
        pytest.param(CustomBaseException, id="custom-base-exception"),
        pytest.param(GeneratorExit, id="generator-exit"),
    ],
)
@pytest.mark.parametrize("capability", ["read_file", "execute", "dispose"])
def test_a_base_exception_from_a_getter_propagates_untouched(
    make_error: Callable[[], BaseException], capability: str
) -> None:
    original = make_error()
    value = instance_of_class("Adapter", complete_namespace(**{capability: raising_property(original)}))
    with pytest.raises(BaseException) as caught:  # noqa: PT011  # the exact object is checked below
        bind_workspace(value)
    assert caught.value is original
    assert not isinstance(caught.value, WorkspaceOperationError)
    assert caught.value.__cause__ is None


async def test_a_trio_cancelled_from_a_getter_propagates_untouched() -> None:
    original = await capture_real_cancelled()
    value = instance_of_class("Adapter", complete_namespace(diff=raising_property(original)))
    with pytest.raises(trio.Cancelled) as caught:
        bind_workspace(value)
    assert caught.value is original


# ------------------------------------------------------------------ hostile __class__


class LyingAboutClass:
    """``__class__`` raises, so an ``isinstance``-based check would crash untyped."""

    @property
    def __class__(self) -> type:  # pyright: ignore[reportIncompatibleMethodOverride]
        raise RuntimeError("__class__ is not available")


class LyingAdapter(SevenMethods, LyingAboutClass):
    pass


async def test_an_adapter_whose_class_property_raises_binds_or_fails_typed() -> None:
    try:
        workspace = bind_workspace(LyingAdapter())
    except WorkspaceOperationError:
        return
    assert await workspace.read_file("x") == "mixed-in"


def test_a_non_adapter_whose_class_property_raises_fails_with_a_typed_error() -> None:
    with pytest.raises(WorkspaceOperationError):
        bind_workspace(LyingAboutClass())


# ------------------------------------------------------------------ any callable counts


class AsyncCallable:
    """An object that is callable through ``__call__`` (not a function or method)."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.arguments: list[tuple[object, ...]] = []

    async def __call__(self, *arguments: object) -> str:
        self.arguments.append(arguments)
        return self.answer


async def test_functools_partial_counts_as_a_capability() -> None:
    async def read_with_prefix(prefix: str, path: str) -> str:
        return prefix + path

    value = instance_of_class(
        "Adapter", complete_namespace(read_file=functools.partial(read_with_prefix, "file:"))
    )
    workspace = bind_workspace(value)
    assert await workspace.read_file("notes.txt") == "file:notes.txt"


async def test_an_object_with_dunder_call_counts_as_a_capability() -> None:
    reader = AsyncCallable("from __call__")
    value = types.SimpleNamespace(**complete_namespace(read_file=reader))
    workspace = bind_workspace(value)
    assert await workspace.read_file("a.txt") == "from __call__"
    assert reader.arguments == [("a.txt",)]


async def test_synchronous_functions_count_as_capabilities_and_their_values_are_used() -> None:
    written: dict[str, str] = {}

    def read_file(path: str) -> str:
        return f"sync {path}"

    def write_file(path: str, contents: str) -> None:
        written[path] = contents

    def list_files(path: str) -> list[str]:
        return [path, "other"]

    def execute(command: CommandRequest) -> dict[str, object]:
        return {"exit_code": 7, "stdout": "out", "stderr": ""}

    def diff() -> str:
        return "--- diff\n"

    def snapshot() -> dict[str, object]:
        return {"id": "sync-1", "created_at": "2026-01-01T00:00:00Z"}

    def dispose() -> None:
        return None

    adapter = types.SimpleNamespace(
        read_file=read_file,
        write_file=write_file,
        list_files=list_files,
        execute=execute,
        diff=diff,
        snapshot=snapshot,
        dispose=dispose,
    )
    workspace = bind_workspace(adapter)
    assert await invoke_workspace_operation(workspace, {"operation": "read_file", "path": "a"}) == "sync a"
    await invoke_workspace_operation(workspace, {"operation": "write_file", "path": "b", "contents": "c"})
    assert written == {"b": "c"}
    assert await invoke_workspace_operation(workspace, {"operation": "list_files", "path": "d"}) == [
        "d",
        "other",
    ]
    result = await invoke_workspace_operation(
        workspace, {"operation": "execute", "command": {"argv": ["true"]}}
    )
    assert result == CommandResult(exit_code=7, stdout="out", stderr="")
    assert await invoke_workspace_operation(workspace, {"operation": "diff"}) == "--- diff\n"
    snap = await invoke_workspace_operation(workspace, {"operation": "snapshot"})
    assert snap == WorkspaceSnapshot(id="sync-1", created_at="2026-01-01T00:00:00Z")
    assert await invoke_workspace_operation(workspace, {"operation": "dispose"}) is None


async def test_a_class_level_callable_attribute_is_captured_as_returned_by_getattr() -> None:
    reader = AsyncCallable("class-level callable")
    value = instance_of_class("Adapter", complete_namespace(read_file=reader))
    workspace = bind_workspace(value)
    assert await workspace.read_file("z") == "class-level callable"
    assert reader.arguments == [("z",)]


# ------------------------------------------------------------------ the facade


async def test_a_bound_facade_calls_each_adapter_method_with_its_arguments() -> None:
    adapter = RecordingAdapter({"a.txt": "alpha"})
    workspace = bind_workspace(adapter)
    assert await workspace.read_file("a.txt") == "alpha"
    assert await workspace.write_file("b.txt", "beta") is None
    assert await workspace.list_files(".") == ["a.txt", "b.txt"]
    outcome = await workspace.execute(CommandRequest(argv=("echo", "hi")))
    assert outcome.stdout == "echo hi"
    assert await workspace.diff() == ""
    assert (await workspace.snapshot()).id == "rec-1"
    assert await workspace.dispose() is None
    assert adapter.calls == list(WORKSPACE_CAPABILITIES)


@pytest.mark.parametrize("name", [*WORKSPACE_CAPABILITIES, "extra", "_methods", "__dict__"])
def test_the_facade_refuses_attribute_assignment(name: str) -> None:
    workspace = bind_workspace(RecordingAdapter())

    async def forged(*arguments: object) -> str:
        return "forged"

    with pytest.raises(AttributeError):
        setattr(workspace, name, forged)


@pytest.mark.parametrize("name", [*WORKSPACE_CAPABILITIES, "_methods"])
def test_the_facade_refuses_attribute_deletion(name: str) -> None:
    workspace = bind_workspace(RecordingAdapter())
    with pytest.raises(AttributeError):
        delattr(workspace, name)


async def test_the_facade_still_works_after_refused_assignments() -> None:
    workspace = bind_workspace(RecordingAdapter({"a": "original"}))

    async def forged(path: str) -> str:
        return "forged"

    with pytest.raises(AttributeError):
        setattr(workspace, "read_file", forged)  # noqa: B010  # the point is a dynamic write
    with pytest.raises(AttributeError):
        delattr(workspace, "read_file")
    assert await workspace.read_file("a") == "original"


async def test_each_capability_is_looked_up_exactly_once_at_binding_time() -> None:
    lookups: list[str] = []

    def lookup_reader(self: object) -> Callable[[str], Awaitable[str]]:
        lookups.append("read_file")

        async def reader(path: str) -> str:
            return f"read {path}"

        return reader

    adapter = instance_of_class("CountingAdapter", complete_namespace(read_file=property(lookup_reader)))
    workspace = bind_workspace(adapter)
    assert lookups == ["read_file"]
    assert await workspace.read_file("a") == "read a"
    assert await workspace.read_file("b") == "read b"
    assert await invoke_workspace_operation(workspace, {"operation": "read_file", "path": "c"}) == "read c"
    assert lookups == ["read_file"]


async def test_replacing_a_method_on_the_adapter_after_binding_has_no_effect() -> None:
    adapter = RecordingAdapter({"README.md": "# demo\n"})
    workspace = bind_workspace(adapter)

    async def forged(path: str) -> str:
        return "forged"

    setattr(adapter, "read_file", forged)  # noqa: B010  # the point is a dynamic write
    assert await adapter.read_file("README.md") == "forged"
    assert await workspace.read_file("README.md") == "# demo\n"


async def test_deleting_a_method_from_the_adapter_class_after_binding_has_no_effect() -> None:
    class PrivateAdapter(SevenMethods):
        async def read_file(self, path: str) -> str:
            return "private"

    adapter = PrivateAdapter()
    workspace = bind_workspace(adapter)
    delattr(PrivateAdapter, "read_file")
    assert await adapter.read_file("a") == "mixed-in"
    assert await workspace.read_file("a") == "private"


async def test_deleting_an_instance_level_method_after_binding_has_no_effect() -> None:
    async def instance_reader(path: str) -> str:
        return "instance-level"

    adapter = RecordingAdapter()
    setattr(adapter, "read_file", instance_reader)  # noqa: B010  # the point is a dynamic write
    workspace = bind_workspace(adapter)
    delattr(adapter, "read_file")
    assert await workspace.read_file("a") == "instance-level"


async def test_the_adapter_state_stays_shared_and_live_through_the_facade() -> None:
    adapter = RecordingAdapter({"a.txt": "one"})
    workspace = bind_workspace(adapter)
    await workspace.write_file("b.txt", "two")
    assert adapter.files == {"a.txt": "one", "b.txt": "two"}
    adapter.files["a.txt"] = "changed by the owner"
    assert await workspace.read_file("a.txt") == "changed by the owner"


async def test_two_facades_over_one_adapter_share_its_state() -> None:
    adapter = RecordingAdapter()
    first = bind_workspace(adapter)
    second = bind_workspace(adapter)
    assert first is not adapter
    await first.write_file("shared.txt", "written through the first facade")
    assert await second.read_file("shared.txt") == "written through the first facade"


def test_binding_a_facade_returns_the_same_facade() -> None:
    workspace = bind_workspace(RecordingAdapter())
    assert bind_workspace(workspace) is workspace


@pytest.mark.parametrize("capability", WORKSPACE_CAPABILITIES)
def test_binding_a_view_returns_the_same_view(capability: str) -> None:
    view = restrict_workspace(RecordingAdapter(), capability)
    assert bind_workspace(view) is view


async def test_binding_a_memory_workspace_gives_a_working_facade() -> None:
    memory = MemoryWorkspace({"README.md": "# demo\n"})
    workspace: Workspace = bind_workspace(memory)
    assert await workspace.read_file("README.md") == "# demo\n"
    assert memory.calls == [("read_file", ("README.md",))]
