"""A team's own CDK app that adds the RelayLink receiver to one of its stacks."""

from aws_cdk import App, Stack, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import StackConfig
from infra.relaylink_receiver import RelayLinkReceiver

app = App()
stack = Stack(app, "MyTeamStack")
RelayLinkReceiver(
    stack,
    "Webhooks",
    config=StackConfig(
        stage="team",
        workflow="agent",
        workflow_settings={"model_id": "anthropic.claude-3-5-haiku-20241022-v1:0"},
        mcp_allowed_hosts=("*.relaylink.example",),
        inbox_retention_days=14,
        worker_memory_mb=1024,
        worker_max_concurrency=10,
        alarm_email="oncall@example.com",
    ),
)
Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
