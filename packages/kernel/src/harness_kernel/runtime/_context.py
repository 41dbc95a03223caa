"""Context accounting and compaction: the pure part (issue #23 §2).

Everything here is synchronous and deterministic; the runtime's model round decides when to
call it. The size of a request is measured on its compact JSON wire form, the kernel codec's
encoding (:func:`~harness_kernel._json.encode_json`) of::

    {"system": …, "tools": [ToolDefinition…], "messages": [ChatMessage…]}

where ``system`` and ``tools`` are left out when ``None`` and each message is encoded as the
kernel encodes a ``ChatMessage``: ``{"role", "content"}``, plus ``"toolCalls": [{"id", "name",
"arguments"}]`` for an assistant message whose ``tool_calls`` is not ``None``, and ``"name"``,
``"toolCallId"`` for a tool result. A token is never shorter than one UTF-8 byte, so the byte
count is a conservative token estimate when no tokenizer is at hand.

The request size is a sum of parts (:func:`request_fixed_bytes` for the system text and
tools, :func:`message_bytes` per message, one comma between messages), so a caller can keep
the size of every message it has measured and get the request size from
:func:`request_bytes_from_sizes` without encoding a message twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from harness_kernel._json import MAX_SAFE_INTEGER, encode_json, has_lone_surrogate
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    ModelRequest,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from harness_kernel.runtime._errors import (
    ContextCompactionError,
    ContextOverflowError,
    InvalidRunInputError,
)

__all__ = [
    "MAX_TAIL_MESSAGES",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_PREFIX",
    "ContextPolicy",
    "Estimate",
    "TokenCounter",
    "check_context_policy",
    "check_summary",
    "check_window",
    "compacted_messages",
    "estimate",
    "message_bytes",
    "needs_compaction",
    "request_bytes",
    "request_bytes_from_sizes",
    "request_fixed_bytes",
    "summary_request_messages",
    "tail_start",
]

MAX_TAIL_MESSAGES: Final = 10_000
"""The most messages a policy may keep verbatim after a compaction."""

SUMMARY_INSTRUCTION: Final = (
    "Summarise the conversation so far so that the task can be continued from your summary "
    "alone; the earlier messages will be replaced by it. Keep every decision taken, every fact "
    "learned, the file paths and names involved, what has been done and what remains, and the "
    "open questions. Write plain text only and do not call any tool."
)
"""The user message appended to the prefix when the model is asked for a summary."""

SUMMARY_PREFIX: Final = "Summary of the earlier conversation, which was compacted:\n\n"
"""What the summary message starts with, so the model knows the history was replaced."""

# The compact JSON around the parts of a request: ``{"messages":[`` … ``]}``, and the key of
# each optional part followed by the comma that separates it from the next one.
_ENVELOPE_BYTES: Final = len(b'{"messages":[]}')
_SYSTEM_KEY_BYTES: Final = len(b'"system":,')
_TOOLS_KEY_BYTES: Final = len(b'"tools":,')


# ------------------------------------------------------------------ policy
@dataclass(frozen=True, kw_only=True, slots=True)
class ContextPolicy:
    """When to compact a run's context and how much of it fits the model.

    Attributes:
        window_tokens: The model's context window, in tokens.
        threshold_tokens: Compaction is due once a request's estimate reaches this many tokens.
        tail_messages: How many of the latest messages a compaction keeps verbatim (a few more
            when the first of them is a tool result, so a call and its results stay together).
        reserve_tokens: Tokens of the window kept free for the model's answer.
    """

    window_tokens: int
    threshold_tokens: int
    tail_messages: int = 8
    reserve_tokens: int = 0


def _is_int_in(value: object, minimum: int, maximum: int) -> bool:
    return type(value) is int and minimum <= value <= maximum


def check_context_policy(value: object) -> ContextPolicy | None:
    """A fresh copy of ``value`` if it is a valid :class:`ContextPolicy`; ``None`` passes through.

    Raises:
        InvalidRunInputError: ``value`` is not exactly a ``ContextPolicy``, or a field is not
            an exact ``int`` in its range: ``window_tokens`` in 1..2**53-1, ``reserve_tokens``
            in 0..window_tokens-1, ``threshold_tokens`` in 1..window_tokens-reserve_tokens,
            ``tail_messages`` in 0..10 000. The message names the field.
    """
    if value is None:
        return None
    if type(value) is not ContextPolicy:
        raise InvalidRunInputError("context_policy must be a ContextPolicy or None")
    assert isinstance(value, ContextPolicy)
    window, threshold = value.window_tokens, value.threshold_tokens
    tail, reserve = value.tail_messages, value.reserve_tokens
    for field, number in (
        ("window_tokens", window),
        ("threshold_tokens", threshold),
        ("tail_messages", tail),
        ("reserve_tokens", reserve),
    ):
        if type(number) is not int:
            raise InvalidRunInputError(f"context_policy.{field} must be an int, not {type(number).__name__}")
    if not _is_int_in(window, 1, MAX_SAFE_INTEGER):
        raise InvalidRunInputError(f"context_policy.window_tokens must be in 1..{MAX_SAFE_INTEGER}")
    if not _is_int_in(reserve, 0, window - 1):
        raise InvalidRunInputError(
            f"context_policy.reserve_tokens must be in 0..{window - 1} (less than window_tokens)"
        )
    if not _is_int_in(threshold, 1, window - reserve):
        raise InvalidRunInputError(
            f"context_policy.threshold_tokens must be in 1..{window - reserve}"
            " (at most window_tokens - reserve_tokens)"
        )
    if not _is_int_in(tail, 0, MAX_TAIL_MESSAGES):
        raise InvalidRunInputError(f"context_policy.tail_messages must be in 0..{MAX_TAIL_MESSAGES}")
    return ContextPolicy(
        window_tokens=window, threshold_tokens=threshold, tail_messages=tail, reserve_tokens=reserve
    )


def needs_compaction(tokens: int, policy: ContextPolicy) -> bool:
    """Whether a request of ``tokens`` tokens has reached the policy's compaction threshold."""
    return tokens >= policy.threshold_tokens


