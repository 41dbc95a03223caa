"""``ConnectionThread``: one long-lived thread that owns one database connection and runs trio's jobs on it.

A trio task hands its job over through a queue and sleeps; the thread takes jobs (all that
are waiting when it is a group-committing writer, one at a time when it is a reader), runs
them and wakes their tasks through ``TrioToken.run_sync_soon`` — one wake-up per run of jobs,
instead of a ``trio.to_thread`` round trip for each. The hand-over keeps what the store
promises about cancellation:

* a task cancelled before its job was taken withdraws it: the thread skips it, nothing runs;
* once the job is taken it always finishes, and a cancellation that arrived meanwhile is
  delivered after, with its effects in place (never abandoned half-way);
* no task is woken before its job — for the writer, the commit that holds it — is done.

The thread stops when :meth:`ConnectionThread.stop` is called, after every job queued
before, and closes its connection on the way out.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any, Final, Generic, Protocol, TypeVar, cast

import trio

__all__ = ["ConnectionThread", "Job", "RunJobs"]

_T = TypeVar("_T")
_Resource = TypeVar("_Resource", bound="_Closable")

# Job states. A job moves QUEUED → TAKEN (by the thread) or QUEUED → WITHDRAWN (by its
# cancelled task); both moves happen under the thread's lock, so exactly one wins.
_QUEUED: Final = 0
_TAKEN: Final = 1
_WITHDRAWN: Final = 2


class _Closable(Protocol):
    def close(self) -> None: ...


class Job(Generic[_T]):
    """One piece of work for the thread, with the task waiting for it and its outcome.

    ``work`` receives whatever the thread's :data:`RunJobs` gives it; only that function and
    the waiting task touch a job, and never at the same time.
    """

    __slots__ = ("_error", "_value", "settled", "state", "task", "token", "work")

    def __init__(self, work: Callable[[Any], _T]) -> None:
        self.work = work
        self.settled = False
        self._value: _T | None = None
        self._error: BaseException | None = None
        self.state = _QUEUED
        self.task = trio.lowlevel.current_task()
        self.token = trio.lowlevel.current_trio_token()

    def succeed(self, value: _T) -> None:
        """Record the job's result (called in the thread)."""
        self._value, self.settled = value, True

    def fail(self, error: BaseException) -> None:
        """Record the job's error (called in the thread)."""
        self._error, self.settled = error, True

    def settlement(self, ok: bool, value: object) -> Callable[[], None]:
        """What records the job's outcome later: a group transaction settles its jobs only
        once it committed. ``value`` is the result if ``ok``, else the error (an exception)."""
        if ok:
            return lambda: self.succeed(cast(_T, value))
        assert isinstance(value, BaseException)
        return lambda: self.fail(value)

    def result(self) -> _T:
        """The result, or raise the error, recorded for the job."""
        if self._error is not None:
            raise self._error
        return cast(_T, self._value)


RunJobs = Callable[[_Resource, list[Job[Any]]], None]
"""Runs jobs on the thread's resource, calling ``succeed`` or ``fail`` on each; if it
raises, every job it left unsettled fails with that error."""


class ConnectionThread(Generic[_Resource]):
    """A thread that owns ``resource`` and runs the jobs :meth:`run` hands it.

    Args:
        resource: The connection; the thread closes it when it stops.
        run_jobs: Runs a list of taken jobs (in the thread).
        name: The thread's name.
        grouped: Take every waiting job at once (a group commit), not one at a time.
    """

    def __init__(
        self, resource: _Resource, run_jobs: RunJobs[_Resource], *, name: str, grouped: bool
    ) -> None:
        self._resource = resource
        self._run_jobs = run_jobs
        self._grouped = grouped
        self._queue: queue.SimpleQueue[Job[Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    async def run(self, work: Callable[[Any], _T]) -> _T:
        """Run ``work`` in the thread and return its result once it is done.

        A cancellation before the thread takes the job withdraws it (nothing runs); after,
        it is delivered once the job is done.
        """
        # A caller cancelled before it asked leaves nothing behind.
        await trio.lowlevel.checkpoint_if_cancelled()
        job = Job(work)
        self._queue.put(job)

        def abort(_: object) -> trio.lowlevel.Abort:
            with self._lock:
                if job.state == _QUEUED:
                    job.state = _WITHDRAWN
                    return trio.lowlevel.Abort.SUCCEEDED
            # Taken: it finishes, and this task is woken after it; the cancellation stays
            # pending and lands at the checkpoint below.
            return trio.lowlevel.Abort.FAILED

        await trio.lowlevel.wait_task_rescheduled(abort)
        await trio.lowlevel.checkpoint_if_cancelled()
        return job.result()

    def stop(self) -> None:
        """Let the thread finish every job queued so far, then close its resource and end.

        Blocks until it has (call it through ``trio.to_thread``). Nothing may be queued after.
        """
        self._queue.put(None)
        self._thread.join()

    def _serve(self) -> None:
        try:
            stopping = False
            while not stopping:
                batch, stopping = self._next_batch()
                with self._lock:
                    taken = [job for job in batch if job.state == _QUEUED]
                    for job in taken:
                        job.state = _TAKEN
                if taken:
                    self._run(taken)
        finally:
            self._resource.close()

    def _next_batch(self) -> tuple[list[Job[Any]], bool]:
        """The next jobs to run (blocking until there is one), and whether the stop came."""
        first = self._queue.get()
        if first is None:
            return [], True
        batch = [first]
        if self._grouped:
            while True:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    return batch, True
                batch.append(job)
        return batch, False

    def _run(self, taken: list[Job[Any]]) -> None:
        try:
            self._run_jobs(self._resource, taken)
        except BaseException as error:
            # The thread serves on: each job keeps the error that stopped it.
            for job in taken:
                if not job.settled:
                    job.fail(error)
        finally:
            _wake(taken)


def _wake(jobs: list[Job[Any]]) -> None:
    """Reschedule the jobs' tasks: one call into each trio run they wait in."""
    for token, group in itertools.groupby(jobs, key=lambda job: job.token):
        tasks = [job.task for job in group]
        # A run that has ended has no task waiting any more.
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(_reschedule, tasks)


def _reschedule(tasks: list[trio.lowlevel.Task]) -> None:
    for task in tasks:
        trio.lowlevel.reschedule(task)
