"""What a cold start at DEBUG leaves in place, seen through what reaches Lambda's handler.

Run inside an emulated Lambda container (:mod:`tests.integration.lambda_container`)
at ``log_level=DEBUG``, after the worker's and the receiver's handlers are imported
(their cold start): the adapters load the MCP token and the signing secrets from
Secrets Manager (moto), then loggers of every kind log them, as a careless library
would. The parent reads the output.
"""

from __future__ import annotations

import json
import logging

from functions.core.adapters.mcp_token import SecretsManagerMcpToken
from functions.core.adapters.signing_secrets import SecretsManagerSigningSecrets
from functions.receiver import handler as receiver  # noqa: F401 (its cold start)
from functions.worker import handler as worker  # noqa: F401 (its cold start)
from local.testkit import builders
from local.testkit.moto_world import moto_world

# A token with no prefix and no shape: only its value can find it.
TOKEN = "Qx7vL2pR9wZk4mT8sN3bYc"
# A library the functions do not hold at WARNING: it logs at the root logger's level.
UNHELD_LIBRARY = "somelibrary.client"
HELD_LIBRARY = "botocore.parsers"


def run() -> None:
    with moto_world() as world:
        token_arn = world.create_secret(TOKEN)
        signing_arn = world.create_secret(json.dumps([builders.SECRET]))
        SecretsManagerMcpToken(
            secret_arn=token_arn, max_age_seconds=300, client=world.secretsmanager
        )()
        SecretsManagerSigningSecrets(
            secret_arn=signing_arn, max_age_seconds=300, client=world.secretsmanager
        ).current()
    body = json.dumps({"SecretString": TOKEN}).encode()
    unheld = logging.getLogger(UNHELD_LIBRARY)
    unheld.debug("response body: %r", body)  # bytes: masked only once formatted
    unheld.debug("headers", extra={"headers": {"Authorization": f"Bearer {TOKEN}"}})
    unheld.debug("secret %s", builders.SECRET.removeprefix("whsec_"))
    logging.getLogger(HELD_LIBRARY).debug("response body: %r", body)
