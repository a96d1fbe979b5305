"""The local stack's AWS emulator: its long polls, its queries and its controls, over HTTP."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ReadTimeoutError
from werkzeug.serving import WSGIRequestHandler

from functions.core import table_layout
from local.aws_emulator import (
    CONTROL_PATH,
    AwsEmulator,
    AwsEmulatorProcess,
    EmulatorControls,
    EmulatorCredentials,
    gate,
    moto_patches,
)
from local.aws_resources import create_table
from tests.polling import poll

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

REGION = "us-east-1"
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"})


def _sqs(endpoint_url: str) -> SQSClient:
    return boto3.client("sqs", region_name=REGION, endpoint_url=endpoint_url)


def _dynamodb(endpoint_url: str, credentials: EmulatorCredentials | None = None) -> DynamoDBClient:
    return boto3.client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=endpoint_url,
        config=NO_RETRIES,
        aws_access_key_id=credentials.access_key_id if credentials else None,
        aws_secret_access_key=credentials.secret_access_key if credentials else None,
    )


def _receive_in_thread(sqs: SQSClient, queue_url: str, wait: int) -> dict[str, Any]:
    """Starts a long poll; the dict gets its messages and elapsed seconds when it ends."""
    outcome: dict[str, Any] = {}

    def receive() -> None:
        started = time.monotonic()
        answer = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=wait)
        outcome["seconds"] = time.monotonic() - started
        outcome["messages"] = answer.get("Messages", [])

    threading.Thread(target=receive, daemon=True).start()
    return outcome


def test_a_long_poll_answers_when_a_message_arrives_and_holds_up_no_other_request(
    aws_emulator: AwsEmulator,
) -> None:
    sqs = _sqs(aws_emulator.endpoint_url)
    queue_url = sqs.create_queue(QueueName=f"long-poll-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    controls = EmulatorControls(aws_emulator.endpoint_url)
    polls_before = controls.calls().get("ReceiveMessage", 0)

    outcome = _receive_in_thread(_sqs(aws_emulator.endpoint_url), queue_url, wait=10)
    asked = poll(
        lambda: controls.calls().get("ReceiveMessage", 0),
        lambda n: n > polls_before,
        deadline_seconds=10,
    )
    assert asked > polls_before
    # While the poll waits, other requests are served at once (moto's own long poll
    # would sleep holding the emulator's lock).
    started = time.monotonic()
    sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])
    assert time.monotonic() - started < 1.0
    assert "messages" not in outcome

    sqs.send_message(QueueUrl=queue_url, MessageBody="hello")
    done = poll(lambda: dict(outcome), lambda o: "messages" in o, deadline_seconds=5)
    assert [m["Body"] for m in done["messages"]] == ["hello"]
    assert done["seconds"] < 5


def test_a_long_poll_on_an_empty_queue_waits_its_time_then_answers_empty(
    aws_emulator: AwsEmulator,
) -> None:
    sqs = _sqs(aws_emulator.endpoint_url)
    queue_url = sqs.create_queue(QueueName=f"empty-{uuid.uuid4().hex[:8]}")["QueueUrl"]

    started = time.monotonic()
    answer = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)

    assert answer.get("Messages", []) == []
    assert 1.0 <= time.monotonic() - started < 3.0


def test_a_long_poll_finds_a_message_whose_delay_ends_while_it_waits(
    aws_emulator: AwsEmulator,
) -> None:
    sqs = _sqs(aws_emulator.endpoint_url)
    queue_url = sqs.create_queue(QueueName=f"delayed-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=queue_url, MessageBody="later", DelaySeconds=1)

    started = time.monotonic()
    answer = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=5)

    assert [m["Body"] for m in answer.get("Messages", [])] == ["later"]
    assert time.monotonic() - started < 3.0


def test_a_queue_counts_its_messages_when_asked(aws_emulator: AwsEmulator) -> None:
    sqs = _sqs(aws_emulator.endpoint_url)
    queue_url = sqs.create_queue(QueueName=f"counted-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    for n in range(3):
        sqs.send_message(QueueUrl=queue_url, MessageBody=f"m{n}")
    sqs.send_message(QueueUrl=queue_url, MessageBody="delayed", DelaySeconds=60)
    received = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1)["Messages"]

    counts = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]

    assert len(received) == 1
    assert counts["ApproximateNumberOfMessages"] == "2"
    assert counts["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert counts["ApproximateNumberOfMessagesDelayed"] == "1"
    assert counts["MessageRetentionPeriod"] == str(4 * 86400)


def _listed(pk: str, sk: str, shard: str, listed_at: int) -> dict[str, Any]:
    return {
        table_layout.TABLE_PARTITION_KEY: {"S": pk},
        table_layout.TABLE_SORT_KEY: {"S": sk},
        table_layout.STATE_INDEX_PARTITION_KEY: {"S": shard},
        table_layout.STATE_INDEX_SORT_KEY: {"N": str(listed_at)},
    }


def test_queries_read_a_partition_or_an_index_shard_in_key_order_and_page(
    aws_emulator: AwsEmulator,
) -> None:
    dynamodb = _dynamodb(aws_emulator.endpoint_url)
    table = f"queries-{uuid.uuid4().hex[:8]}"
    create_table(dynamodb, table)
    pk, sk = table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY
    for sort_key in ("c", "a", "b"):
        dynamodb.put_item(TableName=table, Item={pk: {"S": "one"}, sk: {"S": sort_key}})
    dynamodb.put_item(TableName=table, Item={pk: {"S": "other"}, sk: {"S": "a"}})
    # Listed in two shards, out of order; one item is not listed at all.
    for index, (shard, listed_at) in enumerate([("s#01", 30), ("s#02", 5), ("s#01", 10)]):
        dynamodb.put_item(TableName=table, Item=_listed(f"d{index}", "inbox", shard, listed_at))

    partition = dynamodb.query(
        TableName=table,
        KeyConditionExpression="#pk = :pk",
        ExpressionAttributeNames={"#pk": pk},
        ExpressionAttributeValues={":pk": {"S": "one"}},
    )
    assert [item[sk]["S"] for item in partition["Items"]] == ["a", "b", "c"]

    def shard_page(**more: Any) -> Any:
        return dynamodb.query(
            TableName=table,
            IndexName=table_layout.STATE_INDEX,
            KeyConditionExpression="#shard = :shard AND #listed < :before",
            ExpressionAttributeNames={
                "#shard": table_layout.STATE_INDEX_PARTITION_KEY,
                "#listed": table_layout.STATE_INDEX_SORT_KEY,
            },
            ExpressionAttributeValues={":shard": {"S": "s#01"}, ":before": {"N": "100"}},
            Limit=1,
            **more,
        )

    pages = [shard_page()]
    while "LastEvaluatedKey" in pages[-1] and len(pages) < 5:
        pages.append(shard_page(ExclusiveStartKey=pages[-1]["LastEvaluatedKey"]))
    assert [len(page["Items"]) for page in pages][:2] == [1, 1]
    assert [item[pk]["S"] for page in pages for item in page["Items"]] == ["d2", "d0"]


def test_the_control_path_sets_faults_and_counts_requests(aws_emulator: AwsEmulator) -> None:
    controls = EmulatorControls(aws_emulator.endpoint_url)
    dynamodb = _dynamodb(aws_emulator.endpoint_url)
    listed_before = controls.calls().get("ListTables", 0)
    faults_before = sum(controls.counts().values())

    controls.set_rate(1.0)
    try:
        with pytest.raises(ClientError) as refused:
            dynamodb.list_tables()
    finally:
        controls.set_rate(0.0)
    dynamodb.list_tables()

    assert refused.value.response["Error"]["Code"] in {"ThrottlingException", "InternalServerError"}
    assert sum(controls.counts().values()) == faults_before + 1
    # The refused request never reached moto; the one after did.
    assert controls.calls().get("ListTables", 0) == listed_before + 1
    # The CPU time spent answering, per operation (the refused one spent some too).
    assert controls.cpu_seconds()["ListTables"] > 0
    # The time requests held the one-at-a-time lock and waited for it, per operation:
    # the held time grows with each request moto serves.
    lock_before = controls.lock_seconds()
    dynamodb.list_tables()
    lock_after = controls.lock_seconds()
    assert lock_after["held"]["ListTables"] > lock_before["held"]["ListTables"]
    assert lock_after["waited"]["ListTables"] >= lock_before["waited"]["ListTables"] >= 0
    assert set(lock_after["held"]) == set(lock_after["waited"]) <= set(controls.calls())
    with pytest.raises(ValueError, match="between 0 and 1"):
        controls.set_rate(1.5)


def test_the_emulator_process_serves_its_own_key_only_and_reports_its_cpu_time() -> None:
    emulator = AwsEmulatorProcess()
    emulator.start()
    try:
        dynamodb = _dynamodb(emulator.endpoint_url, emulator.credentials)
        create_table(dynamodb, "in-its-own-process")
        assert dynamodb.list_tables()["TableNames"] == ["in-its-own-process"]
        assert emulator.calls()["CreateTable"] == 1
        assert emulator.cpu_seconds() > 0
        pid = emulator.pid
        # Another user who finds the port: another key, no signature, or the controls.
        other = EmulatorCredentials.generate()
        with pytest.raises(ClientError) as refused:
            _dynamodb(emulator.endpoint_url, other).list_tables()
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert emulator.credentials.access_key_id not in ps_listing()
        for url in (emulator.endpoint_url + "/", emulator.endpoint_url + CONTROL_PATH):
            with pytest.raises(urllib.error.HTTPError) as unsigned:
                urllib.request.urlopen(url, timeout=5)
            assert unsigned.value.code == 403
            unsigned.value.close()
        assert emulator.calls()["CreateTable"] == 1  # the refused requests reached nothing
    finally:
        emulator.stop()
    assert emulator.pid == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def ps_listing() -> str:
    """Every process's command line, as any user of the machine can list them."""
    return subprocess.run(
        ["ps", "-eo", "args"], capture_output=True, text=True, check=True, timeout=10
    ).stdout


