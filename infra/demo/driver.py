"""`make demo`'s story: two simulated weeks of the real Lambda functions against the local stack.

Run by infra/demo-steps.sh inside a started local stack (its env loaded). Starts each function
binary behind `capblock-local-lambda` (a local Lambda Runtime API) and plays EventBridge and
EventBridge Scheduler around them: every step it moves the simulated market's clock, fires the
reminder schedules whose time has come (and deletes them, as ActionAfterCompletion=DELETE
would), sends EC2's Capacity Block events at a block's start and 40 minutes before its end, then
invokes track-blocks and scan-offerings with the scheduler's payload. It prints a timeline, what
Slack shows, and checks the story's invariants (exit 1 if one fails). The hand-off to the
workloads (capblock's events on a queue, p5-weekly's group and Run Command) is in handoff.py.
"""

import copy
import datetime as dt
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from decimal import Decimal

import boto3
from handoff import HandOff

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ["CARGO_TARGET_DIR"], "debug")
SIM = os.environ["CAPBLOCK_SIM_URL"]
STATE = os.environ["CAPBLOCK_STATE"]
FIXTURES = os.path.join(REPO, "core/src/domain/capacity_event/fixtures")
GROUP = "capblock-demo-reminders"
ACCOUNT = "123456789012"
# moto stores schedules but never fires them: the driver does. So these ARNs are only labels.
TARGET_ARN = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:on-capacity-event"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/capblock-demo-scheduler"
STEP = dt.timedelta(hours=3)
DAYS = 14
WARNING_BEFORE_END = dt.timedelta(minutes=40)

FUNCTIONS = {
    # EC2's describe limit runs 80 times faster in the demo's market (infra/examples/market.toml):
    # the scan paces itself on the same scale.
    "scan-offerings": {"CAPBLOCK_MODE": "live", "CAPBLOCK_DESCRIBE_REFILL_SECONDS": "0.05",
                        "CAPBLOCK_DESCRIBE_FASTEST_SECONDS": "0.0125", "CAPBLOCK_DESCRIBE_SLOWEST_SECONDS": "0.375",
                        "CAPBLOCK_ASK_SECONDS": "1"},
    "track-blocks": {
        "CAPBLOCK_MODE": "live",
        "CAPBLOCK_SCHEDULE_GROUP": GROUP,
        "CAPBLOCK_REMINDER_TARGET_ARN": TARGET_ARN,
        "CAPBLOCK_REMINDER_ROLE_ARN": ROLE_ARN,
    },
    "on-capacity-event": {"CAPBLOCK_SCHEDULE_GROUP": GROUP, "CAPBLOCK_REMINDER_ROLE_ARN": ROLE_ARN},
}


# The Organization's two teams, each with a member account its blocks are shared with (the
# simulator's organization: infra/market-sim/README.md), and each with a budget of its own. Every
# function stores the stack's settings, so they all read the same TeamBudgets.
TEAMS = {"pretraining": "111111111111", "evals": "222222222222"}
for _settings in FUNCTIONS.values():
    _settings["CAPBLOCK_TEAM_BUDGETS"] = "pretraining=30000,evals=3000"

# Every function runs on the simulated market's clock (a deployed stack runs on the wall clock;
# a live one refuses a payload whose time is not its clock's).
for _settings in FUNCTIONS.values():
    _settings["CAPBLOCK_SIMULATED_CLOCK_URL"] = SIM.rstrip("/") + "/_sim/clock"


def parse(ts):
    return dt.datetime.fromisoformat(ts)


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def short(t):
    return t.strftime("%a %m-%d %H:%M")


