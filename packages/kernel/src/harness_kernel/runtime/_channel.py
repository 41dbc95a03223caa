"""What a run shares with the tasks outside its producer: its lifecycle status, its
cancellation, the steering it was sent, and its events (spec §8.4, §8.10).

Events are appended before they are delivered, under the writer lock and shielded from
cancellation; the first failed append poisons the run, and every later store call re-raises
it. The steps publish through a :class:`RunChannel`; they never hold the run itself.
"""

from __future__ import annotations

import inspect
import math
from collections import deque
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from contextlib import contextmanager
from typing import Final

import trio

from harness_kernel._gate import budget_percent as percent
from harness_kernel._ids import is_id
from harness_kernel.events._codec import create_event
from harness_kernel.events._model import (
    BudgetWarningData,
    Event,
    EventData,
    EventType,
    RuntimeCheckpointData,
    SteeringQueuedData,
)
from harness_kernel.models._types import ChatMessage
from harness_kernel.runtime._checkpoint import CHECKPOINT_VERSION, Boundary, checkpoint_state
from harness_kernel.runtime._errors import (
    BudgetMetric,
    EventAppendError,
    InvalidRunInputError,
    RunTerminalError,
    RuntimeBudgetExceededError,
    SteeringClosedError,
)
from harness_kernel.runtime._input import Admitted
from harness_kernel.runtime._shared import FINISHED, MAX_PENDING_STEERING, Canceled, QuickLock, or_unset
from harness_kernel.runtime._state import Checkpointed, RunView
from harness_workspace import AbortController, move_on_abort

__all__ = ["RunChannel"]

_OPEN: Final = frozenset({"registered", "running"})


