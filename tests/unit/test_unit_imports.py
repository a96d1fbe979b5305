"""The unit tests load in seconds: collecting them imports neither the CDK (which starts
a Node process) nor the MCP SDK and the local stack. A test that needs one of them
belongs in tests/infra, tests/integration or tests/e2e."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).resolve().parent
ROOT = UNIT.parents[1]
HEAVY = ("aws_cdk", "jsii", "mcp", "local.stack")

_PROBE = """
import importlib, json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("test_*.py")):
    importlib.import_module("tests.unit." + path.stem)
print(json.dumps(sorted(sys.modules)))
"""


def test_collecting_the_unit_tests_imports_no_heavy_package() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(UNIT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded = json.loads(done.stdout.splitlines()[-1])
    heavy = sorted(
        {name for name in loaded for top in HEAVY if name == top or name.startswith(top + ".")}
    )
    assert heavy == []
