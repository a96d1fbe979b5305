"""The front door: HTTP API (payload 2.0) route ``POST /relaylink`` to the receiver Lambda.

The API flavour is argued in docs/architecture.md. Access logs leave out the path and
the query string: a receiver URL may carry a token (docs/contract.md, Request).
"""

from __future__ import annotations

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.access_log import ACCESS_LOG_FORMAT
from infra.config import StackConfig
from infra.environments import receiver_environment
from infra.function_memory import RECEIVER_MEMORY_MB
from infra.lambda_function import python_function, retention
from infra.nag import acknowledge
from infra.secrets import ReadableSecret
from infra.table_access import ItemAction, grant_item_actions

ROUTE_PATH = "/relaylink"
# RelayLink waits 10 s (docs/contract.md, Retries and timing); answer, or fail, well before that.
RECEIVER_TIMEOUT = Duration.seconds(8)
INTEGRATION_TIMEOUT = Duration.seconds(9)


class Receiver(Construct):
    """The receiver Lambda behind an HTTP API stage with throttling and access logs.

    Attributes:
        function: The receiver Lambda.
        api: The HTTP API.
        stage: Its stage (throttling, access logs).
        url: The URL to register with RelayLink.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        table: dynamodb.ITable,
        signing_secrets: ReadableSecret,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function: lambda_.Function = python_function(
            self,
            "Function",
            function="receiver",
            config=config,
            description="Verifies RelayLink deliveries and records each exactly once",
            timeout=RECEIVER_TIMEOUT,
            memory_size=RECEIVER_MEMORY_MB,
            environment=receiver_environment(
                table_name=table.table_name,
                signing_secrets_arn=signing_secrets.secret_arn,
                inbox_retention_days=config.inbox_retention_days,
                received_log_shards=config.received_log_shards,
                trace_sample_percent=config.trace_sample_percent,
            ),
        )
        # Internet-facing, so the narrowest role of all: it only puts new items (the
        # inbox and outbox Puts of one transaction, a quarantine record) and reads its
        # secret. A duplicate is answered from the failed condition's ALL_OLD image,
        # so it needs no GetItem either.
        grant_item_actions(self.function, table, ItemAction.PUT_ITEM)
        signing_secrets.grant_read(self.function)

        self.api = apigwv2.HttpApi(
            self,
            "Api",
            description="RelayLink deliveries",
            create_default_stage=False,
        )
        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=retention(config.log_retention_days),
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit
            ),
            access_log_settings=_AccessLogSettings(
                destination=apigwv2.LogGroupLogDestination(access_logs),
                format=apigateway.AccessLogFormat.custom(ACCESS_LOG_FORMAT),
            ),
        )
        routes = self.api.add_routes(
            path=ROUTE_PATH,
            methods=[apigwv2.HttpMethod.POST],
            integration=integrations.HttpLambdaIntegration(
                "Receiver",
                self.function,
                payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
                timeout=INTEGRATION_TIMEOUT,
            ),
        )
        for route in routes:
            acknowledge(
                route,
                "AwsSolutions-APIG4",
                "RelayLink cannot present IAM, JWT or Lambda-authorizer credentials; every "
                "request is authenticated by its HMAC signature (docs/contract.md, Signature), "
                "checked in the receiver before any storage call.",
            )
        # ``$default`` stage: the route lives right under the API endpoint.
        self.url = f"{self.api.api_endpoint}{ROUTE_PATH}"


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """``IAccessLogSettings`` is a jsii interface, not a struct: Python implements it."""

    def __init__(
        self,
        *,
        destination: apigwv2.IAccessLogDestination,
        format: apigateway.AccessLogFormat,
    ) -> None:
        self._destination = destination
        self._format = format

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigateway.AccessLogFormat:
        return self._format
