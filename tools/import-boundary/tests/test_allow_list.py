"""The allow-list itself: entries, verdicts, and the reviewed defaults held against reality.

The guard that keeps ``typing.sys`` out while ``typing.Final`` stays in rests on a table of
the module-valued attributes of the allowed modules. The tests here import those modules in
the test process and check the table and the verdicts against what the interpreter and the
locked libraries really hold, so a new Python or library version that adds a module attribute
fails here instead of opening a path around the allow-list.
"""

from __future__ import annotations

import importlib
import pkgutil
import types
from pathlib import Path
from typing import Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_import_boundary import DEFAULT_ALLOW, DEFAULT_FORBIDDEN, load_config
from harness_import_boundary._allow import MODULE_ATTRIBUTES, AllowList, Verdict, parse_allow

REPOSITORY: Final = Path(__file__).resolve().parents[3]
DEFAULTS: Final = AllowList(DEFAULT_ALLOW)
ALLOWED, NAMESPACE, REFUSED = Verdict.ALLOWED, Verdict.NAMESPACE, Verdict.REFUSED


def repository_entries() -> tuple[str, ...]:
    """Every entry the repository's configuration grants to some file."""
    config = load_config(REPOSITORY / "pyproject.toml")
    return tuple(
        dict.fromkeys([*config.allow, *(entry for _, entries in config.per_file_allow for entry in entries)])
    )


VERDICTS = [
    # whole modules and their public names
    ("re", ALLOWED),
    ("re.compile", ALLOWED),
    ("typing.Final", ALLOWED),
    ("collections.abc.Mapping", ALLOWED),
    ("datetime.datetime.now", ALLOWED),
    ("datetime.time", ALLOWED),
    ("msgspec.json.encode", ALLOWED),
    ("msgspec.structs.fields", ALLOWED),
    ("json.JSONDecodeError", ALLOWED),
    # module attributes of allowed modules, private names, submodules
    ("typing.sys", REFUSED),
    ("typing.sys.modules", REFUSED),
    ("typing.stdlib_re", REFUSED),
    ("enum.bltns", REFUSED),
    ("dataclasses.builtins", REFUSED),
    ("contextlib.os", REFUSED),
    ("json.decoder", REFUSED),
    ("json.tool", REFUSED),
    ("random._os", REFUSED),
    ("re._compiler", REFUSED),
    ("msgspec.inspect.msgspec", REFUSED),
    ("msgspec.toml", REFUSED),
    # exclusions inside allowed modules
    ("contextlib.chdir", REFUSED),
    ("contextlib.suppress", ALLOWED),
    ("typing.get_type_hints", REFUSED),
    ("typing.ForwardRef", REFUSED),
    ("types.FunctionType", REFUSED),
    ("types.MappingProxyType", ALLOWED),
    ("uuid.uuid1", REFUSED),
    ("uuid.uuid4", ALLOWED),
    ("string.Formatter", REFUSED),
    ("warnings.warn", ALLOWED),
    ("warnings.formatwarning", REFUSED),
    ("warnings.warn_explicit", REFUSED),
    # single names of mixed modules; the modules themselves are only namespaces
    ("inspect", NAMESPACE),
    ("inspect.isawaitable", ALLOWED),
    ("inspect.currentframe", REFUSED),
    ("inspect.os", REFUSED),
    ("pathlib", NAMESPACE),
    ("pathlib.PurePosixPath", ALLOWED),
    ("pathlib.Path", REFUSED),
    ("pathlib.os", REFUSED),
    ("importlib", NAMESPACE),
    ("importlib.metadata", NAMESPACE),
    ("importlib.metadata.version", ALLOWED),
    ("importlib.metadata.distribution", REFUSED),
    ("importlib.import_module", REFUSED),
    ("trio", NAMESPACE),
    ("trio.lowlevel", NAMESPACE),
    ("trio.CancelScope", ALLOWED),
    ("trio.lowlevel.checkpoint", ALLOWED),
    ("trio.lowlevel.open_process", REFUSED),
    ("trio.to_thread.run_sync", REFUSED),
    ("trio.run_process", REFUSED),
    ("trio.open_file", REFUSED),
    ("trio.Path", REFUSED),
    ("trio.socket", REFUSED),
    ("harness_workspace", NAMESPACE),
    ("harness_workspace.Workspace", ALLOWED),
    ("harness_workspace.isolation_of", ALLOWED),
    # Only hosts and adapters declare a workspace isolated: reading it is all kernel and tools may.
    ("harness_workspace.declare_isolation", REFUSED),
    ("harness_workspace.local", REFUSED),
    ("harness_workspace._local_process", REFUSED),
    # what is simply not there
    ("os", REFUSED),
    ("sys", REFUSED),
    ("builtins", REFUSED),
    ("posix", REFUSED),
    ("sqlite3", REFUSED),
    ("harness_kernel", REFUSED),
    ("yaml", REFUSED),
    ("retyping", REFUSED),
]


