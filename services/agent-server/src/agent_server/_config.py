"""``ServerConfig``, its five records, and ``ToolProviderContext`` (spec §1, §9.1), with their validation."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, Literal

from agent_server._auth import DEFAULT_PRINCIPAL, check_principal, check_token
from agent_server._manifests import DEFAULT_TASK_BASE
from agent_server._protocol import utf8_size
from harness_exit_gate.manifest import TaskManifest
from harness_kernel.events import random_id
from harness_kernel.models import FakeModel, Model, ModelAdapter
from harness_kernel.runtime import ContextPolicy, MinimalAgentRuntime
from harness_kernel.store import SessionStore
from harness_sandbox import SandboxEngine, SandboxLimits, is_isolating_engine
from harness_tools import Tool

__all__ = [
    "DEFAULT_MODEL_NAME",
    "LOOPBACK_HOSTS",
    "MAX_DATABASE_URL_CHARS",
    "WORKSPACE_ADAPTERS",
    "LimitsConfig",
    "ModelConfig",
    "ModelFactory",
    "NetworkConfig",
    "ServerConfig",
    "ServerHooks",
    "StorageConfig",
    "ToolProvider",
    "ToolProviderContext",
    "WorkspaceAdapterName",
    "WorkspaceConfig",
    "check_context_policy",
    "check_database_url",
]

DEFAULT_MODEL_NAME: Final = "fake-model/v1"
LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})
MAX_MESSAGE_BYTES_LIMIT: Final = 16 * 1024 * 1024
MIN_OUTBOUND_STALL_MS: Final = 10
"""A floor for tests: a shorter stall would time scheduling jitter, not a peer that stopped reading."""
MAX_OUTBOUND_STALL_MS: Final = 600_000
MIN_CLOSE_GRACE_MS: Final = 10
MAX_CLOSE_GRACE_MS: Final = 60_000

WorkspaceAdapterName = Literal["local", "sandbox"]
"""The operational workspace adapters a server can be opted into."""
WORKSPACE_ADAPTERS: Final[tuple[WorkspaceAdapterName, ...]] = ("local", "sandbox")

ModelFactory = Callable[[], Model | ModelAdapter]
"""Builds one fresh model per prompt: a one-shot ``Model`` or a streaming ``ModelAdapter``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolProviderContext:
    """What a tool provider knows about the session it equips.

    Attributes:
        session_id: The new session's id.
        workspace: The canonical path of the session workspace.
        task_id: The task id, or ``None``.
        model: The model name the session runs.
    """

    session_id: str
    workspace: str
    task_id: str | None
    model: str


ToolProvider = Callable[[ToolProviderContext], Iterable[Tool[Any]]]
"""Returns the tools offered to one session; the server admits them by boundary (§5.2)."""


def _no_tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
    return ()


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _default_models() -> Mapping[str, ModelFactory]:
    return MappingProxyType({DEFAULT_MODEL_NAME: FakeModel})


def _check_int(value: object, name: str, low: int, high: float = math.inf) -> None:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")


_DATABASE_URL_SCHEMES: Final = ("postgresql://", "postgres://")
MAX_DATABASE_URL_CHARS: Final = 4096


def check_database_url(url: object) -> str:
    """``url`` if it is a PostgreSQL connection URL the server may hand to the store.

    The messages never repeat the URL: it may hold a password.

    Raises:
        ValueError: not a ``str``; not ``postgresql://`` or ``postgres://``; longer than 4096
            characters; or holding a control character.
    """
    if type(url) is not str:
        raise ValueError("database_url must be a str")
    if not url.startswith(_DATABASE_URL_SCHEMES):
        raise ValueError("database_url must start with postgresql:// or postgres://")
    if len(url) > MAX_DATABASE_URL_CHARS:
        raise ValueError(f"database_url must be at most {MAX_DATABASE_URL_CHARS} characters")
    if any(ord(character) < 32 or ord(character) == 127 for character in url):
        raise ValueError("database_url must not hold control characters")
    return url


MAX_SAFE_INTEGER: Final = 2**53 - 1
MAX_TAIL_MESSAGES: Final = 10_000


