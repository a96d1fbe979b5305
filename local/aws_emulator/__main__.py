"""``python -m local.aws_emulator``: serve AWS on loopback until stopped."""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Sequence

from local.aws_emulator.gate import ACCESS_KEY_ENV, AwsEmulator
from local.child import Stop, announce_ready, exit_with_parent, install_stop_signals, quiet_exit


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.aws_emulator", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    install_stop_signals()
    exit_with_parent()
    access_key_id = os.environ.pop(ACCESS_KEY_ENV, None) or None
    emulator = AwsEmulator(port=args.port, seed=args.seed, access_key_id=access_key_id)
    emulator.start()
    announce_ready(args.ready_file)
    with contextlib.suppress(Stop):
        while True:
            time.sleep(3600)
    quiet_exit()
    return 0


if __name__ == "__main__":
    main()
