"""Each function's role holds exactly what the stack grants it, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack

from functions.core import steps, table_layout
from infra.worker import guardrail_arn
from tests.infra.conftest import (
    NOTIFY_URL,
    Grant,
    Synthesized,
    get_att,
    ref,
    resource_key,
    role_denials,
    role_grants,
    role_statements,
    synthesize,
)

XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
# Exactly the DynamoDB calls each function's code makes (tests/infra/test_table_access.py
# derives them from the adapters): a transaction of Puts is PutItem, a Query by index
# is allowed on that index alone.
RECEIVER_TABLE = {"dynamodb:PutItem"}
WORKER_TABLE = {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
# BatchGetItem: the state index holds keys only, and a listing reads its items by key.
# It is a read; it can neither delete nor overwrite an item.
# Query on the table itself: the received log (the outbox records, read by their keys);
# its watermark is an UpdateItem (no PutItem: one could overwrite a receipt).
RECONCILER_TABLE = {
    "dynamodb:GetItem",
    "dynamodb:UpdateItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
}
RECONCILER_INDEX = {"dynamodb:Query"}
# What no function may hold: deleting an inbox item (or overwriting items in bulk)
# would let a retried delivery be accepted and run a second time.
FORBIDDEN_TABLE_ACTIONS = {
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:Scan",
    "dynamodb:DescribeTable",
    "dynamodb:PartiQLDelete",
    "dynamodb:PartiQLInsert",
    "dynamodb:PartiQLSelect",
    "dynamodb:PartiQLUpdate",
}
STREAM_READ = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
SECRET_READ = {"secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"}
QUEUE_SEND = {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
QUEUE_CONSUME = {
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}
BUCKET_PUT = {
    "s3:PutObject",
    "s3:PutObjectLegalHold",
    "s3:PutObjectRetention",
    "s3:PutObjectTagging",
    "s3:PutObjectVersionTagging",
    "s3:Abort*",
}
# Step results above the record's limit are read back by digest, from under one prefix.
STEP_RESULTS_READ = {"s3:GetObject"}
ALERT_PUBLISH = {"sns:Publish"}
# Wildcards that only grant_* / CDK itself generate, each acknowledged in cdk-nag.
ALLOWED_WILDCARD_ACTIONS = {"s3:Abort*"}
ACTIONS_WITHOUT_RESOURCE_ARNS = XRAY | {"dynamodb:ListStreams"}


def _grants(actions: set[str], *resources: Any) -> set[Grant]:
    return {(a, resource_key(r)) for a in actions for r in resources}


def _ids(synthesized: Synthesized) -> dict[str, str]:
    stack = synthesized.stack
    return {
        "table": synthesized.logical_id(stack.table.table),
        "queue": synthesized.logical_id(stack.queues.queue),
        "dlq": synthesized.logical_id(stack.queues.dead_letter_queue),
        "failures": synthesized.logical_id(stack.relay.failure_queue),
        "signing": synthesized.logical_id(stack.secrets.signing_secrets.secret),
        "token": synthesized.logical_id(stack.secrets.mcp_token.secret),
        "bucket": synthesized.logical_id(stack.archive.bucket),
        "alerts": synthesized.logical_id(stack.alerts.topic),
    }


def _own_logs(synthesized: Synthesized, function: str) -> set[Grant]:
    group = synthesized.function(function)["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    # X-Ray's write actions come only with tracing on (off by default, -c tracing=true).
    xray = _grants(XRAY, "*") if synthesized.context.get("tracing") == "true" else set()
    return _grants(LOGS, get_att(group, "Arn")) | xray


def _state_index(table: str) -> Any:
    return {"Fn::Join": ["", [get_att(table, "Arn"), f"/index/{table_layout.STATE_INDEX}"]]}


def test_receiver_may_put_items_and_read_its_signing_secret_only(
    synthesized: Synthesized,
) -> None:
    ids = _ids(synthesized)
    assert role_grants(synthesized, "receiver") == (
        _own_logs(synthesized, "receiver")
        | _grants(RECEIVER_TABLE, get_att(ids["table"], "Arn"))
        | _grants(SECRET_READ, ref(ids["signing"]))
    )


def test_relay_reads_the_stream_and_sends_to_the_work_queue_only(
    synthesized: Synthesized,
) -> None:
    ids = _ids(synthesized)
    assert role_grants(synthesized, "relay") == (
        _own_logs(synthesized, "relay")
        | _grants(STREAM_READ, get_att(ids["table"], "StreamArn"))
        | _grants({"dynamodb:ListStreams"}, "*")
        | _grants(QUEUE_SEND, get_att(ids["queue"], "Arn"), get_att(ids["failures"], "Arn"))
    )


def _objects(bucket: str, pattern: str) -> Any:
    return {"Fn::Join": ["", [get_att(bucket, "Arn"), f"/{pattern}"]]}


def worker_base_grants(synthesized: Synthesized) -> set[Grant]:
    """What the worker holds whatever the workflow."""
    ids = _ids(synthesized)
    return (
        _own_logs(synthesized, "worker")
        | _grants(WORKER_TABLE, get_att(ids["table"], "Arn"))
        | _grants(QUEUE_CONSUME, get_att(ids["queue"], "Arn"))
        | _grants(QUEUE_SEND, get_att(ids["queue"], "Arn"), get_att(ids["dlq"], "Arn"))
        | _grants(SECRET_READ, ref(ids["token"]))
        | _grants(BUCKET_PUT, _objects(ids["bucket"], "*"))
        | _grants(STEP_RESULTS_READ, _objects(ids["bucket"], f"{steps.RESULT_OBJECT_PREFIX}*"))
        | _grants(ALERT_PUBLISH, ref(ids["alerts"]))
    )


def test_worker_grants(synthesized: Synthesized) -> None:
    assert role_grants(synthesized, "worker") == worker_base_grants(synthesized)


def test_the_worker_may_not_decide_an_approval_nor_rewrite_a_proposal(
    synthesized: Synthesized,
) -> None:
    """Code running in the worker (a model's tool, a poisoned dependency) could otherwise
    write ``decision = approved`` on its own parked call. The reconciler keeps its
    update: the timeout's denial is its write."""
    table = get_att(_ids(synthesized)["table"], "Arn")
    assert role_denials(synthesized, "worker") == [
        {
            "Effect": "Deny",
            "Action": ["dynamodb:PutItem", "dynamodb:UpdateItem"],
            "Resource": table,
            "Condition": {
                "ForAnyValue:StringEquals": {
                    "dynamodb:Attributes": list(table_layout.APPROVAL_DECISION_ATTRIBUTES)
                }
            },
        },
        {
            "Effect": "Deny",
            "Action": "dynamodb:UpdateItem",
            "Resource": table,
            "Condition": {
                "ForAnyValue:StringEquals": {
                    "dynamodb:Attributes": list(table_layout.APPROVAL_PROPOSAL_ATTRIBUTES)
                }
            },
        },
    ]
    assert {"decision", "decided_by"} <= set(table_layout.APPROVAL_DECISION_ATTRIBUTES)
    for function in ("receiver", "relay", "reconciler"):
        assert role_denials(synthesized, function) == [], function


def test_reconciler_grants(synthesized: Synthesized) -> None:
    ids = _ids(synthesized)
    assert role_grants(synthesized, "reconciler") == (
        _own_logs(synthesized, "reconciler")
        | _grants(RECONCILER_TABLE, get_att(ids["table"], "Arn"))
        | _grants(RECONCILER_INDEX, _state_index(ids["table"]))
        | _grants(QUEUE_SEND, get_att(ids["queue"], "Arn"))
    )


def test_no_function_may_delete_scan_or_batch_write(synthesized: Synthesized) -> None:
    for function in ("receiver", "relay", "worker", "reconciler"):
        actions = {action for action, _ in role_grants(synthesized, function)}
        assert actions & FORBIDDEN_TABLE_ACTIONS == set(), function
        assert not any(a.startswith("dynamodb:PartiQL") for a in actions), function


def test_no_wildcards_beyond_what_grants_generate(synthesized: Synthesized) -> None:
    for function in ("receiver", "relay", "worker", "reconciler"):
        for action, resource in role_grants(synthesized, function):
            assert "*" not in action or action in ALLOWED_WILDCARD_ACTIONS, (function, action)
            if resource == resource_key("*"):
                assert action in ACTIONS_WITHOUT_RESOURCE_ARNS, (function, action)


def test_only_the_worker_can_read_the_mcp_token(synthesized: Synthesized) -> None:
    token = resource_key(ref(_ids(synthesized)["token"]))
    readers = {
        function
        for function in ("receiver", "relay", "worker", "reconciler")
        if any(resource == token for _, resource in role_grants(synthesized, function))
    }
    assert readers == {"worker"}


# The deployer's own secrets, each encrypted with its own customer managed key (the
# token's key in another account, as a shared key may be).
OWN_SIGNING = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink/signing-AbC123"
OWN_TOKEN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink/token-XyZ789"
SIGNING_KEY = "arn:aws:kms:eu-west-1:123456789012:key/1f2e3d4c-5b6a-4789-8abc-def012345678"
TOKEN_KEY = "arn:aws:kms:eu-west-1:210987654321:key/mrk-0123456789abcdef0123456789abcdef"
VIA_SECRETS_MANAGER = {"StringEquals": {"kms:ViaService": "secretsmanager.eu-west-1.amazonaws.com"}}


@pytest.fixture(scope="module")
def own_secrets(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(
        tmp_path_factory,
        {
            "notify_url": NOTIFY_URL,
            "signing_secrets_arn": OWN_SIGNING,
            "mcp_token_secret_arn": OWN_TOKEN,
            "signing_secrets_kms_key_arn": SIGNING_KEY,
            "mcp_token_kms_key_arn": TOKEN_KEY,
        },
    )


def _kms_statements(synthesized: Synthesized, function: str) -> list[dict[str, Any]]:
    return [
        statement
        for statement in role_statements(synthesized, function)
        if "kms:" in str(statement["Action"])
    ]


def test_readers_may_decrypt_their_secrets_key_only_through_secrets_manager(
    own_secrets: Synthesized,
) -> None:
    for function, secret, key in (
        ("receiver", OWN_SIGNING, SIGNING_KEY),
        ("worker", OWN_TOKEN, TOKEN_KEY),
    ):
        assert _kms_statements(own_secrets, function) == [
            {
                "Effect": "Allow",
                "Action": "kms:Decrypt",
                "Resource": key,
                "Condition": VIA_SECRETS_MANAGER,
            }
        ], function
        assert _grants(SECRET_READ, secret) <= role_grants(own_secrets, function)
    for function in ("relay", "reconciler"):
        assert _kms_statements(own_secrets, function) == [], function


def test_without_a_customer_managed_key_no_role_may_use_kms(synthesized: Synthesized) -> None:
    for function in ("receiver", "relay", "worker", "reconciler"):
        assert _kms_statements(synthesized, function) == [], function


# The notify endpoint's secret (URL and signing key), encrypted with its own key.
NOTIFY_SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relaylink/notify-Qw3rTy"
NOTIFY_KEY = "arn:aws:kms:eu-west-1:123456789012:key/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"


@pytest.fixture(scope="module")
def notify_secret(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(
        tmp_path_factory,
        {
            "workflow": "notify",
            "notify_secret_arn": NOTIFY_SECRET,
            "notify_secret_kms_key_arn": NOTIFY_KEY,
        },
    )


def test_the_worker_alone_may_read_the_notify_secret_and_its_key_through_secrets_manager(
    notify_secret: Synthesized,
) -> None:
    assert role_grants(notify_secret, "worker") == (
        worker_base_grants(notify_secret)
        | _grants(SECRET_READ, NOTIFY_SECRET)
        | _grants({"kms:Decrypt"}, NOTIFY_KEY)
    )
    assert {
        "Effect": "Allow",
        "Action": "kms:Decrypt",
        "Resource": NOTIFY_KEY,
        "Condition": VIA_SECRETS_MANAGER,
    } in _kms_statements(notify_secret, "worker")
    for function in ("receiver", "relay", "reconciler"):
        grants = role_grants(notify_secret, function)
        assert not any(NOTIFY_SECRET in str(resource) for _, resource in grants), function
        assert _kms_statements(notify_secret, function) == [], function


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The agent workflow as shipped: a model, no screening guardrail."""
    return synthesize(tmp_path_factory, {"workflow": "agent"})


def test_without_a_guardrail_the_agent_may_invoke_its_model_and_apply_no_guardrail(
    agent: Synthesized,
) -> None:
    bedrock = {
        (action, resource)
        for action, resource in role_grants(agent, "worker")
        if action.startswith("bedrock:")
    }
    assert {action for action, _ in bedrock} == {"bedrock:InvokeModel"}
    assert len(bedrock) == 1


def test_a_guardrail_named_by_its_arn_is_granted_on_that_arn_alone() -> None:
    arn = "arn:aws:bedrock:eu-west-1:210987654321:guardrail/gr7x2k9q4m1p"
    stack = Stack(App(), "Guardrails")
    assert guardrail_arn(stack, arn) == arn
    assert stack.resolve(guardrail_arn(stack, "gr7x2k9q4m1p")) == stack_guardrail_arn(
        "gr7x2k9q4m1p"
    )


def stack_guardrail_arn(guardrail_id: str) -> Any:
    """A bare guardrail id's ARN as the template gives it: the stack's region and account."""
    return stack_bedrock_arn(":", {"Ref": "AWS::AccountId"}, f":guardrail/{guardrail_id}")


def stack_bedrock_arn(*tail: Any) -> Any:
    """A Bedrock ARN in the stack's partition and region, ``tail`` after the region."""
    head = ["arn:", {"Ref": "AWS::Partition"}, ":bedrock:", {"Ref": "AWS::Region"}]
    return {"Fn::Join": ["", [*head, *tail]]}
