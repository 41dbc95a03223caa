"""harness-models: real model providers behind the kernel's ``ModelAdapter`` port.

Network access is host authority: it lives in this adapter distribution, never in the kernel
or the tools (the import-boundary check keeps ``socket``, ``ssl``, ``http``, ``urllib`` and
``httpx`` out of them).
"""

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
    MODEL_TIMEOUT,
    MODEL_TOOL_ARGUMENTS_INVALID,
    ModelError,
)
from harness_models._version import __version__

__all__ = [
    "MODEL_AUTH_FAILED",
    "MODEL_BAD_REQUEST",
    "MODEL_CONFIG_INVALID",
    "MODEL_CONNECTION_FAILED",
    "MODEL_ERROR_CODES",
    "MODEL_NOT_FOUND",
    "MODEL_OVERLOADED",
    "MODEL_PROVIDER_ERROR",
    "MODEL_RATE_LIMITED",
    "MODEL_SERVER_ERROR",
    "MODEL_STREAM_INVALID",
    "MODEL_TIMEOUT",
    "MODEL_TOOL_ARGUMENTS_INVALID",
    "ModelError",
    "__version__",
]
