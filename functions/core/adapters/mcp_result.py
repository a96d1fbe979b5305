"""A ``get_package`` tool result, parsed into a :class:`Package` (or the error it is)."""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, TextContent

from functions.core.adapters.mcp_errors import (
    CODE_PACKAGE_MISMATCH,
    CODE_RESULT_INVALID,
    CODE_TOOL_ERROR,
)
from functions.core.errors import InvalidPackage, PackageNotFound, TransientError
from functions.core.package import Package


def package_from(result: CallToolResult, package_id: str) -> Package:
    """Structured content first, else the first text block that holds a JSON object."""
    if result.is_error:
        message = " ".join(block.text for block in result.content if isinstance(block, TextContent))
        if "not found" in message.lower():
            raise PackageNotFound()
        # The contract promises permanence only for "not found". Any other tool error
        # is the server failing on its side, which docs/contract.md says may be transient;
        # retrying costs a bounded number of attempts, giving up could lose a package.
        raise TransientError(CODE_TOOL_ERROR)
    data: Any = result.structured_content
    if data is None:
        data = _json_text(result)
    package = Package.from_mapping(data)
    if package.package_id != package_id:
        raise InvalidPackage(CODE_PACKAGE_MISMATCH)
    return package


def _json_text(result: CallToolResult) -> object:
    for block in result.content:
        if isinstance(block, TextContent):
            try:
                data: object = json.loads(block.text)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
    raise InvalidPackage(CODE_RESULT_INVALID)
