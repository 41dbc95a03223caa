"""A run's state record, the read-only view its steps get, and the outcomes they return.

A step of a run (a model round, a tool call, a compaction) never writes the run's state: it
reads it through :class:`RunView` and yields an outcome (:data:`Outcome`) at the point where
the state changes; the driver applies it at once, before the step goes on, so the step reads
the new state from there. ``None`` among a step's values is an acknowledgement wait, which
the driver passes up to the consumer. The outcomes say what happened in the run's terms
(``MessageAdded``, ``ModelAnswered``, ``Compacted``); :meth:`RunState.apply` is the one
place where they change the record.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from harness_kernel._gate import ToolGate
from harness_kernel.models._types import ChatMessage, ModelRequest, Usage
from harness_kernel.runtime._context import (
    Estimate,
    estimate,
    message_bytes,
    request_bytes_from_sizes,
    request_fixed_bytes,
)
from harness_kernel.runtime._errors import BudgetMetric
from harness_kernel.runtime._input import Admitted
from harness_kernel.runtime._response import add_usage

__all__ = [
    "Checkpointed",
    "Compacted",
    "MessageAdded",
    "ModelAnswered",
    "Outcome",
    "RequestSent",
    "RunState",
    "RunView",
    "StepValue",
    "ToolCalled",
    "TranscriptGrew",
    "UsageSpent",
    "Warned",
]


@dataclass(frozen=True, slots=True)
class Warned:
    """A ``budget.warning`` of ``metric`` is (being) published; it is not published again."""

    metric: BudgetMetric


@dataclass(frozen=True, slots=True)
class RequestSent:
    """A ``model.request`` was stored and acknowledged: the model is about to be pulled."""


@dataclass(frozen=True, slots=True)
class ModelAnswered:
    """The model's completion was checked: what it spent, the calls it asked for."""

    spent: Usage
    call_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UsageSpent:
    """A request outside the round's own (a summary) spent ``spent``."""

    spent: Usage


@dataclass(frozen=True, slots=True)
class MessageAdded:
    """``message`` joined the context (one more message revision).

    ``output_id`` is set for the assistant's answer: the turn's output message so far.
    """

    message: ChatMessage
    output_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCalled:
    """A tool call was counted (before its ``tool.call`` is published)."""


@dataclass(frozen=True, slots=True)
class TranscriptGrew:
    """``size`` more bytes of call arguments or results went into the run's tool transcript."""

    size: int


@dataclass(frozen=True, slots=True)
class Checkpointed:
    """A ``runtime.checkpoint`` (``event_id``) covering the first ``covered`` messages was built."""

    event_id: str
    covered: int


@dataclass(frozen=True, slots=True)
class Compacted:
    """The context became ``messages`` (a summary and the kept tail), compaction ``revision``.

    ``sizes`` are the ``message_bytes`` already measured of a prefix of ``messages``.
    """

    revision: int
    messages: tuple[ChatMessage, ...]
    sizes: list[int]


Outcome: TypeAlias = (
    Warned
    | RequestSent
    | ModelAnswered
    | UsageSpent
    | MessageAdded
    | ToolCalled
    | TranscriptGrew
    | Checkpointed
    | Compacted
)
StepValue: TypeAlias = Outcome | None
"""What a step yields: an outcome for the driver to apply, or ``None`` (an acknowledgement wait)."""


class RunView(Protocol):
    """What a step may read of a run's state (and the estimate, which memoises sizes)."""

    @property
    def admitted(self) -> Admitted: ...
    @property
    def gate(self) -> ToolGate: ...
    @property
    def messages(self) -> Sequence[ChatMessage]: ...
    @property
    def revision(self) -> int: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def model_requests(self) -> int: ...
    @property
    def tool_calls(self) -> int: ...
    @property
    def warned(self) -> Set[BudgetMetric]: ...
    @property
    def model_call_ids(self) -> Set[str]: ...
    @property
    def transcript(self) -> int: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def output_message_id(self) -> str | None: ...
    @property
    def last_checkpoint(self) -> str | None: ...
    @property
    def checkpointed(self) -> int: ...
    @property
    def compactions(self) -> int: ...

    def measure(self, extra: Sequence[ChatMessage] = ()) -> Estimate:
        """The context estimate of ``messages`` followed by ``extra``."""
        ...

    def measure_of(
        self, messages: Sequence[ChatMessage], sizes: list[int], extra: Sequence[ChatMessage] = ()
    ) -> Estimate:
        """The estimate of ``messages`` + ``extra`` in a request of this run."""
        ...


