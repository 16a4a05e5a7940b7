"""Storage faults: a locked, full or damaged file, told from a bug and skipped."""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Final

from ..const import LOGGER

if TYPE_CHECKING:
    from collections.abc import Callable

# After a fault the file is left alone for this long, so a locked or full
# database costs one timeout, not one per call.
FAULT_BACKOFF: Final = 15.0  # seconds


class StorageUnavailableError(sqlite3.OperationalError):
    """The file is locked, full, damaged or slow; skipped for a while."""


def is_storage_fault(err: BaseException) -> bool:
    """Tell a fault of the file (lock, disk, damage) from a bug in a query."""
    if isinstance(err, StorageUnavailableError | TimeoutError):
        return True
    if isinstance(err, sqlite3.OperationalError):
        text = str(err)
        return any(
            word in text
            for word in ("locked", "busy", "full", "disk", "I/O", "readonly", "open")
        )
    # Plain DatabaseError: "file is not a database", "disk image is malformed".
    return type(err) is sqlite3.DatabaseError


def is_corruption(err: BaseException) -> bool:
    """Tell a damaged file from one that is only locked or on a full disk."""
    if isinstance(err, sqlite3.OperationalError):
        return False
    return type(err) is sqlite3.DatabaseError


class FaultGate:
    """Skip a file for a while after a fault; report the change both ways."""

    def __init__(self, name: str) -> None:
        """Start out assuming the file works (it was opened)."""
        self.name = name
        self.skip_until = 0.0
        self.failing = False
        self.last_error: str | None = None
        # Called on the event loop with (working, reason); raises repairs.
        self.on_change: Callable[[bool, str], None] | None = None

    def check(self) -> None:
        """Raise while the file is being skipped."""
        if time.monotonic() < self.skip_until:
            msg = f"The {self.name} is unavailable: {self.last_error}"
            raise StorageUnavailableError(msg)

    def failed(self, reason: str) -> None:
        """Record a fault; log and report only the first of an outage."""
        self.skip_until = time.monotonic() + FAULT_BACKOFF
        self.last_error = reason
        if not self.failing:
            self.failing = True
            LOGGER.warning("The %s is unavailable: %s", self.name, reason)
            if self.on_change is not None:
                self.on_change(False, reason)  # noqa: FBT003

    def succeeded(self, *, wrote: bool = True) -> None:
        """Record a call that worked; report a recovery once a write worked.

        A file that can be read but not written (a full disk) answers reads:
        they end the skip but leave the outage (and its repair issue) standing.
        """
        if not self.failing:
            return
        self.skip_until = 0.0
        if not wrote:
            return
        self.failing = False
        LOGGER.info("The %s works again", self.name)
        if self.on_change is not None:
            self.on_change(True, "")  # noqa: FBT003
