"""The base both halves of ``relaylink-receiver`` sit on: the local commands
(:mod:`local.commands`) and the operator commands (:mod:`ops.commands`).

Errors and their one-line form (:mod:`cli.errors`), JSON output, the local stack's
state file (:mod:`cli.state`). It imports ``functions`` and ``infra`` at most, never
``local`` or ``ops``, so ``local`` need not import ``ops`` nor ``ops`` take its base
from ``local``.
"""
