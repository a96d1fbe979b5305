"""Each function's role holds exactly what the stack grants it, and nothing else."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.conftest import Synthesized, get_att, ref

XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
TABLE_WRITE = {
    "dynamodb:BatchWriteItem",
    "dynamodb:DeleteItem",
    "dynamodb:DescribeTable",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
}
TABLE_READ_WRITE = TABLE_WRITE | {
    "dynamodb:BatchGetItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:GetItem",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:Query",
    "dynamodb:Scan",
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
# Wildcards that only grant_* / CDK itself generate, each acknowledged in cdk-nag.
ALLOWED_WILDCARD_ACTIONS = {"s3:Abort*"}
ACTIONS_WITHOUT_RESOURCE_ARNS = XRAY | {"dynamodb:ListStreams"}

Grant = tuple[str, str]  # (action, resource as canonical JSON)


def _key(resource: Any) -> str:
    return json.dumps(resource, sort_keys=True)


def _granted(synthesized: Synthesized, function: str) -> set[Grant]:
    role_id = synthesized.function(function)["Properties"]["Role"]["Fn::GetAtt"][0]
    role = synthesized.resources[role_id]["Properties"]
    assert "ManagedPolicyArns" not in role, f"{function} must not use AWS managed policies"
    assert "Policies" not in role
    grants: set[Grant] = set()
    policies = [
        p["Properties"]
        for p in synthesized.of_type("AWS::IAM::Policy").values()
        if ref(role_id) in p["Properties"]["Roles"]
    ]
    assert len(policies) == 1
    for statement in policies[0]["PolicyDocument"]["Statement"]:
        assert statement["Effect"] == "Allow"
        assert set(statement) <= {"Effect", "Action", "Resource"}, statement
        actions = (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
        resources = (
            statement["Resource"]
            if isinstance(statement["Resource"], list)
            else [statement["Resource"]]
        )
        grants.update((a, _key(r)) for a in actions for r in resources)
    return grants


def _grants(actions: set[str], *resources: Any) -> set[Grant]:
    return {(a, _key(r)) for a in actions for r in resources}


def _ids(synthesized: Synthesized) -> dict[str, str]:
    stack = synthesized.stack
    return {
        "table": synthesized.logical_id(stack.table.table),
        "queue": synthesized.logical_id(stack.queues.queue),
        "dlq": synthesized.logical_id(stack.queues.dead_letter_queue),
        "failures": synthesized.logical_id(stack.relay.failure_queue),
        "signing": synthesized.logical_id(stack.secrets.signing_secrets),
        "token": synthesized.logical_id(stack.secrets.mcp_token),
        "bucket": synthesized.logical_id(stack.archive.bucket),
    }


def _own_logs(synthesized: Synthesized, function: str) -> set[Grant]:
    group = synthesized.function(function)["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    return _grants(LOGS, get_att(group, "Arn")) | _grants(XRAY, "*")


def _table_and_indexes(table: str) -> tuple[Any, Any]:
    arn = get_att(table, "Arn")
    return arn, {"Fn::Join": ["", [arn, "/index/*"]]}


def test_receiver_may_write_the_table_and_read_its_signing_secret_only(
    synthesized: Synthesized,
) -> None:
    ids = _ids(synthesized)
    assert _granted(synthesized, "receiver") == (
        _own_logs(synthesized, "receiver")
        | _grants(TABLE_WRITE, *_table_and_indexes(ids["table"]))
        | _grants(SECRET_READ, ref(ids["signing"]))
    )


def test_relay_reads_the_stream_and_sends_to_the_work_queue_only(
    synthesized: Synthesized,
) -> None:
    ids = _ids(synthesized)
    assert _granted(synthesized, "relay") == (
        _own_logs(synthesized, "relay")
        | _grants(STREAM_READ, get_att(ids["table"], "StreamArn"))
        | _grants({"dynamodb:ListStreams"}, "*")
        | _grants(QUEUE_SEND, get_att(ids["queue"], "Arn"), get_att(ids["failures"], "Arn"))
    )


def test_worker_grants(synthesized: Synthesized) -> None:
    ids = _ids(synthesized)
    assert _granted(synthesized, "worker") == (
        _own_logs(synthesized, "worker")
        | _grants(TABLE_READ_WRITE, *_table_and_indexes(ids["table"]))
        | _grants(QUEUE_CONSUME, get_att(ids["queue"], "Arn"))
        | _grants(QUEUE_SEND, get_att(ids["queue"], "Arn"), get_att(ids["dlq"], "Arn"))
        | _grants(SECRET_READ, ref(ids["token"]))
        | _grants(BUCKET_PUT, {"Fn::Join": ["", [get_att(ids["bucket"], "Arn"), "/*"]]})
    )


def test_reconciler_grants(synthesized: Synthesized) -> None:
    ids = _ids(synthesized)
    assert _granted(synthesized, "reconciler") == (
        _own_logs(synthesized, "reconciler")
        | _grants(TABLE_READ_WRITE, *_table_and_indexes(ids["table"]))
        | _grants(QUEUE_SEND, get_att(ids["queue"], "Arn"))
    )


def test_no_wildcards_beyond_what_grants_generate(synthesized: Synthesized) -> None:
    for function in ("receiver", "relay", "worker", "reconciler"):
        for action, resource in _granted(synthesized, function):
            assert "*" not in action or action in ALLOWED_WILDCARD_ACTIONS, (function, action)
            if resource == _key("*"):
                assert action in ACTIONS_WITHOUT_RESOURCE_ARNS, (function, action)


def test_only_the_worker_can_read_the_mcp_token(synthesized: Synthesized) -> None:
    token = _key(ref(_ids(synthesized)["token"]))
    readers = {
        function
        for function in ("receiver", "relay", "worker", "reconciler")
        if any(resource == token for _, resource in _granted(synthesized, function))
    }
    assert readers == {"worker"}