@pytest.mark.parametrize(("target", "verdict"), VERDICTS, ids=[target for target, _ in VERDICTS])
def test_the_default_allow_list_gives_the_reviewed_verdicts(target: str, verdict: Verdict) -> None:
    assert DEFAULTS.classify(target) is verdict


PACKAGE: Final = AllowList(("harness_kernel.*", "re"))

PACKAGE_VERDICTS: list[tuple[str, frozenset[str], Verdict]] = [
    ("harness_kernel", frozenset(), ALLOWED),
    ("harness_kernel.evals", frozenset(), ALLOWED),
    ("harness_kernel.evals.run_scenario", frozenset(), ALLOWED),
    # a module name below an unknown parent is refused unless the file imports that module
    ("harness_kernel.events.Event", frozenset(), REFUSED),
    ("harness_kernel.events.Event", frozenset({"harness_kernel.events"}), ALLOWED),
    # a private module is allowed where the file imports it as a module, and only the module
    ("harness_kernel._json.FrozenDict", frozenset({"harness_kernel._json"}), ALLOWED),
    ("harness_kernel._json.FrozenDict", frozenset(), REFUSED),
    ("harness_kernel._json._helper", frozenset({"harness_kernel._json"}), REFUSED),
    (
        "harness_kernel._json._alias._os",
        frozenset({"harness_kernel._json", "harness_kernel._json._alias"}),
        REFUSED,
    ),
    # a standard library module re-exported by a project module is still guarded
    ("harness_kernel.evals.sys", frozenset(), REFUSED),
    ("harness_kernel.evals.re.enum", frozenset(), REFUSED),
    ("harness_kernel.evals.renamed.bltns", frozenset(), REFUSED),
    ("harness_kernel.evals.trio.run_process", frozenset(), REFUSED),
    # module paths never widen an ordinary entry
    ("re._compiler", frozenset({"re._compiler"}), REFUSED),
    ("harness_kernels", frozenset(), REFUSED),
]


@pytest.mark.parametrize(("target", "module_paths", "verdict"), PACKAGE_VERDICTS)
def test_a_package_entry_allows_its_modules_and_only_the_private_modules_named_by_imports(
    target: str, module_paths: frozenset[str], verdict: Verdict
) -> None:
    assert PACKAGE.classify(target, module_paths) is verdict


