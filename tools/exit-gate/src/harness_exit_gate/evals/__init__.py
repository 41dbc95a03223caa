"""Golden scenarios: a scripted run of one task checked against expectations.

:func:`load_scenario` reads one strict YAML scenario; :func:`execute_scenario` runs it with
``harness_kernel.run_agent`` on a :class:`~harness_kernel.models.FakeModel`, a deterministic
clock and deterministic ids, and reports every failed expectation. A scenario with
``conversation:`` runs on :class:`~harness_kernel.runtime.MinimalAgentRuntime` instead:
several turns of one session, steering while a turn runs, a context policy. The runner is
pure: it takes text and decoded manifests, never paths (the ``harness-eval`` CLI finds and
reads the files), and it is built on the kernel's public names only.
"""

from harness_exit_gate.evals._conversation import (
    ScenarioConversation,
    ScenarioConversationTurn,
    ScenarioSteer,
)
from harness_exit_gate.evals._execute import execute_scenario, stream_satisfies
from harness_exit_gate.evals._match import EventInvariant, InvariantValue, RequestExpectation
from harness_exit_gate.evals._scenario import (
    SCENARIO_INVALID,
    SCENARIO_INVARIANT_INVALID,
    SCENARIO_RUNTIME_FAILED,
    GoldenRun,
    InvariantCheckError,
    ReportExpectation,
    RunExpectation,
    Scenario,
    ScenarioExpectation,
    ScenarioOutcome,
    ScenarioParseError,
    ScenarioRuntimeError,
    ScenarioToolCall,
    ScenarioTurn,
    assert_known_event_types,
    decode_scenario,
    load_scenario,
    load_script,
)
from harness_exit_gate.evals._workspace import ScenarioCommand, ScenarioWorkspace

__all__ = [
    "SCENARIO_INVALID",
    "SCENARIO_INVARIANT_INVALID",
    "SCENARIO_RUNTIME_FAILED",
    "EventInvariant",
    "GoldenRun",
    "InvariantCheckError",
    "InvariantValue",
    "ReportExpectation",
    "RequestExpectation",
    "RunExpectation",
    "Scenario",
    "ScenarioCommand",
    "ScenarioConversation",
    "ScenarioConversationTurn",
    "ScenarioExpectation",
    "ScenarioOutcome",
    "ScenarioParseError",
    "ScenarioRuntimeError",
    "ScenarioSteer",
    "ScenarioToolCall",
    "ScenarioTurn",
    "ScenarioWorkspace",
    "assert_known_event_types",
    "decode_scenario",
    "execute_scenario",
    "load_scenario",
    "load_script",
    "stream_satisfies",
]
