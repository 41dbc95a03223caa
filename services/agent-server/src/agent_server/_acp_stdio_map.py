"""harness/acp/1 events as Agent Client Protocol ``session/update`` payloads (decision 043).

Pure translation, no I/O: :class:`UpdateMapper` turns the event envelopes one harness session
streams (or replays) into the ``update`` objects of ACP ``session/update`` notifications, and
:func:`stop_reason` turns the run's outcome into the ``stopReason`` of ``session/prompt``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final

__all__ = ["MAX_TOOL_TEXT_CHARS", "UpdateMapper", "stop_reason", "tool_kind"]

JsonObject = dict[str, Any]

MAX_TOOL_TEXT_CHARS: Final = 64 * 1024
"""A tool result shown to the editor is cut here; the full output stays in the harness store."""

_KINDS: Final = {
    "fs.read": "read",
    "fs.list": "read",
    "git.diff": "read",
    "fs.write": "edit",
    "process.exec": "execute",
}


def tool_kind(action: str | None) -> str:
    """The ACP tool kind of a policy action: read, edit, execute, or other."""
    return _KINDS.get(action or "", "other")


def stop_reason(status: str | None, finish_reason: str | None, cancelled: bool) -> str | None:
    """The ACP ``stopReason`` of a finished run, or ``None`` when the run failed (an error answer).

    Args:
        status: ``turn.completed``'s status (``completed``, ``failed``, ``canceled``,
            ``budget_exceeded``), or ``None`` when the run ended without one.
        finish_reason: The last ``model.response``'s finish reason.
        cancelled: Whether the client cancelled the prompt.
    """
    if cancelled or status == "canceled":
        return "cancelled"
    if status == "budget_exceeded":
        return "max_turn_requests"
    if status != "completed":
        return None
    return "max_tokens" if finish_reason == "length" else "end_turn"


def _bounded(text: str) -> str:
    if len(text) <= MAX_TOOL_TEXT_CHARS:
        return text
    dropped = len(text) - MAX_TOOL_TEXT_CHARS
    return f"{text[:MAX_TOOL_TEXT_CHARS]}\n[... {dropped} more characters in the session store]"


def _result_text(data: JsonObject) -> str:
    if not data.get("ok"):
        error: JsonObject = data.get("error") or {}
        return f"{error.get('code', 'TOOL_FAILED')}: {error.get('message', 'the tool failed')}"
    output = data.get("output")
    if isinstance(output, dict) and isinstance(output.get("content"), str):  # pyright: ignore[reportUnknownMemberType]
        return _bounded(output["content"])  # pyright: ignore[reportUnknownArgumentType]
    return _bounded(output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, indent=2))


def _text(text: str) -> JsonObject:
    return {"type": "text", "text": text}


class UpdateMapper:
    """The ``session/update`` payloads of one ACP session's harness events, in order.

    Args:
        cwd: The session's absolute working directory (ACP diffs name absolute paths).
        replay: Whether events are replayed by ``session/load`` (the user's own messages
            are then sent back as ``user_message_chunk``).
    """

    def __init__(self, cwd: str, *, replay: bool = False) -> None:
        self._cwd = cwd
        self._replay = replay
        self._streamed: set[str] = set()
        self._calls: dict[str, JsonObject] = {}
        self._announced: set[str] = set()
        self.status: str | None = None
        self.finish_reason: str | None = None

    def tool_call(self, call_id: str) -> JsonObject:
        """The ``ToolCallUpdate`` describing call ``call_id`` (for ``session/request_permission``)."""
        call = self._calls.get(call_id, {})
        return {
            "toolCallId": call_id,
            "title": call.get("title", "tool call"),
            "kind": call.get("kind", "other"),
            "status": "pending",
            "rawInput": call.get("input", {}),
        }

    def updates(self, event: JsonObject) -> list[JsonObject]:
        """The updates ``event`` becomes (often none: bookkeeping events are not shown)."""
        kind = event.get("type")
        data: JsonObject = event.get("data") or {}
        if kind == "message.delta" and data.get("role") == "assistant":
            self._streamed.add(str(data.get("messageId")))
            return [{"sessionUpdate": "agent_message_chunk", "content": _text(str(data.get("delta", "")))}]
        if kind == "message.completed":
            return self._message(data)
        if kind == "model.response":
            self.finish_reason = data.get("finishReason")
        elif kind == "turn.completed":
            self.status = data.get("status")
        elif kind == "tool.call":
            self._calls[str(data.get("callId"))] = {
                "tool": data.get("tool"),
                "input": data.get("input", {}),
                "title": str(data.get("tool")),
            }
        elif kind == "policy.decision":
            return self._announce(str(data.get("callId")), data.get("action"), data.get("subject"))
        elif kind == "tool.result":
            return [*self._announce(str(data.get("callId")), None, None), self._result(data)]
        return []

    def _message(self, data: JsonObject) -> list[JsonObject]:
        content = data.get("content")
        if not isinstance(content, str) or not content:
            return []
        if data.get("role") == "assistant" and str(data.get("messageId")) not in self._streamed:
            return [{"sessionUpdate": "agent_message_chunk", "content": _text(content)}]
        if data.get("role") == "user" and self._replay:
            return [{"sessionUpdate": "user_message_chunk", "content": _text(content)}]
        return []

    def _announce(self, call_id: str, action: object, subject: object) -> list[JsonObject]:
        if call_id in self._announced:
            return []
        self._announced.add(call_id)
        call = self._calls.setdefault(call_id, {"tool": "tool", "input": {}, "title": "tool"})
        call["kind"] = tool_kind(action if isinstance(action, str) else None)
        if isinstance(subject, str) and subject:
            call["title"] = f"{call['tool']}: {subject}"
        return [{"sessionUpdate": "tool_call", **self.tool_call(call_id)}]

    def _result(self, data: JsonObject) -> JsonObject:
        call_id = str(data.get("callId"))
        call = self._calls.get(call_id, {})
        content: list[JsonObject] = [{"type": "content", "content": _text(_result_text(data))}]
        arguments = call.get("input")
        if data.get("ok") and data.get("tool") == "fs.write" and isinstance(arguments, dict):
            path, contents = arguments.get("path"), arguments.get("contents")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if isinstance(path, str) and isinstance(contents, str):
                # The adapter never reads the workspace, so the old text is unknown: the
                # diff carries the new text only (the protocol's oldText is optional).
                content.append({"type": "diff", "path": os.path.join(self._cwd, path), "newText": contents})
        return {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call_id,
            "status": "completed" if data.get("ok") else "failed",
            "content": content,
            "rawOutput": data.get("output") if data.get("ok") else data.get("error"),
        }
