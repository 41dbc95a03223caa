"""harness-models: real model providers behind the kernel's ``ModelAdapter`` port.

Network access is host authority: it lives in this adapter distribution, never in the kernel
or the tools (the import-boundary check keeps ``socket``, ``ssl``, ``http``, ``urllib`` and
``httpx`` out of them).
"""

from harness_models._anthropic import ANTHROPIC_API_VERSION, AnthropicModel
from harness_models._errors import (
    MODEL_AUTH_FAILED,
    MODEL_BAD_REQUEST,
    MODEL_CONFIG_INVALID,
    MODEL_CONNECTION_FAILED,
    MODEL_ERROR_CODES,
    MODEL_NOT_FOUND,
    MODEL_OVERLOADED,
    MODEL_PROVIDER_ERROR,
    MODEL_RATE_LIMITED,
    MODEL_SERVER_ERROR,
    MODEL_STREAM_INVALID,
    MODEL_STREAM_TOO_LARGE,
    MODEL_TIMEOUT,
    MODEL_TOOL_ARGUMENTS_INVALID,
    ModelError,
)
from harness_models._openai import OPENAI_BASE_URL, OpenAIChatModel
from harness_models._retry import stream_with_retries
from harness_models._secrets import (
    api_key_from_descriptor,
    api_key_from_environment,
    api_key_from_file,
    check_base_url,
)
from harness_models._spec import MODEL_PROVIDERS, ModelSpec, model_factory, parse_model_spec
from harness_models._sse import SseParser
from harness_models._transport import HttpSseTransport
from harness_models._version import __version__
from harness_models._wire import ApiKey, RetryPolicy, SseEvent, SseTransport, StreamLimits, Timeouts

__all__ = [
    "ANTHROPIC_API_VERSION",
    "MODEL_AUTH_FAILED",
    "MODEL_BAD_REQUEST",
    "MODEL_CONFIG_INVALID",
    "MODEL_CONNECTION_FAILED",
    "MODEL_ERROR_CODES",
    "MODEL_NOT_FOUND",
    "MODEL_OVERLOADED",
    "MODEL_PROVIDERS",
    "MODEL_PROVIDER_ERROR",
    "MODEL_RATE_LIMITED",
    "MODEL_SERVER_ERROR",
    "MODEL_STREAM_INVALID",
    "MODEL_STREAM_TOO_LARGE",
    "MODEL_TIMEOUT",
    "MODEL_TOOL_ARGUMENTS_INVALID",
    "OPENAI_BASE_URL",
    "AnthropicModel",
    "ApiKey",
    "HttpSseTransport",
    "ModelError",
    "ModelSpec",
    "OpenAIChatModel",
    "RetryPolicy",
    "SseEvent",
    "SseParser",
    "SseTransport",
    "StreamLimits",
    "Timeouts",
    "__version__",
    "api_key_from_descriptor",
    "api_key_from_environment",
    "api_key_from_file",
    "check_base_url",
    "model_factory",
    "parse_model_spec",
    "stream_with_retries",
]
