"""CDK entry point: build the app and the stack, synthesize. Nothing else.

``cdk.json`` runs it with the system's ``python3``: where the CDK cannot be imported,
it hands over to the project's ``.venv`` (which ``make`` builds), or says what to run.
"""

import importlib.util
import os
import sys
from pathlib import Path

VENV = Path(__file__).resolve().parent / ".venv"


def _in_an_interpreter_with_the_cdk() -> None:
    if importlib.util.find_spec("aws_cdk") is not None:
        return
    python = VENV / "bin" / "python"
    if not python.exists():
        sys.exit(f"cdk app: {VENV} is missing; run `make` in {VENV.parent} first (it builds it)")
    if Path(sys.prefix).resolve() == VENV.resolve():
        sys.exit(
            f"cdk app: {VENV} has no CDK (`make demo` installs the demo's packages only); "
            f"run `make` in {VENV.parent} first"
        )
    os.execv(python, [str(python), __file__, *sys.argv[1:]])  # noqa: S606 (the project's venv)


def main() -> None:
    _in_an_interpreter_with_the_cdk()
    from infra.application import build_app  # noqa: PLC0415 (needs the CDK: after the check)
    from infra.bundle import BundleError  # noqa: PLC0415
    from infra.config import ConfigError  # noqa: PLC0415
    from infra.workflow_code import WorkflowCodeError  # noqa: PLC0415

    try:
        app, _stack = build_app()
    except (ConfigError, WorkflowCodeError, BundleError) as exc:
        # A setting or a workflow folder the synth refuses: one line naming it.
        sys.exit(f"cdk app: {exc}")
    app.synth()


if __name__ == "__main__":
    main()
