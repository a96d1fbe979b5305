"""AWS list prices the cost model (:mod:`bench.cost`) bills with: us-east-1, as published
at :data:`PRICE_DATE`, without the free tier, savings plans or reserved capacity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

REGION: Final = "us-east-1"
PRICE_DATE: Final = "2025-06"
GB: Final = 1024**3


@dataclass(frozen=True)
class Price:
    what: str
    usd: float
    per: str


# AWS list prices, us-east-1, as published on the services' pricing pages and known
# to the author at PRICE_DATE (DynamoDB on-demand after its November 2024 reduction;
# Lambda INIT billed since August 2025 is covered by the cold-start line). Check
# https://aws.amazon.com/pricing/ before relying on them.
PRICES: Final = {
    "http_api": Price("API Gateway HTTP API, first 300 M requests/month", 1.00, "1 M requests"),
    "http_api_over": Price("API Gateway HTTP API, over 300 M", 0.90, "1 M requests"),
    "rest_api": Price("API Gateway REST API, first 333 M requests/month", 3.50, "1 M requests"),
    "rest_api_2": Price("API Gateway REST API, next 667 M", 2.80, "1 M requests"),
    "rest_api_3": Price("API Gateway REST API, next 19 B", 2.38, "1 M requests"),
    "lambda_requests": Price("Lambda requests", 0.20, "1 M requests"),
    "lambda_arm_gbs": Price("Lambda duration, arm64, first 7.5 B GB-s/month", 0.0000133334, "GB-s"),
    "lambda_arm_gbs_2": Price("Lambda duration, arm64, next 11.25 B GB-s", 0.0000120001, "GB-s"),
    "ddb_wru": Price("DynamoDB on-demand write request units", 0.625, "1 M WRU"),
    "ddb_rru": Price("DynamoDB on-demand read request units", 0.125, "1 M RRU"),
    "ddb_storage": Price("DynamoDB Standard storage", 0.25, "GB-month"),
    "ddb_pitr": Price("DynamoDB point-in-time recovery", 0.20, "GB-month"),
    "ddb_streams": Price("DynamoDB Streams reads by a Lambda trigger", 0.0, "—"),
    "sqs": Price("SQS standard requests (64 KB chunks)", 0.40, "1 M requests"),
    "s3_put": Price("S3 Standard PUT", 0.005, "1,000 requests"),
    "s3_storage": Price("S3 Standard storage", 0.023, "GB-month"),
    "logs_ingest": Price("CloudWatch Logs ingestion (Lambda, first 10 TB)", 0.50, "GB"),
    "logs_storage": Price("CloudWatch Logs storage", 0.03, "GB-month"),
    "metric": Price("CloudWatch custom metric (first 10,000)", 0.30, "metric-month"),
    "alarm": Price("CloudWatch standard alarm", 0.10, "alarm-month"),
    "dashboard": Price("CloudWatch dashboard (beyond 3 free)", 3.00, "dashboard-month"),
    "xray": Price("X-Ray traces recorded", 5.00, "1 M traces"),
    "secret": Price("Secrets Manager secret", 0.40, "secret-month"),
    "secret_calls": Price("Secrets Manager API calls", 0.05, "10,000 calls"),
    "kms_key": Price("KMS customer managed key (alarm topic)", 1.00, "key-month"),
    "eventbridge_events": Price("EventBridge custom events (PutEvents)", 1.00, "1 M events"),
    "egress": Price("Data transfer out to the internet (first 10 TB)", 0.09, "GB"),
    # The agent workflow's default model (functions/workflows/model_client.py), on demand.
    "bedrock_input": Price(
        "Bedrock Amazon Nova Micro input tokens, on demand", 0.035, "1 M tokens"
    ),
    "bedrock_output": Price(
        "Bedrock Amazon Nova Micro output tokens, on demand", 0.14, "1 M tokens"
    ),
}


def tiered(amount: float, tiers: list[tuple[float, float]]) -> float:
    """Cost of ``amount`` with ``tiers`` of (size or inf, price per unit)."""
    total, left = 0.0, amount
    for size, price in tiers:
        used = min(left, size)
        total += used * price
        left -= used
        if left <= 0:
            break
    return total
