"""One module per ``relaylink-receiver`` subcommand (see :mod:`local.cli`)."""
