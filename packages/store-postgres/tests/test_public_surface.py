"""harness-store-postgres's public surface: exactly these names, each documented."""

from __future__ import annotations

import inspect

import harness_store_postgres
from harness_kernel.store import SessionStoreError
from harness_store_postgres import (
    SESS_SCHEMA_OWNER,
    SESS_UNAVAILABLE,
    SchemaOwnerError,
    StoreUnavailableError,
)

EXPECTED = {
    "READERS_MAX",
    "SCHEMA_VERSION",
    "SESS_SCHEMA_OWNER",
    "SESS_UNAVAILABLE",
    "PostgresSessionStore",
    "SchemaOwnerError",
    "StoreUnavailableError",
}


def test_the_public_names_are_exactly_these() -> None:
    assert set(harness_store_postgres.__all__) == EXPECTED
    assert all(hasattr(harness_store_postgres, name) for name in EXPECTED)


def test_every_public_class_and_function_has_a_docstring() -> None:
    for name in EXPECTED:
        value = getattr(harness_store_postgres, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name


def test_the_unavailable_error_is_a_session_store_error_with_its_code() -> None:
    error = StoreUnavailableError("down")
    assert isinstance(error, SessionStoreError)
    assert error.code == SESS_UNAVAILABLE == "SESS_UNAVAILABLE"


def test_the_schema_owner_error_is_a_session_store_error_with_its_code() -> None:
    error = SchemaOwnerError("planted")
    assert isinstance(error, SessionStoreError)
    assert error.code == SESS_SCHEMA_OWNER == "SESS_SCHEMA_OWNER"
