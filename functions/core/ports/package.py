"""The ports of fetching a package from the MCP server a work item names."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from functions.core.deadline import Deadline
from functions.core.package import Package


class PackageSource(Protocol):
    """Port: fetches a package from the MCP server named by the work item."""

    async def get_package(self, mcp_url: str, package_id: str) -> Package: ...


@runtime_checkable
class AdmittingSource(Protocol):
    """A package source that holds a server's other messages back while one message
    probes it: told when a message has its package, so that one that replays its
    recorded package (no fetch) stops holding them back for the rest of its run."""

    def package_obtained(self, mcp_url: str) -> None: ...


class BatchPackageSource(PackageSource, Protocol):
    """A package source for one batch, which remembers the servers it could not reach."""

    def unreachable(self, mcp_url: str) -> bool:
        """Whether the server failed at transport level (refused, reset, TLS, timeout)."""
        ...


PackageSourceFactory = Callable[[Deadline], AbstractAsyncContextManager[BatchPackageSource]]
