"""``open_workspace`` and ``WorkspacePathScope``: lexical path containment, not a capability."""

from __future__ import annotations

import os
from typing import NoReturn, final

from harness_workspace._errors import WorkspaceEscapesRootError

__all__ = ["WorkspacePathScope", "open_workspace"]


@final
class WorkspacePathScope:
    """A lexical path resolver for one root directory.

    It deliberately is not a :class:`~harness_workspace.Workspace`: it reads, writes and
    runs nothing, resolves no symbolic links and checks nothing on disk, so it is a helper
    for adapters, never a defence against links or races, and never an authority to pass
    to model-facing code.
    """

    __slots__ = ("_boundary", "_root")

    _root: str
    _boundary: str

    def __init__(self, root: str | os.PathLike[str]) -> None:
        raw = os.fspath(root) if isinstance(root, os.PathLike) else root
        if type(raw) is not str:
            raise TypeError(f"workspace root must be a str or os.PathLike[str], got {type(raw).__name__}")
        if not raw:
            raise ValueError("workspace root must be a nonempty path")
        absolute = os.path.abspath(raw)
        object.__setattr__(self, "_root", absolute)
        object.__setattr__(self, "_boundary", absolute if absolute.endswith(os.sep) else absolute + os.sep)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"WorkspacePathScope is frozen; cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"WorkspacePathScope is frozen; cannot delete {name!r}")

    def __repr__(self) -> str:
        return f"WorkspacePathScope(root={self._root!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is WorkspacePathScope and other._root == self._root

    def __hash__(self) -> int:
        return hash((WorkspacePathScope, self._root))

    @property
    def root(self) -> str:
        """The absolute, normalised root."""
        return self._root

    def resolve_path(self, requested: str) -> str:
        """Resolve ``requested`` lexically against the root and return the normalised path.

        Raises:
            TypeError: ``requested`` is not a ``str``.
            WorkspaceEscapesRootError: the normalised path is neither the root nor below it.
        """
        if not isinstance(requested, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"requested path must be a str, got {type(requested).__name__}")
        if os.path.isabs(requested):
            resolved = os.path.normpath(requested)
        else:
            resolved = os.path.normpath(os.path.join(self._root, requested))
        if resolved == self._root or resolved.startswith(self._boundary):
            return resolved
        raise WorkspaceEscapesRootError(requested, self._root)


def open_workspace(root: str | os.PathLike[str]) -> WorkspacePathScope:
    """Return the lexical path scope of ``root`` (made absolute against the current directory).

    No I/O happens: the root need not exist.

    Raises:
        TypeError: ``root`` is neither a ``str`` nor an ``os.PathLike[str]``.
        ValueError: ``root`` is empty.
    """
    return WorkspacePathScope(root)