def _raw_answers(client: DynamoDBClient) -> list[bytes]:
    """Collects the HTTP body of every answer ``client`` gets."""
    bodies: list[bytes] = []

    def keep(http_response: Any, **_: Any) -> None:
        bodies.append(http_response.content)

    client.meta.events.register("after-call.dynamodb.*", keep)
    return bodies


def test_item_answers_skip_moto_serializer_with_the_same_json(aws_emulator: AwsEmulator) -> None:
    dynamodb = _dynamodb(aws_emulator.endpoint_url)
    table = f"answers-{uuid.uuid4().hex[:8]}"
    create_table(dynamodb, table)
    pk, sk = table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY
    for delivery in ("d1", "d2"):  # one for each path to update
        item: dict[str, Any] = {
            pk: {"S": delivery},
            sk: {"S": "inbox"},
            "count": {"N": "3"},
            "flag": {"BOOL": True},
            "nothing": {"NULL": True},
            "tags": {"SS": ["a", "b"]},
            "nested": {"M": {"list": {"L": [{"S": "x"}, {"N": "1.5"}]}}},
        }
        dynamodb.put_item(TableName=table, Item=item)

    def ask(delivery: str) -> None:
        key = {pk: {"S": delivery}, sk: {"S": "inbox"}}
        dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)
        dynamodb.query(
            TableName=table,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": pk},
            ExpressionAttributeValues={":pk": {"S": delivery}},
            ReturnConsumedCapacity="TOTAL",
        )
        dynamodb.batch_get_item(RequestItems={table: {"Keys": [key]}})
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #c = #c + :one",
            ExpressionAttributeNames={"#c": "count"},
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="ALL_NEW",
        )

    bodies = _raw_answers(dynamodb)
    ask("d1")
    plain = [body.replace(b'"d1"', b'"d2"') for body in bodies]
    bodies.clear()
    moto_patches.fast_path_users.remove(aws_emulator)  # moto's own serializer
    try:
        ask("d2")
    finally:
        moto_patches.fast_path_users.append(aws_emulator)

    assert len(plain) == 4
    assert b'"count": {"N": "4"}' in plain[-1]
    # The same documents; members may come in another order.
    assert [json.loads(body) for body in plain] == [json.loads(body) for body in bodies]


