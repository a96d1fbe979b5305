"""The environment that keeps a test or bench run away from any real AWS account."""

from __future__ import annotations

from functions.core import env_names, metric_names
from local.testkit.moto_world import REGION

# Values to set: dummy credentials and a fixed region.
OFFLINE_VARIABLES = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    # botocore >= 1.44.4 sends some calls to account-specific endpoints moto does not catch.
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}
# Variables to remove: they would point the clients at a real profile or endpoint.
REMOVED_VARIABLES = ("AWS_PROFILE", "AWS_ENDPOINT_URL")
# Set only when absent: Powertools' metrics need a namespace.
DEFAULT_VARIABLES = {env_names.ENV_POWERTOOLS_METRICS_NAMESPACE: metric_names.METRICS_NAMESPACE}
