"""The baseline `make bench` compares capblock's scan with: the way a typical script asks for
Capacity Block offerings, one DescribeCapacityBlockOfferings call after another (region by
region, boto3, the standard retry mode), paginated. Prints one JSON object.

Usage: baseline.py --endpoint URL --regions R,.. --types T,.. --counts 1,2 --days 1,7
                   --start RFC3339 --end RFC3339
"""

import argparse
import datetime as dt
import json
import time

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError


def main():
    p = argparse.ArgumentParser()
    for a in ("--endpoint", "--regions", "--types", "--counts", "--days", "--start", "--end"):
        p.add_argument(a, required=True)
    a = p.parse_args()
    start = dt.datetime.fromisoformat(a.start)
    latest = dt.datetime.fromisoformat(a.end)
    config = Config(retries={"mode": "standard"})
    clients = {
        r: boto3.client("ec2", region_name=r, endpoint_url=a.endpoint, config=config)
        for r in a.regions.split(",")
    }
    queries = offerings = failed = 0
    first_error = None
    t0 = time.perf_counter()
    for ec2 in clients.values():
        for itype in a.types.split(","):
            for count in a.counts.split(","):
                for days in a.days.split(","):
                    queries += 1
                    hours = int(days) * 24
                    kwargs = {
                        "CapacityDurationHours": hours,
                        "InstanceType": itype,
                        "InstanceCount": int(count),
                        "StartDateRange": start,
                        "EndDateRange": latest + dt.timedelta(hours=hours),
                        "MaxResults": 100,
                    }
                    try:
                        while True:
                            page = ec2.describe_capacity_block_offerings(**kwargs)
                            offerings += len(page.get("CapacityBlockOfferings", []))
                            if not page.get("NextToken"):
                                break
                            kwargs["NextToken"] = page["NextToken"]
                    except (BotoCoreError, ClientError) as e:  # a script would log and go on
                        failed += 1
                        first_error = first_error or f"{type(e).__name__}: {e}"
    seconds = time.perf_counter() - t0
    print(json.dumps({"queries": queries, "seconds": seconds, "offerings": offerings,
                      "failed": failed, "first_error": first_error}))


if __name__ == "__main__":
    main()
