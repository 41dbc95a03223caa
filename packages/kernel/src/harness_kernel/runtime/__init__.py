"""``MinimalAgentRuntime``: the durable, single-request streaming agent runtime (spec §8).

``run(input)`` admits a :class:`RunInput` synchronously and returns a :class:`RunStream`.
Iterating the stream drives the run: every event is appended to the run's event store
before it is delivered, and the producer waits for the consumer's acknowledgement (the
next ``__anext__``) before it does anything else, so the model is pulled only inside a
consumer step. There is no background task. ``steer`` queues user text before the first
model request; ``cancel`` (and ``aclose``) end the run with the canceled terminal pair.
"""

from __future__ import annotations

from types import TracebackType

import trio

from harness_kernel.events._model import Event
from harness_kernel.runtime._errors import (
    AgentRuntimeError,
    EventAppendError,
    InvalidRunInputError,
    ModelStreamError,
    ModelTimeoutError,
    RunAlreadyExistsError,
    RunNotFoundError,
    RunTerminalError,
    RuntimeBudgetExceededError,
    RuntimeConsumerError,
    SteeringClosedError,
)
from harness_kernel.runtime._input import RunInput, RuntimeBudget, admit, check_id
from harness_kernel.runtime._run import Run

__all__ = [
    "AgentRuntimeError",
    "EventAppendError",
    "InvalidRunInputError",
    "MinimalAgentRuntime",
    "ModelStreamError",
    "ModelTimeoutError",
    "RunAlreadyExistsError",
    "RunInput",
    "RunNotFoundError",
    "RunStream",
    "RunTerminalError",
    "RuntimeBudget",
    "RuntimeBudgetExceededError",
    "RuntimeConsumerError",
    "SteeringClosedError",
]


