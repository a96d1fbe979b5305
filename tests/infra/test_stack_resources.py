"""Template assertions: every property the infrastructure must have."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from functions.core import env_names, metric_names, settings_table, table_layout
from functions.core.retry_policy import MAX_RETRY_HORIZON_SECONDS, retry_schedule
from infra import schema
from infra.bundle import LAMBDA_PYTHON_VERSION
from infra.lambda_function import ARCHITECTURE, RUNTIME
from infra.schema import SQS_MAX_RECEIVE_COUNT, max_receive_count_for, table_definition
from tests.infra.conftest import (
    ALARM_EMAIL,
    NOTIFY_URL,
    ROOT,
    Synthesized,
    get_att,
    ref,
    synthesize,
)

FUNCTIONS = ("receiver", "relay", "worker", "reconciler")


def _table(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    (logical_id, table), *rest = synthesized.of_type("AWS::DynamoDB::Table").items()
    assert rest == []
    return logical_id, table


def _worker_timeout(synthesized: Synthesized) -> int:
    return int(synthesized.function("worker")["Properties"]["Timeout"])


def test_table_matches_the_shared_definition(synthesized: Synthesized) -> None:
    _, table = _table(synthesized)
    props = table["Properties"]
    expected = table_definition("any")
    assert sorted(props["AttributeDefinitions"], key=str) == sorted(
        expected["AttributeDefinitions"], key=str
    )
    assert props["KeySchema"] == expected["KeySchema"]
    assert [
        {k: index[k] for k in ("IndexName", "KeySchema", "Projection")}
        for index in props["GlobalSecondaryIndexes"]
    ] == expected["GlobalSecondaryIndexes"]
    assert props["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    assert props["GlobalSecondaryIndexes"][0]["IndexName"] == table_layout.STATE_INDEX


def test_table_is_on_demand_recoverable_protected_retained_and_encrypted(
    synthesized: Synthesized,
) -> None:
    _, table = _table(synthesized)
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    assert props["TimeToLiveSpecification"] == {
        "AttributeName": table_layout.TTL_ATTRIBUTE,
        "Enabled": True,
    }
    assert props["SSESpecification"]["SSEEnabled"] is True


def test_every_queue_is_encrypted_and_refuses_plain_http(synthesized: Synthesized) -> None:
    queues = synthesized.of_type("AWS::SQS::Queue")
    assert len(queues) == 3  # work, work DLQ, relay failures
    policies = synthesized.of_type("AWS::SQS::QueuePolicy").values()
    tls_only: set[str] = set()
    for policy in policies:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement["Condition"] == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                tls_only.update(q["Ref"] for q in policy["Properties"]["Queues"])
    for logical_id, queue in queues.items():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True, logical_id
        assert logical_id in tls_only, logical_id


def test_work_queue_visibility_and_redrive_match_the_worker(synthesized: Synthesized) -> None:
    queue = synthesized.resource(synthesized.stack.queues.queue)["Properties"]
    dlq_id = synthesized.logical_id(synthesized.stack.queues.dead_letter_queue)
    assert queue["VisibilityTimeout"] >= 6 * _worker_timeout(synthesized)
    attempts = synthesized.context["worker_max_attempts"]
    horizon = synthesized.context["worker_retry_horizon_hours"] * 3600
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": get_att(dlq_id, "Arn"),
        "maxReceiveCount": max_receive_count_for(attempts, retry_horizon_seconds=horizon),
    }
    environment = synthesized.environment("worker")
    assert environment[env_names.ENV_MAX_ATTEMPTS] == str(attempts)
    assert environment[env_names.ENV_RETRY_HORIZON_SECONDS] == str(horizon)
    dlq = synthesized.resources[dlq_id]["Properties"]
    assert dlq["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]


def test_no_dead_letter_outlives_its_inbox_item(synthesized: Synthesized) -> None:
    queue = synthesized.resource(synthesized.stack.queues.queue)["Properties"]
    dlq = synthesized.resource(synthesized.stack.queues.dead_letter_queue)["Properties"]
    latest_send = schema.worker_dead_letter_age(
        retry_horizon_seconds=synthesized.context["worker_retry_horizon_hours"] * 3600,
        max_attempts=synthesized.context["worker_max_attempts"],
        visibility_timeout_seconds=queue["VisibilityTimeout"],
    )
    inbox_seconds = synthesized.context["inbox_retention_days"] * 86400
    assert latest_send + dlq["MessageRetentionPeriod"] <= inbox_seconds
    assert dlq["MessageRetentionPeriod"] == synthesized.stack.config.dead_letter_retention_seconds


def test_redrive_is_a_backstop_above_the_workers_own_budget(synthesized: Synthesized) -> None:
    queue = synthesized.resource(synthesized.stack.queues.queue)["Properties"]
    attempts = synthesized.context["worker_max_attempts"]
    horizon = synthesized.context["worker_retry_horizon_hours"] * 3600
    assert horizon == 24 * 3600
    # The worker receives a message once per attempt of its schedule (101 in 24 h) and
    # once per attempt of unknown outcome before it dead-letters it itself.
    own_budget = len(retry_schedule(horizon)) + attempts
    assert queue["RedrivePolicy"]["maxReceiveCount"] > own_budget > attempts
    # A message lives through the longest horizon, with its last back-off.
    assert queue["MessageRetentionPeriod"] > MAX_RETRY_HORIZON_SECONDS + 900


@pytest.fixture(scope="module")
def longest_retries(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(
        tmp_path_factory, {"worker_retry_horizon_hours": 72, "worker_max_attempts": 100}
    )


def test_longest_retry_settings_synthesize_within_sqs_limits(longest_retries: Synthesized) -> None:
    queue = longest_retries.resource(longest_retries.stack.queues.queue)["Properties"]
    count = queue["RedrivePolicy"]["maxReceiveCount"]
    assert len(retry_schedule(MAX_RETRY_HORIZON_SECONDS)) + 100 < count <= SQS_MAX_RECEIVE_COUNT
    environment = longest_retries.environment("worker")
    assert environment[env_names.ENV_RETRY_HORIZON_SECONDS] == str(MAX_RETRY_HORIZON_SECONDS)


def test_worker_lease_sits_between_its_timeout_and_the_visibility_timeout(
    synthesized: Synthesized,
) -> None:
    lease = int(synthesized.environment("worker")[env_names.ENV_LEASE_SECONDS])
    visibility = synthesized.resource(synthesized.stack.queues.queue)["Properties"][
        "VisibilityTimeout"
    ]
    assert _worker_timeout(synthesized) < lease < visibility
    assert synthesized.environment("reconciler")[env_names.ENV_LEASE_SECONDS] == str(lease)


def test_every_function_uses_the_factory_defaults(synthesized: Synthesized) -> None:
    groups = synthesized.of_type("AWS::Logs::LogGroup")
    for name in FUNCTIONS:
        props = synthesized.function(name)["Properties"]
        # The Python the bundler fetches wheels for, and tests/runtime runs the suite on.
        assert props["Runtime"] == RUNTIME.name == f"python{LAMBDA_PYTHON_VERSION}" == "python3.13"
        assert props["Architectures"] == [ARCHITECTURE.name] == ["arm64"]
        assert props["Handler"] == f"functions.{name}.handler.lambda_handler"
        # Tracing is off unless asked for (docs/cost.md): no TracingConfig, Lambda's
        # PassThrough, and Powertools' Tracer disabled.
        assert "TracingConfig" not in props
        env = props["Environment"]["Variables"]
        assert env[env_names.ENV_POWERTOOLS_TRACE_DISABLED] == "true"
        logging = props["LoggingConfig"]
        assert logging["LogFormat"] == "JSON"
        assert logging["ApplicationLogLevel"] == "INFO" == synthesized.context["log_level"]
        assert logging["SystemLogLevel"] == "WARN"
        group = groups[logging["LogGroup"]["Ref"]]
        assert group["Properties"]["RetentionInDays"] == synthesized.context["log_retention_days"]
        env = props["Environment"]["Variables"]
        assert env[env_names.ENV_POWERTOOLS_SERVICE_NAME] == metric_names.SERVICE
        assert env[env_names.ENV_POWERTOOLS_METRICS_NAMESPACE] == metric_names.METRICS_NAMESPACE
        assert env[env_names.ENV_POWERTOOLS_LOG_LEVEL] == synthesized.context["log_level"]


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    # One synth for two settings: a quieter log level, and tracing turned on.
    return synthesize(
        tmp_path_factory, {"notify_url": NOTIFY_URL, "log_level": "ERROR", "tracing": "true"}
    )


def test_tracing_is_one_switch_for_every_function(quiet: Synthesized) -> None:
    for name in FUNCTIONS:
        props = quiet.function(name)["Properties"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["Environment"]["Variables"][env_names.ENV_POWERTOOLS_TRACE_DISABLED] == "false"


def test_a_quieter_log_level_is_the_functions_own_and_never_lambdas(quiet: Synthesized) -> None:
    # Lambda's filter takes an EMF line (it has no level) for INFO: above INFO it would
    # drop every metric. The functions apply ERROR themselves.
    for name in FUNCTIONS:
        props = quiet.function(name)["Properties"]
        assert props["LoggingConfig"]["ApplicationLogLevel"] == "INFO"
        assert props["Environment"]["Variables"][env_names.ENV_POWERTOOLS_LOG_LEVEL] == "ERROR"


def test_receiver_answers_before_relaylink_gives_up(synthesized: Synthesized) -> None:
    # RelayLink waits 10 s (docs/contract.md, Retries and timing).
    assert synthesized.function("receiver")["Properties"]["Timeout"] < 10
    (integration,) = synthesized.of_type("AWS::ApiGatewayV2::Integration").values()
    assert integration["Properties"]["TimeoutInMillis"] < 10_000


def test_http_api_routes_post_relaylink_to_the_receiver_with_payload_v2(
    synthesized: Synthesized,
) -> None:
    (api,) = synthesized.of_type("AWS::ApiGatewayV2::Api").values()
    assert api["Properties"]["ProtocolType"] == "HTTP"
    (route,) = synthesized.of_type("AWS::ApiGatewayV2::Route").values()
    assert route["Properties"]["RouteKey"] == "POST /relaylink"
    (integration,) = synthesized.of_type("AWS::ApiGatewayV2::Integration").values()
    props = integration["Properties"]
    assert props["IntegrationType"] == "AWS_PROXY"
    assert props["PayloadFormatVersion"] == "2.0"
    assert props["IntegrationUri"] == get_att(synthesized.function_logical_id("receiver"), "Arn")
    (permission,) = [
        p
        for p in synthesized.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"]
        == get_att(synthesized.function_logical_id("receiver"), "Arn")
    ]
    assert permission["Properties"]["Principal"] == "apigateway.amazonaws.com"


def test_api_stage_is_throttled(synthesized: Synthesized) -> None:
    (stage,) = synthesized.of_type("AWS::ApiGatewayV2::Stage").values()
    settings = stage["Properties"]["DefaultRouteSettings"]
    assert settings["ThrottlingRateLimit"] == synthesized.context["api_rate_limit"]
    assert settings["ThrottlingBurstLimit"] == synthesized.context["api_burst_limit"]
    # The bare synth's stage buffers a burst instead of answering it with 429s.
    assert settings["ThrottlingRateLimit"] >= 1_000
    assert settings["ThrottlingBurstLimit"] >= 2_000
    assert stage["Properties"]["AutoDeploy"] is True


def test_access_logs_leave_out_path_and_query_string(synthesized: Synthesized) -> None:
    (stage,) = synthesized.of_type("AWS::ApiGatewayV2::Stage").values()
    log_settings = stage["Properties"]["AccessLogSettings"]
    fields = json.loads(log_settings["Format"])
    assert "$context.requestId" in fields.values()
    # Compact: API Gateway writes the format's separators into every line (billed bytes).
    assert log_settings["Format"] == json.dumps(fields, separators=(",", ":"))
    variables = " ".join(fields.values()).lower()
    for forbidden in ("path", "querystring", "requestoverride", "domainprefix"):
        assert forbidden not in variables, forbidden
    group_id = log_settings["DestinationArn"]["Fn::GetAtt"][0]
    assert synthesized.resources[group_id]["Type"] == "AWS::Logs::LogGroup"


def test_relay_reads_only_outbox_inserts_with_bounded_retries(synthesized: Synthesized) -> None:
    table_id, _ = _table(synthesized)
    (mapping,) = [
        m["Properties"]
        for m in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == get_att(table_id, "StreamArn")
    ]
    assert mapping["FunctionName"] == ref(synthesized.function_logical_id("relay"))
    (pattern,) = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert pattern == {
        "eventName": ["INSERT"],
        "dynamodb": {"NewImage": {table_layout.KIND_ATTRIBUTE: {"S": [table_layout.KIND_OUTBOX]}}},
    }
    assert mapping["BisectBatchOnFunctionError"] is True
    assert 0 < mapping["MaximumRetryAttempts"] <= 20
    # Bounded, and shorter than the stream's own 24 h retention.
    assert 60 <= mapping["MaximumRecordAgeInSeconds"] < 24 * 3600
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    failure_id = synthesized.logical_id(synthesized.stack.relay.failure_queue)
    assert mapping["DestinationConfig"] == {
        "OnFailure": {"Destination": get_att(failure_id, "Arn")}
    }
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    # A hot stream shard's records go out in more than one batch at a time.
    assert mapping["ParallelizationFactor"] >= 2


def _work_queue_mapping(synthesized: Synthesized) -> dict[str, Any]:
    queue_id = synthesized.logical_id(synthesized.stack.queues.queue)
    mapping: dict[str, Any]
    (mapping,) = [
        m["Properties"]
        for m in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == get_att(queue_id, "Arn")
    ]
    return mapping


def test_worker_consumes_the_work_queue_with_partial_batches_and_a_concurrency_cap(
    synthesized: Synthesized,
) -> None:
    mapping = _work_queue_mapping(synthesized)
    assert mapping["FunctionName"] == ref(synthesized.function_logical_id("worker"))
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["ScalingConfig"] == {
        "MaximumConcurrency": synthesized.context["worker_max_concurrency"]
    }


def test_worker_batches_gather_for_the_window_the_visibility_timeout_covers(
    synthesized: Synthesized,
) -> None:
    mapping = _work_queue_mapping(synthesized)
    window = synthesized.stack.config.worker_batching_window_seconds
    assert window == settings_table.WORKER_BATCHING_WINDOW_SECONDS.default > 0
    assert mapping["MaximumBatchingWindowInSeconds"] == window
    # AWS: six times the function's timeout plus the batching window.
    queue = synthesized.resource(synthesized.stack.queues.queue)["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * _worker_timeout(synthesized) + window


def test_reconciler_runs_on_a_schedule(synthesized: Synthesized) -> None:
    (rule,) = synthesized.of_type("AWS::Events::Rule").values()
    props = rule["Properties"]
    minutes = synthesized.context["reconcile_every_minutes"]
    assert props["ScheduleExpression"] == f"rate({minutes} minutes)"
    assert props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert target["Arn"] == get_att(synthesized.function_logical_id("reconciler"), "Arn")


def test_created_secrets_hold_fail_closed_placeholders(synthesized: Synthesized) -> None:
    signing = synthesized.resource(synthesized.stack.secrets.signing_secrets.secret)
    assert json.loads(signing["Properties"]["SecretString"]) == []
    token = synthesized.resource(synthesized.stack.secrets.mcp_token.secret)
    assert "SecretString" not in token["Properties"]
    assert token["Properties"]["GenerateSecretString"]["PasswordLength"] >= 32
    for secret in (signing, token):
        assert secret["DeletionPolicy"] == "Retain"
    env = synthesized.environment("receiver")
    assert env[env_names.ENV_SIGNING_SECRETS_ARN] == ref(
        synthesized.logical_id(synthesized.stack.secrets.signing_secrets.secret)
    )


def test_archive_bucket_is_private_encrypted_tls_only_retained_and_expires(
    synthesized: Synthesized,
) -> None:
    bucket_id = synthesized.logical_id(synthesized.stack.archive.bucket)
    bucket = synthesized.resources[bucket_id]
    props = bucket["Properties"]
    assert bucket["DeletionPolicy"] == "Retain"
    (encryption,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    (rule,) = props["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == synthesized.context["inbox_retention_days"]
    assert rule["Status"] == "Enabled"
    (policy,) = [
        p["Properties"]["PolicyDocument"]
        for p in synthesized.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == ref(bucket_id)
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Statement"]
    )
    assert synthesized.environment("worker")[env_names.ENV_ARCHIVE_BUCKET] == ref(bucket_id)


def test_optional_notification_url_and_alarm_email_are_wired(synthesized: Synthesized) -> None:
    assert synthesized.environment("worker")[env_names.ENV_NOTIFY_URL] == NOTIFY_URL
    (subscription,) = synthesized.of_type("AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == ALARM_EMAIL
    hosts = synthesized.environment("worker")[env_names.ENV_MCP_ALLOWED_HOSTS]
    assert hosts.split(",") == synthesized.context["mcp_allowed_hosts"]


def test_receiver_url_is_an_output(synthesized: Synthesized) -> None:
    output = synthesized.template["Outputs"]["ReceiverUrl"]["Value"]
    api_id = synthesized.logical_id(synthesized.stack.receiver.api)
    assert json.dumps(output).count(api_id) == 1
    assert json.dumps(output).endswith('"/relaylink"]]}')


def test_operator_commands_find_the_table_and_both_work_queues_in_the_outputs(
    synthesized: Synthesized,
) -> None:
    outputs = synthesized.template["Outputs"]
    queues = synthesized.stack.queues
    assert outputs["WorkQueueUrl"]["Value"] == ref(synthesized.logical_id(queues.queue))
    assert outputs["WorkDeadLetterQueueUrl"]["Value"] == ref(
        synthesized.logical_id(queues.dead_letter_queue)
    )


def test_the_outputs_docs_deploy_names_are_the_stacks(synthesized: Synthesized) -> None:
    """docs/deploy.md's list of outputs, against a stack with every optional part on;
    the dashboard's output is named as conditional, since it exists only with it."""
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    start = text.index("The stack's outputs are what you need next:")
    sentence = text[start : text.index(".\n", start)]
    named = set(re.findall(r"`([A-Za-z]+)`", sentence)) - {"dashboard"}
    assert named == set(synthesized.template["Outputs"])
    assert "`DashboardName` only when the stack has a dashboard (`-c dashboard=true`)" in " ".join(
        sentence.split()
    )
