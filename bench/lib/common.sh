# Helpers for bench/system.sh, sourced. Expects BIN (the darkroom binary),
# TMP (a scratch directory) and RESULTS (the results file) to be set.

log() { echo "system.sh: $*" >&2; }
now() { date +%s.%N; }
calc() { python3 -c "print($1)"; }
jget() { python3 "$BENCH/lib/results.py" get "$1" "$2"; }
result() { python3 "$BENCH/lib/results.py" add "$RESULTS" "$@"; }
failed() {  # ROW WHY: a row that could not run
    log "$1: $2"
    result failed "row=$1" "why=$2"
}

# ------------------------------------------------------------ what is missing
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
APT_UPDATED=0
apt_install() {  # PACKAGE...: installed through apt, updating the lists once if needed
    command -v apt-get >/dev/null || return 1
    log "installing $* with apt-get"
    if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1; then
        [ "$APT_UPDATED" = 1 ] && return 1
        APT_UPDATED=1
        $SUDO apt-get update -q >/dev/null 2>&1
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1
    fi
}
need_cmd() {  # COMMAND APT_PACKAGE
    command -v "$1" >/dev/null || apt_install "$2"
    command -v "$1" >/dev/null
}
# need_py "MODULE..." "APT_PACKAGE..." "PIP_PACKAGE...": the modules importable
# by python3. Debian's own python3 takes Debian's packages first; any other
# (a virtualenv, pyenv) takes pip's, as apt's would not be on its path.
need_py() {
    local mods=${1// /, }
    python3 -c "import $mods" 2>/dev/null && return 0
    if [ "$(python3 -c 'import sys; print(sys.prefix)')" = /usr ]; then
        # shellcheck disable=SC2086
        apt_install $2 || python3 -m pip install --quiet $3 >/dev/null 2>&1
    else
        # shellcheck disable=SC2086
        python3 -m pip install --quiet $3 >/dev/null 2>&1 || apt_install $2
    fi
    python3 -c "import $mods" 2>/dev/null
}

# ------------------------------------------------------------------- ports
# free_ports N: the first of N consecutive loopback ports that nothing holds.
free_ports() {
    python3 - "$1" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
for _ in range(200):
    base = random.randrange(20000, 60000 - n)
    ok = True
    for port in range(base, base + n):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            ok = False
        finally:
            s.close()
        if not ok:
            break
    if ok:
        print(base)
        sys.exit(0)
sys.exit(1)
EOF
}
default_ports_free() {
    python3 - <<'EOF'
import socket, sys
for port in range(7700, 7704):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        sys.exit(1)
    finally:
        s.close()
EOF
}

# --------------------------------------------------------------- processes
PIDS=()
spawn() {  # LOG COMMAND...: start in the background; its pid in LAST_PID
    local logfile=$1; shift
    "$@" >>"$logfile" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}
cpu_seconds() {  # PID...: their CPU so far (user + system), in seconds
    local pid ticks=0
    for pid in "$@"; do
        ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    calc "round($ticks / $(getconf CLK_TCK), 2)"
}
stop() {  # PID...: SIGTERM each, then wait for each
    local pid
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "$@"; do wait "$pid" 2>/dev/null; done
    return 0
}
stop_everything() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
}
hwm_mib() { awk '/^VmHWM/ {print int($2 / 1024)}' "/proc/$1/status" 2>/dev/null || echo 0; }
rss_mib() { awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$1/status" 2>/dev/null || echo 0; }

# wait_ready: the broker (FE) and the storage node (ST) answer, within 30 s.
wait_ready() {
    local i
    for i in $(seq 1 60); do
        "$BIN" status --check --broker "$FE" --store "$ST" --timeout 1 >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    return 1
}
# wait_workers N: N workers have registered with the broker, within 30 s.
wait_workers() {
    local i n
    for i in $(seq 1 60); do
        n=$("$BIN" status --json --broker "$FE" --store "$ST" --timeout 1 2>/dev/null |
            python3 -c 'import json, sys; print(len(json.load(sys.stdin).get("workers", [])))' 2>/dev/null)
        [ "${n:-0}" -ge "$1" ] && return 0
        sleep 0.5
    done
    return 1
}

# ---------------------------------------------------------------- systems
# start_up NAME [UP_FLAGS...]: `darkroom up` run in a fresh directory
# (its data goes to ./darkroom-data, as in the README), on the default
# endpoints when they are free, else on free ports. Sets FE, BE, EV, ST,
# UP_PID and UP_ENDPOINTS (what the endpoints were).
start_up() {
    local name=$1; shift
    local dir=$TMP/$name eps=()
    rm -rf "$dir"; mkdir -p "$dir"
    if default_ports_free; then
        FE=tcp://127.0.0.1:7700; BE=tcp://127.0.0.1:7701; EV=tcp://127.0.0.1:7702; ST=tcp://127.0.0.1:7703
        UP_ENDPOINTS="default endpoints"
    else
        local base; base=$(free_ports 4)
        FE=tcp://127.0.0.1:$base; BE=tcp://127.0.0.1:$((base + 1)); EV=tcp://127.0.0.1:$((base + 2)); ST=tcp://127.0.0.1:$((base + 3))
        eps=(--frontend "$FE" --backend "$BE" --events "$EV" --store "$ST")
        UP_ENDPOINTS="ports $base-$((base + 3)) (7700-7703 busy)"
    fi
    (cd "$dir" && exec "$BIN" up "$@" "${eps[@]}") >>"$dir.log" 2>&1 &
    UP_PID=$!
    PIDS+=("$UP_PID")
    wait_ready || { log "$name: darkroom up did not answer:"; tail -5 "$dir.log" >&2; stop "$UP_PID"; return 1; }
}
# start_roles NAME: `darkroom broker` and `darkroom store` as processes of
# their own on free ports, data in a fresh directory. Sets FE, BE, EV, ST,
# BROKER_PID and STORE_PID.
start_roles() {
    local name=$1 base
    local dir=$TMP/$name
    rm -rf "$dir"; mkdir -p "$dir"
    base=$(free_ports 4)
    FE=tcp://127.0.0.1:$base; BE=tcp://127.0.0.1:$((base + 1)); EV=tcp://127.0.0.1:$((base + 2)); ST=tcp://127.0.0.1:$((base + 3))
    spawn "$dir.broker.log" "$BIN" broker --data "$dir" --frontend "$FE" --backend "$BE" --events "$EV"
    BROKER_PID=$LAST_PID
    spawn "$dir.store.log" "$BIN" store --data "$dir" --bind "$ST"
    STORE_PID=$LAST_PID
    wait_ready || { log "$name: broker or store did not answer:"; tail -5 "$dir".*.log >&2; stop "$BROKER_PID" "$STORE_PID"; return 1; }
}
# start_workers NAME COUNT BROKER_ENDPOINT STORE_ENDPOINT [WORKER_FLAGS...]:
# COUNT `darkroom worker` processes; their pids in WORKER_PIDS.
start_workers() {
    local name=$1 count=$2 be=$3 st=$4 i
    shift 4
    WORKER_PIDS=()
    for i in $(seq 1 "$count"); do
        spawn "$TMP/$name.worker$i.log" "$BIN" worker --broker "$be" --store "$st" "$@"
        WORKER_PIDS+=("$LAST_PID")
    done
}
# start_proxy LOG TARGET_ENDPOINT [DELAY_MS]: a delaying forwarder
# (bench/latency_proxy.py, DELAY_MS each way, LINK_DELAY_MS unless given)
# to TARGET on a free port; its endpoint in PROXY_EP.
start_proxy() {
    local logfile=$1 target=${2#tcp://} delay=${3:-$LINK_DELAY_MS} port
    port=$(free_ports 1)
    spawn "$logfile" python3 "$BENCH/latency_proxy.py" --listen "127.0.0.1:$port" --target "$target" --delay-ms "$delay"
    PROXY_EP=tcp://127.0.0.1:$port
    PROXY_PIDS+=("$LAST_PID")
    local i
    for i in $(seq 1 50); do
        grep -q "latency_proxy:" "$logfile" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# --------------------------------------------------------------- clients
# submit_wait DIR OUT.json [SUBMIT_FLAGS...]: `darkroom submit DIR --wait
# --json` to FE/EV, timed. Sets SECONDS_TAKEN, STORED, SUBMIT_STATUS and
# SUBMIT_CPU_US (the submit's own CPU, user + system, per stored job).
submit_wait() {
    local dir=$1 out=$2 t0 t1
    shift 2
    # The inputs are read once first, untimed: a run measures Darkroom, not
    # this machine's disk. (Files a user has just written are in the page
    # cache; here the kernel's reclaim empties it between runs, and reading
    # 5,000 cold files cost submit a quarter of its CPU in block I/O.)
    cat "$dir"/* >/dev/null
    t0=$(now)
    # The text a user sees: one "stored JOB INPUT record ID" line per job.
    /usr/bin/time -f "%U %S" -o "$out.cpu" "$BIN" submit "$dir" --wait --broker "$FE" --events "$EV" "$@" >"$out" 2>"$out.log"
    SUBMIT_STATUS=$?
    t1=$(now)
    SECONDS_TAKEN=$(calc "round($t1 - $t0, 3)")
    STORED=$(grep -c '^stored ' "$out")
    SUBMIT_CPU_US=$(cpu_us "$out.cpu" "$STORED")
}
# cpu_us FILE JOBS: microseconds of CPU per job from /usr/bin/time's "%U %S".
cpu_us() {
    python3 -c "import sys; print(round(sum(map(float, open(sys.argv[1]).read().split()[-2:])) * 1e6 / max(1, int(sys.argv[2]))))" "$1" "$2" 2>/dev/null || echo "?"
}
