"""The store's errors of its own: the database could not be reached; its tables are not the store's."""

from __future__ import annotations

from typing import Final

from harness_kernel.store import SessionStoreError

__all__ = ["SESS_SCHEMA_OWNER", "SESS_UNAVAILABLE", "SchemaOwnerError", "StoreUnavailableError"]

SESS_UNAVAILABLE: Final = "SESS_UNAVAILABLE"
SESS_SCHEMA_OWNER: Final = "SESS_SCHEMA_OWNER"


class StoreUnavailableError(SessionStoreError):
    """The database could not be reached, or the connection broke during the operation.

    ``code`` is ``SESS_UNAVAILABLE``. A write that fails so may or may not have committed
    (the connection can break while ``COMMIT`` is on its way): retrying an append with the
    same event id returns the stored event if it did, and stores it if it did not. The
    store reconnects for the next operation; it stays open.
    """

    def __init__(self, message: str) -> None:
        super().__init__(SESS_UNAVAILABLE, message)


class SchemaOwnerError(SessionStoreError):
    """A table of the store's names, or the schema holding them, belongs to a role not trusted.

    ``code`` is ``SESS_SCHEMA_OWNER``. Another role that owns a store table can read every
    event and change or drop rows behind the store's back, so the store refuses to start
    before it reads or writes anything. Raised at start-up (the first operation or
    ``async with``); the database is left as it was.
    """

    def __init__(self, message: str) -> None:
        super().__init__(SESS_SCHEMA_OWNER, message)
