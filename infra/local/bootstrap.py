#!/usr/bin/env python3
"""Create the capblock resources in a running moto server (idempotent).

Usage: bootstrap.py --endpoint http://127.0.0.1:PORT [--table NAME]

Creates:
  * DynamoDB table (PAY_PER_REQUEST; pk/sk keys; GSI "gsi1" on gsi1pk/gsi1sk and
    "gsi2" on gsi2pk/gsi2sk (people's requests), projection ALL; TTL on attribute "ttl")
  * SNS topics capblock-alerts and capblock-workloads
  * SQS "tap" queues capblock-alerts-tap and capblock-workloads-tap, subscribed
    to those topics with raw delivery OFF (the full SNS envelope, including
    MessageAttributes, lands in the queue), plus queue policies allowing the
    topics to send.

Prints KEY=VALUE lines on stdout (consumed by stack.sh):
  CAPBLOCK_TABLE, CAPBLOCK_ALERTS_TOPIC_ARN, CAPBLOCK_WORKLOADS_TOPIC_ARN,
  CAPBLOCK_ALERTS_TAP_URL, CAPBLOCK_WORKLOADS_TAP_URL
"""

import argparse
import json
import sys

import boto3
from botocore.exceptions import ClientError

REGION = "us-east-1"

# topic name -> (tap queue name, env var for topic ARN, env var for tap URL)
TOPICS = {
    "capblock-alerts": (
        "capblock-alerts-tap",
        "CAPBLOCK_ALERTS_TOPIC_ARN",
        "CAPBLOCK_ALERTS_TAP_URL",
    ),
    "capblock-workloads": (
        "capblock-workloads-tap",
        "CAPBLOCK_WORKLOADS_TOPIC_ARN",
        "CAPBLOCK_WORKLOADS_TAP_URL",
    ),
}


def client(service, endpoint):
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def ensure_table(ddb, name):
    try:
        ddb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
                {"AttributeName": "gsi1pk", "AttributeType": "S"},
                {"AttributeName": "gsi1sk", "AttributeType": "S"},
                {"AttributeName": "gsi2pk", "AttributeType": "S"},
                {"AttributeName": "gsi2sk", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "gsi1",
                    "KeySchema": [
                        {"AttributeName": "gsi1pk", "KeyType": "HASH"},
                        {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                },
                {
                    "IndexName": "gsi2",
                    "KeySchema": [
                        {"AttributeName": "gsi2pk", "KeyType": "HASH"},
                        {"AttributeName": "gsi2sk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                },
            ],
        )
    except ClientError as e:
        if e.response["Error"]["Code"] != "ResourceInUseException":
            raise
    ddb.get_waiter("table_exists").wait(
        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30}
    )
    ttl = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        ddb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"},
        )


def ensure_tap(sns, sqs, topic_name, queue_name):
    topic_arn = sns.create_topic(Name=topic_name)["TopicArn"]  # idempotent
    queue_url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]  # idempotent
    queue_arn = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AllowTopic",
                "Effect": "Allow",
                "Principal": {"Service": "sns.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
            }
        ],
    }
    sqs.set_queue_attributes(
        QueueUrl=queue_url, Attributes={"Policy": json.dumps(policy)}
    )
    existing = [
        s
        for page in sns.get_paginator("list_subscriptions_by_topic").paginate(
            TopicArn=topic_arn
        )
        for s in page["Subscriptions"]
        if s["Protocol"] == "sqs" and s["Endpoint"] == queue_arn
    ]
    if existing:
        sub_arn = existing[0]["SubscriptionArn"]
    else:
        sub_arn = sns.subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=queue_arn,
            Attributes={"RawMessageDelivery": "false"},
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]
    sns.set_subscription_attributes(
        SubscriptionArn=sub_arn,
        AttributeName="RawMessageDelivery",
        AttributeValue="false",
    )
    return topic_arn, queue_url


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", required=True, help="moto server URL")
    ap.add_argument("--table", default="capblock-local")
    args = ap.parse_args()

    ddb = client("dynamodb", args.endpoint)
    sns = client("sns", args.endpoint)
    sqs = client("sqs", args.endpoint)

    out = {"CAPBLOCK_TABLE": args.table}
    ensure_table(ddb, args.table)
    for topic_name, (queue_name, arn_var, url_var) in TOPICS.items():
        out[arn_var], out[url_var] = ensure_tap(sns, sqs, topic_name, queue_name)

    for k, v in out.items():
        print(f"{k}={v}")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - one clear line for stack.sh
        print(f"bootstrap.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
