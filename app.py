"""CDK entry point: build the app and the stack, synthesize. Nothing else.

``cdk.json`` runs it with the system's ``python3``: where the CDK cannot be imported,
it hands over to the project's ``.venv`` (which ``make`` builds), or says what to run.
"""

import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

VENV = Path(__file__).resolve().parent / ".venv"
MIN_NODE_MAJOR = 22  # the CDK's supported releases (docs/deploy.md)
# A step quiet this long gets a "still ..." line: a synth is never silent for long.
HEARTBEAT_SECONDS = 10.0


class _Step:
    """The step the app is on, since when, and when a line last said so."""

    line = "starting"
    since = said = time.monotonic()


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
    threading.Thread(target=_heartbeat, name="cdk-app-heartbeat", daemon=True).start()
    _node_notice()
    _say("loading the CDK library and the stack's code (the first run compiles them)")
    # Both need the CDK: imported after the check.
    from infra import refusals  # noqa: PLC0415
    from infra.application import build_app  # noqa: PLC0415

    _say("building the stack: every function's asset is bundled (the first synth installs wheels)")
    try:
        app, _stack = build_app()
        _say("writing the cloud assembly (cdk-nag checks every resource)")
        app.synth()
    except Exception as error:  # a refusal may arrive wrapped by jsii: re-raised unless one
        # A refused setting or workflow is the deployer's to fix: one line, no traceback.
        refusal = error if isinstance(error, refusals.REFUSALS) else refusals.noted()
        if refusal is None:
            raise
        sys.exit(f"cdk app: error: {refusal}")
    _say("synthesized")


def _node_notice() -> None:
    """One line about an end-of-life Node instead of jsii's boxed notice (which the
    CLI's pipe turns into Python byte strings)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")
    try:
        major = int(
            subprocess.run(
                # The node on PATH: the one jsii itself runs.
                ["node", "-p", "process.versions.node.split('.')[0]"],  # noqa: S607
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return  # jsii reports a missing or broken node itself
    if major < MIN_NODE_MAJOR:
        _say(f"warning: Node {major} is end-of-life for the CDK; deploy with Node 22 or 24")


def _say(line: str) -> None:
    _Step.line, _Step.since = line, time.monotonic()
    _Step.said = _Step.since
    print(f"cdk app: {line}", file=sys.stderr, flush=True)


def _heartbeat(stop: threading.Event | None = None) -> None:
    """A line for a step that has been quiet for HEARTBEAT_SECONDS (until ``stop``)."""
    ticker = stop or threading.Event()
    while not ticker.wait(HEARTBEAT_SECONDS / 2):
        now = time.monotonic()
        if now - _Step.said >= HEARTBEAT_SECONDS:
            _Step.said = now
            step, took = _Step.line.split(" (", maxsplit=1)[0], now - _Step.since
            print(f"cdk app: still {step} ({took:.0f} s)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
