"""The one way the CLI writes JSON (``--json``, ``chaos --report``): indented, keys sorted,
so that output is stable for scripts and diffs."""

from __future__ import annotations

import json
from typing import Any


def json_text(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=True)


def print_json(document: Any) -> None:
    print(json_text(document))
