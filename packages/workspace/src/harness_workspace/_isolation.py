"""Isolation attestation: trusted outer code says where a workspace's effects land.

A tool that writes files or runs commands (a workspace boundary with ``write`` or ``execute``
access) may act only on a workspace whose effects cannot reach the host: one that the code
constructing it declared isolated. The declaration is a fact about an object, recorded here
by identity, so it never travels through data a model writes — tool arguments, events,
manifests — and the ``Workspace`` contract itself stays free of provider names.

Who declares what:

- ``MemoryWorkspace`` declares itself ``in-memory`` only when it has no command handlers:
  files in a dict, nothing that could reach further. A handler may delegate anywhere (to a
  host workspace, a shell), so one built with handlers is undeclared until a host that
  vouches for them declares it ``in-memory`` itself.
- harness-sandbox's ``SandboxWorkspace`` declares itself ``sandboxed`` once its environment is
  up: a disposable copy, commands inside a container or a bubblewrap jail.
- A host that runs effects on a ``LocalWorkspace`` anyway does so only on an explicit operator
  opt-in at its launch boundary, and declares ``unsafe-host``, so the choice stays visible.

Only hosts and adapters declare: kernel and tools code may read an attestation
(:func:`isolation_of`) but the import-boundary allow-list does not let it name
:func:`declare_isolation`.
"""

from __future__ import annotations

import weakref
from typing import Final, Literal, TypeVar, get_args

__all__ = [
    "WORKSPACE_ISOLATION_REQUIRED",
    "WorkspaceIsolation",
    "declare_isolation",
    "inherit_isolation",
    "isolation_of",
]

W = TypeVar("W")

WorkspaceIsolation = Literal["in-memory", "sandboxed", "unsafe-host"]
"""Where a declared workspace's effects land: nowhere on the host, inside a sandbox, or on
the host by the operator's explicit, unsafe choice."""

WORKSPACE_ISOLATION_REQUIRED: Final = "WORKSPACE_ISOLATION_REQUIRED"
"""The code of a write or execute tool call refused because its workspace is not declared."""

_LEVELS: Final[frozenset[str]] = frozenset(get_args(WorkspaceIsolation))

# id(workspace) -> (a weak reference to it, its isolation). Keyed by id, not by the object:
# an adapter may define ``__eq__`` without ``__hash__``, and equality must never transfer an
# attestation to a look-alike. The weak reference's callback drops the entry when the
# workspace dies, so a later object that reuses the id starts undeclared.
_DECLARED: Final[dict[int, tuple[weakref.ref[object], WorkspaceIsolation]]] = {}


def _forget(key: int, ref: weakref.ref[object]) -> None:
    entry = _DECLARED.get(key)
    if entry is not None and entry[0] is ref:
        del _DECLARED[key]


def declare_isolation(workspace: W, isolation: WorkspaceIsolation) -> W:
    """Record that ``workspace``'s effects land as ``isolation`` says; return the same object.

    For hosts and adapters only. Declaring the same isolation again changes nothing; a
    different one is refused, so no later holder can relabel a workspace.

    Args:
        workspace: The adapter (or a facade or view of one) being declared.
        isolation: ``"in-memory"``, ``"sandboxed"`` or ``"unsafe-host"``.

    Raises:
        ValueError: ``isolation`` is not one of the three, or ``workspace`` already carries
            a different one.
        TypeError: ``workspace`` is ``None``, data, or an object that cannot be weakly
            referenced (the record must not keep it alive).
    """
    if type(isolation) is not str or isolation not in _LEVELS:
        raise ValueError(f"workspace isolation must be one of {sorted(_LEVELS)}, got {isolation!r}")
    if workspace is None or isinstance(workspace, (str, bytes, int, float, bool, tuple, list, dict)):
        raise TypeError("only a workspace object can be declared isolated")
    key = id(workspace)
    entry = _DECLARED.get(key)
    if entry is not None and entry[0]() is workspace:
        if entry[1] != isolation:
            raise ValueError(f"workspace is already declared {entry[1]}, not {isolation}")
        return workspace
    try:
        ref: weakref.ref[object] = weakref.ref(workspace, lambda dead: _forget(key, dead))
    except TypeError as error:
        raise TypeError(
            f"{type(workspace).__name__} cannot be declared isolated: it does not support weak references"
        ) from error
    _DECLARED[key] = (ref, isolation)
    return workspace


def isolation_of(workspace: object) -> WorkspaceIsolation | None:
    """The isolation declared for exactly this object, or ``None``; never raises.

    A copy, a subclass instance or an equal-looking object is undeclared. The facades and
    views that ``bind_workspace`` and ``restrict_workspace`` make carry the isolation of what
    they wrap.
    """
    entry = _DECLARED.get(id(workspace))
    if entry is None or entry[0]() is not workspace:
        return None
    return entry[1]


def inherit_isolation(wrapper: object, wrapped: object) -> None:
    """Give ``wrapper`` (a facade or view made by this package) the isolation of ``wrapped``."""
    isolation = isolation_of(wrapped)
    if isolation is not None:
        declare_isolation(wrapper, isolation)
