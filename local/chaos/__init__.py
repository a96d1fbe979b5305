"""Fault injection against the local stack: a seeded load, kills and faults, then invariants.

:func:`run_chaos` starts a :class:`~local.stack.LocalStack` and, while the RelayLink
simulator (:mod:`local.sender`) sends its load (:mod:`local.chaos.plan`,
:mod:`local.chaos.load`), SIGKILLs the front door and the worker process at seeded
moments and injects faults: DynamoDB throttling and internal errors
(:mod:`local.aws_emulator`), MCP 503s and responses slower than the worker's MCP
timeout (:mod:`local.mcp_server`), and relay invocations that fail before the handler
(:mod:`local.event_sources`). Then it turns the faults off, waits until the system is
quiet and checks every invariant (:mod:`local.chaos.invariants`); the result is a
:class:`ChaosReport` (:mod:`local.chaos.report`). ``docs/reliability.md`` explains each
check and publishes the figures of a large run. Import what you use from its modules
(:mod:`local.chaos.run`, :mod:`local.chaos.config`): a test that reads one part does not
start the whole stack's imports.
"""