def sim(path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(SIM + path, data=data, method="GET" if body is None else "POST")
    with urllib.request.urlopen(req) as r:
        return json.load(r)


class Lambdas:
    """One capblock-local-lambda (and its function binary) per function."""

    def __init__(self):
        self.procs, self.urls = {}, {}

    def start(self):
        pid_file = os.path.join(STATE, "lambdas.pids")  # infra/demo.sh stops these on any exit
        open(pid_file, "w").close()
        for name, settings in FUNCTIONS.items():
            log_path = os.path.join(STATE, f"lambda-{name}.log")
            env = dict(os.environ, **settings)
            env.setdefault("RUST_LOG", "info")
            with open(log_path, "w") as log:
                p = subprocess.Popen(
                    [f"{BIN}/capblock-local-lambda", "--port", "0", "--name", name, "--", f"{BIN}/{name}"],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                )
            self.procs[name] = (p, log_path)
            with open(pid_file, "a") as f:
                f.write(f"{p.pid}\n")
        for name, (p, log_path) in self.procs.items():
            deadline = time.time() + 20
            while name not in self.urls:
                if p.poll() is not None or time.time() > deadline:
                    sys.exit(f"capblock-local-lambda for {name} did not start; see {log_path}")
                with open(log_path) as f:
                    for line in f:
                        if line.startswith("listening on "):
                            self.urls[name] = line.split()[-1]
                time.sleep(0.05)

    def stop(self):
        for p, _ in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p, _ in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()

    def invoke(self, name, event):
        req = urllib.request.Request(self.urls[name] + "/invoke", data=json.dumps(event).encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=90) as r:
                return True, json.load(r)
        except urllib.error.HTTPError as e:
            return False, json.loads(e.read() or b"{}")


class Story:
    def __init__(self, lambdas):
        self.fn = lambdas
        self.sqs = boto3.client("sqs")
        self.scheduler = boto3.client("scheduler")
        self.seen = {}  # reservation id -> last state seen
        self.delivered, self.warned = set(), set()
        self.failed_on_purpose = None
        self.errors = []
        self.workload_notices = 0
        self.reminders_fired = 0
        self.fired = []  # (reservation id, lead minutes, when the schedule was due)
        self.events_sent = 0
        self.alert_types = []
        self.handoff = HandOff(self.say)

    def say(self, now, text):
        print(f"{short(now)}  {text}")

    # --- what the market did ---------------------------------------------------------------

    def market(self, now):
        state = sim("/_sim/state")
        for r in state["reservations"]:
            rid, st = r["reservation_id"], r["state"]
            what = f"{r['instance_count']} x {r['instance_type']} {r['region']} {rule_of(r)}"
            old = self.seen.get(rid)
            if old is None:
                fee = r["upfront_fee"]
                self.say(now, f"PURCHASE   {rid}  {what}  {short(parse(r['start']))} -> {short(parse(r['end']))}  fee {fee}")
                if r["instance_type"] == "p4d.24xlarge" and self.failed_on_purpose is None:
                    # The one payment failure of the story, steered through the simulator.
                    self.failed_on_purpose = rid
                    sim("/_sim/payment", {"reservation_id": rid, "outcome": "fail", "after_hours": 2})
                    self.say(now, f"           (demo: the market is told to fail {rid}'s payment in 2 h)")
            elif old != st:
                label = {
                    "scheduled": "PAYMENT    succeeded",
                    "payment-failed": "PAYMENT    FAILED",
                    "active": "STARTED   ",
                    "expired": "EXPIRED   ",
                }.get(st, f"STATE      {st}")
                self.say(now, f"{label}  {rid}  {what}")
            self.seen[rid] = st
        for x in state.get("extensions", []):
            key, st = (x["reservation_id"], x["offering_id"]), x["status"]
            old = self.seen.get(key)
            hours = x["duration_hours"]
            if old is None:
                self.say(now, f"EXTENSION  {x['reservation_id']}  +{hours} h bought, fee {x['upfront_fee']} (new end {short(parse(x['end']))})")
            elif old != st:
                self.say(now, f"EXTENSION  {x['reservation_id']}  +{hours} h: {st}")
            self.seen[key] = st
        return state

    # --- what EventBridge would deliver --------------------------------------------------

    def ec2_events(self, now, state):
        for r in state["reservations"]:
            rid, start, end = r["reservation_id"], parse(r["start"]), parse(r["end"])
            if r["state"] in ("active", "expired") and rid not in self.delivered and start <= now:
                self.delivered.add(rid)
                self.send(now, "capacity-block-delivered.json", r, start, "AWS EVENT  Capacity Block Delivered")
            if r["state"] == "active" and rid not in self.warned and end - WARNING_BEFORE_END <= now:
                self.warned.add(rid)
                self.send(
                    now, "capacity-block-expiration-warning.json", r, end - WARNING_BEFORE_END,
                    "AWS EVENT  Capacity Block Expiration Warning",
                )

    def send(self, now, fixture, r, at, label):
        with open(os.path.join(FIXTURES, fixture)) as f:
            ev = json.load(f)
        ev = copy.deepcopy(ev)
        rid, region = r["reservation_id"], r["region"]
        ev.update(id=str(uuid.uuid4()), account=ACCOUNT, time=iso(at), region=region)
        ev["resources"] = [f"arn:aws:ec2:{region}:{ACCOUNT}:capacity-reservation/{rid}"]
        ev["detail"] = {"capacity-reservation-id": rid, "end-date": r["end"]}
        self.say(now, f"{label}  {rid}")
        self.events_sent += 1
        self.call(now, "on-capacity-event", ev)

    # --- what EventBridge Scheduler would fire ---------------------------------------------

    def schedules(self):
        out, token = [], None
        while True:
            kw = {"GroupName": GROUP, **({"NextToken": token} if token else {})}
            page = self.scheduler.list_schedules(**kw)
            for s in page.get("Schedules", []):
                full = self.scheduler.get_schedule(GroupName=GROUP, Name=s["Name"])
                expr = full["ScheduleExpression"]  # at(2026-12-11T11:00:00), in UTC
                at = dt.datetime.fromisoformat(expr[3:-1]).replace(tzinfo=dt.UTC)
                out.append((at, s["Name"], full["Target"]["Input"]))
            token = page.get("NextToken")
            if not token:
                return sorted(out)

    def reminders(self, now):
        for at, name, payload in self.schedules():
            if at > now:
                continue
            p = json.loads(payload)
            self.say(now, f"REMINDER   {p['reservation_id']}  {p['lead_minutes']} min before the end (schedule {name})")
            self.reminders_fired += 1
            self.fired.append((p["reservation_id"], p["lead_minutes"], at))
            self.call(now, "on-capacity-event", p)
            self.scheduler.delete_schedule(GroupName=GROUP, Name=name)  # ActionAfterCompletion=DELETE

    # --- the scheduled functions ---------------------------------------------------------

    def tick(self, now):
        for name in ("track-blocks", "scan-offerings"):
            self.call(now, name, {"source": "capblock.schedule", "time": iso(now)})

    def call(self, now, name, event):
        ok, answer = self.fn.invoke(name, event)
        if not ok:
            self.errors.append((now, name, answer))
            self.say(now, f"ERROR      {name}: {answer.get('errorType')}: {answer.get('errorMessage')}")

    # --- what was published --------------------------------------------------------------

    def drain(self, url):
        while True:
            msgs = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
            if not msgs:
                return
            for m in msgs:
                yield json.loads(json.loads(m["Body"])["Message"])
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

    def slack(self):
        for body in self.drain(os.environ["CAPBLOCK_ALERTS_TAP_URL"]):
            c = body["content"]
            self.alert_types.append(body["metadata"].get("eventType"))
            print("      ┌─ Slack #capacity ── thread " + body["metadata"]["threadId"])
            print("      │ " + c["title"])
            for line in c["description"].splitlines():
                print("      │ " + line)
            for step in c.get("nextSteps", []):
                print("      │ → " + step)
            print("      └─")
        n = sum(1 for _ in self.drain(os.environ["CAPBLOCK_WORKLOADS_TAP_URL"]))
        if n:
            self.workload_notices += n
            print(f"      ({n} workload notice(s) on the workloads topic, {self.workload_notices} so far)")

    # --- the clock ---------------------------------------------------------------------

    def next_time(self, now, state):
        """The next step: 3 hours on, or sooner if something is due before that."""
        midnight = now.replace(hour=0, minute=0, second=0) + dt.timedelta(days=1)  # price steps
        due = [now + STEP, midnight]
        delay = dt.timedelta(hours=state["behaviour"].get("payment_delay_hours", 3))
        for r in state["reservations"]:
            start, end = parse(r["start"]), parse(r["end"])
            due += [start, end, end - WARNING_BEFORE_END]
            if r["state"] == "payment-pending":
                bought = parse(r["purchased_at"])
                due += [bought + delay, bought + dt.timedelta(hours=2)]
        for x in state.get("extensions", []):
            if x["status"] == "payment-pending":
                due.append(parse(x["purchased_at"]) + delay)
        due += [at for at, _, _ in self.schedules()]
        due += self.handoff.due(state)
        return min(t for t in due if t > now)


def shares_summary(state):
    """The RAM shares capblock made (one per block, tagged with it), and for each the selector a
    consumer account's Karpenter uses to launch into the shared block: the owner's account and
    capblock's rule tag. Returns the shares by reservation id."""
    shares = sim("/_sim/ram/shares")["shares"]
    # The account that bought (and pays for) the blocks: what Karpenter's ownerID names.
    owner = next((s["owning_account_id"] for s in shares), "?")
    by_block = {}
    print()
    print("==> the blocks shared through AWS RAM with the teams' member accounts")
    for s in shares:
        rid = s["tags"].get("capblock:reservation", "?")
        by_block.setdefault(rid, []).append(s)
        principals = [a["associated_entity"] for a in s["associations"] if a["association_type"] == "PRINCIPAL"]
        print(f"  {rid}  rule {s['tags'].get('capblock:rule', '?')}  shared with {', '.join(principals)}  "
              f"share {s['status'].lower()}")
    for rule in sorted({s["tags"].get("capblock:rule") for s in shares}):
        team = next((t for t, acct in TEAMS.items()
                     if any(a["associated_entity"] == acct for s in shares if s["tags"].get("capblock:rule") == rule
                            for a in s["associations"])), "?")
        print(f"  team {team} (account {TEAMS.get(team, '?')}) selects {rule}'s blocks in its EC2NodeClass:")
        print("      capacityReservationSelectorTerms:")
        print(f"        - ownerID: \"{owner}\"")
        print(f"          tags: {{ capblock:rule: {rule} }}")
    return by_block


CAPACITY_ACCOUNT = "123456789012"  # the functions' account on moto (its default)


def member_client(service, account):
    """A boto3 client acting in member `account` (moto hands out that account's keys for any
    role assumed there)."""
    creds = boto3.client("sts").assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/capblock-demo-member", RoleSessionName="capblock-demo"
    )["Credentials"]
    return boto3.client(
        service,
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    )