def test_an_exclusion_wins_over_any_entry_that_covers_it() -> None:
    allow = AllowList(("contextlib", "contextlib.chdir", "!contextlib.chdir"))

    assert allow.classify("contextlib.chdir") is REFUSED
    assert allow.classify("contextlib.chdir.__call__") is REFUSED
    assert allow.classify("contextlib.suppress") is ALLOWED


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        (["os path"], "not a dotted name"),
        (["os."], "not a dotted name"),
        (["*"], "not a dotted name"),
        (["a.*.b"], "not a dotted name"),
        (["!a.*"], "an exclusion names one module"),
        ([""], "not a dotted name"),
        ([1], "must be a string"),
    ],
)
def test_malformed_entries_are_refused(entries: list[object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_allow(entries)


def test_valid_entries_are_kept_in_order_without_duplicates() -> None:
    assert parse_allow(["re", "trio.*", "!re.compile", "re"]) == ("re", "trio.*", "!re.compile")


@given(st.from_regex(r"[a-z_]{1,8}(\.[a-z_]{1,8}){0,3}", fullmatch=True))
def test_a_name_below_an_exclusion_is_never_allowed(suffix: str) -> None:
    allow = AllowList(("typing", "typing.*", "!typing.get_type_hints"))

    assert allow.classify(f"typing.get_type_hints.{suffix}") is REFUSED


# ------------------------------------------------------------------ the defaults held against reality


def imported(name: str) -> object | None:
    """The module or object ``name`` names in this interpreter, or ``None`` if there is none."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            value = getattr(value, part, None)
            if value is None:
                return None
        return value
    return None


MODULE_ENTRIES: Final = sorted(
    entry
    for entry in repository_entries()
    if not entry.startswith("!")
    and not entry.endswith(".*")
    and isinstance(imported(entry), types.ModuleType)
)


def module_members(module: types.ModuleType) -> set[str]:
    """Public names under which ``module`` holds a module, or can load a submodule."""
    names = {name for name, value in vars(module).items() if isinstance(value, types.ModuleType)}
    if hasattr(module, "__path__"):
        names.update(info.name for info in pkgutil.iter_modules(module.__path__))
    return {name for name in names if not name.startswith("_")}


def test_every_allowed_module_is_a_module_of_this_environment() -> None:
    assert "re" in MODULE_ENTRIES
    assert "msgspec.json" in MODULE_ENTRIES
    assert "yaml.events" in MODULE_ENTRIES


@pytest.mark.parametrize("name", MODULE_ENTRIES)
def test_no_module_is_reached_through_an_allowed_module(name: str) -> None:
    module = imported(name)
    assert isinstance(module, types.ModuleType)
    allow = AllowList(repository_entries())
    explicit = set(repository_entries())

    leaks = sorted(
        member
        for member in module_members(module)
        if f"{name}.{member}" not in explicit and allow.classify(f"{name}.{member}") is not REFUSED
    )

    assert leaks == [], f"module attributes of {name} missing from MODULE_ATTRIBUTES"
    assert module_members(module) <= MODULE_ATTRIBUTES[name] | {
        entry.rsplit(".", 1)[1] for entry in explicit if entry.startswith(f"{name}.")
    }


@pytest.mark.parametrize("name", MODULE_ENTRIES)
def test_the_public_classes_and_functions_of_an_allowed_module_stay_allowed(name: str) -> None:
    module = imported(name)
    assert isinstance(module, types.ModuleType)
    allow = AllowList(repository_entries())
    excluded = {entry[1:] for entry in repository_entries() if entry.startswith("!")}

    refused = sorted(
        member
        for member, value in vars(module).items()
        if not member.startswith("_")
        and not isinstance(value, types.ModuleType)
        and f"{name}.{member}" not in excluded
        and allow.classify(f"{name}.{member}") is not ALLOWED
    )

    assert refused == []


def test_every_named_entry_exists_in_this_environment() -> None:
    missing = [
        entry
        for entry in repository_entries()
        if not entry.endswith(".*") and imported(entry.removeprefix("!")) is None
    ]

    assert missing == []


def test_the_workspace_contract_is_allowed_name_by_name_and_nothing_else_of_it() -> None:
    workspace = importlib.import_module("harness_workspace")
    allowed = {entry.split(".", 1)[1] for entry in DEFAULT_ALLOW if entry.startswith("harness_workspace.")}

    # Everything public but the one host-side act: declaring a workspace isolated.
    assert allowed == set(workspace.__all__) - {"declare_isolation"}
    assert DEFAULTS.classify("harness_workspace.local.LocalWorkspace") is REFUSED


def test_the_defaults_do_not_allow_what_the_default_forbidden_entries_name() -> None:
    for entry in DEFAULT_FORBIDDEN:
        if entry != "pathlib:write":
            assert DEFAULTS.classify(entry) is REFUSED, entry
