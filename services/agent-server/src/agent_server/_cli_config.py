"""The :class:`ServerConfig` of ``serve``, ``chat`` and ``acp``: their parsed flags and the environment."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from typing import Final

from agent_server._auth import DEFAULT_PRINCIPAL, ensure_token_file, read_token_file
from agent_server._catalogue import EFFECT_TOOL_NAMES, catalogue_provider, expand_tool_names
from agent_server._config import (
    DEFAULT_MODEL_NAME,
    LimitsConfig,
    ModelConfig,
    ModelFactory,
    NetworkConfig,
    ServerConfig,
    StorageConfig,
    WorkspaceConfig,
    check_database_url,
)
from agent_server._environment import QUOTA_VARIABLES, Environment, read_environment
from agent_server._scenario import ScenarioModelFactory, read_script
from agent_server._server import default_token_path
from harness_kernel.runtime import ContextPolicy
from harness_models import ModelError, ModelSpec, Timeouts, model_factory, parse_model_spec
from harness_sandbox import BubblewrapEngine, DockerEngine, SandboxEngine, SandboxLimits

__all__ = ["DEFAULT_PORT", "EMBEDDED_IDLE_MS", "build_config", "build_embedded_config", "with_default_tokens"]

DEFAULT_PORT: Final = 8765
EMBEDDED_IDLE_MS: Final = 24 * 3600 * 1000
"""How long the server of ``chat`` or ``acp`` keeps a session waiting for its prompt: its one user
may think longer than the five minutes of a shared server, and the conversation lives in it."""


def build_config(arguments: argparse.Namespace, environ: dict[str, str]) -> ServerConfig:
    """The :class:`ServerConfig` of ``serve`` from its arguments and the environment.

    Raises:
        ValueError: an invalid argument, variable or setting.
    """
    environment = read_environment(environ, token_variable=arguments.token_env)
    root = arguments.workspace_root if arguments.workspace_root is not None else os.getcwd()
    port = arguments.port
    if port is None:
        port = environment.port if environment.port is not None else DEFAULT_PORT
    models = _provider_models(arguments, environment, environ)
    if arguments.scenario is not None:
        if models is not None:
            raise ValueError("--scenario scripts the fake model; it does not go with a provider --model")
        try:
            with open(arguments.scenario, encoding="utf-8") as handle:
                script = read_script(handle.read())
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read scenario {arguments.scenario}: {error}") from None
        models = {DEFAULT_MODEL_NAME: ScenarioModelFactory(script)}
    names = [name.strip() for name in arguments.tools.split(",") if name.strip()]
    tools = catalogue_provider(names)
    allow_remote = arguments.allow_plaintext_remote or environment.allow_plaintext_remote is True
    readiness = (
        arguments.readiness_path if arguments.readiness_path is not None else environment.readiness_path
    )
    adapter = (
        arguments.workspace_adapter
        if arguments.workspace_adapter is not None
        else environment.workspace_adapter
    )
    stall_ms = (
        arguments.outbound_stall_ms
        if arguments.outbound_stall_ms is not None
        else environment.outbound_stall_ms
    )
    auth_tokens = None if arguments.token_file is None else read_token_file(arguments.token_file)
    engine, sandbox_limits = _sandbox_options(arguments, adapter)
    if arguments.allow_host_effects and adapter != "local":
        raise ValueError("--allow-host-effects is for --workspace-adapter local (a sandbox needs no opt-in)")
    database_url = _database_url(arguments, environment)
    quotas: dict[str, int] = dict(environment.quotas)
    for name in QUOTA_VARIABLES.values():
        if getattr(arguments, name) is not None:
            quotas[name] = getattr(arguments, name)  # a flag wins over its variable
    retention_max_bytes = quotas.pop("retention_max_bytes", None)
    model = ModelConfig(context_policy=_context_policy(arguments))
    if models is not None:
        model = ModelConfig(models=models, context_policy=model.context_policy)
    config = ServerConfig(
        network=NetworkConfig(
            host=arguments.host,
            port=port,
            allow_plaintext_remote=allow_remote,
            allowed_origins=tuple(arguments.allow_origin),
            readiness_path=readiness,
            auth_token=environment.token if auth_tokens is None else None,
            auth_tokens=auth_tokens,
        ),
        storage=StorageConfig(
            db_path=arguments.db,
            persistence=not arguments.no_db,
            database_url=database_url,
            resume_interrupted=arguments.resume_interrupted,
            retention_days=arguments.retention_days or None,
            retention_max_bytes=retention_max_bytes,
        ),
        model=model,
        workspace=WorkspaceConfig(
            workspace_root=root,
            tools=tools,
            workspace_adapter=adapter,
            allow_host_effects=arguments.allow_host_effects,
            sandbox_engine=engine,
            tasks_dir=arguments.tasks_dir,
            task_base=arguments.task_base,
        ),
        limits=LimitsConfig(
            max_sessions=arguments.max_sessions,
            max_run_ms=arguments.max_run_seconds * 1000,
            session_lease_ms=arguments.session_lease_seconds * 1000,
            max_message_bytes=arguments.max_message_bytes,
            sandbox_limits=sandbox_limits,
            **({} if stall_ms is None else {"outbound_stall_ms": stall_ms}),
            **quotas,
        ),
    )
    config.check_serving()
    _check_effect_tools(names, config)
    return config


def build_embedded_config(
    arguments: argparse.Namespace, environ: dict[str, str], *, workspace_root: str
) -> ServerConfig:
    """The configuration ``chat`` and ``acp`` give :func:`~agent_server.embedded_server`.

    Their flags configure the server as ``serve``'s do, with the listener's settings left out
    (the embedded server makes them private), the store kept in SQLite whatever
    ``HARNESS_DATABASE_URL`` says, sessions kept only with ``--db``, and an idle session kept
    :data:`EMBEDDED_IDLE_MS`.

    Raises:
        ValueError: what ``serve`` would refuse for the same flags.
    """
    values = vars(arguments) | {
        "host": "127.0.0.1",
        "port": 0,
        "workspace_root": workspace_root,
        "no_db": arguments.db is None,
        "token_file": None,
        "readiness_path": None,
        "store": "sqlite",
        "database_url": None,
        "session_lease_seconds": 30,
    }
    config = build_config(argparse.Namespace(**values), environ)
    limits = dataclasses.replace(config.limits, created_session_timeout_ms=EMBEDDED_IDLE_MS)
    return dataclasses.replace(config, limits=limits)


def _database_url(arguments: argparse.Namespace, environment: Environment) -> str | None:
    """The ``database_url`` of ``--store postgres`` (explicit, or implied by HARNESS_DATABASE_URL).

    Raises:
        ValueError: the flags contradict each other, or postgres has no URL. The messages
            never repeat a URL: it may hold a password.
    """
    url: str | None = arguments.database_url
    if url is not None:
        url = check_database_url(url)
    elif environment.database_url is not None:
        url = environment.database_url
    store = arguments.store or ("postgres" if url is not None else "sqlite")
    if store == "sqlite":
        if arguments.database_url is not None:
            raise ValueError("--database-url is for --store postgres")
        return None
    if url is None:
        raise ValueError("--store postgres needs --database-url or HARNESS_DATABASE_URL")
    if arguments.db is not None or arguments.no_db:
        raise ValueError("--db and --no-db are for --store sqlite")
    return url


def _context_policy(arguments: argparse.Namespace) -> ContextPolicy | None:
    """The ``--context-*`` flags as a :class:`ContextPolicy` (ranges are checked by ``ServerConfig``).

    Raises:
        ValueError: only one of the window and the threshold, or the tail or the reserve
            without them.
    """
    window, threshold = arguments.context_window_tokens, arguments.context_threshold_tokens
    if window is None and threshold is None:
        if arguments.context_tail_messages is not None or arguments.context_reserve_tokens is not None:
            raise ValueError(
                "--context-tail-messages and --context-reserve-tokens need"
                " --context-window-tokens and --context-threshold-tokens"
            )
        return None
    if window is None or threshold is None:
        raise ValueError("give --context-window-tokens and --context-threshold-tokens together")
    tail = arguments.context_tail_messages
    reserve = arguments.context_reserve_tokens
    return ContextPolicy(
        window_tokens=window,
        threshold_tokens=threshold,
        tail_messages=8 if tail is None else tail,
        reserve_tokens=0 if reserve is None else reserve,
    )


def _check_effect_tools(names: list[str], config: ServerConfig) -> None:
    """Refuse at start-up what every ``session/new`` would refuse: effect tools without isolation.

    Raises:
        ValueError: ``--tools`` names ``fs.write`` or ``process.exec`` (or ``dev``) on a server
            whose workspaces are not isolated.
    """
    effects = sorted(set(expand_tool_names(names)) & EFFECT_TOOL_NAMES)
    if effects and not config.workspace.effects_admitted:
        raise ValueError(
            f"{' and '.join(effects)} write or run commands and need an isolated workspace:"
            " use --workspace-adapter sandbox, or --workspace-adapter local with --allow-host-effects"
            " (unsafe: they act on the host); for reading only, use --tools fs.read,fs.list,git.diff"
        )


def _provider_models(
    arguments: argparse.Namespace, environment: Environment, environ: Mapping[str, str]
) -> dict[str, ModelFactory] | None:
    """The provider model of ``--model`` (or ``HARNESS_MODEL``), checked now; ``None`` for ``fake``.

    Raises:
        ValueError: an unknown model, a missing key (the message names the variable), a
            missing or refused base URL, or provider options without a provider model.
    """
    text = arguments.model if arguments.model is not None else environment.model
    base_url = arguments.base_url if arguments.base_url is not None else environment.model_base_url
    key_file = arguments.api_key_file
    if key_file is None and arguments.api_key_env is None and arguments.api_key_fd is None:
        key_file = environment.model_api_key_file
    if text is None or text.strip() == "fake":
        provider_only = (
            arguments.api_key_env,
            key_file,
            arguments.api_key_fd,
            arguments.model_timeouts,
        )
        if (
            base_url is not None
            or any(value is not None for value in provider_only)
            or arguments.allow_insecure_http
        ):
            raise ValueError(
                "--base-url, --api-key-env, --api-key-file, --api-key-fd and --allow-insecure-http"
                " need a provider model"
                " (--model PROVIDER:MODEL)"
            )
        return None
    try:
        provider, model = parse_model_spec(text)
        spec = ModelSpec(
            provider=provider,
            model=model,
            base_url=base_url,
            api_key_env=arguments.api_key_env,
            api_key_file=key_file,
            api_key_fd=arguments.api_key_fd,
            allow_insecure_http=arguments.allow_insecure_http,
            timeouts=_model_timeouts(arguments.model_timeouts),
        )
        factory = model_factory(spec, environ)
    except ModelError as error:
        raise ValueError(error.message) from None
    return {spec.name: factory}


def _model_timeouts(text: str | None) -> Timeouts:
    """``CONNECT,READ,TOTAL`` seconds as :class:`Timeouts` (the defaults without the flag).

    Raises:
        ValueError: not three numbers, or one out of (0, 86400].
    """
    if text is None:
        return Timeouts()
    parts = text.split(",")
    try:
        connect, read, total = (float(part) for part in parts)
    except ValueError:
        raise ValueError("--model-timeouts takes three numbers of seconds: CONNECT,READ,TOTAL") from None
    return Timeouts(connect_s=connect, read_s=read, total_s=total)


def _sandbox_options(
    arguments: argparse.Namespace, adapter: str | None
) -> tuple[SandboxEngine | None, SandboxLimits | None]:
    """``sandbox_engine`` and ``sandbox_limits`` from the ``--sandbox-*`` flags.

    Raises:
        ValueError: a sandbox flag without ``--workspace-adapter sandbox``, the docker engine
            without ``--sandbox-image``, or a limit out of range.
    """
    given = [
        name
        for name in ("sandbox_engine", "sandbox_image", "sandbox_memory", "sandbox_pids", "sandbox_cpus")
        if getattr(arguments, name) is not None
    ]
    if adapter != "sandbox":
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            raise ValueError(f"{flags} need --workspace-adapter sandbox")
        return None, None
    limits: dict[str, object] = {}
    if arguments.sandbox_memory is not None:
        limits["memory_bytes"] = arguments.sandbox_memory * 1024 * 1024
    if arguments.sandbox_pids is not None:
        limits["pids"] = arguments.sandbox_pids
    if arguments.sandbox_cpus is not None:
        limits["cpus"] = arguments.sandbox_cpus
    engine_name = arguments.sandbox_engine or "docker"
    engine: SandboxEngine
    if engine_name == "docker":
        if arguments.sandbox_image is None:
            raise ValueError(
                "the docker sandbox engine needs --sandbox-image NAME@sha256:... "
                "(build one with packages/sandbox/scripts/build_image.py)"
            )
        engine = DockerEngine(arguments.sandbox_image)
    else:
        if arguments.sandbox_image is not None:
            raise ValueError("--sandbox-image is for the docker engine; bubblewrap runs the host's /usr")
        engine = BubblewrapEngine()
    return engine, SandboxLimits(**limits)  # pyright: ignore[reportArgumentType]


def with_default_tokens(config: ServerConfig, arguments: argparse.Namespace) -> tuple[ServerConfig, str]:
    """``config`` with its tokens, and a line saying where clients find them.

    Without ``--token-file`` or the token variable, the tokens come from the default token
    file beside the default store, created with a fresh token on first use.

    Raises:
        ValueError: the default token file cannot be created, or is not private.
    """
    if arguments.token_file is not None:
        return config, f"tokens from {arguments.token_file}"
    if config.network.auth_token is not None:
        return config, (
            f"token from ${arguments.token_env} (readable by every process of this user through"
            " /proc/<pid>/environ; prefer --token-file)"
        )
    path = default_token_path(config.workspace.workspace_root)
    tokens, created = ensure_token_file(path)
    if DEFAULT_PRINCIPAL not in tokens:
        raise ValueError(f'token file {path} has no token for principal "{DEFAULT_PRINCIPAL}"')
    config = dataclasses.replace(config, network=dataclasses.replace(config.network, auth_tokens=tokens))
    return config, f"token file {path}" + (" (created now)" if created else "")
