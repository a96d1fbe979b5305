"""``python -m bench.async_peer.server --port P``: the asynchronous peer's receiver over
HTTP, through the local stack's own front door (as the baseline's)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from local.child import install_stop_signals
from local.front_door import serve


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.async_peer.server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    install_stop_signals()
    from bench.async_peer import receiver  # noqa: PLC0415 (pay the cold start before serving)

    serve(receiver.lambda_handler, port=args.port, ready_file=args.ready_file, name="peer")
    return 0


if __name__ == "__main__":
    main()
