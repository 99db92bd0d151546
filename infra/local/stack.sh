#!/usr/bin/env bash
# capblock local stack: moto (DynamoDB, SNS, SQS, EventBridge, Scheduler, SSM, Auto Scaling,
# Resource Groups, S3) plus the capblock market simulator (EC2 capacity-block API). See --help.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
REQUIREMENTS="$SCRIPT_DIR/requirements.txt"
BOOTSTRAP="$SCRIPT_DIR/bootstrap.py"

CAPBLOCK_CACHE="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}"
CAPBLOCK_STATE="${CAPBLOCK_STATE:-$CAPBLOCK_CACHE/stack}"
VENV="$CAPBLOCK_CACHE/venv"
ENV_FILE="$CAPBLOCK_STATE/stack.env"
STARTUP_TIMEOUT="${CAPBLOCK_STARTUP_TIMEOUT:-30}"
STOP_TIMEOUT=5
SERVICES=(moto sim)

usage() {
	cat <<EOF
Usage: infra/local/stack.sh COMMAND

Local stand-in for the AWS services capblock talks to. Two processes on
127.0.0.1: a moto server (DynamoDB, SNS, SQS, EventBridge, Scheduler, SSM, Auto
Scaling, Resource Groups, Service Quotas, S3) and the capblock market simulator (the
EC2 capacity-block / capacity-reservation API).

Commands:
  up            Install moto into a cached venv if needed, start both servers,
                create the table, topics and tap queues and the CloudFormation
                stand-in stack capblock-local (dry-run), write and print the
                env file (shell 'export' lines). A no-op that just prints the
                env when a healthy stack is already running.
                Use it as:  eval "\$(infra/local/stack.sh up)"
  down          Stop both servers (TERM, KILL after ${STOP_TIMEOUT}s) and remove pid
                files and the env file. A no-op when nothing runs.
  deploy [KEY=VALUE...]
                The stand-in for 'sam deploy' (infra/local/deploy.py): sets the
                CloudFormation stack capblock-local's parameters (Mode=dry-run|live,
                AccountMonthlyBudget=USD, TeamBudgets=team=USD,...; one not given keeps
                its value) and runs the built scan-offerings once so the stack's
                settings are stored, as a deployed function's first run does. 'up'
                creates the stack in dry-run. Then: capblock --stack capblock-local ...
  env           Print the env file; exit 1 if the stack is not up.
  status        One line per service: running/stopped and its URL
                (exit 0 if both run, 3 otherwise).
  logs [N]      Last N (default 40) lines of both server logs.
  run -- CMD... up, run CMD with the env file loaded, then down - always, even
                if CMD fails or is interrupted. Exits with CMD's exit code.
                'up' output goes to stderr. Used by 'make test'.
  help          This text.

The env file exports:
  AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
  AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
  AWS_ENDPOINT_URL_{DYNAMODB,SNS,SQS,SCHEDULER,EVENTBRIDGE,SSM,AUTO_SCALING,RESOURCE_GROUPS,
                   EKS,SERVICE_QUOTAS,CLOUDFORMATION,STS,ORGANIZATIONS,S3} -> moto
      (S3 path-style: the SDKs address a bucket by path when the endpoint is an IP)
  AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_RAM, CAPBLOCK_SIM_URL -> simulator
      (the simulator serves RAM for Capacity Blocks: moto refuses to share them)
  CAPBLOCK_MOTO_URL, CAPBLOCK_TABLE, CAPBLOCK_STACK=capblock-local
  CAPBLOCK_ALERTS_TOPIC_ARN, CAPBLOCK_WORKLOADS_TOPIC_ARN
  CAPBLOCK_ALERTS_TAP_URL, CAPBLOCK_WORKLOADS_TAP_URL  (SQS queues subscribed
      to the topics, raw delivery off: read them to see what was published)
  No bare AWS_ENDPOINT_URL: EC2 goes to the simulator, the rest to moto.

