"""Strict start-up validation of the ``HARNESS_*`` environment (spec §9.2)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from agent_server._config import MAX_OUTBOUND_STALL_MS, MIN_OUTBOUND_STALL_MS, check_database_url

__all__ = [
    "QUOTA_VARIABLES",
    "Environment",
    "parse_outbound_stall_ms",
    "read_environment",
    "refuse_unsupported",
]

_PORT: Final = re.compile(r"[0-9]{1,5}", re.ASCII)
_SANDBOX_PREFIXES: Final = ("HARNESS_SANDBOX_", "HARNESS_DOCKER_")
_RENAMED: Final = {"HARNESS_MODEL_ID": "HARNESS_MODEL"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Environment:
    """The validated settings the environment supplies."""

    port: int | None = None
    token: str | None = None
    allow_plaintext_remote: bool | None = None
    readiness_path: str | None = None
    workspace_adapter: Literal["local"] | None = None
    outbound_stall_ms: int | None = None
    model: str | None = None
    model_base_url: str | None = None
    model_api_key_file: str | None = None
    database_url: str | None = field(default=None, repr=False)
    quotas: dict[str, int] = field(default_factory=dict[str, int])
    """``ServerConfig`` quota and retention fields set by ``HARNESS_AGENT_*`` (decision 058)."""


def refuse_unsupported(environ: Mapping[str, str]) -> None:
    """Refuse variables that would select features this build does not have.

    Raises:
        ValueError: with the documented message.
    """
    if any(name.startswith(_SANDBOX_PREFIXES) for name in environ):
        raise ValueError(
            "HARNESS_SANDBOX_* and HARNESS_DOCKER_* variables are not read;"
            " use --workspace-adapter sandbox with the --sandbox-* flags"
        )
    for old, new in _RENAMED.items():
        if old in environ:
            raise ValueError(
                f"{old} is not read; set {new}"
                " (fake, openai:MODEL, anthropic:MODEL or openai-compatible:MODEL)"
            )


def read_environment(
    environ: Mapping[str, str], *, token_variable: str = "HARNESS_AGENT_TOKEN"
) -> Environment:
    """Validate every ``HARNESS_*`` variable the server reads.

    Raises:
        ValueError: a variable is malformed or refused.
    """
    refuse_unsupported(environ)
    port: int | None = None
    raw_port = environ.get("HARNESS_AGENT_PORT")
    if raw_port is not None:
        if not _PORT.fullmatch(raw_port) or int(raw_port) > 65535:
            raise ValueError("HARNESS_AGENT_PORT must be an integer from 0 to 65535")
        port = int(raw_port)
    token: str | None = None
    raw_token = environ.get(token_variable)
    if raw_token is not None:
        token = raw_token.strip()
        if not token:
            raise ValueError(f"{token_variable} must be non-empty when set")
    allow: bool | None = None
    raw_allow = environ.get("HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE")
    if raw_allow is not None:
        if raw_allow not in ("true", "false"):
            raise ValueError('HARNESS_AGENT_ALLOW_PLAINTEXT_REMOTE must be exactly "true" or "false"')
        allow = raw_allow == "true"
    readiness: str | None = None
    raw_readiness = environ.get("HARNESS_AGENT_READINESS_PATH")
    if raw_readiness is not None:
        readiness = raw_readiness.strip()
        if not readiness:
            raise ValueError("HARNESS_AGENT_READINESS_PATH must be non-empty after trimming")
    adapter: Literal["local"] | None = None
    raw_adapter = environ.get("HARNESS_AGENT_WORKSPACE_ADAPTER")
    if raw_adapter is not None:
        # An opt-in to host-filesystem tools: only the exact name counts, never "", "1" or " local".
        if raw_adapter != "local":
            raise ValueError('HARNESS_AGENT_WORKSPACE_ADAPTER must be exactly "local" when set')
        adapter = "local"
    return Environment(
        port=port,
        token=token,
        allow_plaintext_remote=allow,
        readiness_path=readiness,
        workspace_adapter=adapter,
        outbound_stall_ms=_read_outbound_stall_ms(environ),
        model=_non_empty(environ, "HARNESS_MODEL"),
        model_base_url=_non_empty(environ, "HARNESS_MODEL_BASE_URL"),
        model_api_key_file=_non_empty(environ, "HARNESS_MODEL_API_KEY_FILE"),
        database_url=_database_url(environ),
        quotas=_read_quotas(environ),
    )


QUOTA_VARIABLES: Final = {
    "HARNESS_AGENT_MAX_SESSIONS_PER_PRINCIPAL": "max_sessions_per_principal",
    "HARNESS_AGENT_MAX_STORED_BYTES_PER_PRINCIPAL": "max_stored_bytes_per_principal",
    "HARNESS_AGENT_RETENTION_MAX_BYTES": "retention_max_bytes",
}
"""The quota and retention variables and the ``ServerConfig`` field each sets."""


def _read_quotas(environ: Mapping[str, str]) -> dict[str, int]:
    quotas: dict[str, int] = {}
    for variable, name in QUOTA_VARIABLES.items():
        raw = environ.get(variable)
        if raw is None:
            continue
        # At most 19 digits: int() is never handed an arbitrarily long string.
        if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or int(raw) < 1:
            raise ValueError(f"{variable} must be a positive integer")
        quotas[name] = int(raw)
    return quotas


def _database_url(environ: Mapping[str, str]) -> str | None:
    raw = environ.get("HARNESS_DATABASE_URL")
    if raw is None:
        return None
    try:
        return check_database_url(raw.strip())
    except ValueError as error:
        raise ValueError(f"HARNESS_DATABASE_URL: {error}") from None


def _non_empty(environ: Mapping[str, str], name: str) -> str | None:
    raw = environ.get(name)
    if raw is None:
        return None
    if not raw.strip():
        raise ValueError(f"{name} must be non-empty when set")
    return raw.strip()


def parse_outbound_stall_ms(text: str) -> int:
    """``text`` as an outbound stall in milliseconds, the same rule for the flag and the variable.

    Raises:
        ValueError: ``text`` is not ASCII digits, or its value is outside 10 to 600000.
    """
    message = f"must be an integer from {MIN_OUTBOUND_STALL_MS} to {MAX_OUTBOUND_STALL_MS}"
    # Leading zeros are harmless; more significant digits than the maximum has are out of range
    # without handing int() an arbitrarily long string.
    significant = text.lstrip("0")
    if not text.isascii() or not text.isdigit() or len(significant) > len(str(MAX_OUTBOUND_STALL_MS)):
        raise ValueError(message)
    value = int(text)
    if not MIN_OUTBOUND_STALL_MS <= value <= MAX_OUTBOUND_STALL_MS:
        raise ValueError(message)
    return value


def _read_outbound_stall_ms(environ: Mapping[str, str]) -> int | None:
    raw = environ.get("HARNESS_AGENT_OUTBOUND_STALL_MS")
    if raw is None:
        return None
    try:
        return parse_outbound_stall_ms(raw)
    except ValueError as error:
        raise ValueError(f"HARNESS_AGENT_OUTBOUND_STALL_MS {error}") from None