def check_window(estimate_tokens: int, policy: ContextPolicy) -> None:
    """Refuse a request that leaves less than ``reserve_tokens`` of the window for the answer.

    Raises:
        ContextOverflowError: ``estimate_tokens + reserve_tokens > window_tokens``.
    """
    if estimate_tokens + policy.reserve_tokens > policy.window_tokens:
        raise ContextOverflowError(estimate_tokens, policy.reserve_tokens, policy.window_tokens)


# ------------------------------------------------------------------ sizes
def message_bytes(message: ChatMessage) -> int:
    """The UTF-8 byte length of ``message``'s compact JSON wire form (see the module docstring).

    The message is trusted to be valid (as the message state holds it): a lone surrogate in
    its text cannot be encoded.
    """
    return len(encode_json(message))


def request_fixed_bytes(*, system: str | None, tools: Sequence[ToolDefinition] | None) -> int:
    """The bytes of a request that do not depend on its messages: the envelope, system and tools.

    Constant for a run, so a caller computes it once.
    """
    size = _ENVELOPE_BYTES
    if system is not None:
        size += _SYSTEM_KEY_BYTES + len(encode_json(system))
    if tools is not None:
        size += _TOOLS_KEY_BYTES + len(encode_json(tuple(tools)))
    return size


def request_bytes_from_sizes(sizes: Sequence[int], *, fixed: int) -> int:
    """The request size from each message's :func:`message_bytes` and :func:`request_fixed_bytes`.

    Args:
        sizes: The size of every message of the request, in order (only their sum and count
            matter).
        fixed: What :func:`request_fixed_bytes` answered for the request's system and tools.
    """
    return fixed + sum(sizes) + max(len(sizes) - 1, 0)


def request_bytes(
    messages: Sequence[ChatMessage],
    *,
    system: str | None,
    tools: Sequence[ToolDefinition] | None,
) -> int:
    """The UTF-8 byte length of the whole request's compact JSON (see the module docstring).

    Equal to the length of encoding the request object at once; each message is encoded once.
    """
    sizes = [message_bytes(message) for message in messages]
    return request_bytes_from_sizes(sizes, fixed=request_fixed_bytes(system=system, tools=tools))


