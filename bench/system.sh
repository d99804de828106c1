#!/usr/bin/env bash
# System benchmark: the whole queue (broker, storage node, workers) end to end.
# See bench/README.md. Usage: bench/system.sh [CORPUS_DIR]
# Environment: DARKROOM_BIN (skip the build), DARKROOM_LOADGEN (the darkroom-loadgen
# binary; by default the one next to DARKROOM_BIN, else built), LOADGEN=python
# (bench/loadgen.py instead), TINY_JOBS (20000), TINY_WINDOW (1000),
# TINY_WORKERS (embedded workers for tiny jobs, 1), TINY_CONCURRENCY (--concurrency, the
# processing threads per worker for tiny jobs; empty: the default, one per core), MEM_JOBS (20000), REPEAT (4), IMAGE_RUNS (3),
# CELERY=0 to skip the Celery peer, SKIP_IMAGES=1 / SKIP_MEMORY=1 / SKIP_TINY=1.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CORPUS=${1:-$ROOT/../shared/corpus/good}
[ -d "$CORPUS" ] || CORPUS=/work/shared/corpus/good
TINY_JOBS=${TINY_JOBS:-20000}
TINY_WINDOW=${TINY_WINDOW:-1000}
TINY_WORKERS=${TINY_WORKERS:-1}
TINY_CONCURRENCY=${TINY_CONCURRENCY:-}
MEM_JOBS=${MEM_JOBS:-20000}
REPEAT=${REPEAT:-4}
IMAGE_RUNS=${IMAGE_RUNS:-3}
CELERY=${CELERY:-1}
P1='scale:2048x2048,mode=fill | crop:square | glitch:seed=7'
OUT_DIR=$ROOT/bench/out
mkdir -p "$OUT_DIR"
REPORT=$OUT_DIR/system-latest.md
TMP=$(mktemp -d /tmp/darkroom-system.XXXXXX)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT

if [ -n "${DARKROOM_BIN:-}" ]; then
    BIN=$DARKROOM_BIN
else
    (cd "$ROOT" && swift build -c release --product darkroom >&2) || { echo "build failed" >&2; exit 1; }
    BIN=$ROOT/.build/release/darkroom
fi
# The load generator: darkroom-loadgen (DRK1 in Swift, a fraction of the
# client CPU of the Python one), or bench/loadgen.py with LOADGEN=python.
if [ "${LOADGEN:-}" = python ]; then
    LOADGEN_CMD=(python3 "$ROOT/bench/loadgen.py"); LOADGEN_NAME="bench/loadgen.py"
else
    if [ -n "${DARKROOM_LOADGEN:-}" ]; then
        LG=$DARKROOM_LOADGEN
    elif [ -n "${DARKROOM_BIN:-}" ] && [ -x "$(dirname "$DARKROOM_BIN")/darkroom-loadgen" ]; then
        LG=$(dirname "$DARKROOM_BIN")/darkroom-loadgen
    else
        (cd "$ROOT" && swift build -c release --product darkroom-loadgen >&2) || { echo "build of darkroom-loadgen failed (LOADGEN=python uses bench/loadgen.py)" >&2; exit 1; }
        LG=$ROOT/.build/release/darkroom-loadgen
    fi
    LOADGEN_CMD=("$LG"); LOADGEN_NAME="darkroom-loadgen"
fi
python3 -c 'import zmq' 2>/dev/null || pip install --quiet pyzmq >&2 || { echo "pyzmq is needed (pip install pyzmq)" >&2; exit 1; }

LINES=()      # report table rows
VERDICTS=()   # PASS/FAIL lines
row() { LINES+=("$1"); echo "$1"; }
verdict() { VERDICTS+=("$1"); echo "$1"; }
jget() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2], ""))' "$1" "$2"; }
fcmp() { python3 -c "import sys; sys.exit(0 if ($1) else 1)"; }
now() { python3 -c 'import time; print(time.time())'; }

