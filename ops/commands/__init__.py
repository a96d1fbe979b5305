"""One module per operator subcommand of ``relaylink-receiver`` (see :mod:`ops.cli`)."""
