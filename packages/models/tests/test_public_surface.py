"""Pins the public surface of harness-models: names, codes, and that errors keep secrets out."""

from __future__ import annotations

import pickle

import pytest

import harness_models
from harness_models import MODEL_ERROR_CODES, ModelError
from harness_models._wire import ApiKey

EXPECTED_NAMES = {
    "ANTHROPIC_API_VERSION",
    "AnthropicModel",
    "OPENAI_BASE_URL",
    "OpenAIChatModel",
    "stream_with_retries",
    "api_key_from_environment",
    "api_key_from_file",
    "api_key_from_descriptor",
    "check_base_url",
    "MODEL_PROVIDERS",
    "ModelSpec",
    "model_factory",
    "parse_model_spec",
    "SseParser",
    "HttpSseTransport",
    "ApiKey",
    "RetryPolicy",
    "SseEvent",
    "SseTransport",
    "Timeouts",
    "StreamLimits",
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
    "MODEL_STREAM_TOO_LARGE",
    "MODEL_TIMEOUT",
    "MODEL_TOOL_ARGUMENTS_INVALID",
    "ModelError",
    "__version__",
}


def test_the_public_names_are_exactly_these() -> None:
    assert set(harness_models.__all__) == EXPECTED_NAMES


def test_every_code_is_its_own_name() -> None:
    for code in MODEL_ERROR_CODES:
        assert getattr(harness_models, code) == code


def test_an_unknown_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown model error code"):
        ModelError("MODEL_WHATEVER", "x")


def test_an_api_key_never_shows_itself() -> None:
    key = ApiKey("sk-test-1234567890")
    assert "sk-test" not in repr(key)
    assert "sk-test" not in str(key)
    assert "sk-test" not in f"{key!r} {key}"
    assert key.reveal() == "sk-test-1234567890"
    with pytest.raises(TypeError):
        pickle.dumps(key)


@pytest.mark.parametrize("value", ["", "   ", "a b", "key\n", "ключ"])
def test_an_api_key_must_be_printable_ascii(value: str) -> None:
    with pytest.raises(ValueError, match="printable ASCII"):
        ApiKey(value)