ports_free() {
    ! ss -ltn 2>/dev/null | grep -qE "127\.0\.0\.1:(7700|7701|7702|7703) "
}
wait_ping() {  # frontend endpoint
    python3 - "$1" <<'EOF'
import sys, zmq, struct, time
c = zmq.Context(); s = c.socket(zmq.DEALER); s.setsockopt(zmq.LINGER, 0); s.connect(sys.argv[1])
for _ in range(100):
    s.send_multipart([b"DRK1", b"\x02", struct.pack(">Q", 1)])
    if s.poll(200):
        s.recv_multipart(); sys.exit(0)
sys.exit(1)
EOF
}
stop_pid() {  # pid: SIGTERM and wait
    kill -TERM "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}
# start_system NAME WORKERS CONCURRENCY: `darkroom up` on the default
# endpoints, or, when another darkroom holds them, the same roles as
# separate processes (broker, store, WORKERS workers) on random ports.
# Sets FE, EV, SYS_PIDS and SYS_MODE; CPU_PIDS lists the processes to bill.
start_system() {
    local name=$1 workers=$2 conc=$3
    local cflag=()
    [ -n "$conc" ] && cflag=(--concurrency "$conc")
    rm -rf "$TMP/$name"; mkdir -p "$TMP/$name"
    SYS_PIDS=()
    if ports_free; then
        SYS_MODE="darkroom up -w $workers${conc:+ -c $conc}"
        FE=tcp://127.0.0.1:7700; EV=tcp://127.0.0.1:7702
        "$BIN" up --data "$TMP/$name" --workers "$workers" "${cflag[@]}" 2>"$TMP/$name.log" &
        SYS_PIDS+=($!)
    else
        SYS_MODE="broker + store + $workers worker(s)${conc:+ -c $conc} as processes (7700-7703 busy)"
        local base=$((30000 + RANDOM % 20000))
        FE=tcp://127.0.0.1:$base; EV=tcp://127.0.0.1:$((base + 2))
        local be=tcp://127.0.0.1:$((base + 1)) st=tcp://127.0.0.1:$((base + 3))
        "$BIN" broker --data "$TMP/$name" --frontend "$FE" --backend "$be" --events "$EV" 2>"$TMP/$name.log" & SYS_PIDS+=($!)
        "$BIN" store --data "$TMP/$name" --bind "$st" 2>>"$TMP/$name.log" & SYS_PIDS+=($!)
        for _ in $(seq 1 "$workers"); do
            "$BIN" worker --broker "$be" --store "$st" "${cflag[@]}" 2>>"$TMP/$name.log" & SYS_PIDS+=($!)
        done
    fi
    PIDS+=("${SYS_PIDS[@]}")
    wait_ping "$FE"
}
stop_system() {  # workers first, then broker and store
    local i
    for ((i = ${#SYS_PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${SYS_PIDS[$i]}"; done
}
# loadgen CPUFILE ARGS...: one load generator run; prints its JSON line and
# writes its user and system CPU seconds to CPUFILE.
loadgen() {
    local cpu=$1; shift
    /usr/bin/time -f "%U %S" -o "$cpu" "${LOADGEN_CMD[@]}" "$@"
}
# cpu_per_job CPUFILE JOBS: microseconds of CPU (user+sys) per job.
cpu_per_job() {
    python3 -c "import sys; v = open(sys.argv[1]).read().split()[-2:]; print(round(sum(float(x) for x in v) * 1e6 / int(sys.argv[2])))" "$1" "$2" 2>/dev/null || echo "?"
}
system_cpu_ticks() { local t=0 p; for p in "${SYS_PIDS[@]}"; do t=$((t + $(cpu_ticks "$p"))); done; echo $t; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
cpu_ticks() { awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$1/stat" 2>/dev/null || echo 0; }  # utime + stime

DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
echo "darkroom system benchmark, $DATE, $(nproc) cores, load $LOAD_BEFORE" >&2

# A 64x64 JPEG for the tiny jobs.
TINY=$TMP/tiny.jpg
SRC=$(ls "$CORPUS"/*.jpg | head -1)
"$BIN" process "$CORPUS/plasma-small.jpg" --ops 'scale:64x64,mode=fill | crop:square' --out "$TMP/tinyout" --thumb 32x32 >/dev/null 2>&1 \
  || "$BIN" process "$SRC" --ops 'scale:64x64,mode=fill | crop:square' --out "$TMP/tinyout" --thumb 32x32 >/dev/null 2>&1
TINY_SRC=$(ls "$TMP"/tinyout/*.jpg 2>/dev/null | grep -v thumb | head -1)
cp "$TINY_SRC" "$TINY"

# ---------------------------------------------------------------- 1. tiny jobs
if [ -z "${SKIP_TINY:-}" ]; then
  if start_system up-tiny "$TINY_WORKERS" "$TINY_CONCURRENCY"; then
      R=$(loadgen "$TMP/lg-tiny.cpu" --frontend "$FE" --events "$EV" \
            --image "$TINY" --jobs "$TINY_JOBS" --window "$TINY_WINDOW" --ops grayscale --thumb 32x32)
      L=$(loadgen "$TMP/lg-one.cpu" --frontend "$FE" --events "$EV" \
            --image "$TINY" --jobs 500 --window 1 --ops grayscale --thumb 32x32)
      RATE=$(jget "$R" jobsPerSecond)
      row "| tiny jobs, $SYS_MODE, window $TINY_WINDOW | $TINY_JOBS jobs | $RATE jobs/s | p50 $(jget "$R" p50ms) ms, p99 $(jget "$R" p99ms) ms (accept p50 $(jget "$R" acceptP50ms) ms, p99 $(jget "$R" acceptP99ms) ms); load generator $LOADGEN_NAME $(cpu_per_job "$TMP/lg-tiny.cpu" "$TINY_JOBS") µs CPU per job |"
      row "| tiny jobs, one at a time (window 1) | 500 jobs | $(jget "$L" jobsPerSecond) jobs/s | p50 $(jget "$L" p50ms) ms, p99 $(jget "$L" p99ms) ms |"
      if fcmp "$RATE >= 5000"; then verdict "PASS tiny jobs: $RATE jobs/s >= 5000"; else verdict "FAIL tiny jobs: $RATE jobs/s < 5000"; fi
  else
      verdict "FAIL tiny jobs: the system did not answer (see log below)"; tail -5 "$TMP/up-tiny.log" >&2
  fi
  stop_system
  # Optional peer: Celery + Redis, 2 prefork workers, no-op task.
  # The peer's packages are installed on first use (Debian's redis-server,
  # celery and redis from PyPI); without them the row says it was skipped.
  if [ "$CELERY" = 1 ] && ! command -v redis-server >/dev/null; then
      { apt-get install -y -q redis-server || { apt-get update -q && apt-get install -y -q redis-server; }; } >/dev/null 2>&1
  fi
  if [ "$CELERY" = 1 ] && ! python3 -c 'import celery, redis' 2>/dev/null; then
      pip install --quiet celery redis >/dev/null 2>&1
  fi
  if [ "$CELERY" = 1 ] && command -v redis-server >/dev/null && python3 -c 'import celery, redis' 2>/dev/null; then
    RPORT=$((20000 + RANDOM % 10000))
    redis-server --port "$RPORT" --save '' --appendonly no --daemonize no >/dev/null 2>&1 &
    RP=$!; PIDS+=("$RP"); sleep 0.5
    mkdir -p "$TMP/celery"
    cat >"$TMP/celery/noop.py" <<EOF
from celery import Celery
app = Celery("noop", broker="redis://127.0.0.1:$RPORT/0", backend="redis://127.0.0.1:$RPORT/1")
@app.task
def noop(x):
    return x
EOF
    # exec: $! is then Celery's own process, so the kill below stops it and
    # its prefork children instead of leaving them to disturb what follows.
    (cd "$TMP/celery" && exec celery -A noop worker --concurrency 2 --pool prefork --loglevel WARNING >"$TMP/celery.log" 2>&1) &
    CW=$!; PIDS+=("$CW"); sleep 3
    CR=$(cd "$TMP/celery" && python3 - "$TINY_JOBS" <<'EOF'
import sys, time
from noop import noop
n = min(int(sys.argv[1]), 5000)
t = time.time(); rs = [noop.delay(i) for i in range(n)]
for r in rs: r.get(timeout=120)
print(round(n / (time.time() - t), 1))
EOF
)
    row "| peer: Celery + Redis, 2 prefork workers, no-op task | $((TINY_JOBS < 5000 ? TINY_JOBS : 5000)) jobs | ${CR:-?} jobs/s | |"
    kill "$CW" "$RP" 2>/dev/null; wait "$CW" "$RP" 2>/dev/null
  else
    row "| peer: Celery + Redis | skipped (needs redis-server and pip celery redis) | | |"
  fi
fi

# ---------------------------------------------------------------- 2. image jobs
if [ -z "${SKIP_IMAGES:-}" ]; then
  mkdir -p "$TMP/set" "$TMP/set2"
  for i in $(seq 1 "$REPEAT"); do
      for f in "$CORPUS"/*.jpg; do ln -s "$f" "$TMP/set/r$i-$(basename "$f")"; done
  done
  for i in $(seq 1 $((REPEAT * 2))); do
      for f in "$CORPUS"/*.jpg; do ln -s "$f" "$TMP/set2/r$i-$(basename "$f")"; done
  done
  NSET=$(ls "$TMP/set" | wc -l)
  # Baseline and system alternate IMAGE_RUNS times, so that both see the
  # same mix of load from other work on the machine; the best and the
  # median of each are compared.
  BASE_T=(); SYS_T=(); BASE_CPU=0; SYS_CPU=0; FAILED=""
  TICK=$(getconf CLK_TCK)
  for run in $(seq 1 "$IMAGE_RUNS"); do
    # Baseline: two `darkroom process` side by side, each over the whole set.
    T0=$(now)
    /usr/bin/time -f "%U %S" -o "$TMP/p-a.cpu" "$BIN" process "$TMP"/set/*.jpg --ops "$P1" --out "$TMP/p-a" --thumb 256x256 --quality 95 --thumb-quality 70 --jobs 1 >/dev/null 2>"$TMP/p-a.log" &
    PA=$!
    /usr/bin/time -f "%U %S" -o "$TMP/p-b.cpu" "$BIN" process "$TMP"/set/*.jpg --ops "$P1" --out "$TMP/p-b" --thumb 256x256 --quality 95 --thumb-quality 70 --jobs 1 >/dev/null 2>"$TMP/p-b.log" &
    PB=$!
    wait $PA; RA=$?; wait $PB; RB=$?
    T1=$(now)
    # CPU time of the two runs, to compare the work done apart from the load.
    BASE_CPU=$(python3 -c "print($BASE_CPU + sum(float(x) for f in ('$TMP/p-a.cpu', '$TMP/p-b.cpu') for x in open(f).read().split()[-2:]))")
    rm -rf "$TMP/p-a" "$TMP/p-b"
    [ $RA = 0 ] && [ $RB = 0 ] || FAILED="$FAILED process exited $RA/$RB;"
    BASE_T+=("$(python3 -c "print(round($T1-$T0, 3))")")
    if start_system up-img 2 1; then
        T0=$(now)
        C0=$(system_cpu_ticks)
        "$BIN" submit "$TMP/set2" --ops "$P1" --thumb 256x256 --wait --json --timeout 600 --broker "$FE" --events "$EV" >"$TMP/submit.json" 2>"$TMP/submit.log"
        RS=$?
        T1=$(now)
        SYS_CPU=$((SYS_CPU + $(system_cpu_ticks) - C0))

        STORED=$(grep -c '"stored"' "$TMP/submit.json")
        [ "$RS" = 0 ] && [ "$STORED" = $((2 * NSET)) ] || FAILED="$FAILED submit exited $RS with $STORED/$((2 * NSET)) stored;"
        SYS_T+=("$(python3 -c "print(round($T1-$T0, 3))")")
    else
        FAILED="$FAILED the system did not answer;"; tail -5 "$TMP/up-img.log" >&2
    fi
    stop_system
  done
  if [ ${#SYS_T[@]} -gt 0 ]; then
    read -r BBEST BMED < <(python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(min(v), statistics.median(v))" "${BASE_T[@]}")
    read -r SBEST SMED < <(python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(min(v), statistics.median(v))" "${SYS_T[@]}")
    N2=$((2 * NSET))
    row "| P1, 2x darkroom process --jobs 1 side by side, $IMAGE_RUNS runs | $N2 images | best $(python3 -c "print(round($N2/$BBEST, 2))"), median $(python3 -c "print(round($N2/$BMED, 2))") images/s | runs ${BASE_T[*]} s |"
    RATIO=$(python3 -c "print(round($BBEST/$SBEST, 3))")
    RMED=$(python3 -c "print(round($BMED/$SMED, 3))")
    row "| P1, $SYS_MODE, submit --wait, $IMAGE_RUNS runs | $N2 jobs | best $(python3 -c "print(round($N2/$SBEST, 2))"), median $(python3 -c "print(round($N2/$SMED, 2))") images/s | runs ${SYS_T[*]} s; ${RATIO}x of process (best), ${RMED}x (median) |"
    NR=${#SYS_T[@]}
    row "| P1 CPU time (user+sys) per image: process / system | | $(python3 -c "print(round($BASE_CPU * 1000 / ($NR * $N2)))") / $(python3 -c "print(round($SYS_CPU * 1000 / $TICK / ($NR * $N2)))") ms | system overhead $(python3 -c "print(round(($SYS_CPU / $TICK) / $BASE_CPU * 100 - 100, 1))")% CPU (broker, store, SHA-256, copies) |"
    if [ -z "$FAILED" ] && fcmp "$RATIO >= 0.90"; then verdict "PASS image jobs: best run ${RATIO}x of two process runs >= 0.90 (median ${RMED}x)"; else verdict "FAIL image jobs: best run ${RATIO}x of two process runs, need 0.90 (median ${RMED}x)${FAILED:+;$FAILED}"; fi
  else
    verdict "SKIP image jobs:$FAILED"
  fi
fi

# ---------------------------------------------------------------- 3. memory
if [ -z "${SKIP_MEMORY:-}" ]; then
  BASEPORT=$((30000 + RANDOM % 20000))
  FE=tcp://127.0.0.1:$BASEPORT; BE=tcp://127.0.0.1:$((BASEPORT + 1)); EV=tcp://127.0.0.1:$((BASEPORT + 2)); ST=tcp://127.0.0.1:$((BASEPORT + 3))
  "$BIN" broker --data "$TMP/mem" --frontend "$FE" --backend "$BE" --events "$EV" 2>"$TMP/broker.log" & BP=$!; PIDS+=("$BP")
  "$BIN" store --data "$TMP/mem" --bind "$ST" 2>"$TMP/store.log" & SP=$!; PIDS+=("$SP")
  "$BIN" worker --broker "$BE" --store "$ST" ${TINY_CONCURRENCY:+--concurrency "$TINY_CONCURRENCY"} 2>"$TMP/worker.log" & WP=$!; PIDS+=("$WP")
  if wait_ping "$FE"; then
      # Warm up (caches, WAL, buffers), then measure the growth over the run.
      loadgen "$TMP/lg-warm.cpu" --frontend "$FE" --events "$EV" --image "$TINY" --jobs 2000 --window "$TINY_WINDOW" >/dev/null
      WB=$(rss_kb $BP); WS=$(rss_kb $SP); WW=$(rss_kb $WP)
      CB=$(cpu_ticks $BP); CS=$(cpu_ticks $SP); CW=$(cpu_ticks $WP); T0=$(now)
      ( while :; do echo "$(rss_kb $BP) $(rss_kb $SP) $(rss_kb $WP)"; sleep 0.2; done ) >"$TMP/rss.txt" &
      SAMPLER=$!
      R=$(loadgen "$TMP/lg-mem.cpu" --frontend "$FE" --events "$EV" --image "$TINY" --jobs "$MEM_JOBS" --window "$TINY_WINDOW")
      kill $SAMPLER 2>/dev/null; wait $SAMPLER 2>/dev/null
      EB=$(rss_kb $BP); ES=$(rss_kb $SP); EW=$(rss_kb $WP); T1=$(now)
      CB=$(($(cpu_ticks $BP) - CB)); CS=$(($(cpu_ticks $SP) - CS)); CW=$(($(cpu_ticks $WP) - CW))
      TICK=$(getconf CLK_TCK)
      perjob() { python3 -c "print(round($1 * 1e6 / $TICK / $MEM_JOBS))"; }
      row "| CPU per job (user+sys): broker / store / worker | $MEM_JOBS jobs | $(perjob $CB) / $(perjob $CS) / $(perjob $CW) µs | $(python3 -c "print(round(($CB + $CS + $CW) / $TICK / ($T1 - $T0), 2))") cores busy over $(python3 -c "print(round($T1 - $T0, 1))") s |"

      read -r PB PS PW < <(awk 'BEGIN{a=0;b=0;c=0} {if($1>a)a=$1; if($2>b)b=$2; if($3>c)c=$3} END{print a, b, c}' "$TMP/rss.txt")
      row "| memory run, separate processes, worker${TINY_CONCURRENCY:+ -c $TINY_CONCURRENCY} | $MEM_JOBS jobs | $(jget "$R" jobsPerSecond) jobs/s | p50 $(jget "$R" p50ms) ms, p99 $(jget "$R" p99ms) ms |"
      for role in broker store worker; do
          case $role in broker) W=$WB P=$PB E=$EB;; store) W=$WS P=$PS E=$ES;; worker) W=$WW P=$PW E=$EW;; esac
          row "| RSS $role (MiB): after warm-up / peak / end | | $((W / 1024)) / $((P / 1024)) / $((E / 1024)) | growth $(((E - W) / 1024)) MiB |"
          if [ "$role" != worker ]; then
              if [ $((P - W)) -le 16384 ]; then verdict "PASS $role RSS flat: peak $((P / 1024)) MiB, $(((P - W) / 1024)) MiB over warm-up (limit 16)"; else verdict "FAIL $role RSS grew: peak $((P / 1024)) MiB, $(((P - W) / 1024)) MiB over warm-up (limit 16)"; fi
          fi
      done
  else
      verdict "FAIL memory: broker did not answer"; tail -5 "$TMP/broker.log" >&2
  fi
  stop_pid "$WP"; stop_pid "$BP"; stop_pid "$SP"
fi

LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "# darkroom system benchmark"
    echo
    echo "$DATE, $(nproc) cores, load average $LOAD_BEFORE before, $LOAD_AFTER after; binary $BIN; load generator $LOADGEN_NAME"
    echo
    echo "| run | work | throughput | latency / notes |"
    echo "|---|---|---|---|"
    for l in "${LINES[@]}"; do echo "$l"; done
    echo
    for v in "${VERDICTS[@]}"; do echo "- $v"; done
} >"$REPORT"
echo "report written to $REPORT" >&2
