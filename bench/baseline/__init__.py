"""The usual way, for comparison only (figure 5; never shipped, nothing imports it).

A receiver as one would write it without this project's design: verify the
signature, deduplicate with Powertools' ``@idempotent_function`` on DynamoDB, fetch
the package over MCP and run the same default workflow, all inside the request.
"""
