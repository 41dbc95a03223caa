"""Models: the message vocabulary, the streaming model port and the scripted fake (spec §4).

A :class:`ModelAdapter` answers a :class:`ModelRequest` with a stream of frames — text
deltas, tool calls, then one :class:`ResponseCompletedFrame`. Legacy one-shot
:class:`Model` implementations plug in through :func:`adapt_model`. :class:`FakeModel`
plays :class:`ScriptedTurn` values for tests. Every record is a frozen msgspec Struct,
camelCase when encoded; the records do not validate themselves (msgspec does not validate
in ``__init__``): the message state and the runtime re-validate what they accept.

:class:`ToolNameAliases` maps canonical tool names (``fs.read``) to provider-safe aliases
(``fs_read``) and back, for the adapters of real providers (decision 040).
"""

from __future__ import annotations

from harness_kernel.models._adapters import FakeModel, ScriptedTurn, adapt_model
from harness_kernel.models._aliases import (
    ToolNameAliasError,
    ToolNameAliases,
)
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    CompletionRequest,
    CompletionResponse,
    FinishReason,
    Model,
    ModelAdapter,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    SystemMessage,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
    abort_reason_error,
    normalize_model_text_deltas,
    raise_if_aborted,
)

__all__ = [
    "AssistantMessage",
    "ChatMessage",
    "CompletionRequest",
    "CompletionResponse",
    "FakeModel",
    "FinishReason",
    "Model",
    "ModelAdapter",
    "ModelEvent",
    "ModelRequest",
    "ResponseCompletedFrame",
    "ScriptedTurn",
    "SystemMessage",
    "TextDeltaFrame",
    "ToolCall",
    "ToolCallFrame",
    "ToolDefinition",
    "ToolMessage",
    "ToolNameAliasError",
    "ToolNameAliases",
    "Usage",
    "UserMessage",
    "abort_reason_error",
    "adapt_model",
    "normalize_model_text_deltas",
    "raise_if_aborted",
]
