"""``python -m bench.baseline.server --port P``: the baseline receiver over HTTP.

Served by the local stack's own front door (:func:`local.front_door.serve`): each
POST becomes the API Gateway HTTP API event and goes into the handler, so both
receivers are measured through the same door.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from local.child import install_stop_signals
from local.front_door import serve


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.baseline.server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    install_stop_signals()  # serve() leaves with the parent
    from bench.baseline import handler  # noqa: PLC0415 (pay the cold start before serving)

    # RelayLink's answer deadline: Powertools sets the in-progress expiry from it.
    serve(
        handler.lambda_handler,
        port=args.port,
        ready_file=args.ready_file,
        name="baseline",
        remaining_ms=10_000,
    )
    return 0


if __name__ == "__main__":
    main()
