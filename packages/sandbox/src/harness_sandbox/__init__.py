"""harness-sandbox: a disposable, isolated :class:`~harness_workspace.Workspace`.

A ``SandboxWorkspace`` copies a source tree into a directory of its own and starts one
isolated environment (Docker by default, bubblewrap as the light engine) with that copy at
``/workspace``. File operations run on the host with ``LocalWorkspace``'s descriptor-based
containment; commands run inside the environment. There is no fallback: when the chosen
engine cannot run, creation fails with ``SANDBOX_ENGINE_UNAVAILABLE`` saying what is missing.
"""

from __future__ import annotations

from harness_sandbox._bubblewrap import BubblewrapEngine
from harness_sandbox._copy import DEFAULT_DENY, DeniedPolicy
from harness_sandbox._docker import DockerEngine
from harness_sandbox._docker_cli import sweep_leftovers
from harness_sandbox._engine import (
    LABEL,
    WORKSPACE_MOUNT,
    CommandOutcome,
    CommandSpec,
    EnvironmentSpec,
    SandboxEngine,
    SandboxEnvironment,
)
from harness_sandbox._errors import (
    SANDBOX_COPY_FAILED,
    SANDBOX_DISK_LIMIT,
    SANDBOX_DISPOSE_FAILED,
    SANDBOX_ENGINE_UNAVAILABLE,
    SANDBOX_ERROR_CODES,
    SANDBOX_IDS_UNAVAILABLE,
    SANDBOX_IMAGE_NOT_PINNED,
    SANDBOX_SOURCE_INVALID,
    SANDBOX_START_FAILED,
    SandboxError,
)
from harness_sandbox._limits import SandboxLimits
from harness_sandbox._workspace import (
    SANDBOX_ENVIRONMENT,
    SANDBOX_ID_RANGE,
    SandboxWorkspace,
    is_isolating_engine,
)

__all__ = [
    "DEFAULT_DENY",
    "LABEL",
    "SANDBOX_COPY_FAILED",
    "SANDBOX_DISK_LIMIT",
    "SANDBOX_DISPOSE_FAILED",
    "SANDBOX_ENGINE_UNAVAILABLE",
    "SANDBOX_ENVIRONMENT",
    "SANDBOX_ERROR_CODES",
    "SANDBOX_IDS_UNAVAILABLE",
    "SANDBOX_ID_RANGE",
    "SANDBOX_IMAGE_NOT_PINNED",
    "SANDBOX_SOURCE_INVALID",
    "SANDBOX_START_FAILED",
    "WORKSPACE_MOUNT",
    "BubblewrapEngine",
    "CommandOutcome",
    "CommandSpec",
    "DeniedPolicy",
    "DockerEngine",
    "EnvironmentSpec",
    "SandboxEngine",
    "SandboxEnvironment",
    "SandboxError",
    "SandboxLimits",
    "SandboxWorkspace",
    "is_isolating_engine",
    "sweep_leftovers",
]