Settings (environment):
  CAPBLOCK_CACHE     cache folder (default \$HOME/.cache/capblock); the venv
                     lives in \$CAPBLOCK_CACHE/venv
  CAPBLOCK_STATE     pid files, logs, stack.env (default \$CAPBLOCK_CACHE/stack)
  MOTO_PORT, SIM_PORT  fixed ports (default: two free ports picked at 'up')
  CAPBLOCK_SIM_BIN   simulator binary (default
                     \${CARGO_TARGET_DIR:-\$HOME/.cache/capblock/target}/debug/capblock-market-sim;
                     build it with: cargo build -p capblock-market-sim)
  CAPBLOCK_SCENARIO  simulator scenario (default <repo>/infra/examples/market.toml,
                     skipped if that file does not exist)
  CAPBLOCK_TABLE     DynamoDB table name (default capblock-local)
  CAPBLOCK_STARTUP_TIMEOUT  seconds to wait for each server (default 30)

Logs: \$CAPBLOCK_STATE/moto.log and \$CAPBLOCK_STATE/sim.log
EOF
}

log() { printf 'stack.sh: %s\n' "$*" >&2; }
UP_IN_PROGRESS=""
die() {
	log "error: $*"
	if [[ -n $UP_IN_PROGRESS ]]; then
		# A failed 'up' must not leave half a stack behind.
		UP_IN_PROGRESS=""
		local svc
		for svc in "${SERVICES[@]}"; do stop_service "$svc" || true; done
		rm -f "$ENV_FILE" "$ENV_FILE.tmp"
	fi
	exit 1
}

pid_file() { printf '%s/%s.pid' "$CAPBLOCK_STATE" "$1"; }
port_file() { printf '%s/%s.port' "$CAPBLOCK_STATE" "$1"; }
log_file() { printf '%s/%s.log' "$CAPBLOCK_STATE" "$1"; }

read_file() {
	if [[ -s $1 ]]; then head -n1 "$1"; fi
}

health_url() {
	case "$1" in
	moto) printf 'http://127.0.0.1:%s/moto-api/' "$2" ;;
	sim) printf 'http://127.0.0.1:%s/_sim/health' "$2" ;;
	esac
}

# True if PID exists and is not a zombie.
pid_alive() {
	local pid=$1 stat
	kill -0 "$pid" 2>/dev/null || return 1
	if [[ -r /proc/$pid/stat ]]; then
		stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
		stat=${stat##*) }
		[[ ${stat%% *} != Z ]] || return 1
	fi
	return 0
}

# True if any non-zombie process is left in process group PGID.
group_alive() {
	local pgid=$1 p
	if command -v pgrep >/dev/null; then
		for p in $(pgrep -g "$pgid" 2>/dev/null); do
			pid_alive "$p" && return 0
		done
		return 1
	fi
	kill -0 -- "-$pgid" 2>/dev/null
}

# True if PID is alive and was started by this script for this state folder
# (guards against pid reuse after a reboot or crash).
is_ours() {
	local pid=$1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	pid_alive "$pid" || return 1
	if [[ -r /proc/$pid/environ ]]; then
		tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
			grep -qxF "CAPBLOCK_STACK_STATE=$CAPBLOCK_STATE" || return 1
	fi
	return 0
}

http_ok() { # URL -> true on HTTP 200
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null) || true
	[[ $code == 200 ]]
}

service_running() { # svc -> true if recorded pid is ours and alive
	is_ours "$(read_file "$(pid_file "$1")")"
}

service_healthy() {
	local port
	service_running "$1" || return 1
	port=$(read_file "$(port_file "$1")")
	[[ -n $port ]] && http_ok "$(health_url "$1" "$port")"
}

log_tail() {
	local f
	f=$(log_file "$1")
	if [[ -s $f ]]; then
		echo "---- last lines of $f ----" >&2
		tail -n 25 "$f" >&2
		echo "----" >&2
	fi
}

# ---------------------------------------------------------------- venv