def check_context_policy(policy: object) -> None:
    """Refuse a context policy the runtime would refuse at every turn (kernel.md §8.15).

    Raises:
        ValueError: not a ``ContextPolicy``, or a field out of its range: ``window_tokens``
            1..2**53-1, ``reserve_tokens`` 0..window-1, ``threshold_tokens``
            1..window-reserve, ``tail_messages`` 0..10 000.
    """
    if type(policy) is not ContextPolicy:
        raise ValueError("context_policy must be a harness_kernel.runtime.ContextPolicy or None")
    assert isinstance(policy, ContextPolicy)
    # Named by field and by flag: the CLI's --context-* flags build the policy.
    window, reserve = policy.window_tokens, policy.reserve_tokens
    _check_int(window, "window_tokens (--context-window-tokens)", 1, MAX_SAFE_INTEGER)
    _check_int(reserve, "reserve_tokens (--context-reserve-tokens)", 0, window - 1)
    _check_int(policy.threshold_tokens, "threshold_tokens (--context-threshold-tokens)", 1, window - reserve)
    _check_int(policy.tail_messages, "tail_messages (--context-tail-messages)", 0, MAX_TAIL_MESSAGES)


def _check_optional_str(value: object, name: str) -> None:
    if value is not None and type(value) is not str:
        raise ValueError(f"{name} must be a str or None")


def _check_bool(value: object, name: str) -> None:
    if type(value) is not bool:
        raise ValueError(f"{name} must be a bool")