def organization():
    """The Organization as its management account leaves it for capblock: RAM's sharing with
    it enabled (`aws ram enable-sharing-with-aws-organization`), which preflight checks. On moto
    the stack's account manages it."""
    orgs = boto3.client("organizations")
    try:
        orgs.create_organization(FeatureSet="ALL")
    except orgs.exceptions.AlreadyInOrganizationException:
        pass
    orgs.enable_aws_service_access(ServicePrincipal="ram.amazonaws.com")


def consumer_buses():
    """Each team's account as its member stack leaves it: a default-bus policy letting the
    capacity account put capblock's events (member.yaml's), and a rule that sends them to a
    queue the story reads at the end (member.yaml's own rule logs them). Returns the queues."""
    queues = {}
    for team, account in TEAMS.items():
        sqs, events = member_client("sqs", account), member_client("events", account)
        url = sqs.create_queue(QueueName=f"capblock-demo-{team}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_permission(Policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{
                "Sid": "capblock-capblock-local", "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{CAPACITY_ACCOUNT}:root"}, "Action": "events:PutEvents",
                "Resource": f"arn:aws:events:us-east-1:{account}:event-bus/default",
                "Condition": {"StringEquals": {"events:source": "capblock"}},
            }],
        }))
        events.put_rule(Name="capblock-events", EventPattern=json.dumps({"source": ["capblock"]}))
        events.put_targets(Rule="capblock-events", Targets=[{"Id": "queue", "Arn": arn}])
        queues[team] = url
    return queues


