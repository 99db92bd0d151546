#!/usr/bin/env python3
"""Checkpoint a training job when capblock says its Capacity Block is about to end.

Polls an SQS queue subscribed to capblock's workloads topic (ideally with a filter policy on
`reservation_id`, see docs/notifications.md) and, for each checkpoint notice, either sends a
signal to the training process or touches a file the training loop watches.

    pip install boto3
    python3 checkpoint-on-notice.py --queue-url URL --pid-file /run/train.pid
    python3 checkpoint-on-notice.py --queue-url URL --touch /shared/CHECKPOINT_NOW --kinds reminder-30m,aws-expiration-warning

Notices are JSON: reservation_id, region, instance_type, end_date, termination_time,
minutes_left, kind (delivered, reminder-<N>m, aws-expiration-warning, instance-interruption),
instance_ids and notice_id. The same notice_id is never acted on twice (SNS and SQS deliver at
least once). Works with raw message delivery on or off.
"""

import argparse
import json
import os
import pathlib
import signal
import sys
import time

import boto3

# "delivered" is informational: the block just started, there is nothing to save yet.
DEFAULT_KINDS = "reminder-1440m,reminder-120m,reminder-30m,aws-expiration-warning,instance-interruption"


def parse_notice(body: str) -> dict:
    """The notice, from a raw delivery or from the SNS envelope around it."""
    msg = json.loads(body)
    if isinstance(msg, dict) and msg.get("Type") == "Notification" and "Message" in msg:
        msg = json.loads(msg["Message"])
    if not isinstance(msg, dict) or "reservation_id" not in msg:
        raise ValueError("not a capblock checkpoint notice")
    return msg


def this_instance_id() -> str | None:
    """The EC2 instance id from IMDSv2, or None off EC2."""
    import urllib.request

    try:
        token_req = urllib.request.Request(
            "http://169.254.169.254/latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"},
        )
        token = urllib.request.urlopen(token_req, timeout=1).read().decode()
        id_req = urllib.request.Request(
            "http://169.254.169.254/latest/meta-data/instance-id",
            headers={"X-aws-ec2-metadata-token": token},
        )
        return urllib.request.urlopen(id_req, timeout=1).read().decode()
    except OSError:
        return None


def concerns_me(notice: dict, me: str | None) -> bool:
    # An interruption warning names the instances of the whole block; act on it only if this
    # instance is among them (or when we cannot tell).
    ids = notice.get("instance_ids") or []
    return me is None or not ids or me in ids


def trigger(args, notice: dict) -> None:
    if args.touch:
        path = pathlib.Path(args.touch)
        path.write_text(json.dumps(notice) + "\n")  # the training loop checks for this file
        print(f"wrote {path}", flush=True)
    if args.pid_file or args.pid:
        pid = args.pid or int(pathlib.Path(args.pid_file).read_text().strip())
        os.kill(pid, getattr(signal, args.signal))
        print(f"sent {args.signal} to {pid}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queue-url", required=True)
    p.add_argument("--region", default=os.environ.get("AWS_REGION"))
    p.add_argument("--kinds", default=DEFAULT_KINDS, help="comma-separated notice kinds to act on")
    p.add_argument("--reservation-id", help="ignore notices for other blocks (if the queue has no filter policy)")
    p.add_argument("--pid", type=int, help="process to signal")
    p.add_argument("--pid-file", help="file holding the pid of the process to signal")
    p.add_argument("--signal", default="SIGUSR1")
    p.add_argument("--touch", help="file to write the notice to")
    p.add_argument("--once", action="store_true", help="exit after the first notice acted on")
    args = p.parse_args()
    if not (args.pid or args.pid_file or args.touch):
        p.error("give --pid, --pid-file or --touch")

    kinds = {k.strip() for k in args.kinds.split(",") if k.strip()}
    sqs = boto3.client("sqs", region_name=args.region)
    me = this_instance_id()
    seen: set[str] = set()
    print(f"waiting for {sorted(kinds)} on {args.queue_url} (instance {me or 'unknown'})", flush=True)

    while True:
        resp = sqs.receive_message(QueueUrl=args.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=20)
        for m in resp.get("Messages", []):
            try:
                notice = parse_notice(m["Body"])
            except (ValueError, json.JSONDecodeError) as e:
                print(f"skipping message {m['MessageId']}: {e}", file=sys.stderr, flush=True)
                sqs.delete_message(QueueUrl=args.queue_url, ReceiptHandle=m["ReceiptHandle"])
                continue
            nid = notice.get("notice_id") or m["MessageId"]
            act = (
                nid not in seen
                and notice.get("kind") in kinds
                and (args.reservation_id is None or notice["reservation_id"] == args.reservation_id)
                and concerns_me(notice, me)
            )
            print(
                f"{notice.get('kind')} for {notice['reservation_id']}: {notice.get('minutes_left')} min "
                f"to termination at {notice.get('termination_time')} -> {'checkpoint' if act else 'ignore'}",
                flush=True,
            )
            if act:
                trigger(args, notice)
                seen.add(nid)
            # Delete only after acting: a crash before this redelivers the notice.
            sqs.delete_message(QueueUrl=args.queue_url, ReceiptHandle=m["ReceiptHandle"])
            if act and args.once:
                return 0
        if not resp.get("Messages"):
            time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