@dataclass(frozen=True, kw_only=True, slots=True)
class NetworkConfig:
    """Where the server listens and whom it lets in (spec §2.2, §3).

    Authentication is never off: ``auth_token`` (one token, principal ``"default"``) or
    ``auth_tokens`` (principal name → token) give the accepted tokens; with neither, ``serve``
    generates a 256-bit token at start-up and hands it out on :class:`ServerHandle`. Sessions
    are bound to the principal that created them. A host that is not loopback needs a token
    and ``allow_plaintext_remote`` (checked by ``serve`` before it binds).

    Raises:
        ValueError: a field has the wrong type or is out of range.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    path: str = "/acp"
    auth_token: str | None = None
    auth_tokens: Mapping[str, str] | None = None
    allow_plaintext_remote: bool = False
    allowed_origins: tuple[str, ...] = ()
    readiness_path: str | None = None

    def __post_init__(self) -> None:
        for name in ("host", "path"):
            if type(getattr(self, name)) is not str or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty str")
        if not self.path.startswith("/"):
            raise ValueError("path must start with /")
        _check_int(self.port, "port", 0, 65535)
        for name in ("auth_token", "readiness_path"):
            _check_optional_str(getattr(self, name), name)
        if self.auth_token is not None and self.auth_tokens is not None:
            raise ValueError("give either auth_token or auth_tokens, not both")
        if self.auth_token is not None:
            check_token(self.auth_token)
        if self.auth_tokens is not None:
            if not isinstance(self.auth_tokens, Mapping) or not self.auth_tokens:  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ValueError("auth_tokens must map principal names to tokens")
            for principal, token in self.auth_tokens.items():
                check_token(token, f'the token of principal "{check_principal(principal)}"')
        _check_bool(self.allow_plaintext_remote, "allow_plaintext_remote")
        if type(self.allowed_origins) is not tuple or any(
            type(origin) is not str for origin in self.allowed_origins
        ):
            raise ValueError("allowed_origins must be a tuple of str")

    def configured_tokens(self) -> dict[str, str] | None:
        """Principal → token as configured, or ``None`` when ``serve`` must generate one."""
        if self.auth_tokens is not None:
            return dict(self.auth_tokens)
        if self.auth_token is not None:
            return {DEFAULT_PRINCIPAL: self.auth_token}
        return None


@dataclass(frozen=True, kw_only=True, slots=True)
class StorageConfig:
    """Where sessions are kept, how long, and what happens to interrupted ones (spec §4).

    ``session_store`` is used as given; otherwise ``database_url`` opens PostgreSQL, and
    ``persistence`` SQLite at ``db_path`` (default: a file in the user's state directory);
    without persistence, sessions live in memory. ``resume_interrupted`` continues this
    root's interrupted sessions in the background at start-up. Finished sessions are deleted
    once closed ``retention_days`` ago and, when ``retention_max_bytes`` is set, oldest first
    while the finished ones keep more than that many bytes (decision 058). A session is not
    created or prompted while the store's disk has less than ``min_free_disk_bytes`` free.

    Raises:
        ValueError: a field has the wrong type or is out of range, or the store is given twice.
    """

    db_path: str | None = None
    persistence: bool = True
    session_store: SessionStore | None = None
    database_url: str | None = field(default=None, repr=False)
    resume_interrupted: bool = False
    retention_days: int | None = 30
    retention_max_bytes: int | None = None
    min_free_disk_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        _check_optional_str(self.db_path, "db_path")
        _check_bool(self.persistence, "persistence")
        if type(self.resume_interrupted) is not bool:
            raise ValueError("resume_interrupted must be a bool")
        if self.resume_interrupted and not self.persistence:
            raise ValueError("resume_interrupted needs a persistent session store")
        if self.session_store is not None and not isinstance(self.session_store, SessionStore):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("session_store must be a SessionStore or None")
        if self.db_path is not None and self.session_store is not None:
            raise ValueError("give either db_path or session_store, not both")
        if self.database_url is not None:
            check_database_url(self.database_url)
            if self.db_path is not None or self.session_store is not None or not self.persistence:
                raise ValueError("database_url excludes db_path, session_store and persistence=False")
        _check_int(self.min_free_disk_bytes, "min_free_disk_bytes", 0)
        if self.retention_days is not None:
            _check_int(self.retention_days, "retention_days", 1, 36_500)
        if self.retention_max_bytes is not None:
            _check_int(self.retention_max_bytes, "retention_max_bytes", 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    """The models sessions may choose, and how a conversation's context is kept (spec §9.1).

    ``models`` maps each advertised name to a factory building one fresh model per prompt;
    ``default_model`` (else the first name) serves a ``session/new`` that names none.
    ``context_policy`` turns on the runtime's context accounting and compaction for every
    turn (kernel.md §8.15).

    Raises:
        ValueError: a field has the wrong type or is out of range.
    """

    models: Mapping[str, ModelFactory] = field(default_factory=_default_models)
    default_model: str | None = None
    context_policy: ContextPolicy | None = None

    def __post_init__(self) -> None:
        _check_optional_str(self.default_model, "default_model")
        if not isinstance(self.models, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("models must be a mapping of names to model factories")
        for name, factory in self.models.items():
            if type(name) is not str or not callable(factory):
                raise ValueError("models must map names to callables")
        if self.context_policy is not None:
            check_context_policy(self.context_policy)

    @property
    def model_names(self) -> tuple[str, ...]:
        """The advertised model names, in configuration order."""
        return tuple(self.models)

    @property
    def chosen_default_model(self) -> str | None:
        """``default_model``, else the first configured name."""
        if self.default_model is not None:
            return self.default_model
        return next(iter(self.models), None)


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkspaceConfig:
    """Where sessions' workspaces live, which tools they get, and how tools reach them (§5.2).

    ``workspace_adapter="local"`` is the explicit opt-in to host-filesystem tools: each
    session gets its own ``harness_workspace.local.LocalWorkspace`` over its workspace,
    workspace-read tools rooted there are admitted, and the adapter is disposed when the
    session finishes. With ``None`` (the default) every workspace tool is refused.
    ``workspace_adapter="sandbox"`` gives each session a ``harness_sandbox.SandboxWorkspace``
    instead: a disposable copy of its workspace, with commands run in ``sandbox_engine``
    (required then; there is no fallback). Tools that write or run commands (``fs.write``,
    ``process.exec``) are admitted only there, or — **unsafe**: they then act on the host as
    this process's user — with ``workspace_adapter="local"`` and ``allow_host_effects=True``,
    the operator's explicit opt-in. Task manifests are read from ``tasks_dir`` or else from
    each workspace repository's ``task_base`` commit (or by ``load_manifest``).

    Raises:
        ValueError: a field has the wrong type or is out of range.
    """

    workspace_root: str = field(default_factory=os.getcwd)
    tools: ToolProvider = _no_tools
    workspace_adapter: WorkspaceAdapterName | None = None
    allow_host_effects: bool = False
    sandbox_engine: SandboxEngine | None = None
    tasks_dir: str | None = None
    task_base: str = DEFAULT_TASK_BASE
    load_manifest: Callable[[str, str], TaskManifest] | None = None

    def __post_init__(self) -> None:
        if type(self.workspace_root) is not str or not self.workspace_root:
            raise ValueError("workspace_root must be a non-empty str")
        if not callable(self.tools):
            raise ValueError("tools must be callable")
        if self.workspace_adapter is not None and (
            type(self.workspace_adapter) is not str or self.workspace_adapter not in WORKSPACE_ADAPTERS
        ):
            choices = " or ".join(f'"{name}"' for name in WORKSPACE_ADAPTERS)
            raise ValueError(f"workspace_adapter must be {choices} or None, got {self.workspace_adapter!r}")
        if (str(self.workspace_adapter) == "sandbox") != (self.sandbox_engine is not None):
            raise ValueError('sandbox_engine is required with workspace_adapter="sandbox", and only then')
        if self.allow_host_effects and str(self.workspace_adapter) != "local":
            raise ValueError(
                'allow_host_effects is for workspace_adapter="local" (a sandbox needs no opt-in)'
            )
        _check_bool(self.allow_host_effects, "allow_host_effects")
        if self.load_manifest is not None and not callable(self.load_manifest):
            raise ValueError("load_manifest must be callable or None")
        _check_optional_str(self.tasks_dir, "tasks_dir")
        if self.tasks_dir == "":
            raise ValueError("tasks_dir must be a non-empty str or None")
        task_base = self.task_base
        if type(task_base) is not str or not task_base or task_base.startswith("-") or "\x00" in task_base:
            raise ValueError("task_base must be a revision: HEAD, a branch, a refs/ name or a commit id")

    @property
    def effects_admitted(self) -> bool:
        """Whether sessions' workspaces are declared isolated (or the operator opted in to host effects)."""
        if self.workspace_adapter == "sandbox":
            return is_isolating_engine(self.sandbox_engine)
        return self.workspace_adapter == "local" and self.allow_host_effects


@dataclass(frozen=True, kw_only=True, slots=True)
class LimitsConfig:
    """How much the server, a principal, a connection, a session, a run and a sandbox may use.

    A principal holds at most ``max_sessions_per_principal`` live sessions (``None``:
    ``max_sessions`` divided among the configured principals, so a single principal keeps the
    whole server) and, when ``max_stored_bytes_per_principal`` is set, keeps at most that many
    bytes of events in the store before its new sessions and prompts are refused (decision 058).
    ``outbound_stall_ms`` is how long a full outbound queue may see its peer accept no byte
    before the socket is closed with 1013 (10 ms to 10 min); ``close_grace_ms`` is how long a
    close waits for the peer's close before the TCP stream is aborted (10 ms to 1 min, §2.4).
    ``sandbox_limits`` bounds each sandbox (with ``workspace_adapter="sandbox"``).

    Raises:
        ValueError: a field has the wrong type or is out of range.
    """

    max_sessions: int = 256
    max_sessions_per_principal: int | None = None
    max_stored_bytes_per_principal: int | None = None
    max_run_ms: int = 1_800_000
    session_lease_ms: int = 30_000
    max_message_bytes: int = 1024 * 1024
    outbound_stall_ms: int = 5_000
    sandbox_limits: SandboxLimits | None = None
    max_connections: int = 1024
    max_pending_connections: int = 128
    close_grace_ms: int = 1_000
    max_sessions_per_connection: int = 32
    permission_timeout_ms: int = 120_000
    created_session_timeout_ms: int = 300_000

    def __post_init__(self) -> None:
        if self.sandbox_limits is not None and type(self.sandbox_limits) is not SandboxLimits:
            raise ValueError("sandbox_limits must be a harness_sandbox.SandboxLimits or None")
        _check_int(self.max_message_bytes, "max_message_bytes", 1, MAX_MESSAGE_BYTES_LIMIT)
        _check_int(self.max_connections, "max_connections", 1)
        _check_int(self.max_pending_connections, "max_pending_connections", 1)
        _check_int(self.max_sessions, "max_sessions", 1)
        _check_int(self.max_run_ms, "max_run_ms", 1000)
        for name in ("max_sessions_per_principal", "max_stored_bytes_per_principal"):
            if getattr(self, name) is not None:
                _check_int(getattr(self, name), name, 1)
        for name in ("permission_timeout_ms", "max_sessions_per_connection", "created_session_timeout_ms"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError("agent server session limits must be positive")
        _check_int(self.session_lease_ms, "session_lease_ms", 1000)
        _check_int(self.outbound_stall_ms, "outbound_stall_ms", MIN_OUTBOUND_STALL_MS, MAX_OUTBOUND_STALL_MS)
        _check_int(self.close_grace_ms, "close_grace_ms", MIN_CLOSE_GRACE_MS, MAX_CLOSE_GRACE_MS)


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerHooks:
    """What tests replace to watch or steer a server: never configuration a user sets.

    ``serve`` uses the defaults; tests hand their own to ``serve_with_hooks``.
    """

    runtime: Callable[[], MinimalAgentRuntime] = MinimalAgentRuntime
    now: Callable[[], datetime] = _utc_now
    new_id: Callable[[str], str] = random_id

    def __post_init__(self) -> None:
        for name in ("runtime", "now", "new_id"):
            if not callable(getattr(self, name)):
                raise ValueError(f"{name} must be callable")


_RECORDS: Final = {
    "network": NetworkConfig,
    "storage": StorageConfig,
    "model": ModelConfig,
    "workspace": WorkspaceConfig,
    "limits": LimitsConfig,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerConfig:
    """Everything :func:`~agent_server.serve` needs, in five records; each checks its own fields.

    ``network`` (where it listens, whom it lets in), ``storage`` (where sessions are kept and
    for how long), ``model`` (the models and the context policy), ``workspace`` (the
    workspaces, tools and adapter) and ``limits`` (how much anything may use). The rules that
    span records, and the workspace root, are checked by ``serve`` before it binds
    (:meth:`check_serving`).

    Raises:
        ValueError: a record of the wrong type.
    """

    network: NetworkConfig = field(default_factory=NetworkConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    workspace: WorkspaceConfig = field(default_factory=WorkspaceConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)

    def __post_init__(self) -> None:
        for name, record in _RECORDS.items():
            if type(getattr(self, name)) is not record:
                raise ValueError(f"{name} must be an agent_server.{record.__name__}")

    def check_serving(self) -> str:
        """Apply the rules checked before binding and return the workspace root's realpath.

        Raises:
            ValueError: remote host without token or plaintext opt-in, a bad model list,
                or a workspace root that is not an existing directory.
        """
        network, workspace = self.network, self.workspace
        if network.host not in LOOPBACK_HOSTS:
            if network.configured_tokens() is None:
                raise ValueError(f"host {network.host} requires an auth token")
            if network.allow_plaintext_remote is not True:
                raise ValueError(f"host {network.host} requires allow_plaintext_remote")
        names = self.model.model_names
        if not 1 <= len(names) <= 128:
            raise ValueError("models must advertise 1..128 names")
        for name in names:
            try:
                size = utf8_size(name)
            except ValueError:
                size = 0
            if not 1 <= size <= 256:
                raise ValueError("model names must be 1..256 UTF-8 bytes")
        if self.model.chosen_default_model not in names:
            raise ValueError("default_model must be one of the configured models")
        root = os.path.realpath(workspace.workspace_root)
        if not os.path.isdir(root):
            raise ValueError(f"workspace root {workspace.workspace_root} must be an existing directory")
        if workspace.tasks_dir is not None:
            tasks = os.path.realpath(workspace.tasks_dir)
            if not os.path.isdir(tasks):
                raise ValueError(f"tasks_dir {workspace.tasks_dir} must be an existing directory")
            if os.path.commonpath((root, tasks)) == root:
                outside = "must lie outside the workspace root, where no session writes"
                raise ValueError(f"tasks_dir {workspace.tasks_dir} {outside}")
        return root
