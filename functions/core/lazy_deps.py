"""A handler's dependencies, built on first use and kept for the container's life.

Building them reads the environment and creates clients, so it happens at the first
invocation rather than at import (nothing touches AWS at import). The lock matters
where invocations overlap in one process (the local runtime runs them in threads):
the dependencies are then built once, not once per thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyDeps(Generic[T]):
    """Holds one value, built by ``factory`` when first asked for."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        """The value, built now if it was not built (or was reset).

        Raises:
            Whatever ``factory`` raises (e.g. ``SettingsError``); the next call tries again.
        """
        with self._lock:
            if self._value is None:
                self._value = self._factory()
            return self._value

    def set(self, value: T) -> None:
        """Use ``value`` from now on (tests and the local runtime wire their own)."""
        with self._lock:
            self._value = value

    def reset(self) -> None:
        """Forget the value: the next :meth:`get` builds it again from ``factory``."""
        with self._lock:
            self._value = None
