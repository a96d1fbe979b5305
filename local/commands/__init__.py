"""One module per ``relaylink-receiver`` subcommand that runs or drives the local stack.

The CLI (:mod:`ops.cli`) registers these and the operator commands (:mod:`ops.commands`).
The errors every command raises and the one formatter of the lines the CLI prints
about them live below both, in :mod:`cli.errors`.
"""
