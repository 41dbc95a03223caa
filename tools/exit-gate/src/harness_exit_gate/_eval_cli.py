"""``harness-eval [SCENARIO ...] [--report PATH] [--root DIR]`` (kernel.md §10)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import msgspec
import trio

from harness_exit_gate._cli_help import examples
from harness_exit_gate._errors import RunReportError
from harness_exit_gate._manifest_file import load_task_manifest_file
from harness_exit_gate._report import validate_report_artifact
from harness_exit_gate._usage import EXIT_FAILED, EXIT_OK, RaisingParser, UsageError
from harness_exit_gate.evals import (
    InvariantCheckError,
    Scenario,
    ScenarioParseError,
    ScenarioRuntimeError,
    execute_scenario,
    load_scenario,
)
from harness_exit_gate.manifest import ManifestParseError, TaskManifest
from harness_kernel.models import ModelAdapter
from harness_workspace import MemoryWorkspace, declare_isolation

__all__ = ["main"]

PROG: Final = "harness-eval"
EXIT_NONE: Final = 2


_EXAMPLES: Final = (
    ("run every scenario in tasks/scenarios/ on its scripted model", ["harness-eval"]),
    (
        "two scenarios, checked against a run report",
        ["harness-eval kernel-0001-golden dev-tools-0001-golden --report run-report.json"],
    ),
    (
        "the scenarios' tasks on a local OpenAI-compatible model",
        ["harness-eval --model openai-compatible:llama3 --base-url http://127.0.0.1:11434/v1"],
    ),
)


def _parser() -> argparse.ArgumentParser:
    parser = RaisingParser(
        prog=PROG,
        description="Run golden scenarios from tasks/scenarios/."
        " Exit 0 when all pass, 1 on any failure, 2 when none are found or on misuse.",
        epilog=examples(*_EXAMPLES),
    )
    parser.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help="a path, or a bare name in tasks/scenarios/ (default: every scenario there)",
    )
    parser.add_argument(
        "--report", metavar="PATH", help="a run report whose status the scenarios check (default: none)"
    )
    parser.add_argument("--root", default=".", metavar="DIR", help="the repository root")
    model = parser.add_argument_group("model (needs harness-models: pip install 'harness-exit-gate[models]')")
    model.add_argument(
        "--model",
        default=None,
        metavar="PROVIDER:MODEL",
        help="run each task on a real model, openai:MODEL, anthropic:MODEL or openai-compatible:MODEL;"
        " only run.status and files are checked then (default: each scenario's script)",
    )
    model.add_argument(
        "--base-url",
        default=None,
        metavar="URL",
        help="the provider API's base URL, required for openai-compatible (default: the provider's)",
    )
    model.add_argument(
        "--api-key-env",
        default=None,
        metavar="VARIABLE",
        help="the variable holding the provider key (default: env OPENAI_API_KEY or ANTHROPIC_API_KEY)",
    )
    model.add_argument(
        "--api-key-file",
        default=None,
        metavar="FILE",
        help="read the provider key from FILE (one line, mode 0600, not a link) instead of a variable"
        " (default: none)",
    )
    model.add_argument(
        "--allow-insecure-http",
        action="store_true",
        help="allow a plain http:// base URL to a host that is not loopback (the key travels in clear)",
    )
    return parser


ModelChoice = tuple[str, Callable[[], ModelAdapter]]


def _model_choice(arguments: argparse.Namespace) -> ModelChoice | None:
    """The ``--model`` to run the tasks on, checked now, or ``None`` for the scenarios' scripts.

    Raises:
        UsageError: provider options without ``--model``, harness-models missing, or an
            unusable model (an unknown provider, a missing key, a refused base URL).
    """
    if arguments.model is None:
        if (
            arguments.base_url is not None
            or arguments.api_key_env is not None
            or arguments.api_key_file is not None
            or arguments.allow_insecure_http
        ):
            raise UsageError(
                "--base-url, --api-key-env, --api-key-file and --allow-insecure-http need --model"
            )
        return None
    try:
        from harness_models import ModelError, ModelSpec, model_factory, parse_model_spec  # noqa: PLC0415
    except ImportError:
        raise UsageError("--model needs harness-models: pip install 'harness-exit-gate[models]'") from None
    try:
        provider, model = parse_model_spec(arguments.model)
        spec = ModelSpec(
            provider=provider,
            model=model,
            base_url=arguments.base_url,
            api_key_env=arguments.api_key_env,
            api_key_file=arguments.api_key_file,
            allow_insecure_http=arguments.allow_insecure_http,
        )
        return spec.name, model_factory(spec, os.environ)
    except ModelError as error:
        raise UsageError(error.message) from None


def _scenario_paths(root: Path, names: Sequence[str]) -> list[Path]:
    folder = root / "tasks" / "scenarios"
    if not names:
        if not folder.is_dir():
            return []
        return sorted(
            path for path in folder.iterdir() if path.suffix in (".yaml", ".yml") and path.is_file()
        )
    paths: list[Path] = []
    for name in names:
        bare = "/" not in name and not name.endswith((".yaml", ".yml"))
        paths.append(folder / f"{name}.yaml" if bare else Path(name))
    return paths


def _read_scenario(path: Path, root: Path) -> tuple[Scenario, dict[str, TaskManifest]] | str:
    try:
        scenario = load_scenario(path.read_text(encoding="utf-8"))
        manifests = {
            task_id: load_task_manifest_file(root / "tasks" / f"{task_id}.yaml")
            for task_id in scenario.uses_tasks
        }
    except OSError as error:
        return f"FAIL {path}: cannot read: {error.strerror}"
    except UnicodeDecodeError:
        return f"FAIL {path}: not UTF-8"
    except (ScenarioParseError, ManifestParseError) as error:
        return f"FAIL {path}: {error}"
    return scenario, manifests


def _scripted_workspace(workspace: MemoryWorkspace) -> None:
    """A scenario's workspace holds its files in memory and answers its commands from the
    scenario's script (the kernel's own handler): this host vouches that nothing reaches out."""
    declare_isolation(workspace, "in-memory")


async def _run_one(
    path: Path, root: Path, report: Mapping[str, object] | None, model: ModelChoice | None
) -> tuple[bool, str]:
    read = await trio.to_thread.run_sync(_read_scenario, path, root)
    if isinstance(read, str):
        return False, read
    scenario, manifests = read
    chosen = None if model is None else (model[0], model[1]())
    try:
        outcome = await execute_scenario(
            scenario, manifests, report=report, model=chosen, attest_workspace=_scripted_workspace
        )
    except (ScenarioRuntimeError, InvariantCheckError) as error:
        return False, f"FAIL {path}: {error}"
    if outcome.ok:
        return True, f"PASS {outcome.id} ({outcome.duration_ms:.1f} ms)"
    return False, f"FAIL {outcome.id}: " + "; ".join(outcome.failures)


async def _run_all(
    paths: Sequence[Path], root: Path, report: Mapping[str, object] | None, model: ModelChoice | None
) -> int:
    passed = 0
    for path in paths:
        ok, line = await _run_one(path, root, report, model)
        passed += ok
        print(line)
    print(f"{passed}/{len(paths)} scenarios passed")
    return EXIT_OK if passed == len(paths) else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenarios: exit 0 when all pass, 1 on any failure, 2 when none are found or on misuse."""
    try:
        arguments = _parser().parse_args(argv)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_NONE
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else EXIT_NONE
    try:
        model = _model_choice(arguments)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_NONE
    root = Path(arguments.root)
    report: Mapping[str, object] | None = None
    if arguments.report is not None:
        try:
            document = msgspec.json.decode(Path(arguments.report).read_bytes())
            validate_report_artifact(document)
        except OSError as error:
            print(f"{PROG}: cannot read report {arguments.report}: {error.strerror}", file=sys.stderr)
            return EXIT_FAILED
        except (msgspec.DecodeError, RunReportError) as error:
            print(f"{PROG}: {error}", file=sys.stderr)
            return EXIT_FAILED
        report = document
    paths = _scenario_paths(root, arguments.scenarios)
    if not paths:
        print(f"{PROG}: no scenarios found in {root / 'tasks' / 'scenarios'}", file=sys.stderr)
        return EXIT_NONE
    return trio.run(_run_all, paths, root, report, model)
