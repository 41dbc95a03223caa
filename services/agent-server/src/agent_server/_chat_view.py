"""What ``agent-server chat`` writes to the terminal: events as lines, text made safe to print.

Everything the server sends is untrusted text for the terminal: the model's words, a file's
content in a tool result, an error message. Any of them may carry escape sequences that move
the cursor, retitle the window or write the clipboard (OSC 52), or bidirectional overrides that
make a line read differently from what it holds. :func:`terminal_safe` turns every such
character into a visible ``\\x1b``-style escape before anything is written; colour codes come
only from this module, and only when the output is a colour terminal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final, TextIO, cast

from agent_server.client import JsonObject

__all__ = ["Style", "Transcript", "result_summary", "terminal_safe"]

# C0 controls, DEL, C1 controls, and the Unicode bidirectional controls (the "Trojan Source"
# characters): none of them is ever written as is.
_BIDI: Final = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE: Final = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_MULTILINE: Final = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_LINE_CHARS: Final = 160


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``).

    Args:
        text: Untrusted text.
        multiline: Keep newlines and tabs (streamed assistant text); otherwise they are
            escaped too, so the result is one line.
    """
    return (_UNSAFE_MULTILINE if multiline else _UNSAFE).sub(_escape, text)


def _clip(text: str, limit: int = _LINE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def result_summary(data: JsonObject) -> str:
    """One line for a ``tool.result``: ``ok`` or ``failed``, a size or the first line of the output."""
    if not data.get("ok"):
        error: Any = data.get("error") or {}
        return f"failed: {error.get('code', '?')}: {_first_line(str(error.get('message', '')))}"
    value: Any = data.get("output")
    if isinstance(value, dict):
        output = cast(JsonObject, value)
        if "exitCode" in output:
            streams = str(output.get("stdout") or "") or str(output.get("stderr") or "")
            line = _first_line(streams)
            return f"ok, exit {output['exitCode']}" + (f": {line}" if line else "")
        if isinstance(output.get("entries"), list):
            return f"ok, {len(output['entries'])} entries"
        for key in ("content", "diff"):
            text = output.get(key)
            if isinstance(text, str):
                line = _first_line(text)
                size = len(text.encode("utf-8", "surrogatepass"))
                return f"ok, {size} bytes" + (f": {line}" if line else "")
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    size = len(compact.encode("utf-8", "surrogatepass"))
    return f"ok, {size} bytes of output"


@dataclass(frozen=True)
class Style:
    """SGR colours when ``colour`` is true (a terminal, ``NO_COLOR`` unset), else plain text."""

    colour: bool

    def _sgr(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and text else text

    def dim(self, text: str) -> str:
        """Secondary information: tool lines, status."""
        return self._sgr("2", text)

    def bold(self, text: str) -> str:
        """The prompt."""
        return self._sgr("1", text)

    def warn(self, text: str) -> str:
        """A question to the operator."""
        return self._sgr("33", text)

    def bad(self, text: str) -> str:
        """A failure."""
        return self._sgr("31", text)


@dataclass
class _Call:
    tool: str
    arguments: str
    shown: bool = False


@dataclass
class Transcript:
    """Writes events to ``out`` as a person reads them; one instance per chat.

    Assistant text is written as it streams; every other thing starts on its own line.
    """

    out: TextIO
    style: Style
    _line_open: bool = False
    _calls: dict[str, _Call] = field(default_factory=dict[str, _Call])
    _streamed: set[str] = field(default_factory=set[str])

    def text(self, text: str) -> None:
        """Stream assistant text (already safe)."""
        if text:
            self.out.write(text)
            self.out.flush()
            self._line_open = not text.endswith("\n")

    def line(self, text: str) -> None:
        """Write ``text`` (already safe and styled) on a line of its own."""
        if self._line_open:
            self.out.write("\n")
            self._line_open = False
        self.out.write(text + "\n")
        self.out.flush()

    def end_line(self) -> None:
        """Close a line that streamed text left open."""
        if self._line_open:
            self.out.write("\n")
            self.out.flush()
            self._line_open = False

    def event(self, event: JsonObject, *, replay: bool = False) -> None:
        """Show one ``session/event`` envelope (``replay``: a restored timeline, user turns included)."""
        kind = str(event.get("type"))
        data: Any = event.get("data") or {}
        handlers = {
            "message.delta": self._delta,
            "message.completed": self._message,
            "tool.call": self._tool_call,
            "policy.decision": self._policy,
            "permission.resolved": self._permission_resolved,
            "tool.result": self._tool_result,
            "agent.stopped": self._stopped,
            "session.restored": self._restored,
            "error": self._error,
        }
        handler = handlers.get(kind)
        if handler is not None:
            handler(data, replay)

    # ---------------------------------------------------------------- one per event type

    def _delta(self, data: JsonObject, replay: bool) -> None:
        self._streamed.add(str(data.get("messageId")))
        self.text(terminal_safe(str(data.get("delta", "")), multiline=True))

    def _message(self, data: JsonObject, replay: bool) -> None:
        role = data.get("role")
        content = str(data.get("content", ""))
        if role == "user" and replay:
            self.line(self.style.bold("> ") + terminal_safe(_clip(content)))
        elif role == "assistant" and str(data.get("messageId")) not in self._streamed and content:
            self.text(terminal_safe(content, multiline=True))

    def _tool_call(self, data: JsonObject, replay: bool) -> None:
        arguments = json.dumps(data.get("input"), ensure_ascii=False, separators=(",", ":"))
        self._calls[str(data.get("callId"))] = _Call(str(data.get("tool")), arguments)

    def _show_call(self, call_id: str, subject: str | None) -> None:
        call = self._calls.get(call_id)
        if call is None or call.shown:
            return
        call.shown = True
        # A tool without its own authorization is asked about by name only: show its input then.
        detail = subject if subject not in (None, call.tool) else call.arguments
        self.line(self.style.dim(f"  > {terminal_safe(call.tool)} {terminal_safe(_clip(detail))}"))

    def _policy(self, data: JsonObject, replay: bool) -> None:
        subject = data.get("subject")
        self._show_call(str(data.get("callId")), None if subject is None else str(subject))

    def _permission_resolved(self, data: JsonObject, replay: bool) -> None:
        if replay:
            note = str(data.get("note") or "")
            decision = "allowed" if data.get("decision") == "allow" else "denied"
            shown = f"    {decision}" + (f" ({terminal_safe(_clip(note))})" if note else "")
            self.line(self.style.dim(shown))

    def _tool_result(self, data: JsonObject, replay: bool) -> None:
        self._show_call(str(data.get("callId")), None)
        summary = terminal_safe(_clip(result_summary(data)))
        self.line("    " + (self.style.dim(summary) if data.get("ok") else self.style.bad(summary)))

    def _stopped(self, data: JsonObject, replay: bool) -> None:
        if not replay and data.get("status") == "completed":
            return  # a live turn ends with chat's own status line, from the prompt's result
        note = data.get("note")
        status = str(data.get("status"))
        text = f"[{terminal_safe(status)}; tool calls: {data.get('toolCalls', 0)}"
        text += f"; {terminal_safe(_clip(str(note)))}]" if note else "]"
        self.line(self.style.dim(text) if status == "completed" else self.style.bad(text))

    def _restored(self, data: JsonObject, replay: bool) -> None:
        note = data.get("note")
        text = f"[restored: {terminal_safe(str(data.get('outcome')))}"
        self.line(self.style.dim(text + (f"; {terminal_safe(_clip(str(note)))}]" if note else "]")))

    def _error(self, data: JsonObject, replay: bool) -> None:
        message = terminal_safe(_clip(str(data.get("message", ""))))
        self.line(self.style.bad(f"error {terminal_safe(str(data.get('code', '')))}: {message}"))