def test_stream_records_skip_moto_serializer_with_the_same_json(aws_emulator: AwsEmulator) -> None:
    dynamodb = _dynamodb(aws_emulator.endpoint_url)
    streams = boto3.client(
        "dynamodbstreams", region_name=REGION, endpoint_url=aws_emulator.endpoint_url
    )
    table = f"records-{uuid.uuid4().hex[:8]}"
    stream_arn = create_table(dynamodb, table)
    pk, sk = table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY
    key = {pk: {"S": "d1"}, sk: {"S": "inbox"}}
    item: dict[str, Any] = {
        **key,
        "count": {"N": "3"},
        "nested": {"M": {"list": {"L": [{"S": "x"}]}}},
    }
    dynamodb.put_item(TableName=table, Item=item)  # INSERT
    dynamodb.update_item(  # MODIFY: both images
        TableName=table,
        Key=key,
        UpdateExpression="SET #c = #c + :one, flag = :t REMOVE nested",
        ExpressionAttributeNames={"#c": "count"},
        ExpressionAttributeValues={":one": {"N": "1"}, ":t": {"BOOL": True}},
    )
    dynamodb.delete_item(TableName=table, Key=key)  # REMOVE
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
    bodies: list[bytes] = []

    def keep(http_response: Any, **_: Any) -> None:
        bodies.append(http_response.content)

    streams.meta.events.register("after-call.dynamodbstreams.GetRecords", keep)

    def read() -> list[Any]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        answer = streams.get_records(ShardIterator=iterator)
        streams.get_records(ShardIterator=answer["NextShardIterator"])  # nothing new
        return answer["Records"]

    records = read()
    plain = list(bodies)
    bodies.clear()
    moto_patches.fast_path_users.remove(aws_emulator)  # moto's own serializer
    try:
        assert read() == records
    finally:
        moto_patches.fast_path_users.append(aws_emulator)

    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    assert records[1]["dynamodb"]["NewImage"]["flag"] == {"BOOL": True}
    assert "nested" not in records[1]["dynamodb"]["NewImage"]
    assert b'"ApproximateCreationDateTime": ' in plain[0]
    assert json.loads(plain[1])["Records"] == []
    # The same documents (iterators are new each time); members may come in another order.
    documents = [json.loads(body) for body in plain], [json.loads(body) for body in bodies]
    for answers in documents:
        for answer in answers:
            answer.pop("NextShardIterator")
    assert documents[0] == documents[1]


