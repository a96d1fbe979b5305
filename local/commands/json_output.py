"""The one way every ``--json`` option prints: indented, keys sorted (stable for diffs)."""

from __future__ import annotations

import json
from typing import Any


def print_json(document: Any) -> None:
    print(json.dumps(document, indent=2, sort_keys=True))