def consumer_events(queues):
    """What each team's own bus received, by detail-type and block."""
    got = {}
    print()
    print("==> capblock's events on the teams' own buses (member accounts)")
    for team, url in queues.items():
        sqs = member_client("sqs", TEAMS[team])
        seen = []
        while True:
            msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not msgs:
                break
            for m in msgs:
                e = json.loads(m["Body"])
                seen.append((e.get("detail-type"), e.get("detail", {}).get("reservation_id")))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        kinds = {}
        for kind, _ in seen:
            kinds[kind] = kinds.get(kind, 0) + 1
        print(f"  {team} ({TEAMS[team]}): " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
        got[team] = seen
    return got


def share_checks(shared, p5, a100, final):
    """Each paid block of the two rules shared once with its team's account, and unshared at its
    end; the block whose payment failed never shared."""
    def one(rid, account):
        got = shared.get(rid, [])
        return (len(got) == 1 and got[0]["status"] == "DELETED"
                and any(a["associated_entity"] == account for a in got[0]["associations"]))
    paid_a100 = [p for p in a100 if final.get(p["reservation_id"]) != "payment-failed"]
    failed_a100 = [p for p in a100 if final.get(p["reservation_id"]) == "payment-failed"]
    return [
        ("p5-weekly's block shared once with pretraining's account, unshared at its end",
         len(p5) == 1 and one(p5[0]["reservation_id"], TEAMS["pretraining"])),
        ("a100-daily's paid block shared once with evals' account, unshared at its end",
         len(paid_a100) >= 1 and all(one(p["reservation_id"], TEAMS["evals"]) for p in paid_a100)),
        ("the A100 block whose payment failed was never shared",
         bool(failed_a100) and all(p["reservation_id"] not in shared for p in failed_a100)),
    ]


def rule_of(r):
    tags = r.get("tags") or {}
    return f"[{tags.get('capblock:rule', '?')}]"


def main():
    scheduler = boto3.client("scheduler")
    try:
        scheduler.create_schedule_group(Name=GROUP)
    except scheduler.exceptions.ConflictException:
        pass
    lambdas = Lambdas()
    try:
        lambdas.start()
        story = Story(lambdas)
        organization()
        story.consumer_queues = consumer_buses()
        played = play(story)
        reported = report()
        preflight(lambdas)
        return played or reported
    finally:
        lambdas.stop()


def report():
    """`capblock report` for the story's month: per rule and team, what was spent beside each
    budget's own count, and what the blocks were used for. The demo fails if a rule's spend and
    its budget disagree (the report says so on stderr)."""
    month = sim("/_sim/state")["now"][:7]
    print()
    print(f"==> capblock report --month {month}: the month per rule and team, beside the budgets")
    sys.stdout.flush()
    out = subprocess.run([f"{BIN}/capblock", "report", "--month", month], capture_output=True, text=True, check=False)
    print(out.stdout, end="")
    disagree = [line for line in out.stderr.splitlines() if line.startswith("note:")]
    for line in disagree:
        print("  " + line)
    ok = out.returncode == 0 and not disagree
    print(f"  {'ok  ' if ok else 'FAIL'}  the report agrees with every budget to the cent")
    return 0 if ok else 1


def preflight(lambdas):
    """`capblock preflight` while the functions still run: it invokes each one (Lambda's Invoke,
    through a capblock-local-lambda router) to check its own role. Its exit code is not the
    demo's: the trn2 quota of 0 fails a check on purpose."""
    print()
    print("==> capblock preflight: what an operator checks in the account before Mode=live (here the simulator:")
    print("    the account's trn2 quota of 0 is a failed check, on purpose). Each function checks its own")
    print("    role: DryRun calls, reads and a probe item of its own; what has an effect is not checked")
    sys.stdout.flush()
    routes = [a for name, url in lambdas.urls.items() for a in ("--route", f"{name}={url}")]
    log_path = os.path.join(STATE, "lambda-router.log")
    with open(log_path, "w") as log:
        router = subprocess.Popen(
            [f"{BIN}/capblock-local-lambda", "--port", "0", *routes],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    try:
        url, deadline = None, time.time() + 20
        while url is None:
            if router.poll() is not None or time.time() > deadline:
                sys.exit(f"the Invoke router did not start; see {log_path}")
            with open(log_path) as f:
                url = next((line.split()[-1] for line in f if line.startswith("listening on ")), None)
            time.sleep(0.05)
        env = dict(os.environ, AWS_ENDPOINT_URL_LAMBDA=url)
        subprocess.run([f"{BIN}/capblock", "preflight", "--pause-seconds", "0.05"], env=env, check=False)
    finally:
        router.terminate()
        router.wait(timeout=5)


def play(story):
    began = time.time()
    start = parse(sim("/_sim/state")["now"])
    end = start + dt.timedelta(days=DAYS)
    print(f"==> two simulated weeks, {iso(start)} -> {iso(end)}: the real function binaries behind")
    print("    capblock-local-lambda; scan-offerings and track-blocks every 3 h (finer when something is")
    print("    due), EC2 events at a block's start and 40 min before its end, reminders when due")
    print()
    now = start
    steps = 0
    while True:
        state = story.market(now)
        story.ec2_events(now, state)
        story.reminders(now)
        story.tick(now)
        state = story.market(now)  # a purchase made by this tick
        story.slack()
        story.handoff.observe(now, state)
        steps += 1
        state = sim("/_sim/state")
        nxt = story.next_time(now, state)
        if nxt > end:
            break
        sim("/_sim/clock", {"set": iso(nxt)})
        now = nxt
    print()
    print(f"==> {steps} steps over {DAYS} simulated days in {time.time() - began:.0f} s of real time")
    return summary(story, sim("/_sim/state"))


def summary(story, state):
    print()
    print("==> what the market recorded")
    by_rule = {}
    for p in state["purchases"]:
        by_rule.setdefault(p["tags"].get("capblock:rule", "?"), []).append(p)
    final = {r["reservation_id"]: r["state"] for r in state["reservations"]}
    for rule, ps in sorted(by_rule.items()):
        print(f"  {rule}: {len(ps)} purchase(s)")
        for p in ps:
            print(
                f"    {p['reservation_id']}  {p['instance_count']} x {p['instance_type']}  {p['region']}  "
                f"{p['start'][:16]} -> {p['end'][:16]}  fee {p['upfront_fee']}  {final.get(p['reservation_id'])}"
            )
    print(
        f"  reminders fired: {story.reminders_fired}, EC2 events sent: {story.events_sent}, "
        f"workload notices: {story.workload_notices}, function errors: {len(story.errors)}"
    )
    p5 = by_rule.get("p5-weekly", [])
    starter = by_rule.get("starter", [])
    a100 = by_rule.get("a100-daily", [])
    failed = [p for p in a100 if final.get(p["reservation_id"]) == "payment-failed"]
    rebought = failed and any(p["purchased_at"] > failed[0]["purchased_at"] for p in a100)
    ultra = by_rule.get("trn2-ultra", [])
    ultra_id = ultra[0]["reservation_id"] if len(ultra) == 1 else None
    ultra_end = parse(ultra[0]["end"]) if ultra_id else None
    # An UltraServer's instances go 60 minutes before the end: its 30-minute reminder is due 90
    # minutes before it (a plain block's, 60).
    ultra_30 = [at for rid, lead, at in story.fired if rid == ultra_id and lead == 30]
    health = story.alert_types.count("health")
    emf_lines, emf_names, emf_problems = metric_lines()
    # Errors appears only when an invocation fails, which this story never has.
    dashboard = subprocess.run(
        [sys.executable, os.path.join(REPO, "infra", "deploy", "dashboard.py"), "--metrics"],
        capture_output=True, text=True, check=True, cwd=REPO,
    ).stdout.split()
    missing = sorted(set(dashboard) - emf_names - {"Errors"})
    print(f"  metrics: {emf_lines} EMF line(s) in the function logs, {len(emf_names)} metric(s)"
          + (f"; problems: {emf_problems[:3]}" if emf_problems else "")
          + (f"; the dashboard's {missing} never written" if missing else ""))
    shared = shares_summary(state)
    consumed = consumer_events(story.consumer_queues)
    paid = [p["reservation_id"] for p in p5 + a100 if final.get(p["reservation_id"]) != "payment-failed"]

    def once_each(team, blocks):
        got = [rid for kind, rid in consumed.get(team, []) if kind == "Block Shared"]
        return bool(blocks) and sorted(got) == sorted(blocks)
    checks = [
        ("the starter rule bought at today's list or below", bool(starter) and all(at_list_or_below(p) for p in starter)),
        ("p5-weekly bought exactly once", len(p5) == 1),
        ("p5-weekly's block ran and expired", len(p5) == 1 and final.get(p5[0]["reservation_id"]) == "expired"),
        ("a100-daily's first payment failed", bool(failed) and failed[0]["reservation_id"] == story.failed_on_purpose),
        ("a100-daily rebought after the failure", bool(rebought)),
        ("reminders fired", story.reminders_fired > 0),
        ("trn2's quota of 0 alerted once", story.alert_types.count("quota-zero") == 1),
        ("trn2-ultra bought one UltraServer block, which ran and expired",
         ultra_id is not None and final.get(ultra_id) == "expired"),
        ("the UltraServer's 30-minute reminder came 90 minutes before its end",
         ultra_30 == [ultra_end - dt.timedelta(minutes=90)] if ultra_end else False),
        ("its health alert and its recovery, once each", health == 2),
        ("p5-weekly's idle-but-paid alert and its recovery, once each", story.alert_types.count("idle") == 2),
        ("no function failed", not story.errors),
        ("every dashboard metric written as valid EMF", emf_lines > 0 and not emf_problems and not missing),
        *story.handoff.checks(state),
        *share_checks(shared, p5, a100, final),
        ("each team's own bus got Block Shared once per block of its rule",
         once_each("pretraining", [r for r in paid if any(p["reservation_id"] == r for p in p5)])
         and once_each("evals", [r for r in paid if any(p["reservation_id"] == r for p in a100)])),
        ("no team got another team's block's events",
         all(rid in {p["reservation_id"] for p in (p5 if team == "pretraining" else a100)}
             for team, seen in consumed.items() for _, rid in seen if rid)),
    ]
    print()
    print("==> the story's invariants")
    for what, ok in checks:
        print(f"  {'ok  ' if ok else 'FAIL'}  {what}")
    return 0 if all(ok for _, ok in checks) else 1



# The p5 rate published from 2026-10-07 (core/src/domain/list_price.rs), per GPU-hour; a
# p5.48xlarge has 8 GPUs.
P5_LIST = Decimal("5.97")


def at_list_or_below(purchase):
    """A p5 purchase whose fee is at most the published list over its GPU-hours."""
    hours = Decimal(int((parse(purchase["end"]) - parse(purchase["start"])).total_seconds())) / 3600
    return Decimal(purchase["upfront_fee"]) <= P5_LIST * 8 * purchase["instance_count"] * hours


def metric_lines():
    """The EMF documents the functions wrote to stdout (here, their lambda-*.log): how many,
    the metric names they define, and what is wrong with any of them (a short reading of the
    EMF specification; tests/src/emf.rs is the full one, run on real function runs in make test)."""
    count, names, problems = 0, set(), []
    for f in sorted(os.listdir(STATE)):
        if not (f.startswith("lambda-") and f.endswith(".log")):
            continue
        with open(os.path.join(STATE, f), encoding="utf-8", errors="replace") as log:
            for line in log:
                if '"_aws"' not in line or not line.lstrip().startswith("{"):
                    continue
                count += 1
                try:
                    doc = json.loads(line)
                    for d in doc["_aws"]["CloudWatchMetrics"]:
                        for dims in d["Dimensions"]:
                            if not all(isinstance(doc.get(k), str) and doc[k] for k in dims):
                                problems.append(f"{f}: a dimension of {dims} is missing")
                        for m in d["Metrics"]:
                            if not isinstance(doc.get(m["Name"]), (int, float)):
                                problems.append(f"{f}: {m['Name']} has no number")
                            names.add(m["Name"])
                    if not isinstance(doc["_aws"]["Timestamp"], int):
                        problems.append(f"{f}: Timestamp is not an integer")
                except (ValueError, KeyError, TypeError) as e:
                    problems.append(f"{f}: {e!r}")
    return count, names, problems


if __name__ == "__main__":
    sys.exit(main())
