"""The ports of the core: what the use cases need from the world, one module per concept.

Each port is a :class:`typing.Protocol`; the adapters in :mod:`functions.core.adapters`
(and the workflows' own) implement them, the fakes in the tests stand in for them.
The modules here import only the core's value types, never a use case, so any use case
may import any port.
"""
