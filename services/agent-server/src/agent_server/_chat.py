"""``agent-server chat``: an interactive terminal client of ``harness/acp/1``.

One prompt line is one turn of the chat's one session, a conversation (issue #23): the model
sees the earlier turns. Should the session end under the chat (a server's idle timeout), the
next prompt opens a new one, and says so. The session id is printed so that ``/resume`` can
show it again. The embedded server (no ``--url``) is the real :func:`serve` on 127.0.0.1.

Terminal input never blocks the event loop: a line is read by a worker thread (``input``,
with the standard library's ``readline`` line editing on a terminal) and handed back to trio.
A read interrupted by Ctrl-C is kept, not lost: the next read takes its line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

import outcome
import trio

from agent_server._chat_cli import ACTION_CLASSES, ChatOptions, chat_options
from agent_server._chat_view import Style, Transcript, terminal_safe
from agent_server._cli_config import build_embedded_config
from agent_server._config import ServerConfig
from agent_server._embedded import embedded_server
from agent_server.client import (
    AcpClient,
    AcpClientError,
    ConnectionClosedError,
    HandshakeRejectedError,
    JsonObject,
    connect,
)
from harness_workspace.credentials import is_credential_path

__all__ = ["PermissionRules", "run_chat"]

_HELP: Final = "type a request; /resume SESSION shows a stored session; /quit (or Ctrl-D) exits"
_ASK: Final = "allow? [y/N/a(lways for this run)] "
_RESTORE_PAGE: Final = 1000
_INTERRUPTED: Final = 130
_SESSION_FINISHED: Final = -32011
# Actions whose subject is a workspace path: one on the credential deny list is never auto-approved.
_PATH_ACTIONS: Final = frozenset({"fs.read", "fs.list", "fs.write"})


@dataclass
class PermissionRules:
    """Which permission requests chat answers ``allow`` without asking.

    ``--yes-to`` classes hold for the whole process; "always" answers add an action for the
    rest of this chat run. ``harness/acp/1`` has no "always" decision (``permission/respond``
    takes ``allow`` or ``deny`` for one ``permissionId``), so the server still asks each time
    and every request is answered, and recorded, on its own; only the asking is skipped.
    No rule allows a path action on a name of the credential deny list
    (``harness_workspace.credentials``): that is asked, or denied when nobody can answer.
    """

    yes_to: frozenset[str]
    always: set[str] = field(default_factory=set[str])

    def rule_for(self, action: str, subject: object = None) -> str | None:
        """The rule allowing ``action`` on ``subject`` (``"--yes-to read"``, ``"always fs.read"``) or None."""
        if withheld_subject(action, subject):
            return None
        if "all" in self.yes_to:
            return "--yes-to all"
        for name in sorted(self.yes_to):
            if action in ACTION_CLASSES.get(name, frozenset()):
                return f"--yes-to {name}"
        return f"always {action}" if action in self.always else None


def withheld_subject(action: str, subject: object) -> bool:
    """Whether ``subject`` is a path on the credential deny list that ``action`` would touch."""
    return action in _PATH_ACTIONS and isinstance(subject, str) and is_credential_path(subject)


class _PendingLine:
    def __init__(self) -> None:
        self.done = trio.Event()
        self.result: outcome.Outcome[str | None] | None = None

    def deliver(self, result: outcome.Outcome[str | None]) -> None:
        self.result = result
        self.done.set()


class LineReader:
    """Lines from stdin, read in a worker thread; ``None`` at end of input."""

    def __init__(self, *, terminal: bool, out: TextIO) -> None:
        self._terminal = terminal
        self._out = out
        self._pending: _PendingLine | None = None

    def _read(self, prompt: str) -> str | None:
        if self._terminal:
            try:
                return input(prompt)
            except EOFError:
                return None
        line = sys.stdin.readline()
        return None if line == "" else line.rstrip("\r\n")

    async def read(self, prompt: str) -> str | None:
        """Show ``prompt`` (on a terminal) and wait for a line without blocking trio."""
        pending = self._pending
        if pending is None:
            pending = self._pending = _PendingLine()
            token = trio.lowlevel.current_trio_token()

            def deliver(result: outcome.Outcome[str | None]) -> None:
                with suppress(trio.RunFinishedError):
                    token.run_sync_soon(pending.deliver, result)

            trio.lowlevel.start_thread_soon(lambda: self._read(prompt), deliver)
        elif self._terminal:
            # An earlier read was interrupted; its thread still waits for the line this prompt asks.
            self._out.write(prompt)
            self._out.flush()
        await pending.done.wait()
        self._pending = None
        assert pending.result is not None
        return pending.result.unwrap()


@dataclass
class _Turn:
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    session_id: str | None = None
    cancel_requested: bool = False


class Chat:
    """One chat over one connection."""

    def __init__(self, client: AcpClient, options: ChatOptions, *, out: TextIO, err: TextIO) -> None:
        self._client = client
        self._options = options
        self._err = err
        self._interactive = sys.stdin.isatty()
        colour = out.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        self._style = Style(colour=colour)
        self._view = Transcript(out, self._style)
        self._lines = LineReader(terminal=self._interactive, out=out)
        self._rules = PermissionRules(options.yes_to)
        self._turn: _Turn | None = None
        self._session_id: str | None = None
        """The chat's session: every prompt is a turn of it (issue #23), until it ends."""
        self._status = 0

    async def run(self) -> int:
        """Read prompts until ``/quit``, end of input or a second Ctrl-C; return the exit status."""
        with trio.open_signal_receiver(signal.SIGINT) as interrupts:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_interrupts, interrupts, nursery)
                await self._loop()
                nursery.cancel_scope.cancel()
        return self._status

    async def _loop(self) -> None:
        if self._interactive:
            self._view.line(self._style.dim(_HELP))
        while True:
            line = await self._lines.read(self._style.bold("you> ") if self._interactive else "")
            if line is None:
                self._view.end_line()
                return
            text = line.strip()
            if not text:
                continue
            if not self._interactive:
                self._view.line(self._style.bold("> ") + terminal_safe(text))
            command, _, rest = text.partition(" ")
            if command in ("/quit", "/exit"):
                return
            if command == "/resume":
                await self._resume(rest.strip())
            elif command.startswith("/"):
                self._view.line(self._style.bad(f"unknown command {terminal_safe(command)}: {_HELP}"))
            else:
                await self._prompt(text)

    async def _watch_interrupts(self, interrupts: AsyncIterator[int], nursery: trio.Nursery) -> None:
        async for _ in interrupts:
            turn = self._turn
            if turn is None or turn.cancel_requested:
                self._view.line(self._style.dim("^C: exiting"))
                self._status = _INTERRUPTED
                nursery.cancel_scope.cancel()
                return
            turn.cancel_requested = True
            self._view.line(self._style.dim("^C: canceling the turn (Ctrl-C again exits)"))
            if turn.session_id is None:
                turn.scope.cancel()
            else:
                nursery.start_soon(self._cancel, turn.session_id)

    async def _cancel(self, session_id: str) -> None:
        try:
            await self._client.request("session/cancel", {"sessionId": session_id})
        except (AcpClientError, ConnectionClosedError) as error:
            self._error(error)

    async def _prompt(self, text: str) -> None:
        turn = self._turn = _Turn()
        try:
            with turn.scope:
                await self._run_turn(turn, text)
            if turn.scope.cancelled_caught:
                self._view.line(self._style.bad("turn canceled"))
                self._failed()
        except (AcpClientError, ConnectionClosedError) as error:
            self._error(error)
            self._failed()
        finally:
            self._turn = None

    async def _run_turn(self, turn: _Turn, text: str) -> None:
        session_id = await self._session(turn)
        result, failure = await self._send(session_id, text)
        if failure is not None and failure.code == _SESSION_FINISHED and not turn.cancel_requested:
            # The session ended under the chat (the server's idle timeout): a new one takes the prompt.
            self._session_id = None
            self._view.line(
                self._style.dim("[the session had ended; a new one starts without the earlier turns]")
            )
            session_id = await self._session(turn)
            result, failure = await self._send(session_id, text)
        self._show_notes(session_id)
        if failure is not None and not turn.cancel_requested:
            raise failure
        if result is None:  # a canceled run's prompt is answered with an error (spec §5.3)
            self._view.line(self._style.bad(f"turn canceled; session {terminal_safe(session_id)}"))
            self._failed()
            return
        usage: Any = result.get("usage") or {}
        status = str(result.get("status"))
        line = f"[{status}; {usage.get('totalTokens', 0)} tokens; session {terminal_safe(session_id)}]"
        self._view.line(self._style.dim(line))
        if status != "completed":
            self._failed()

    async def _session(self, turn: _Turn) -> str:
        """The chat's session, created at the first prompt."""
        if self._session_id is None:
            created = await self._client.request("session/new", {"workspace": self._options.workspace})
            self._session_id = str(created["sessionId"])
        turn.session_id = self._session_id
        return self._session_id

    async def _send(self, session_id: str, text: str) -> tuple[JsonObject | None, AcpClientError | None]:
        """Prompt the session while its events are shown; the result, or the refusal."""
        result: JsonObject | None = None
        failure: AcpClientError | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._follow, session_id)
            try:
                params = {"sessionId": session_id, "content": text}
                result = await self._client.request("session/prompt", params)
            except AcpClientError as error:
                failure = error  # kept out of the nursery, which would wrap it in a group
            finally:
                nursery.cancel_scope.cancel()
        return result, failure

    def _show_notes(self, session_id: str) -> None:
        """Show the notifications the server wrote before its answer and the follower did not take."""
        for note in self._client.drain_notifications():
            if note["params"]["sessionId"] == session_id:
                self._view.event(note["params"]["event"])
        self._view.end_line()

    async def _follow(self, session_id: str) -> None:
        async for note in self._client.notifications:
            params = note["params"]
            if params["sessionId"] != session_id:
                continue
            event: JsonObject = params["event"]
            self._view.event(event)
            if event["type"] == "permission.requested":
                await self._answer(session_id, event["data"])

    async def _answer(self, session_id: str, data: JsonObject) -> None:
        action = str(data.get("action"))
        subject = data.get("subject")
        asked = terminal_safe(action + ("" if subject is None else f" {subject}"))
        self._view.line(self._style.warn(f"  ? {asked}"))
        rule = self._rules.rule_for(action, subject)
        if rule is not None:
            decision, note = "allow", f"allowed by chat's {rule}"
        elif not self._interactive and withheld_subject(action, subject):
            decision, note = "deny", "denied by chat: a credential file is never allowed without asking"
            print(
                f"agent-server chat: denied {asked}: a credential file is never auto-approved", file=self._err
            )
        elif not self._interactive:
            decision, note = "deny", "denied by chat: stdin is not a terminal and no --yes-to rule allows it"
            print(f"agent-server chat: denied {asked}: no --yes-to rule allows {action}", file=self._err)
        else:
            answer = (await self._lines.read(self._style.warn(_ASK)) or "").strip().lower()
            if answer in ("a", "always"):
                self._rules.always.add(action)
                decision, note = "allow", f"allowed by the operator, always {action} for this chat run"
            elif answer in ("y", "yes"):
                decision, note = "allow", "allowed by the operator"
            else:
                decision, note = "deny", "denied by the operator"
        self._view.line(self._style.dim(f"    {decision}: {terminal_safe(note)}"))
        params = {"sessionId": session_id, "permissionId": data["permissionId"], "decision": decision}
        try:
            await self._client.request("permission/respond", {**params, "note": note})
        except (AcpClientError, ConnectionClosedError) as error:
            self._error(error)  # already resolved: timed out, or the turn was canceled meanwhile

    async def _resume(self, session_id: str) -> None:
        if not session_id:
            self._view.line(self._style.bad("usage: /resume SESSION"))
            return
        after = -1
        try:
            while True:
                params = {"sessionId": session_id, "afterSeq": after, "limit": _RESTORE_PAGE}
                result = await self._client.request("session/restore", params)
                for note in self._client.drain_notifications():
                    self._view.event(note["params"]["event"], replay=True)
                after = int(result["replayedThroughSeq"])
                if not result["hasMore"]:
                    break
        except AcpClientError as error:
            self._error(error)
            return
        self._view.end_line()
        status = terminal_safe(str(result["status"]))
        self._view.line(self._style.dim(f"[session {terminal_safe(session_id)}: {status}; replay only]"))

    def _error(self, error: Exception) -> None:
        message = error.message if isinstance(error, AcpClientError) else str(error)
        if isinstance(error, AcpClientError) and error.data_code == "ACP_SESSION_NOT_RESTORABLE":
            message += " (a chat without --url keeps sessions only with --db PATH)"
        self._view.line(self._style.bad(f"error: {terminal_safe(message)}"))

    def _failed(self) -> None:
        if not self._interactive:
            self._status = self._status or 1


