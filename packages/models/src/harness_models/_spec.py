"""``PROVIDER:MODEL``: choosing a provider model by name, checked before the first request.

One rule for every host (``agent-server --model``, ``harness-eval --model``):
``openai:MODEL``, ``anthropic:MODEL``, ``openai-compatible:MODEL`` (with a base URL). The key
comes from a file or an inherited descriptor the operator names (then nothing secret needs
to be in the environment), or else from the environment (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``, or a variable the operator names); a missing one is refused at once,
naming the file, descriptor or variable, never showing a value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from harness_kernel.models import ModelAdapter
from harness_models._anthropic import AnthropicModel
from harness_models._errors import MODEL_CONFIG_INVALID, ModelError
from harness_models._openai import OpenAIChatModel
from harness_models._openai_wire import MaxTokensField
from harness_models._secrets import (
    api_key_from_descriptor,
    api_key_from_environment,
    api_key_from_file,
    check_base_url,
)
from harness_models._transport import HttpSseTransport
from harness_models._wire import ApiKey, StreamLimits, Timeouts

__all__ = ["MODEL_PROVIDERS", "ModelSpec", "model_factory", "parse_model_spec"]

Provider = Literal["openai", "anthropic", "openai-compatible"]
MODEL_PROVIDERS: Final[tuple[Provider, ...]] = ("openai", "anthropic", "openai-compatible")

_DEFAULT_BASE_URLS: Final[dict[str, str]] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
_KEY_VARIABLES: Final[dict[str, str]] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """A provider model and how to reach it.

    Attributes:
        provider: ``openai``, ``anthropic`` or ``openai-compatible``.
        model: The provider's model name.
        base_url: The API's base URL (required for ``openai-compatible``).
        api_key_env: The environment variable holding the key, instead of the provider's.
        api_key_file: A file holding the key (see :func:`api_key_from_file`); the
            environment is then not read for a key.
        api_key_fd: An inherited descriptor to read the key from (see
            :func:`api_key_from_descriptor`); the environment is then not read for a key.
        allow_insecure_http: Allow plain ``http://`` to a host that is not loopback.
        timeouts: Connect, between-reads and whole-attempt timeouts of every request.
        stream_limits: The most text, argument and body bytes one response may carry.
    """

    provider: Provider
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    api_key_file: str | None = None
    api_key_fd: int | None = None
    allow_insecure_http: bool = False
    timeouts: Timeouts = Timeouts()  # noqa: RUF009 - frozen, so one shared default is safe
    stream_limits: StreamLimits = StreamLimits()  # noqa: RUF009 - frozen, shared safely

    @property
    def name(self) -> str:
        """The name sessions and reports know the model by (``openai:gpt-4o``)."""
        return f"{self.provider}:{self.model}"


def _invalid(message: str) -> ModelError:
    return ModelError(MODEL_CONFIG_INVALID, message)


def parse_model_spec(text: str) -> tuple[Provider, str]:
    """``PROVIDER:MODEL`` as ``(provider, model)``.

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID`` for an unknown provider or a missing model name.
    """
    provider, separator, model = text.strip().partition(":")
    if provider not in MODEL_PROVIDERS or not separator:
        choices = ", ".join(f"{name}:MODEL" for name in MODEL_PROVIDERS)
        raise _invalid(f"unknown model {text!r}; choose {choices}")
    if not model or len(model) > 200 or any(ord(c) < 0x21 or ord(c) == 0x7F for c in model):
        raise _invalid(f"{provider}:MODEL needs a model name without spaces, got {text!r}")
    return provider, model


def _key(spec: ModelSpec, environ: Mapping[str, str]) -> ApiKey | None:
    sources = [spec.api_key_env, spec.api_key_file, spec.api_key_fd]
    if sum(source is not None for source in sources) > 1:
        raise _invalid("give the API key one way: a variable, a file or a descriptor")
    if spec.api_key_file is not None:
        return api_key_from_file(spec.api_key_file)
    if spec.api_key_fd is not None:
        return api_key_from_descriptor(spec.api_key_fd)
    if spec.api_key_env is not None:
        return api_key_from_environment(spec.api_key_env, environ)
    variable = _KEY_VARIABLES.get(spec.provider)
    if variable is not None:
        return api_key_from_environment(variable, environ)
    # An OpenAI-compatible local server usually needs no key; use one when it is there.
    return api_key_from_environment("OPENAI_API_KEY", environ) if environ.get("OPENAI_API_KEY") else None


def model_factory(spec: ModelSpec, environ: Mapping[str, str]) -> Callable[[], ModelAdapter]:
    """A factory of adapters for ``spec``, everything checked now.

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID``: the key's variable is missing or empty (named),
            its file or descriptor is refused (named, see :func:`api_key_from_file`), more
            than one source of the key is given, the base URL is missing (``openai-compatible``),
            or refused (plain ``http://`` to a host that is not loopback without
            ``allow_insecure_http``).
    """
    base = spec.base_url if spec.base_url is not None else _DEFAULT_BASE_URLS.get(spec.provider)
    if base is None:
        raise _invalid("openai-compatible:MODEL needs a base URL (e.g. http://127.0.0.1:11434/v1)")
    url = check_base_url(base, allow_insecure_http=spec.allow_insecure_http)
    key = _key(spec, environ)
    model = spec.model
    insecure = spec.allow_insecure_http
    # One transport (one connection pool) for every adapter the factory makes: a server makes
    # one adapter per prompt, and each should reuse the provider's open connections.
    limits = spec.stream_limits
    transport = HttpSseTransport(spec.timeouts, max_response_bytes=limits.max_response_bytes)
    if spec.provider == "anthropic":
        return lambda: AnthropicModel(
            model,
            api_key=key,
            base_url=url,
            transport=transport,
            allow_insecure_http=insecure,
            stream_limits=limits,
        )
    # OpenAI's reasoning models take only max_completion_tokens; compatible servers read max_tokens.
    field: MaxTokensField = "max_completion_tokens" if spec.provider == "openai" else "max_tokens"
    return lambda: OpenAIChatModel(
        model,
        api_key=key,
        base_url=url,
        transport=transport,
        max_tokens_field=field,
        allow_insecure_http=insecure,
        stream_limits=limits,
    )
