"""Cancellation signals: ``AbortController`` / ``AbortSignal``.

A signal is a plain value that can be handed to any task, unlike a ``trio.CancelScope``,
which belongs to the task that entered it. Adapters honour a signal either by awaiting
:meth:`AbortSignal.wait` in a helper task or, more simply, with :func:`move_on_abort`,
which links a cancel scope to the signal without any extra task.

All state changes happen on the trio thread (call ``abort`` elsewhere through
``trio.from_thread.run_sync``). No user callback ever runs inside ``abort``: the only
reactions are waking ``trio.Event`` waiters, aborting dependent signals and cancelling
linked cancel scopes, none of which can raise.
"""

# The module-level helpers below are the signal's own implementation, split out of the
# class so that no public method exposes them.
# pyright: reportPrivateUsage=false

from __future__ import annotations

import weakref
from collections.abc import Iterable
from types import TracebackType
from typing import Final, NoReturn, final

import trio

__all__ = ["AbortController", "AbortSignal", "move_on_abort"]


@final
class AbortSignal:
    """A read-only view of whether an operation has been asked to stop, and why.

    Signals come only from :class:`AbortController`, :meth:`AbortSignal.any` and
    :meth:`AbortSignal.aborted_with`; the class cannot be constructed directly or
    subclassed, so the exact type is a brand the dispatcher can trust.
    """

    __slots__ = ("__weakref__", "_aborted", "_dependents", "_event", "_reason", "_scopes", "_sources")

    _aborted: bool
    _reason: object
    _event: trio.Event | None
    _dependents: weakref.WeakSet[AbortSignal] | None
    # For a signal made by ``any``: the controller-owned signals it follows. Nested
    # combinations are flattened onto these sources, so a dropped intermediate combination
    # cannot cut the link (sources hold dependents weakly; dependents hold sources).
    _sources: tuple[AbortSignal, ...] | None
    _scopes: list[trio.CancelScope] | None

    def __new__(cls, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            "AbortSignal cannot be constructed directly; use AbortController().signal, "
            "AbortSignal.any() or AbortSignal.aborted_with()"
        )

    def __init_subclass__(cls, **kwargs: object) -> NoReturn:
        raise TypeError("AbortSignal cannot be subclassed")

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"AbortSignal is read-only; cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"AbortSignal is read-only; cannot delete {name!r}")

    def __copy__(self) -> AbortSignal:
        # A copy would be a second, unlinked signal; identity is the point of a signal.
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> AbortSignal:
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError("AbortSignal cannot be pickled: it is bound to this process's controller")

    def __repr__(self) -> str:
        if self._aborted:
            return f"<AbortSignal aborted reason={self._reason!r}>"
        return "<AbortSignal pending>"

    @property
    def aborted(self) -> bool:
        """Whether the signal has been aborted."""
        return self._aborted

    @property
    def reason(self) -> object:
        """The reason given to ``abort``; ``None`` until aborted (and possibly after)."""
        return self._reason

    async def wait(self) -> None:
        """Return once the signal is aborted (immediately, after a checkpoint, if it already is)."""
        if self._aborted:
            await trio.lowlevel.checkpoint()
            return
        event = self._event
        if event is None:
            event = trio.Event()
            object.__setattr__(self, "_event", event)
        await event.wait()

    @staticmethod
    def any(signals: Iterable[AbortSignal]) -> AbortSignal:
        """Return a new signal that aborts when the first of ``signals`` does.

        If an input is already aborted the new signal starts aborted with the first such
        input's reason. The new signal is linked to the controller-owned signals behind its
        inputs (a combined input is flattened onto its own sources), which hold it weakly:
        a long-lived signal passed to many operations accumulates no children, and dropping
        an intermediate combination does not cut the link.

        Raises:
            TypeError: ``signals`` is not iterable or holds something other than a genuine
                signal made by this module.
        """
        inputs = tuple(signals)
        for candidate in inputs:
            _require_genuine(candidate)
        for candidate in inputs:
            if candidate._aborted:
                return _new_signal(aborted=True, reason=candidate._reason)
        sources: dict[int, AbortSignal] = {}
        for candidate in inputs:
            for source in candidate._sources or (candidate,):
                sources.setdefault(id(source), source)
        dependent = _new_signal(aborted=False, reason=None, sources=tuple(sources.values()))
        for source in sources.values():
            dependents = source._dependents
            if dependents is None:
                dependents = weakref.WeakSet[AbortSignal]()
                object.__setattr__(source, "_dependents", dependents)
            dependents.add(dependent)
        return dependent

    @staticmethod
    def aborted_with(reason: object = None) -> AbortSignal:
        """Return a signal that is already aborted with ``reason``."""
        return _new_signal(aborted=True, reason=reason)


_AbortSignal: Final = AbortSignal