ensure_venv() {
	local want have=""
	[[ -f $REQUIREMENTS ]] || die "missing $REQUIREMENTS"
	command -v python3 >/dev/null || die "python3 not found (needed for moto)"
	# Hash of requirements.txt (plus the interpreter version, so a python
	# upgrade rebuilds the venv instead of leaving it broken).
	want=$({
		cat "$REQUIREMENTS"
		python3 -c 'import sys; print(sys.version)'
	} | sha256sum | cut -d' ' -f1)
	[[ -f $VENV/.requirements.sha256 ]] && have=$(cat "$VENV/.requirements.sha256")
	if [[ $have == "$want" && -x $VENV/bin/python && -x $VENV/bin/moto_server ]]; then
		return 0
	fi
	mkdir -p "$CAPBLOCK_CACHE"
	exec 8>"$CAPBLOCK_CACHE/.venv.lock"
	flock -w 600 8 || die "timed out waiting for another venv install ($CAPBLOCK_CACHE/.venv.lock)"
	# Another process may have finished the install while we waited.
	have=""
	[[ -f $VENV/.requirements.sha256 ]] && have=$(cat "$VENV/.requirements.sha256")
	if [[ $have != "$want" || ! -x $VENV/bin/python || ! -x $VENV/bin/moto_server ]]; then
		log "installing $(grep -v '^#' "$REQUIREMENTS" | xargs) into $VENV (one-time)"
		rm -f "$VENV/.requirements.sha256"
		if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c '' 2>/dev/null; then
			python3 -m venv --clear "$VENV" >&2 || die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
		fi
		"$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQUIREMENTS" >&2 ||
			die "pip install -r $REQUIREMENTS failed"
		printf '%s\n' "$want" >"$VENV/.requirements.sha256"
	fi
	flock -u 8
	exec 8>&-
}

# ---------------------------------------------------------------- processes

free_ports() { # prints two distinct free TCP ports on 127.0.0.1
	python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))
for x in s: x.close()'
}

port_free() { # PORT -> true if nothing listens on 127.0.0.1:PORT
	python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$1"
}

# start_service SVC PORT CMD... : starts CMD in its own session (pid == pgid),
# detached from this shell, logging to $CAPBLOCK_STATE/SVC.log.
start_service() {
	local svc=$1 port=$2 pidf logf i
	shift 2
	pidf=$(pid_file "$svc")
	logf=$(log_file "$svc")
	rm -f "$pidf"
	printf '%s\n' "$port" >"$(port_file "$svc")"
	{
		printf '=== %s: %s\n' "$(date -u +%FT%TZ)" "$*"
	} >"$logf"
	# The outer ( ... & ) double-forks so the service is reparented away from
	# this shell; the inner bash records its own pid and execs the service.
	# fd 9 (the state lock) is closed so the service does not hold it.
	(
		# shellcheck disable=SC2016 # expanded by the inner bash
		CAPBLOCK_STACK_STATE="$CAPBLOCK_STATE" setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' \
			"$pidf" "$@" </dev/null >>"$logf" 2>&1 9>&- &
	)
	for ((i = 0; i < 50; i++)); do
		[[ -s $pidf ]] && return 0
		sleep 0.1
	done
	log_tail "$svc"
	die "$svc did not start (no pid file after 5s)"
}

wait_healthy() { # svc port
	local svc=$1 port=$2 url pid deadline
	url=$(health_url "$svc" "$port")
	pid=$(read_file "$(pid_file "$svc")")
	deadline=$((SECONDS + STARTUP_TIMEOUT))
	while ((SECONDS < deadline)); do
		if http_ok "$url" && pid_alive "$pid"; then return 0; fi
		if ! pid_alive "$pid"; then
			log_tail "$svc"
			die "$svc exited during startup (log: $(log_file "$svc"))"
		fi
		sleep 0.2
	done
	log_tail "$svc"
	die "$svc did not answer $url within ${STARTUP_TIMEOUT}s (log: $(log_file "$svc"))"
}

stop_service() {
	local svc=$1 pidf pid i
	pidf=$(pid_file "$svc")
	pid=$(read_file "$pidf")
	if [[ -n $pid ]] && is_ours "$pid"; then
		log "stopping $svc (pid $pid)"
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
			group_alive "$pid" || pid_alive "$pid" || break
			sleep 0.1
		done
		if group_alive "$pid" || pid_alive "$pid"; then
			log "$svc did not stop after ${STOP_TIMEOUT}s, sending KILL"
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
		fi
	elif [[ -n $pid ]]; then
		log "removing stale pid file for $svc (pid $pid not running)"
	fi
	rm -f "$pidf" "$(port_file "$svc")"
}

