"""One tool call of a run: ``tool.call``, the gate's decision, an ask, the effect, the result
(spec §8.6, §8.7).

A :class:`ToolStep` is an async generator driven by the run's producer: it yields ``None``
wherever the producer waits for the consumer's acknowledgement, and an outcome (the call
counted, the transcript grown, the tool's message) wherever the run's state changes. The
tool gate (``harness_kernel._gate``) converts the arguments, derives the permission
intent, decides, and hands the tool its restricted capability; this module records each of
those steps as events. A cancellation that interrupts an ask or a running tool still records
the ask's ``permission.resolved`` and the call's ``tool.result`` before the run ends.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import AsyncGenerator
from typing import Any, Literal, TypeAlias, cast

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
    ToolMessageCompletedData,
    ToolResultData,
    ToolResultErrorData,
)
from harness_kernel.models._types import ToolCall, ToolMessage
from harness_kernel.policy._permission import PermissionRequest
from harness_kernel.runtime._channel import RunChannel
from harness_kernel.runtime._errors import RuntimeBudgetExceededError
from harness_kernel.runtime._shared import MAX_TRANSCRIPT_BYTES, Canceled, or_unset
from harness_kernel.runtime._state import MessageAdded, RunView, StepValue, ToolCalled, TranscriptGrew, Warned
from harness_tools import Tool, ToolExecutionContext, ToolPermissionIntent

__all__ = ["Observation", "ToolStep", "observed_content", "tool_answer", "tool_message_data"]

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


def tool_answer(call: ToolCall, content: str) -> MessageAdded:
    """The tool message that answers ``call`` joins the context."""
    return MessageAdded(ToolMessage(content=content, name=call.name, tool_call_id=call.id))


def tool_message_data(
    channel: RunChannel, call: ToolCall, content: str, revision: int
) -> ToolMessageCompletedData:
    """The ``message.completed`` data of the tool message answering ``call`` (at ``revision``)."""
    return ToolMessageCompletedData(
        **channel.ids,
        message_id=channel.new_id("msg"),
        role="tool",
        name=call.name,
        tool_call_id=call.id,
        content=content,
        state_version=1,
        message_revision=revision,
    )


class ToolStep:
    """One tool call of one model round, from ``tool.call`` to the tool's message."""

    def __init__(self, view: RunView, channel: RunChannel, call: ToolCall, request_id: str) -> None:
        self.view = view
        self.channel = channel
        self.call = call
        self.request_id = request_id
        self.call_id = ""
        self.observation: Observation = (None, ("TOOL_CANCELED", "tool canceled"))
        self.cancel_after_observation = False
        """The run was canceled during this call: record its result, then end the run."""
        self.ask_denial: Failure | None = None

    async def steps(self) -> AsyncGenerator[StepValue, None]:
        """Record and perform the call; raises ``Canceled`` once an interrupted call is recorded."""
        channel, call = self.channel, self.call
        self.call_id = channel.new_id("call")
        yield ToolCalled()
        recorded = ToolCallData(
            call_id=self.call_id,
            tool=call.name,
            # The model step froze the arguments (``_check_call``); ToolCall's type is wider.
            input=cast(JsonValue, call.arguments),
            **channel.ids,
            request_id=self.request_id,
            model_call_id=call.id,
        )
        if await channel.publish("tool.call", recorded):
            yield None
        async for value in self._count_call():
            yield value
        tool = self.view.admitted.tools.get(call.name)
        if tool is None:
            self.observation = (None, ("TOOL_NOT_FOUND", f"unknown tool: {call.name}"))
        else:
            try:
                params = convert_arguments(tool, call.arguments)
            except ToolInputError as bad:
                self.observation = (None, ("TOOL_BAD_INPUT", str(bad)))
            else:
                async for value in self._authorize_and_execute(tool, params):
                    yield value
        async for value in self._observe():
            yield value
        if self.cancel_after_observation:
            raise Canceled

    async def _count_call(self) -> AsyncGenerator[StepValue, None]:
        """The tool-call budget: a warning at half, an exceed past the limit (§8.9)."""
        view, channel = self.view, self.channel
        limit = view.admitted.max_tool_calls
        if limit is None:
            return
        calls = view.tool_calls
        if calls > limit:
            if await channel.warning("tool_calls", calls, limit):
                yield None
            raise RuntimeBudgetExceededError("tool_calls", calls, limit)
        if calls >= max(1, math.ceil(limit / 2)) and "tool_calls" not in view.warned:
            yield Warned("tool_calls")
            if await channel.warning("tool_calls", calls, limit):
                yield None

    async def _authorize_and_execute(
        self, tool: Tool[Any], params: object
    ) -> AsyncGenerator[StepValue, None]:
        channel, gate = self.channel, self.view.gate
        verdict = gate.judge(tool, permission_intent(tool, params))
        intent, effect, reason = verdict.intent, verdict.effect, verdict.reason
        decision = RuntimePolicyDecisionData(
            task_id=or_unset(self.view.admitted.task_id),
            **channel.ids,
            call_id=self.call_id,
            action=intent.action,
            subject=or_unset(intent.subject),
            effect=effect,
            reason=reason,
            rule_id=or_unset(verdict.rule_id),
        )
        if await channel.publish("policy.decision", decision):
            yield None
        if effect == "deny":
            self.observation = (None, (verdict.denial, cut(reason)))
            return
        if effect == "ask" and not gate.granted(intent):
            async for value in self._ask(intent, reason):
                yield value
            if self.ask_denial is not None:
                self.observation = (None, self.ask_denial)
                return
        channel.check_cancel()
        grew = await self._execute(tool)
        if grew is not None:
            yield grew

    async def _execute(self, tool: Tool[Any]) -> TranscriptGrew | None:
        """Run the tool with its restricted capability; a cancellation ends it as ``TOOL_CANCELED``.

        Returns:
            The output's share of the transcript, when the tool answered with bounded JSON.
        """
        channel, admitted = self.channel, self.view.admitted
        execute_params = convert_arguments(tool, self.call.arguments)
        context = ToolExecutionContext(
            signal=channel.controller.signal,
            workspace=self.view.gate.capability(tool),
            session_id=admitted.session_id,
            task_id=admitted.task_id,
            call_id=self.call_id,
        )
        result: object = None
        failure: Exception | None = None
        with channel.cancellable():
            try:
                result = tool.execute(execute_params, context)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as error:
                failure = error
        if channel.cancel_requested:
            self.observation = (None, ("TOOL_CANCELED", "tool canceled"))
            self.cancel_after_observation = True
            return None
        if failure is not None:
            code = typed_error_code(failure) or "TOOL_EXECUTION_FAILED"
            self.observation = (None, (code, cut(f"tool {tool.name} failed: {failure}")))
            return None
        try:
            output, wire = bounded_json(result)
            if self.view.transcript + len(wire) > MAX_TRANSCRIPT_BYTES:
                raise BoundedJsonError("transcript")
        except BoundedJsonError:
            self.observation = (None, ("TOOL_INVALID_RESULT", "tool result is not bounded JSON"))
            return None
        self.observation = (output, None)
        return TranscriptGrew(len(wire))

    async def _ask(self, intent: ToolPermissionIntent, reason: str) -> AsyncGenerator[StepValue, None]:
        """``permission.requested``, the resolver's answer, ``permission.resolved`` (§8.6 step 7).

        A denial (or a cancellation) sets ``ask_denial``; an allow with scope ``run`` is
        remembered by the gate.
        """
        channel = self.channel
        scope_name = intent.scope or "once"
        permission_id = channel.new_id("perm")
        requested = PermissionRequestedData(
            permission_id=permission_id,
            **channel.ids,
            call_id=self.call_id,
            action=intent.action,
            subject=or_unset(intent.subject),
            scope=scope_name,
            reason=reason,
        )
        if await channel.publish("permission.requested", requested):
            yield None
        decision, note, actor, canceled = await self._resolve(permission_id, intent, reason)
        resolved = PermissionResolvedData(
            permission_id=permission_id,
            **channel.ids,
            call_id=self.call_id,
            action=intent.action,
            subject=or_unset(intent.subject),
            scope=scope_name,
            decision=decision,
            note=or_unset(note),
        )
        ack = await channel.publish("permission.resolved", resolved, actor=actor, force=True)
        if canceled or channel.cancel_requested:
            self.ask_denial = ("TOOL_CANCELED", "tool canceled")
            self.cancel_after_observation = True
            return
        if ack:
            yield None
        if decision == "deny":
            self.ask_denial = ("TOOL_PERMISSION_DENIED", note or "operator denied permission")
            return
        self.view.gate.grant(intent)

    async def _resolve(
        self, permission_id: str, intent: ToolPermissionIntent, reason: str
    ) -> tuple[Literal["allow", "deny"], str | None, str, bool]:
        """(decision, note, actor, canceled): the resolver's answer, or the kernel's deny."""
        channel = self.channel
        resolve = self.view.admitted.resolve
        if resolve is None:
            return "deny", "no permission resolver", "kernel", False
        request = PermissionRequest(
            permission_id=permission_id,
            **channel.ids,
            call_id=self.call_id,
            action=intent.action,
            subject=intent.subject,
            scope=intent.scope or "once",
            reason=reason,
        )
        answer: object = None
        failed = False
        with channel.cancellable():
            try:
                pending = resolve(request, channel.controller.signal)
                if not inspect.isawaitable(pending):
                    failed = True
                else:
                    answer = await pending
            except Exception:
                failed = True
        resolution = None if failed else resolution_of(answer)
        if channel.cancel_requested:
            return "deny", "run canceled while awaiting permission", "kernel", True
        if resolution is None:
            return "deny", "permission resolver failed closed", "kernel", False
        return resolution.decision, resolution.note, "operator", False

    async def _observe(self) -> AsyncGenerator[StepValue, None]:
        """``tool.result`` and the tool's message; no acknowledgement wait once canceled."""
        channel, call = self.channel, self.call
        output, error = self.observation
        force = self.cancel_after_observation
        if error is None:
            result = ToolResultData(
                call_id=self.call_id, tool=call.name, ok=True, output=output, **channel.ids
            )
        else:
            failure = ToolResultErrorData(code=error[0], message=error[1])
            result = ToolResultData(
                call_id=self.call_id, tool=call.name, ok=False, error=failure, **channel.ids
            )
        if await channel.publish("tool.result", result, force=force) and not force:
            yield None
        content = observed_content(self.observation)
        yield tool_answer(call, content)
        message = tool_message_data(channel, call, content, self.view.revision)
        if await channel.publish("message.completed", message, force=force) and not force:
            yield None