def _conditional_writes(dynamodb: DynamoDBClient, table: str) -> list[Any]:
    """Updates and conditional writes, each sent twice (the second finds what the first
    left remembered), valid and not; every answer or error, in order."""
    pk, sk = table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY
    key = {pk: {"S": "d1"}, sk: {"S": "inbox"}}
    claim = "(attribute_exists(pk)) AND (#s = :pending OR (#s = :processing AND lease <= :now))"
    requests: list[tuple[str, dict[str, Any]]] = [
        ("put_item", {"Item": {**key, "state": {"S": "pending"}, "c": {"S": "x"}}}),
        (
            "put_item",
            {
                "Item": key,
                "ConditionExpression": "attribute_not_exists(#p)",
                "ExpressionAttributeNames": {"#p": pk},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
    ]
    for now in ("10", "20", "5"):  # claimed, then past its lease, then not yet
        requests.append(
            (
                "update_item",
                {
                    "Key": key,
                    "UpdateExpression": "SET #s = :processing, lease = :lease, "
                    "attempts = if_not_exists(attempts, :zero) + :one, history = list_append("
                    "if_not_exists(history, :empty), :entry) REMOVE c",
                    "ConditionExpression": claim,
                    "ExpressionAttributeNames": {"#s": "state"},
                    "ExpressionAttributeValues": {
                        ":processing": {"S": "processing"},
                        ":pending": {"S": "pending"},
                        ":lease": {"N": str(int(now) + 5)},
                        ":now": {"N": now},
                        ":zero": {"N": "0"},
                        ":one": {"N": "1"},
                        ":empty": {"L": []},
                        ":entry": {"L": [{"N": now}]},
                    },
                    "ReturnValues": "ALL_NEW",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                },
            )
        )
    refused = [
        ("SET #p = :v", {"#p": pk}, {":v": {"S": "other"}}, None),  # a key attribute
        ("SET a = :v, a = :w", None, {":v": {"S": "1"}, ":w": {"S": "2"}}, None),  # twice
        ("SET a = :v SET b = :v", None, {":v": {"S": "1"}}, None),  # two SET clauses
        ("SET a.b = :v, a = :v", None, {":v": {"S": "1"}}, None),  # overlapping paths
        ("SET a = :v", {"#s": "nothing"}, {":v": {"S": "1"}, ":p": {"S": "processing"}}, "#s = :p"),
        # The same condition on another attribute, then without its value (moto fails).
        ("SET a = :v", {"#s": "state"}, {":v": {"S": "1"}, ":p": {"S": "processing"}}, "#s = :p"),
        ("SET a = :v", {"#s": "state"}, {":v": {"S": "1"}}, "#s = :p"),
    ]
    for update, names, values, condition in refused:
        request: dict[str, Any] = {"Key": key, "UpdateExpression": update}
        if names:
            request["ExpressionAttributeNames"] = names
        if values:
            request["ExpressionAttributeValues"] = values
        if condition:
            request["ConditionExpression"] = condition
        requests.append(("update_item", request))
    requests.append(
        (
            "query",
            {
                "KeyConditionExpression": "#p = :d",
                "FilterExpression": "attempts BETWEEN :lo AND :hi",
                "ExpressionAttributeNames": {"#p": pk},
                "ExpressionAttributeValues": {
                    ":d": {"S": "d1"},
                    ":lo": {"N": "1"},
                    ":hi": {"N": "9"},
                },
            },
        )
    )
    answers: list[Any] = []
    for operation, request in requests:
        for _ in range(2):
            try:
                answer = getattr(dynamodb, operation)(TableName=table, **request)
                answer.pop("ResponseMetadata")
                answers.append(answer)
            except ClientError as error:
                answers.append(error.response["Error"] | {"Item": error.response.get("Item")})
    return answers


def _both_ways(
    aws_emulator: AwsEmulator, requests: Callable[[DynamoDBClient, str], list[Any]]
) -> tuple[list[Any], list[Any]]:
    """The answers to ``requests`` on a new table through the emulator's faster paths,
    then through moto's own code on a new table of the same name (answers name it)."""
    dynamodb = _dynamodb(aws_emulator.endpoint_url)
    table = f"both-{uuid.uuid4().hex[:8]}"
    create_table(dynamodb, table)
    fast = requests(dynamodb, table)
    moto_patches.fast_path_users.remove(aws_emulator)
    try:
        dynamodb.delete_table(TableName=table)
        create_table(dynamodb, table)
        own = requests(dynamodb, table)
    finally:
        moto_patches.fast_path_users.append(aws_emulator)
    return fast, own


def test_updates_and_conditions_answer_as_moto_does(aws_emulator: AwsEmulator) -> None:
    fast, own = _both_ways(aws_emulator, _conditional_writes)

    assert fast == own
    # Claimed, claimed again past its lease, refused before it; every bad update refused.
    claims = [answer.get("Attributes", {}).get("attempts") for answer in fast[4:10]]
    assert claims == [{"N": "1"}, None, {"N": "2"}, None, None, None]
    assert fast[9]["Code"] == "ConditionalCheckFailedException"
    assert all("Code" in answer for answer in fast[10:20])
    assert "Code" not in fast[20]  # the same condition on "state" holds
    assert "Internal Server Error" in fast[22]["Message"]  # moto's answer to a missing value
    assert fast[-1]["Count"] == 1


def test_one_connection_carries_request_after_request(aws_emulator: AwsEmulator) -> None:
    host, port = aws_emulator.endpoint_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    auth = (
        "AWS4-HMAC-SHA256 Credential=x/20250101/us-east-1/{}/aws4_request, "
        "SignedHeaders=host, Signature=0"
    )

    def ask(target: str, body: bytes | Iterator[bytes], **headers: str) -> tuple[int, Any]:
        connection.request(
            "POST",
            "/",
            body=body,
            headers={
                "X-Amz-Target": target,
                "Content-Type": "application/x-amz-json-1.0",
                "Authorization": auth.format("dynamodb"),
                **headers,
            },
        )
        answer = connection.getresponse()
        return answer.status, (json.loads(answer.read()), answer.getheader("Connection"))

    listed = ask("DynamoDB_20120810.ListTables", b"{}")
    again = [ask("DynamoDB_20120810.ListTables", b"{}") for _ in range(3)]
    missing = ask("DynamoDB_20120810.GetItem", b'{"TableName": "none", "Key": {}}')
    chunked = ask("DynamoDB_20120810.ListTables", iter([b"{", b"}"]))  # no length: chunks
    closing = ask("DynamoDB_20120810.ListTables", b"{}", Connection="close")

    assert listed[0] == 200 and "TableNames" in listed[1][0]
    assert listed[1][1] is None  # kept open
    assert again == [listed] * 3
    assert missing[0] == 400 and "ResourceNotFound" in missing[1][0]["__type"]
    assert chunked[0] == 200 and chunked[1] == listed[1]
    assert closing[0] == 200 and closing[1][1] == "close"  # as the caller asked
    assert connection.sock is None  # http.client saw the close


def test_an_open_connection_sends_each_answer_without_waiting_for_an_ack() -> None:
    # Nagle's algorithm would hold an answer's body until the caller acknowledges its
    # head, which the caller delays by 40 ms on a kept-open connection.
    with socket.socket() as ended, socket.create_server(("127.0.0.1", 0)) as listener:
        handler = gate._keep_alive_handler(WSGIRequestHandler, ended)
        caller = socket.create_connection(listener.getsockname()[:2])
        accepted, _ = listener.accept()
        with caller, accepted:
            request = handler.__new__(handler)
            request.request = accepted
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
            request.setup()
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            request.finish()


def _sized_puts(dynamodb: DynamoDBClient, table: str) -> list[Any]:
    """Items of many attributes, one just under moto's size limit and one just over."""
    pk, sk = table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY
    many = {f"a{i}": {"S": "x" * i} for i in range(40)}
    # Measured as moto measures: each name and value in bytes ("fits" and "over": 4).
    room = moto_patches.ITEM_SIZE_LIMIT - len(pk + "fits") - len(sk + "inbox") - len("big")
    answers: list[Any] = []
    for name, extra in (
        ("many", many),
        ("fits", {"big": {"S": "y" * room}}),
        ("over", {"big": {"S": "y" * (room + 1)}}),
    ):
        item = {pk: {"S": name}, sk: {"S": "inbox"}, **extra}
        try:
            dynamodb.put_item(TableName=table, Item=item)
            answers.append(
                dynamodb.get_item(TableName=table, Key={pk: item[pk], sk: item[sk]})["Item"]
            )
        except ClientError as error:
            answers.append(error.response["Error"])
    return answers


def test_items_are_sized_as_moto_sizes_them(aws_emulator: AwsEmulator) -> None:
    fast, own = _both_ways(aws_emulator, _sized_puts)

    assert fast == own
    assert len(fast[0]) == 42 and len(fast[1]["big"]["S"]) > 400_000
    assert "Item size has exceeded" in fast[2]["Message"]


def _index_moves(dynamodb: DynamoDBClient, table: str) -> list[Any]:
    """Entries that enter, move between and leave index shards by every kind of write
    (put, in-place update, refused update, delete, transaction, batch), each shard read
    page by page after each write; every page, in order."""
    pk, sk = table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY
    shard_key, listed_key = (
        table_layout.STATE_INDEX_PARTITION_KEY,
        table_layout.STATE_INDEX_SORT_KEY,
    )
    names = {"#shard": shard_key, "#listed": listed_key}

    def key(n: int) -> dict[str, Any]:
        return {pk: {"S": f"d{n}"}, sk: {"S": "inbox"}}

    def move(n: int, shard: str, listed_at: int) -> dict[str, Any]:
        return {
            "Key": key(n),
            "UpdateExpression": "SET #shard = :shard, #listed = :at",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {":shard": {"S": shard}, ":at": {"N": str(listed_at)}},
        }

    writes: list[tuple[str, dict[str, Any]]] = [
        *(
            ("put_item", {"Item": _listed(f"d{n}", "inbox", f"s#0{n % 2}", 40 - n)})
            for n in range(6)
        ),
        ("update_item", move(1, "s#00", 3)),  # moved to the other shard, in place
        (
            "update_item",
            {**move(2, "s#01", 1), "ConditionExpression": "attribute_not_exists(#shard)"},
        ),
        (
            "update_item",
            {
                "Key": key(3),
                "UpdateExpression": "REMOVE #shard, #listed",
                "ExpressionAttributeNames": names,
            },
        ),
        ("delete_item", {"Key": key(4)}),
        ("update_item", move(9, "s#01", 2)),  # a new item, by an update
    ]
    pages: list[Any] = []
    for operation, request in writes:
        try:
            getattr(dynamodb, operation)(TableName=table, **request)
        except ClientError as error:
            pages.append(error.response["Error"]["Code"])
        if operation == "update_item" and "REMOVE" in request["UpdateExpression"]:
            dynamodb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": table, "Item": _listed("d7", "inbox", "s#00", 7)}}
                ]
            )
            dynamodb.batch_write_item(
                RequestItems={
                    table: [
                        {"DeleteRequest": {"Key": key(0)}},
                        {"PutRequest": {"Item": _listed("d8", "inbox", "s#01", 8)}},
                    ]
                }
            )
        for shard in ("s#00", "s#01"):
            arguments: dict[str, Any] = {
                "TableName": table,
                "IndexName": table_layout.STATE_INDEX,
                "KeyConditionExpression": "#shard = :shard AND #listed < :before",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": {":shard": {"S": shard}, ":before": {"N": "100"}},
                "Limit": 2,
            }
            while True:
                page = dynamodb.query(**arguments)
                pages.append([item[pk]["S"] for item in page["Items"]])
                if "LastEvaluatedKey" not in page:
                    break
                arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return pages