class RunStream:
    """The events of one run, in append order; iterate it once, inside ``async with``.

    Raises (from ``__anext__``):
        RuntimeConsumerError: the stream was claimed twice or stepped concurrently.
        EventAppendError: the store failed; no terminal events were written.
        AgentRuntimeError: after the terminal pair of a failed or budget-exceeded run, once.
    """

    def __init__(self, run: Run) -> None:
        self._run = run
        self._claimed = False
        self._stepping = False
        self._error_delivered = False

    def __aiter__(self) -> RunStream:
        if self._claimed:
            raise RuntimeConsumerError("the run stream is already being iterated")
        self._claimed = True
        return self

    async def __anext__(self) -> Event:
        run = self._run
        if self._stepping:
            raise RuntimeConsumerError("concurrent __anext__ on a run stream")
        self._stepping = True
        try:
            while True:
                if run.queue:
                    return run.queue.popleft()
                if run.producer_done or run.abandoned:
                    break
                try:
                    async with run.driver:
                        if not run.queue:
                            await run.advance(consumer=True)
                except trio.Cancelled:
                    # Cancelled while waiting for the driver lock, or inside a step (which
                    # then already persisted the pair): abandonment either way (§8.4).
                    with trio.CancelScope(shield=True):
                        await run.abandon()
                    raise
            if run.error is not None and not self._error_delivered:
                self._error_delivered = True
                raise run.error
            raise StopAsyncIteration
        finally:
            self._stepping = False

    async def steer(self, text: str) -> str:
        """Steer this run: ``text`` is stored as ``steering.queued`` before this returns, and
        applied as a user message at the next model-request boundary (``steering.applied``
        before ``model.request``). If the model stops while steering is pending, another
        round runs. Returns the steering message's id.

        May be called from any task while the stream is being iterated.

        Raises:
            InvalidRunInputError: not a str of 1..256 Ki characters, or 1 024 already pending.
            RunTerminalError: cancellation was requested, or the run is completing or finished.
            SteeringClosedError: the run's last boundary passed while this steer waited its turn.
            EventAppendError: the steering event could not be stored.
        """
        return await self._run.steer(text)

    async def aclose(self) -> None:
        """Abandon the run: drop undelivered events and persist the canceled pair unseen.

        Raises:
            EventAppendError: the canceled terminal pair could not be appended.
        """
        run = self._run
        if run.finished.is_set():
            run.abandoned = True
            run.queue.clear()
            return
        if run.driver.locked():
            # A step is driving (the consumer's or a control's). Cancellation releases every
            # acknowledgement, so that step runs the producer to its end and persists the pair;
            # waiting for it may be cancelled.
            await run.abandon()
        else:
            # No one else will drive: persist the pair here, shielded, so that an `async with`
            # left because its task was cancelled (a deadline hit while the consumer was busy
            # outside __anext__) still ends the run; that cancellation is delivered right after.
            # No checkpoint separates the check above from taking the free driver lock.
            with trio.CancelScope(shield=True):
                await run.abandon()
            await trio.lowlevel.checkpoint_if_cancelled()
        if isinstance(run.poison, EventAppendError):
            raise run.poison

    async def __aenter__(self) -> RunStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class MinimalAgentRuntime:
    """Runs agent turns; owns its live runs and the tombstones of finished ones."""

    def __init__(self) -> None:
        self._runs: dict[str, Run] = {}
        self._tombstones: dict[str, str] = {}

    def run(self, input: RunInput) -> RunStream:
        """Admit ``input`` synchronously and return its stream (spec §8.2).

        Raises:
            InvalidRunInputError: a field breaks its admission rule; nothing is registered.
            RunAlreadyExistsError: the run id is live or tombstoned on this runtime.
            WorkspaceOperationError: ``bind_workspace`` refused the workspace.
        """
        admitted = admit(input, check_run_id=self._check_run_id_free)
        run = Run(admitted, self._finished)
        self._runs[admitted.run_id] = run
        return RunStream(run)

    def _check_run_id_free(self, run_id: str) -> None:
        if run_id in self._runs or run_id in self._tombstones:
            raise RunAlreadyExistsError(run_id)

    def _finished(self, run: Run) -> None:
        self._runs.pop(run.a.run_id, None)
        self._tombstones[run.a.run_id] = run.status

    def _lookup(self, run_id: str) -> Run:
        run = self._runs.get(run_id)
        if run is not None:
            return run
        status = self._tombstones.get(run_id)
        if status is None:
            raise RunNotFoundError(run_id)
        raise RunTerminalError(run_id, status)

    async def steer(self, run_id: str, text: str) -> None:
        """Queue ``text`` as a user message for the run's next model-request boundary.

        Raises:
            RunNotFoundError, RunTerminalError, InvalidRunInputError, SteeringClosedError,
            EventAppendError: see spec §8.10 and :meth:`RunStream.steer`.
        """
        run = self._lookup(run_id)
        await run.steer(text)

    async def cancel(self, run_id: str) -> None:
        """Request cancellation and return once the canceled terminal pair is durable.

        Raises:
            InvalidRunInputError: ``run_id`` is not an id.
            RunNotFoundError: no such run.
            RunTerminalError: the run finished otherwise (also when the request came while
                another outcome was being recorded), or is completing otherwise.
            EventAppendError: the terminal pair could not be appended.
        """
        check_id(run_id, "run_id")
        run = self._runs.get(run_id)
        if run is None:
            status = self._tombstones.get(run_id)
            if status is None:
                raise RunNotFoundError(run_id)
            if status == "canceled":
                return
            raise RunTerminalError(run_id, status)
        if run.status == "completing":
            if run.finishing_as != "canceled":
                raise RunTerminalError(run_id, "completing")
            # Finishing as canceled already: wait for that pair like any later request, and
            # raise its failure rather than report a pair that was never appended.
            await run.finished.wait()
        else:
            run.request_cancel()
            await run.drive_to_end()
        failure = run.failure()
        if failure is not None:
            raise failure
        if run.status != "canceled":
            # The request lost to an outcome already being recorded when it came (a budget
            # exceed after its forced warning): report that outcome, as its tombstone would.
            raise RunTerminalError(run_id, run.status)