class RunChannel:
    """A run's status, cancellation, pending steering and event writer."""

    def __init__(self, admitted: Admitted) -> None:
        self.admitted = admitted
        self.ids: Final = admitted.ids()
        """The run, session and turn ids every event of the run carries."""
        self.status = "registered"
        self.finishing_as: str | None = None
        """The status of the terminal pair being stored, once the run is completing."""
        self.queue: deque[Event] = deque()
        self.abandoned = False
        # The writer lock needs no scheduling point when free (``QuickLock``).
        self.writer = QuickLock()
        self.poison: EventAppendError | None = None
        self.pending: list[tuple[str, str]] = list(admitted.pending)
        """Steering not yet applied, oldest first: (message id, text)."""
        self.cancel_requested = False
        self.controller = AbortController()
        self.round_controller: AbortController | None = None
        self.active_scope: trio.CancelScope | None = None
        self.driver_cancelled = False

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """The run is admitted: ``registered`` becomes ``running`` (a cancel request stays)."""
        if self.status == "registered":
            self.status = "running"

    def request_cancel(self) -> None:
        """Set the flag, abort the signals and cancel the active wait, synchronously."""
        if self.cancel_requested:
            return
        self.cancel_requested = True
        if self.status in _OPEN:
            self.status = "cancel_requested"
        reason = RunTerminalError(self.admitted.run_id, "canceled")
        self.controller.abort(reason)
        if self.round_controller is not None:
            self.round_controller.abort(reason)
        if self.active_scope is not None:
            self.active_scope.cancel()

    def check_cancel(self) -> None:
        """Before any step with an effect: a failed append (a steer's, stored from another task,
        issue #23) ends the run; a cancellation request raises ``Canceled``."""
        if self.status == "completing":
            return
        if self.poison is not None:
            raise self.poison
        signal = self.admitted.signal
        if signal is not None and signal.aborted:
            self.request_cancel()
        if self.cancel_requested:
            raise Canceled

    @contextmanager
    def cancellable(self, deadline: float = math.inf) -> Generator[trio.CancelScope]:
        """A scope that run cancellation (and the input signal) cancels.

        An abort of the input signal is caught by an inner scope, so the yielded scope's
        ``cancelled_caught`` stays false; it turns into a cancellation request on exit, so
        callers test ``scope.cancelled_caught or self.cancel_requested``.

        So does a trio cancellation of the driving task: it is absorbed here as a
        cancellation request, so that the producer still records the interrupted step (the
        ``permission.resolved`` of an ask, the ``tool.result`` of a started tool) before the
        terminal pair, with only shielded appends; the driver then re-raises it.
        """
        signal = self.admitted.signal
        try:
            with trio.CancelScope(deadline=deadline) as scope:
                self.active_scope = scope
                if self.cancel_requested:
                    scope.cancel()
                try:
                    if signal is None:
                        yield scope
                    else:
                        with move_on_abort(signal):
                            yield scope
                finally:
                    self.active_scope = None
        except trio.Cancelled:
            # Not this scope's cancellation (it would have caught its own): the driving task's.
            self.driver_cancelled = True
            self.request_cancel()
        if signal is not None and signal.aborted:
            self.request_cancel()

    @contextmanager
    def model_round(self, controller: AbortController) -> Generator[None]:
        """While a model stream is pulled, run cancellation aborts ``controller`` too."""
        self.round_controller = controller
        try:
            yield
        finally:
            self.round_controller = None

    def completing_as(self, status: str) -> None:
        """The terminal pair for ``status`` is being stored: no more steps, no more steering."""
        self.finishing_as = status
        self.status = "completing"

    def drop_undelivered(self) -> None:
        """The consumer is gone: drop the queued events and queue no more."""
        self.abandoned = True
        self.queue.clear()

    def closed_to_steering(self) -> bool:
        """Cancellation was requested, or the run is completing or finished."""
        return self.cancel_requested or self.status == "completing" or self.status in FINISHED

    async def queue_steering(self, text: str) -> str:
        """Store ``text`` as ``steering.queued`` and add it to the pending steering; its message id."""
        message_id = ""
        with trio.CancelScope(shield=True):
            async with self.writer:
                if self.closed_to_steering():
                    raise SteeringClosedError(self.admitted.run_id)
                if len(self.pending) >= MAX_PENDING_STEERING:
                    raise InvalidRunInputError(
                        f"at most {MAX_PENDING_STEERING} steering messages may be pending"
                    )
                message_id = self.new_id("msg")
                queued = SteeringQueuedData(**self.ids, message_id=message_id, content=text)
                event = self.event("steering.queued", queued)
                await self.append_locked(event)
                self.enqueue(event)
                self.pending.append((message_id, text))
        return message_id

    async def complete_unless_steered(self) -> None:
        """The run completes, unless steering is pending: that means another round (issue #23).

        Under the writer lock: a steer being stored now lands before this decision, never
        after a completion that would drop it.
        """
        with trio.CancelScope(shield=True):
            async with self.writer:
                if not self.pending:
                    self.status = "completing"

    # ------------------------------------------------------------ events
    def new_id(self, prefix: str) -> str:
        """A fresh id from the run's injected generator, checked."""
        value = self.admitted.new_id(prefix)
        if not is_id(value):
            raise InvalidRunInputError(f'new_id("{prefix}") returned an invalid id')
        return value

    def event(self, event_type: EventType, data: EventData, actor: str = "kernel") -> Event:
        """A validated event of this run, with a fresh id and the injected clock's time."""
        event_id = self.new_id("evt")
        at: object = self.admitted.now()
        if type(at) is not str:
            raise InvalidRunInputError("now() must return a str")
        try:
            return create_event(event_type, data, event_id=event_id, at=at, actor=actor)
        except Exception as error:
            raise InvalidRunInputError(f"cannot build {event_type} event: {error}") from error

    def checkpoint(
        self,
        view: RunView,
        boundary: Boundary,
        request_id: str | None = None,
        *,
        messages: Sequence[ChatMessage] | None = None,
        revision: int | None = None,
    ) -> tuple[Event, Checkpointed]:
        """A ``runtime.checkpoint`` of the context (``view``'s, or ``messages`` at ``revision``):
        the messages added since the session's last checkpoint (all of them after a compaction)
        and the run's accounting; and the outcome that counts it as taken.

        The run counts the checkpoint as taken at once: it is appended in the batch it was
        built for, and a failed append poisons the run anyway.

        Raises:
            CheckpointError: the checkpoint would be over its bounds.
        """
        context = view.messages if messages is None else messages
        state = checkpoint_state(
            base=None if view.checkpointed == 0 else view.last_checkpoint,
            added=context[view.checkpointed :],
            message_count=len(context),
            message_revision=view.revision if revision is None else revision,
            usage=view.usage,
            model_requests=view.model_requests,
            tool_calls=view.tool_calls,
        )
        data = RuntimeCheckpointData(
            **self.ids,
            version=CHECKPOINT_VERSION,
            boundary=boundary,
            state=state,
            request_id=or_unset(request_id),
        )
        event = self.event("runtime.checkpoint", data)
        return event, Checkpointed(event.event_id, len(context))

    def enqueue(self, event: Event) -> None:
        """Queue a stored event for the consumer (none once it is gone)."""
        if not self.abandoned:
            self.queue.append(event)

    async def append_locked(self, event: Event) -> None:
        """Append, shielded; the caller holds the writer lock."""
        if self.poison is not None:
            raise self.poison
        with trio.CancelScope(shield=True):
            await self._append_shielded(event)

    async def _append_shielded(self, event: Event) -> None:
        """The store call itself; the caller holds the writer lock inside a shielded scope."""
        await self._store(lambda: self.admitted.append(event), event.type)

    async def _store(self, call: Callable[[], object], event_type: EventType) -> None:
        """Make one store call (awaiting what it returns); a failure poisons the run with ``event_type``."""
        if self.poison is not None:
            raise self.poison
        try:
            result = call()
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            poison = EventAppendError(event_type)
            poison.__cause__ = error
            self.poison = poison
            raise poison from error

    async def append_batch(self, events: tuple[Event, ...]) -> None:
        """Append and queue events that need no acknowledgement between them (spec §8.4).

        Under the writer lock, shielded. A :class:`~harness_kernel.store.BatchEventStore`
        stores them with one durable commit, all or none (a failure poisons the run with the
        first event's type); any other store gets one ``append`` per event, and each event
        is queued once it is stored.
        """
        with trio.CancelScope(shield=True):
            async with self.writer:
                await self.append_batch_locked(events)

    async def append_batch_locked(self, events: tuple[Event, ...]) -> None:
        """:meth:`append_batch` for a caller that holds the writer lock inside a shielded scope."""
        append_many = self.admitted.append_many
        if append_many is None:
            for event in events:
                await self._append_shielded(event)
                self.enqueue(event)
            return
        await self._store(lambda: append_many(list(events)), events[0].type)
        for event in events:
            self.enqueue(event)

    async def publish(
        self, event_type: EventType, data: EventData, *, actor: str = "kernel", force: bool = False
    ) -> bool:
        """Append and queue one event; True when the producer must wait for the acknowledgement."""
        if not force:
            self.check_cancel()
        event = self.event(event_type, data, actor)
        with trio.CancelScope(shield=True):
            async with self.writer:
                # Already shielded here, so no second scope (``append_locked`` opens one).
                await self._append_shielded(event)
        self.enqueue(event)
        return not self.cancel_requested

    async def publish_batch(self, build: Callable[[], tuple[Event, ...]]) -> bool:
        """Append and queue the events ``build`` makes (after the cancellation check), with no
        acknowledgement between them; True when the producer must wait for the acknowledgement."""
        self.check_cancel()
        await self.append_batch(build())
        return not self.cancel_requested

    async def warning(self, metric: BudgetMetric, used: int, limit: int) -> bool:
        """Publish one ``budget.warning``; True when the producer must wait for the acknowledgement."""
        warning = BudgetWarningData(
            task_id=or_unset(self.admitted.task_id),
            **self.ids,
            metric=metric,
            used=used,
            limit=limit,
            pct=percent(used, limit),
        )
        return await self.publish("budget.warning", warning)

    async def refuse_spent_tokens(self, total: int) -> AsyncGenerator[None, None]:
        """Before a request: with ``total`` tokens at or over the budget, warn, then end the run.

        Raises:
            RuntimeBudgetExceededError: the token budget is spent.
        """
        limit = self.admitted.max_model_tokens
        if limit is not None and total >= limit:
            if await self.warning("tokens", total, limit):
                yield None
            raise RuntimeBudgetExceededError("tokens", total, limit)
