"""One tool call of a run: ``tool.call``, the gate's decision, an ask, the effect, the result
(spec §8.6, §8.7).

A :class:`ToolStep` is an async generator driven by the run's producer: it yields wherever
the producer waits for the consumer's acknowledgement. The tool gate (``harness_kernel._gate``)
converts the arguments, derives the permission intent, decides, and hands the tool its
restricted capability; this module records each of those steps as events. A cancellation
that interrupts an ask or a running tool still records the ask's ``permission.resolved``
and the call's ``tool.result`` before the run ends.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

from harness_kernel._bounded import BoundedJsonError, bounded_json
from harness_kernel._gate import (
    ToolInputError,
    convert_arguments,
    permission_intent,
    resolution_of,
    typed_error_code,
)
from harness_kernel._gate import cut_reason as cut
from harness_kernel._json import JsonValue, encode_json
from harness_kernel.events._model import (
    PermissionRequestedData,
    PermissionResolvedData,
    RuntimePolicyDecisionData,
    ToolCallData,
    ToolResultData,
    ToolResultErrorData,
)
from harness_kernel.models._types import ToolCall
from harness_kernel.policy._permission import PermissionRequest
from harness_kernel.runtime._errors import RuntimeBudgetExceededError
from harness_kernel.runtime._shared import MAX_TRANSCRIPT_BYTES, Canceled, or_unset
from harness_tools import Tool, ToolExecutionContext, ToolPermissionIntent

if TYPE_CHECKING:
    from harness_kernel.runtime._run import Run

__all__ = ["Observation", "ToolStep", "observed_content"]

Failure: TypeAlias = tuple[str, str]
"""An error code and its message."""
Observation: TypeAlias = tuple[JsonValue, None] | tuple[None, Failure]
"""What the model observes of a call: its output, or its failure."""


def observed_content(observation: Observation) -> str:
    """The tool message the model sees of a call: its output's JSON, or ``{"error": {code, message}}``."""
    output, error = observation
    if error is None:
        return encode_json(output).decode()
    return encode_json({"error": {"code": error[0], "message": error[1]}}).decode()