lock_state() {
	mkdir -p "$CAPBLOCK_STATE"
	exec 9>"$CAPBLOCK_STATE/.lock"
	flock -w 120 9 || die "timed out waiting for another stack.sh ($CAPBLOCK_STATE/.lock)"
}

unlock_state() {
	flock -u 9 2>/dev/null || true
	exec 9>&-
}

# ---------------------------------------------------------------- commands

sim_bin() {
	if [[ -n ${CAPBLOCK_SIM_BIN:-} ]]; then
		printf '%s' "$CAPBLOCK_SIM_BIN"
	else
		printf '%s/debug/capblock-market-sim' "${CARGO_TARGET_DIR:-$HOME/.cache/capblock/target}"
	fi
}

stack_up_unlocked() {
	local moto_port sim_port bin scenario svc k v
	local -a sim_args
	local -A boot=()

	# Already running and healthy: nothing to do.
	if [[ -s $ENV_FILE ]] && service_healthy moto && service_healthy sim; then
		cat "$ENV_FILE"
		return 0
	fi
	# Partial or stale stack: clean it up first.
	for svc in "${SERVICES[@]}"; do
		if [[ -e $(pid_file "$svc") ]]; then
			stop_service "$svc"
		fi
	done
	rm -f "$ENV_FILE"

	# Check the simulator binary before anything slow.
	bin=$(sim_bin)
	[[ -x $bin ]] || die "market simulator binary not found at $bin
  build it with: cargo build -p capblock-market-sim
  (or point CAPBLOCK_SIM_BIN at a built binary)"
	sim_args=(--listen "127.0.0.1:PORT")
	if [[ -n ${CAPBLOCK_SCENARIO:-} ]]; then
		[[ -f $CAPBLOCK_SCENARIO ]] || die "CAPBLOCK_SCENARIO=$CAPBLOCK_SCENARIO does not exist"
		scenario=$CAPBLOCK_SCENARIO
	elif [[ -f $REPO_DIR/infra/examples/market.toml ]]; then
		scenario=$REPO_DIR/infra/examples/market.toml
	else
		scenario=""
		log "note: $REPO_DIR/infra/examples/market.toml not found, starting the simulator without --scenario"
	fi

	ensure_venv

	read -r moto_port sim_port < <(free_ports)
	moto_port=${MOTO_PORT:-$moto_port}
	sim_port=${SIM_PORT:-$sim_port}
	[[ $moto_port != "$sim_port" ]] || die "MOTO_PORT and SIM_PORT must differ"
	port_free "$moto_port" || die "port $moto_port (moto) is already in use on 127.0.0.1"
	port_free "$sim_port" || die "port $sim_port (simulator) is already in use on 127.0.0.1"

	UP_IN_PROGRESS=1
	# One request at a time: moto has no locking, and conditional writes must be atomic (see moto_serial.py).
	start_service moto "$moto_port" "$VENV/bin/python" "$SCRIPT_DIR/moto_serial.py" -H 127.0.0.1 -p "$moto_port"
	# moto serves STS on its one port: the simulator asks it which account a temporary key
	# (a member role the scan assumed) belongs to, for that account's own describe limit.
	sim_args=(--listen "127.0.0.1:$sim_port" --sts-endpoint "http://127.0.0.1:$moto_port")
	[[ -n $scenario ]] && sim_args+=(--scenario "$scenario")
	start_service sim "$sim_port" "$bin" "${sim_args[@]}"
	wait_healthy moto "$moto_port"
	wait_healthy sim "$sim_port"

	local moto_url="http://127.0.0.1:$moto_port" sim_url="http://127.0.0.1:$sim_port"
	local out
	out=$(AWS_EC2_METADATA_DISABLED=true "$VENV/bin/python" "$BOOTSTRAP" \
		--endpoint "$moto_url" --table "${CAPBLOCK_TABLE:-capblock-local}") ||
		die "bootstrap of DynamoDB/SNS/SQS resources failed (moto log: $(log_file moto))"
	while IFS='=' read -r k v; do
		[[ -n $k ]] && boot[$k]=$v
	done <<<"$out"

	{
		printf '# capblock local stack, written by infra/local/stack.sh up (%s)\n' "$(date -u +%FT%TZ)"
		local -a pairs=(
			AWS_ACCESS_KEY_ID test
			AWS_SECRET_ACCESS_KEY test
			AWS_REGION us-east-1
			AWS_DEFAULT_REGION us-east-1
			AWS_EC2_METADATA_DISABLED true
			AWS_ENDPOINT_URL_DYNAMODB "$moto_url"
			AWS_ENDPOINT_URL_SNS "$moto_url"
			AWS_ENDPOINT_URL_SQS "$moto_url"
			AWS_ENDPOINT_URL_SCHEDULER "$moto_url"
			AWS_ENDPOINT_URL_EVENTBRIDGE "$moto_url"
			AWS_ENDPOINT_URL_SSM "$moto_url"
			AWS_ENDPOINT_URL_AUTO_SCALING "$moto_url"
			AWS_ENDPOINT_URL_RESOURCE_GROUPS "$moto_url"
			AWS_ENDPOINT_URL_EKS "$moto_url"
			AWS_ENDPOINT_URL_SERVICE_QUOTAS "$moto_url"
			AWS_ENDPOINT_URL_CLOUDFORMATION "$moto_url"
			AWS_ENDPOINT_URL_STS "$moto_url"
			AWS_ENDPOINT_URL_ORGANIZATIONS "$moto_url"
			# The team page's bucket. An IP endpoint: the SDK's S3 endpoint rules address
			# buckets by path (http://127.0.0.1:<port>/<bucket>/<key>), which moto serves.
			AWS_ENDPOINT_URL_S3 "$moto_url"
			AWS_ENDPOINT_URL_EC2 "$sim_url"
			AWS_ENDPOINT_URL_RAM "$sim_url"
			CAPBLOCK_SIM_URL "$sim_url"
			CAPBLOCK_MOTO_URL "$moto_url"
			CAPBLOCK_TABLE "${boot[CAPBLOCK_TABLE]}"
			CAPBLOCK_ALERTS_TOPIC_ARN "${boot[CAPBLOCK_ALERTS_TOPIC_ARN]}"
			CAPBLOCK_WORKLOADS_TOPIC_ARN "${boot[CAPBLOCK_WORKLOADS_TOPIC_ARN]}"
			CAPBLOCK_ALERTS_TAP_URL "${boot[CAPBLOCK_ALERTS_TAP_URL]}"
			CAPBLOCK_WORKLOADS_TAP_URL "${boot[CAPBLOCK_WORKLOADS_TAP_URL]}"
			CAPBLOCK_STACK capblock-local
		)
		local i
		for ((i = 0; i < ${#pairs[@]}; i += 2)); do
			printf 'export %s=%q\n' "${pairs[i]}" "${pairs[i + 1]}"
		done
	} >"$ENV_FILE.tmp"
	mv "$ENV_FILE.tmp" "$ENV_FILE"
	# The stand-in for a deployed stack's CloudFormation stack (its TableName output and
	# parameters, which the CLI reads): dry-run until `deploy` says otherwise.
	(
		# shellcheck disable=SC1090
		source "$ENV_FILE"
		"$VENV/bin/python" "$SCRIPT_DIR/deploy.py" --stack-only
	) || die "the CloudFormation stand-in could not be created (moto log: $(log_file moto))"
	UP_IN_PROGRESS=""
	log "stack up: moto $moto_url, simulator $sim_url (env: $ENV_FILE)"
	cat "$ENV_FILE"
}

cmd_up() {
	lock_state
	stack_up_unlocked
	unlock_state
}

cmd_down() {
	local svc
	lock_state
	for svc in "${SERVICES[@]}"; do
		stop_service "$svc"
	done
	rm -f "$ENV_FILE" "$ENV_FILE.tmp"
	unlock_state
}

cmd_env() {
	if [[ -s $ENV_FILE ]] && service_running moto && service_running sim; then
		cat "$ENV_FILE"
	else
		log "the stack is not up (start it with: infra/local/stack.sh up)"
		exit 1
	fi
}

cmd_deploy() {
	if ! { [[ -s $ENV_FILE ]] && service_running moto && service_running sim; }; then
		log "the stack is not up (start it with: infra/local/stack.sh up)"
		exit 1
	fi
	(
		# shellcheck disable=SC1090
		source "$ENV_FILE"
		exec "$VENV/bin/python" "$SCRIPT_DIR/deploy.py" "$@"
	)
}

cmd_status() {
	local svc port pid state url rc=0
	for svc in "${SERVICES[@]}"; do
		pid=$(read_file "$(pid_file "$svc")")
		port=$(read_file "$(port_file "$svc")")
		url="-"
		[[ -n $port ]] && url="http://127.0.0.1:$port"
		if is_ours "$pid"; then
			if [[ -n $port ]] && http_ok "$(health_url "$svc" "$port")"; then
				state="running"
			else
				state="unhealthy"
				rc=3
			fi
			printf '%-5s %-9s %s (pid %s)\n' "$svc" "$state" "$url" "$pid"
		else
			printf '%-5s %-9s %s\n' "$svc" "stopped" "-"
			rc=3
		fi
	done
	return "$rc"
}

cmd_logs() {
	local n=${1:-40} svc f
	[[ $n =~ ^[0-9]+$ ]] || die "logs: N must be a number"
	for svc in "${SERVICES[@]}"; do
		f=$(log_file "$svc")
		echo "==> $f <=="
		if [[ -f $f ]]; then tail -n "$n" "$f"; else echo "(no log)"; fi
	done
}

RUN_CHILD=""
run_on_exit() {
	local rc=$?
	trap - EXIT INT TERM HUP
	if [[ -n $RUN_CHILD ]] && kill -0 "$RUN_CHILD" 2>/dev/null; then
		kill -TERM "$RUN_CHILD" 2>/dev/null || true
		wait "$RUN_CHILD" 2>/dev/null || true
	fi
	cmd_down >&2 || log "warning: down failed"
	exit "$rc"
}

run_on_signal() { # SIGNAME EXITCODE
	if [[ -n $RUN_CHILD ]] && kill -0 "$RUN_CHILD" 2>/dev/null; then
		kill -"$1" "$RUN_CHILD" 2>/dev/null || true
		wait "$RUN_CHILD" 2>/dev/null || true
	fi
	RUN_CHILD=""
	exit "$2"
}

cmd_run() {
	local rc
	[[ ${1:-} == "--" ]] && shift
	(($# > 0)) || die "run: missing command (usage: stack.sh run -- CMD...)"
	trap run_on_exit EXIT
	trap 'run_on_signal INT 130' INT
	trap 'run_on_signal TERM 143' TERM
	trap 'run_on_signal HUP 129' HUP
	cmd_up >&2
	# CMD runs as a child we wait for, so a TERM/INT sent to this script is
	# forwarded to it and the stack is still torn down. The subshell restores
	# default INT/QUIT handling (bash ignores them in background jobs) and
	# keeps our stdin.
	(
		trap - INT QUIT TERM HUP
		set -a
		# shellcheck disable=SC1090
		. "$ENV_FILE"
		set +a
		exec "$@"
	) <&0 &
	RUN_CHILD=$!
	set +e
	wait "$RUN_CHILD"
	rc=$?
	set -e
	RUN_CHILD=""
	exit "$rc"
}

main() {
	local cmd=${1:-}
	[[ $# -gt 0 ]] && shift
	case "$cmd" in
	up) cmd_up ;;
	down) cmd_down ;;
	env) cmd_env ;;
	status) cmd_status ;;
	logs) cmd_logs "$@" ;;
	run) cmd_run "$@" ;;
	deploy) cmd_deploy "$@" ;;
	-h | --help | help) usage ;;
	"")
		usage >&2
		exit 2
		;;
	*)
		log "unknown command: $cmd"
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
