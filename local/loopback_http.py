"""An HTTP server on loopback: quiet about callers that vanish, and answering without
Nagle's delay.

The worker side is killed on purpose (chaos, the demo), and a browser drops
connections it no longer needs (the operator console): a request then ends in a
reset, which the standard library's server reports with a traceback on stderr. That
is the expected end of such a caller, not an error.

``http.server`` writes an answer's headers and its body in two sends. With Nagle's
algorithm on, the body waits for the headers' ACK, which the caller delays by up to
40 ms on Linux: every answer took about 44 ms however fast the handler was.
"""

from __future__ import annotations

import socket
import sys
from http.server import ThreadingHTTPServer


class LoopbackHTTPServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` in daemon threads, silent when a caller drops the line."""

    daemon_threads = True  # a call sleeping out its latency must not hold exit

    def get_request(self) -> tuple[socket.socket, object]:
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # reset or broken pipe: the caller was killed or gave up
        super().handle_error(request, client_address)  # type: ignore[arg-type]