class ToolStep:
    """One tool call of one model round, from ``tool.call`` to the tool's message."""

    def __init__(self, run: Run, call: ToolCall, request_id: str) -> None:
        self.run = run
        self.call = call
        self.request_id = request_id
        self.call_id = ""
        self.observation: Observation = (None, ("TOOL_CANCELED", "tool canceled"))
        self.cancel_after_observation = False
        """The run was canceled during this call: record its result, then end the run."""
        self.ask_denial: Failure | None = None

    async def steps(self) -> AsyncGenerator[None, None]:
        """Record and perform the call; raises ``Canceled`` once an interrupted call is recorded."""
        run, call = self.run, self.call
        self.call_id = run.new_id("call")
        run.tool_calls += 1
        recorded = ToolCallData(
            call_id=self.call_id,
            tool=call.name,
            # The model step froze the arguments (``_check_call``); ToolCall's type is wider.
            input=cast(JsonValue, call.arguments),
            **run.ids(),
            request_id=self.request_id,
            model_call_id=call.id,
        )
        if await run.publish("tool.call", recorded):
            yield
        async for _ in self._count_call():
            yield
        tool = run.a.tools.get(call.name)
        if tool is None:
            self.observation = (None, ("TOOL_NOT_FOUND", f"unknown tool: {call.name}"))
        else:
            try:
                params = convert_arguments(tool, call.arguments)
            except ToolInputError as bad:
                self.observation = (None, ("TOOL_BAD_INPUT", str(bad)))
            else:
                async for _ in self._authorize_and_execute(tool, params):
                    yield
        async for _ in self._observe():
            yield
        if self.cancel_after_observation:
            raise Canceled

    async def _count_call(self) -> AsyncGenerator[None, None]:
        """The tool-call budget: a warning at half, an exceed past the limit (§8.9)."""
        run = self.run
        limit = run.a.max_tool_calls
        if limit is None:
            return
        if run.tool_calls > limit:
            if await run.warning("tool_calls", run.tool_calls, limit):
                yield
            raise RuntimeBudgetExceededError("tool_calls", run.tool_calls, limit)
        if run.tool_calls >= max(1, math.ceil(limit / 2)) and "tool_calls" not in run.warned:
            run.warned.add("tool_calls")
            if await run.warning("tool_calls", run.tool_calls, limit):
                yield

    async def _authorize_and_execute(self, tool: Tool[Any], params: object) -> AsyncGenerator[None, None]:
        run = self.run
        a = run.a
        verdict = run.gate.judge(tool, permission_intent(tool, params))
        intent, effect, reason = verdict.intent, verdict.effect, verdict.reason
        decision = RuntimePolicyDecisionData(
            task_id=or_unset(a.task_id),
            session_id=a.session_id,
            run_id=a.run_id,
            turn_id=a.turn_id,
            call_id=self.call_id,
            action=intent.action,
            subject=or_unset(intent.subject),
            effect=effect,
            reason=reason,
            rule_id=or_unset(verdict.rule_id),
        )
        if await run.publish("policy.decision", decision):
            yield
        if effect == "deny":
            self.observation = (None, (verdict.denial, cut(reason)))
            return
        if effect == "ask" and not run.gate.granted(intent):
            async for _ in self._ask(intent, reason):
                yield
            if self.ask_denial is not None:
                self.observation = (None, self.ask_denial)
                return
        run.check_cancel()
        await self._execute(tool)

    async def _execute(self, tool: Tool[Any]) -> None:
        """Run the tool with its restricted capability; a cancellation ends it as ``TOOL_CANCELED``."""
        run = self.run
        execute_params = convert_arguments(tool, self.call.arguments)
        context = ToolExecutionContext(
            signal=run.controller.signal,
            workspace=run.gate.capability(tool),
            session_id=run.a.session_id,
            task_id=run.a.task_id,
            call_id=self.call_id,
        )
        result: object = None
        failure: Exception | None = None
        with run.cancellable():
            try:
                result = tool.execute(execute_params, context)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as error:
                failure = error
        if run.cancel_requested:
            self.observation = (None, ("TOOL_CANCELED", "tool canceled"))
            self.cancel_after_observation = True
        elif failure is not None:
            code = typed_error_code(failure) or "TOOL_EXECUTION_FAILED"
            self.observation = (None, (code, cut(f"tool {tool.name} failed: {failure}")))
        else:
            try:
                output, wire = bounded_json(result)
                if run.transcript + len(wire) > MAX_TRANSCRIPT_BYTES:
                    raise BoundedJsonError("transcript")
                run.transcript += len(wire)
                self.observation = (output, None)
            except BoundedJsonError:
                self.observation = (None, ("TOOL_INVALID_RESULT", "tool result is not bounded JSON"))

    async def _ask(self, intent: ToolPermissionIntent, reason: str) -> AsyncGenerator[None, None]:
        """``permission.requested``, the resolver's answer, ``permission.resolved`` (§8.6 step 7).

        A denial (or a cancellation) sets ``ask_denial``; an allow with scope ``run`` is
        remembered by the gate.
        """
        run = self.run
        a = run.a
        scope_name = intent.scope or "once"
        permission_id = run.new_id("perm")
        requested = PermissionRequestedData(
            permission_id=permission_id,
            session_id=a.session_id,
            run_id=a.run_id,
            turn_id=a.turn_id,
            call_id=self.call_id,
            action=intent.action,
            subject=or_unset(intent.subject),
            scope=scope_name,
            reason=reason,
        )
        if await run.publish("permission.requested", requested):
            yield
        decision, note, actor, canceled = await self._resolve(permission_id, intent, reason)
        resolved = PermissionResolvedData(
            permission_id=permission_id,
            session_id=a.session_id,
            run_id=a.run_id,
            turn_id=a.turn_id,
            call_id=self.call_id,
            action=intent.action,
            subject=or_unset(intent.subject),
            scope=scope_name,
            decision=decision,
            note=or_unset(note),
        )
        ack = await run.publish("permission.resolved", resolved, actor=actor, force=True)
        if canceled or run.cancel_requested:
            self.ask_denial = ("TOOL_CANCELED", "tool canceled")
            self.cancel_after_observation = True
            return
        if ack:
            yield
        if decision == "deny":
            self.ask_denial = ("TOOL_PERMISSION_DENIED", note or "operator denied permission")
            return
        run.gate.grant(intent)

    async def _resolve(
        self, permission_id: str, intent: ToolPermissionIntent, reason: str
    ) -> tuple[Literal["allow", "deny"], str | None, str, bool]:
        """(decision, note, actor, canceled): the resolver's answer, or the kernel's deny."""
        run = self.run
        a = run.a
        resolve = a.resolve
        if resolve is None:
            return "deny", "no permission resolver", "kernel", False
        request = PermissionRequest(
            permission_id=permission_id,
            session_id=a.session_id,
            call_id=self.call_id,
            action=intent.action,
            subject=intent.subject,
            scope=intent.scope or "once",
            reason=reason,
            run_id=a.run_id,
            turn_id=a.turn_id,
        )
        answer: object = None
        failed = False
        with run.cancellable():
            try:
                pending = resolve(request, run.controller.signal)
                if not inspect.isawaitable(pending):
                    failed = True
                else:
                    answer = await pending
            except Exception:
                failed = True
        resolution = None if failed else resolution_of(answer)
        if run.cancel_requested:
            return "deny", "run canceled while awaiting permission", "kernel", True
        if resolution is None:
            return "deny", "permission resolver failed closed", "kernel", False
        return resolution.decision, resolution.note, "operator", False

    async def _observe(self) -> AsyncGenerator[None, None]:
        """``tool.result`` and the tool's message; no acknowledgement wait once canceled."""
        run, call = self.run, self.call
        output, error = self.observation
        force = self.cancel_after_observation
        if error is None:
            result = ToolResultData(call_id=self.call_id, tool=call.name, ok=True, output=output, **run.ids())
        else:
            failure = ToolResultErrorData(code=error[0], message=error[1])
            result = ToolResultData(
                call_id=self.call_id, tool=call.name, ok=False, error=failure, **run.ids()
            )
        if await run.publish("tool.result", result, force=force) and not force:
            yield
        message = run.tool_message(call, observed_content(self.observation))
        if await run.publish("message.completed", message, force=force) and not force:
            yield