@dataclass(slots=True, kw_only=True)
class RunState:
    """A run's context and accounting: what its checkpoints and terminal pair record.

    Only the driver writes it, through :meth:`apply` (and when it admits or resumes the turn).
    """

    admitted: Admitted
    gate: ToolGate
    messages: list[ChatMessage]
    revision: int
    usage: Usage
    last_checkpoint: str | None
    checkpointed: int
    compactions: int
    model_requests: int = 0
    tool_calls: int = 0
    warned: set[BudgetMetric] = field(default_factory=set[BudgetMetric])
    model_call_ids: set[str] = field(default_factory=set[str])
    transcript: int = 0
    agent_id: str = ""
    input_message_id: str = ""
    output_message_id: str | None = None
    sizes: list[int] = field(default_factory=list[int])
    """``message_bytes`` of ``messages[: len(sizes)]``, kept for the context estimate."""
    fixed_bytes: int | None = None

    @classmethod
    def of(cls, admitted: Admitted) -> RunState:
        """The state a run of ``admitted`` starts from (the session's context and accounting)."""
        return cls(
            admitted=admitted,
            gate=ToolGate(workspace=admitted.workspace, decide=admitted.decide),
            messages=list(admitted.context),
            revision=len(admitted.context) if admitted.revision is None else admitted.revision,
            usage=admitted.usage or Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0),
            last_checkpoint=admitted.last_checkpoint,
            checkpointed=admitted.checkpointed,
            compactions=admitted.compactions,
        )

    def apply(self, outcome: Outcome) -> None:
        """Record what a step reports."""
        match outcome:
            case MessageAdded(message, output_id):
                self.messages.append(message)
                self.revision += 1
                if output_id is not None:
                    self.output_message_id = output_id
            case Warned(metric):
                self.warned.add(metric)
            case ToolCalled():
                self.tool_calls += 1
            case TranscriptGrew(size):
                self.transcript += size
            case RequestSent():
                self.model_requests += 1
            case ModelAnswered(spent, call_ids):
                self.model_call_ids.update(call_ids)
                self.usage = add_usage(self.usage, spent)
            case UsageSpent(spent):
                self.usage = add_usage(self.usage, spent)
            case Checkpointed(event_id, covered):
                self.last_checkpoint = event_id
                self.checkpointed = covered
            case Compacted(revision, messages, sizes):
                # The next checkpoint starts afresh: the context is no longer an extension.
                self.compactions = revision
                self.revision += 1
                self.messages = list(messages)
                self.sizes = sizes
                self.checkpointed = 0

    def measure(self, extra: Sequence[ChatMessage] = ()) -> Estimate:
        """The context estimate of ``messages`` followed by ``extra`` (issue #23 §2)."""
        return self.measure_of(self.messages, self.sizes, extra)

    def measure_of(
        self, messages: Sequence[ChatMessage], sizes: list[int], extra: Sequence[ChatMessage] = ()
    ) -> Estimate:
        """The estimate of ``messages`` + ``extra`` in a request of this run.

        ``sizes`` holds the ``message_bytes`` of a prefix of ``messages`` and is completed
        here, so a boundary measures only the messages added since the last one; a
        provider's tokenizer, when the adapter has one, counts the whole request instead.
        """
        admitted = self.admitted
        if admitted.counter is not None:
            return estimate(
                [*messages, *extra], system=admitted.system, tools=admitted.advertised, counter=self
            )
        for message in messages[len(sizes) :]:
            sizes.append(message_bytes(message))
        if self.fixed_bytes is None:
            self.fixed_bytes = request_fixed_bytes(system=admitted.system, tools=admitted.advertised)
        every = sizes if not extra else [*sizes, *(message_bytes(message) for message in extra)]
        tokens = request_bytes_from_sizes(every, fixed=self.fixed_bytes)
        return Estimate(tokens=tokens, method="utf8-bytes", messages=len(every))

    def count_tokens(self, request: ModelRequest) -> object:
        """The adapter's tokenizer (:class:`~harness_kernel.runtime._context.TokenCounter`)."""
        assert self.admitted.counter is not None
        return self.admitted.counter(request)