async def _chat(options: ChatOptions, config: ServerConfig | None, out: TextIO, err: TextIO) -> int:
    async with AsyncExitStack() as stack:
        url, token = options.url, options.token
        if config is not None:
            handle = await stack.enter_async_context(embedded_server(config))
            url, token = handle.url, handle.token
        assert url is not None
        status = 1
        try:
            async with connect(url, token=token) as client:
                await client.initialize()
                status = await Chat(client, options, out=out, err=err).run()
        except* HandshakeRejectedError as group:
            for error in group.exceptions:
                assert isinstance(error, HandshakeRejectedError)
                rejected = error.status in (401, 403)
                hint = " (give --token-file, or the token in $HARNESS_AGENT_TOKEN)" if rejected else ""
                print(f"agent-server chat: error: {error}{hint}", file=err)
        except* (OSError, AcpClientError, ConnectionClosedError) as group:
            for error in group.exceptions:
                print(f"agent-server chat: error: {error}", file=err)
    return status


def _keep_terminal() -> Callable[[], None]:
    """Line editing on a terminal, and a function that puts the terminal back as it was."""
    if not sys.stdin.isatty():
        return lambda: None
    with suppress(ImportError):
        importlib.import_module("readline")  # importing it is what gives input() line editing
    import termios  # noqa: PLC0415 - POSIX only, and only for a terminal

    saved = termios.tcgetattr(sys.stdin.fileno())
    # A line read abandoned at exit leaves readline's terminal mode behind; restore it.
    return lambda: termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)


def run_chat(arguments: argparse.Namespace, defaults: argparse.Namespace, environ: dict[str, str]) -> int:
    """Run ``agent-server chat`` and return its exit status (2: bad flags, 1: failure, 130: Ctrl-C).

    Args:
        arguments: The parsed ``chat`` command line.
        defaults: ``chat`` parsed with no flags, to tell which flags were given.
        environ: The environment.
    """
    try:
        options = chat_options(arguments, defaults, environ)
        config = None
        if options.root is not None:
            config = build_embedded_config(arguments, environ, workspace_root=options.root)
    except ValueError as error:
        print(f"agent-server chat: error: {error}", file=sys.stderr)
        return 2
    restore = _keep_terminal()
    status = 2
    try:
        status = trio.run(_chat, options, config, sys.stdout, sys.stderr)
    except* (ValueError, OSError) as group:
        for error in group.exceptions:
            print(f"agent-server chat: error: {error}", file=sys.stderr)
    finally:
        restore()
    return status
