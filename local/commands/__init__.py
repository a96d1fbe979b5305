"""One module per ``relaylink-receiver`` subcommand that runs or drives the local stack.

The CLI (:mod:`ops.cli`) registers these and the operator commands (:mod:`ops.commands`).
"""


class CommandError(Exception):
    """A failure the user can act on: printed as one line, exit status 2.

    Here, at the bottom of the CLI, so that the local and the operator commands can
    both raise it without ``local`` importing ``ops``.
    """