def test_index_queries_follow_every_write_as_moto_does(aws_emulator: AwsEmulator) -> None:
    fast, own = _both_ways(aws_emulator, _index_moves)

    assert fast == own
    # After the last write: d1 moved in, d3 left, d0 and d4 deleted, d7 and d8 and d9 came.
    assert fast[-4:] == [["d1", "d7"], ["d2"], ["d9", "d8"], ["d5"]]


def test_an_emulator_whose_port_was_taken_meanwhile_starts_on_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from local.aws_emulator import process  # noqa: PLC0415

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1]])
        real = process.free_port
        monkeypatch.setattr(process, "free_port", lambda: next(ports, None) or real())
        emulator = AwsEmulatorProcess()
        emulator.start()
        try:
            assert emulator.endpoint_url != f"http://127.0.0.1:{taken.getsockname()[1]}"
            dynamodb = _dynamodb(emulator.endpoint_url, emulator.credentials)
            assert dynamodb.list_tables()["TableNames"] == []
        finally:
            emulator.stop()


def test_a_held_write_whose_caller_hangs_up_is_dropped_and_one_whose_caller_waits_lands(
    aws_emulator: AwsEmulator,
) -> None:
    """The kill points' hold (local/kill_point.py): a killed worker's write never lands."""
    controls = EmulatorControls(aws_emulator.endpoint_url)
    dynamodb = _dynamodb(aws_emulator.endpoint_url)
    table = f"held-{uuid.uuid4().hex[:8]}"
    create_table(dynamodb, table)
    held_before = controls.counts().get("held", 0)

    def put(sk: str, client: DynamoDBClient) -> None:
        client.put_item(TableName=table, Item={"pk": {"S": "d1"}, "sk": {"S": sk}})

    controls.hold_next("PutItem", ['"effect#gone"'], 1.0)
    # A caller that gives up (as a killed process's socket closes) while the write is held.
    impatient = boto3.client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=aws_emulator.endpoint_url,
        config=Config(read_timeout=0.5, retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    with pytest.raises(ReadTimeoutError):
        put("effect#gone", impatient)
    controls.hold_next("PutItem", ['"effect#kept"'], 0.2)
    put("effect#kept", dynamodb)  # held 0.2 s, its caller still there: applied

    def stored(sk: str) -> bool:
        key = {"pk": {"S": "d1"}, "sk": {"S": sk}}
        return "Item" in dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)

    assert stored("effect#kept")
    # Not dropped, it would land once its hold of 1 s ends: look for twice that.
    assert not poll(lambda: stored("effect#gone"), bool, deadline_seconds=2.0)
    assert controls.counts().get("held", 0) == held_before + 2
