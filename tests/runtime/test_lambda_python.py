"""The interpreter running this folder is the one the Lambda functions run on.

``make test-lambda`` (part of ``make test``) runs the functions' unit and integration
tests in ``.venv-lambda``, built on ``python<LAMBDA_PYTHON_VERSION>``, together with this
folder: the run fails if that venv is built on another minor, or if the runtime moves
(``infra.bundle.LAMBDA_PYTHON_VERSION``, which ``tests/infra`` ties to the functions'
``Runtime``) and the venv does not. The default suite leaves this folder out
(``--ignore`` in pyproject.toml): the development venv runs on the oldest Python the
project supports.
"""

from __future__ import annotations

import sys

from infra.bundle import LAMBDA_PYTHON_VERSION


def test_this_interpreter_is_the_lambda_runtimes_python() -> None:
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert running == LAMBDA_PYTHON_VERSION, (
        f"the functions' tests ran on Python {running}; Lambda runs {LAMBDA_PYTHON_VERSION}"
    )
