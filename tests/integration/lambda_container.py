"""A Lambda container, emulated in this process.

``python -m tests.integration.lambda_container MODULE``, run with the environment
Lambda would give a function (``local.function_environments.lambda_log_environment``).
Lambda's log handling
(:mod:`local.lambda_logging`) is installed first, before any handler module is
imported, as Lambda's runtime does; then ``MODULE``'s ``run()`` drives the handlers.
What this process writes to stdout is what Lambda would send to CloudWatch Logs.
moto runs in this process too, but stands for AWS's side: its loggers stay at WARNING.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence

from local import lambda_logging


def main(argv: Sequence[str]) -> None:
    lambda_logging.install()
    logging.getLogger("moto").setLevel(logging.WARNING)
    importlib.import_module(argv[0]).run()
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