def _new_signal(
    *, aborted: bool, reason: object, sources: tuple[AbortSignal, ...] | None = None
) -> AbortSignal:
    signal = object.__new__(_AbortSignal)
    set_field = object.__setattr__
    set_field(signal, "_aborted", aborted)
    set_field(signal, "_reason", reason)
    set_field(signal, "_event", None)
    set_field(signal, "_dependents", None)
    set_field(signal, "_scopes", None)
    set_field(signal, "_sources", sources)
    return signal


def _require_genuine(candidate: object) -> AbortSignal:
    if type(candidate) is not _AbortSignal:
        raise TypeError(f"expected an AbortSignal, got {type(candidate).__name__}")
    try:
        read_signal_state(candidate)
    except AttributeError as error:
        raise TypeError("AbortSignal instance was not created by an AbortController") from error
    return candidate


def read_signal_state(signal: AbortSignal) -> tuple[bool, object]:
    """Private accessor: read a signal's state straight from its slots.

    Raises ``AttributeError`` for an instance whose slots were never filled (one made
    with ``object.__new__``), which the brand check turns into a typed error.
    """
    return (_ABORTED_SLOT.__get__(signal, _AbortSignal), _REASON_SLOT.__get__(signal, _AbortSignal))


# The slot descriptors are captured at import, so rebinding attributes on the class later
# cannot redirect the state read of the brand check.
_ABORTED_SLOT: Final = AbortSignal.__dict__["_aborted"]
_REASON_SLOT: Final = AbortSignal.__dict__["_reason"]
_signal_any: Final = AbortSignal.any


def link_signal(candidate: object) -> AbortSignal:
    """Brand-check ``candidate`` and return a fresh signal linked to it.

    Raises:
        TypeError: ``candidate`` is not a genuine, fully built signal.
    """
    return _signal_any((_require_genuine(candidate),))


def _abort(root: AbortSignal, reason: object) -> None:
    # Iterative, so that a long chain of linked signals cannot exhaust the stack.
    pending = [root]
    while pending:
        signal = pending.pop()
        if signal._aborted:
            continue
        set_field = object.__setattr__
        set_field(signal, "_aborted", True)
        set_field(signal, "_reason", reason)
        event = signal._event
        if event is not None:
            event.set()
        scopes = signal._scopes
        if scopes is not None:
            set_field(signal, "_scopes", None)
            for scope in scopes:
                scope.cancel()
        dependents = signal._dependents
        if dependents is not None:
            set_field(signal, "_dependents", None)
            pending.extend(dependents)


@final
class AbortController:
    """The owner's handle on a signal: hand out :attr:`signal`, keep the right to :meth:`abort`."""

    __slots__ = ("_signal",)

    _signal: AbortSignal

    def __init__(self) -> None:
        object.__setattr__(self, "_signal", _new_signal(aborted=False, reason=None))

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"AbortController is read-only; cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"AbortController is read-only; cannot delete {name!r}")

    def __repr__(self) -> str:
        return f"<AbortController signal={self._signal!r}>"

    @property
    def signal(self) -> AbortSignal:
        """The controller's signal; always the same object."""
        return self._signal

    def abort(self, reason: object = None) -> None:
        """Abort the signal, wake its waiters and abort every signal linked to it.

        Only the first call has an effect. Call it on the trio thread.
        """
        _abort(self._signal, reason)


@final
class move_on_abort:
    """A context manager whose cancel scope is cancelled when ``signal`` aborts.

    Like ``trio.move_on_after``, the body is cancelled and execution continues after the
    ``with`` block; ``scope.cancelled_caught`` says whether that happened. A signal that is
    already aborted cancels the scope on entry. No helper task is needed.

    Example::

        with move_on_abort(command.signal) as scope:
            await run_the_process()
        if scope.cancelled_caught:
            ...

    Raises:
        TypeError: ``signal`` is not a genuine :class:`AbortSignal`.
    """

    __slots__ = ("_scope", "_signal")

    def __init__(self, signal: AbortSignal) -> None:
        _require_genuine(signal)
        self._signal = signal
        self._scope = trio.CancelScope()

    def __enter__(self) -> trio.CancelScope:
        scope = self._scope.__enter__()
        signal = self._signal
        if signal._aborted:
            scope.cancel()
        else:
            scopes = signal._scopes
            if scopes is None:
                scopes = []
                object.__setattr__(signal, "_scopes", scopes)
            scopes.append(scope)
        return scope

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        scopes = self._signal._scopes
        if scopes is not None:
            # Unlink by identity: CancelScope defines no __eq__, but be explicit.
            for index, linked in enumerate(scopes):
                if linked is self._scope:
                    del scopes[index]
                    break
        return self._scope.__exit__(exc_type, exc_value, traceback)
