"""``relaylink-receiver console``: a local web console over the operator functions.

:mod:`ops.console.reads` gathers what the pages show (typed values, no HTML),
:mod:`ops.console.views` renders them (pure functions: values in, HTML out),
:mod:`ops.console.routes` maps a request to a page or an action and guards both,
:mod:`ops.console.server` serves it on 127.0.0.1 with the standard library.
"""