# ------------------------------------------------------------------ estimate
class TokenCounter(Protocol):
    """What a model adapter may offer to count a request's tokens with the provider's tokenizer."""

    def count_tokens(self, request: ModelRequest) -> int:
        """The number of tokens ``request`` takes in the model's context (a safe int >= 0)."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    """How many tokens a request takes, and how that was found.

    Attributes:
        tokens: The token count (an upper bound when ``method`` is ``"utf8-bytes"``).
        method: ``"tokenizer"`` when a :class:`TokenCounter` counted, else ``"utf8-bytes"``:
            the request's compact JSON length, one token per byte at most.
        messages: How many messages the request held.
    """

    tokens: int
    method: Literal["utf8-bytes", "tokenizer"]
    messages: int


def _count_tokens_method(counter: object) -> object:
    try:
        return getattr(counter, "count_tokens", None)
    except Exception as error:
        raise InvalidRunInputError("counter.count_tokens could not be read") from error


def estimate(
    messages: Sequence[ChatMessage],
    *,
    system: str | None,
    tools: Sequence[ToolDefinition] | None,
    counter: object | None = None,
    message_sizes: Sequence[int] | None = None,
) -> Estimate:
    """Estimate the tokens of the request built from ``messages``, ``system`` and ``tools``.

    Args:
        messages: The request's messages.
        system: The request's system text, if any.
        tools: The tools the request advertises, if any.
        counter: Any object; when it has a callable ``count_tokens`` (a :class:`TokenCounter`,
            typically the model adapter), it counts a ``ModelRequest`` of these parts (model
            ``"estimate"``). Otherwise the request's UTF-8 byte length is the estimate.
        message_sizes: The :func:`message_bytes` of each message, when the caller keeps
            them; the byte estimate then encodes no message.

    Raises:
        InvalidRunInputError: ``count_tokens`` could not be read, or returned something other
            than an exact ``int`` in 0..2**53-1.
        ValueError: ``message_sizes`` does not hold one size per message.

    Whatever ``count_tokens`` raises propagates unchanged.
    """
    count = _count_tokens_method(counter)
    if callable(count):
        request = ModelRequest(
            messages=tuple(messages),
            tools=None if tools is None else tuple(tools),
            model="estimate",
            system=system,
        )
        tokens = count(request)
        if not _is_int_in(tokens, 0, MAX_SAFE_INTEGER):
            # Only the type is named: showing the value could run the counter's code.
            shown = "an int out of range" if type(tokens) is int else type(tokens).__name__
            raise InvalidRunInputError(
                f"counter.count_tokens must return an int of 0..{MAX_SAFE_INTEGER}, not {shown}"
            )
        assert isinstance(tokens, int)
        return Estimate(tokens=tokens, method="tokenizer", messages=len(messages))
    if message_sizes is None:
        tokens = request_bytes(messages, system=system, tools=tools)
    elif len(message_sizes) == len(messages):
        tokens = request_bytes_from_sizes(
            message_sizes, fixed=request_fixed_bytes(system=system, tools=tools)
        )
    else:
        raise ValueError(f"message_sizes holds {len(message_sizes)} sizes for {len(messages)} messages")
    return Estimate(tokens=tokens, method="utf8-bytes", messages=len(messages))


# ------------------------------------------------------------------ compaction
def tail_start(messages: Sequence[ChatMessage], tail_messages: int) -> int:
    """The index where the kept tail of ``messages`` begins; ``messages[:index]`` is summarised.

    The tail holds at least the last ``tail_messages`` messages. It never begins on a tool
    result: it starts earlier, on the assistant message that made the calls, so that call and
    all its results stay together. 0 means there is nothing to summarise.

    Raises:
        ValueError: ``tail_messages`` is negative.
    """
    if tail_messages < 0:
        raise ValueError("tail_messages must be >= 0")
    start = max(len(messages) - tail_messages, 0)
    while 0 < start < len(messages) and type(messages[start]) is ToolMessage:
        start -= 1
    return start


def summary_request_messages(prefix: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The messages of the request that asks the model to summarise ``prefix``.

    ``prefix`` is ``messages[:tail_start(...)]``, followed by one user message holding
    :data:`SUMMARY_INSTRUCTION`.

    Raises:
        ValueError: ``prefix`` is empty, or ends with an assistant message whose tool calls
            have no results (its results must be summarised with it).
    """
    if not prefix:
        raise ValueError("there is nothing to summarise")
    last = prefix[-1]
    if type(last) is AssistantMessage and last.tool_calls:
        raise ValueError("the prefix must not end with tool calls that have no results")
    return (*prefix, UserMessage(content=SUMMARY_INSTRUCTION))


def compacted_messages(summary: str, tail: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The context after a compaction: one user message with the summary, then ``tail``."""
    return (UserMessage(content=SUMMARY_PREFIX + summary), *tail)


def check_summary(text: object, *, before_bytes: int, after_bytes: int) -> str:
    """``text`` if it is a usable summary, else ``ContextCompactionError``.

    Args:
        text: The model's summary.
        before_bytes: The request size before the compaction.
        after_bytes: The request size with :func:`compacted_messages` in place of the messages.

    Raises:
        ContextCompactionError: ``text`` is not a ``str``, is empty or only whitespace, holds a
            lone surrogate, or does not make the request smaller.
    """
    if type(text) is not str:
        raise ContextCompactionError(f"the summary must be a str, not {type(text).__name__}")
    assert isinstance(text, str)
    if not text.strip():
        raise ContextCompactionError("the summary is empty")
    if has_lone_surrogate(text):
        raise ContextCompactionError("the summary holds a lone surrogate")
    if after_bytes >= before_bytes:
        raise ContextCompactionError(
            f"the summary does not shrink the context ({before_bytes} bytes before, {after_bytes} after)"
        )
    return text
