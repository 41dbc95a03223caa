"""Message validation: the exact kernel message classes, deep-frozen (kernel.md §3).

msgspec does not validate in ``__init__``, so a message handed to the runtime (a run's
``context``) is checked field by field here: only the exact classes of
:mod:`harness_kernel.models`, text without lone surrogates, and tool-call arguments that
become the kernel's frozen JSON (depth ≤ 64, ≤ 100 000 values, no cycles).
"""

from harness_kernel._json import JsonDataError, JsonValue, freeze_json, has_lone_surrogate, is_exact_array
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

__all__ = ["InvalidMessageError", "freeze_messages"]


class InvalidMessageError(ValueError):
    """A message is out of contract; the text says which field and why."""


def freeze_messages(messages: object) -> tuple[ChatMessage, ...]:
    """Validated, deep-frozen copies of ``messages`` (the same objects where already frozen).

    Raises:
        InvalidMessageError: ``messages`` is not an exact ``list`` or ``tuple`` of valid messages.
    """
    if not is_exact_array(messages):
        raise InvalidMessageError(f"prior messages must be a list or tuple, not {type(messages).__name__}")
    return tuple(_freeze_message(message, index) for index, message in enumerate(messages))


# ------------------------------------------------------------------ validation
def _freeze_message(message: object, index: int) -> ChatMessage:
    """``message`` re-validated and deep-frozen; the same object when it already is."""
    where = f"messages[{index}]"
    kind = type(message)
    if kind is SystemMessage or kind is UserMessage:
        assert isinstance(message, SystemMessage | UserMessage)
        _check_text(message.content, f"{where}.content")
        return message
    if kind is ToolMessage:
        assert isinstance(message, ToolMessage)
        _check_text(message.content, f"{where}.content")
        _check_text(message.name, f"{where}.name")
        _check_text(message.tool_call_id, f"{where}.tool_call_id")
        return message
    if kind is AssistantMessage:
        assert isinstance(message, AssistantMessage)
        _check_text(message.content, f"{where}.content")
        calls: object = message.tool_calls
        if calls is None:
            return message
        if not is_exact_array(calls):
            raise InvalidMessageError(f"{where}.tool_calls must be a list, tuple or None")
        frozen = tuple(
            _freeze_call(call, f"{where}.tool_calls[{position}]") for position, call in enumerate(calls)
        )
        if type(calls) is tuple and all(a is b for a, b in zip(frozen, calls, strict=True)):
            return message
        return AssistantMessage(content=message.content, tool_calls=frozen)
    raise InvalidMessageError(f"{where}: unknown message class {kind.__name__}")


def _freeze_call(call: object, where: str) -> ToolCall:
    if type(call) is not ToolCall:
        raise InvalidMessageError(f"{where} must be a ToolCall, not {type(call).__name__}")
    assert isinstance(call, ToolCall)
    _check_text(call.id, f"{where}.id")
    _check_text(call.name, f"{where}.name")
    arguments = _freeze_json_field(call.arguments, f"{where}.arguments")
    if arguments is call.arguments:
        return call
    return ToolCall(id=call.id, name=call.name, arguments=arguments)


def _freeze_json_field(value: object, where: str) -> JsonValue:
    """Frozen JSON within the default limits (depth ≤ 64, ≤ 100 000 values, no cycles)."""
    try:
        return freeze_json(value)
    except JsonDataError as error:
        raise InvalidMessageError(f"{where} is not valid JSON data: {error}") from None


def _check_text(value: object, where: str) -> None:
    if type(value) is not str:
        raise InvalidMessageError(f"{where} must be a str, not {type(value).__name__}")
    assert isinstance(value, str)
    if has_lone_surrogate(value):
        raise InvalidMessageError(f"{where} holds a lone surrogate")
