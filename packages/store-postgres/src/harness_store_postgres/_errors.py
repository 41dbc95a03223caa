"""The store's one error of its own: the database could not be reached."""

from __future__ import annotations

from typing import Final

from harness_kernel.store import SessionStoreError

__all__ = ["SESS_UNAVAILABLE", "StoreUnavailableError"]

SESS_UNAVAILABLE: Final = "SESS_UNAVAILABLE"


class StoreUnavailableError(SessionStoreError):
    """The database could not be reached, or the connection broke during the operation.

    ``code`` is ``SESS_UNAVAILABLE``. A write that fails so may or may not have committed
    (the connection can break while ``COMMIT`` is on its way): retrying an append with the
    same event id returns the stored event if it did, and stores it if it did not. The
    store reconnects for the next operation; it stays open.
    """

    def __init__(self, message: str) -> None:
        super().__init__(SESS_UNAVAILABLE, message)
