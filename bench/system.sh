#!/usr/bin/env bash
# System benchmark: the whole queue (broker, storage node, workers) end to
# end, against Sidekiq and Celery, in one run on the same files. See
# bench/README.md for the rows and what each compares.
#
# Usage: bench/system.sh [CORPUS_DIR]      (default <repo>/../shared/corpus/good)
#
# Environment:
#   BENCH_QUICK=1       fewer jobs everywhere: proves every row runs, in minutes
#   BENCH_ROWS=a,b      only these rows: readme, tuned, sidekiq, celery,
#                       latency-tiny, latency-photos (or latency), big, images,
#                       memory, hotfolder (default: all)
#   DARKROOM_BIN        the darkroom binary (default: swift build -c release,
#                       the Swift runtime linked statically as script/demo does)
#   DARKROOM_LOADGEN    the darkroom-loadgen binary (default: next to
#                       DARKROOM_BIN, else built)
#   TINY_JOBS           tiny jobs per throughput row (5000; quick 1000)
#   BENCH_REPEAT        runs of the README path and of each tuned
#                       configuration, interleaved; the median counts, and
#                       the README path's ratio to the best is also taken
#                       round by round (5; quick 1)
#   TUNED_CONFIGS       up configurations tried, WORKERSxTHREADS (up -w -c) or default
#                       ("default 1x256 1x512 1x1024 2x256 2x512";
#                       quick "default 1x512")
#   TUNED_WINDOW        darkroom-loadgen's jobs in flight (1000)
#   LAT_WORKERS         worker processes in the latency rows (2)
#   LAT_TINY_JOBS       tiny jobs in each latency run (10000: a run of 1,000
#                       measures mostly the credit ramping up over 100 ms
#                       round trips; quick 200)
#   LINK_DELAY_MS       the proxy's delay each way (50: +100 ms a round trip)
#   PHOTO_REPEAT        copies of the corpus in the image-overhead rows (4; quick 1)
#   LAT_PHOTO_REPEAT    copies of the corpus in each photo latency run (16:
#                       a run of a few seconds, in which the first result's
#                       extra round trips weigh a few percent; quick 1)
#   LAT_REPEAT          rounds of the latency runs (direct, relay, proxy),
#                       interleaved; the median counts (5; quick 1)
#   BIG_INPUTS          ~20 MB inputs in the big row (50; quick 10)
#   IMAGE_RUNS          rounds of an engine run then a system run (5; quick 1)
#   MEM_JOBS            tiny jobs in the memory row (20000; quick 3000)
#   HOT_FILES           tiny files dropped into the hot folder at once (1000; quick 200)
set -u
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)
CORPUS=${1:-$ROOT/../shared/corpus/good}
[ -d "$CORPUS" ] || CORPUS=/work/shared/corpus/good

QUICK=${BENCH_QUICK:-0}
q() { if [ "$QUICK" = 1 ]; then echo "$2"; else echo "$1"; fi; }  # q FULL QUICK
TINY_JOBS=${TINY_JOBS:-$(q 5000 1000)}
REPEAT=${BENCH_REPEAT:-$(q 5 1)}
TUNED_CONFIGS=${TUNED_CONFIGS:-$(q "default 1x1 1x2 1x4 2x1 2x2" "default 1x2")}
TUNED_WINDOW=${TUNED_WINDOW:-1000}
LAT_WORKERS=${LAT_WORKERS:-2}
LAT_TINY_JOBS=${LAT_TINY_JOBS:-$(q 10000 200)}
LINK_DELAY_MS=${LINK_DELAY_MS:-50}
PHOTO_REPEAT=${PHOTO_REPEAT:-$(q 4 1)}
LAT_PHOTO_REPEAT=${LAT_PHOTO_REPEAT:-$(q 16 1)}
LAT_REPEAT=${LAT_REPEAT:-$(q 5 1)}
BIG_INPUTS=${BIG_INPUTS:-$(q 50 10)}
IMAGE_RUNS=${IMAGE_RUNS:-$(q 5 1)}
MEM_JOBS=${MEM_JOBS:-$(q 20000 3000)}
HOT_FILES=${HOT_FILES:-$(q 1000 200)}
BENCH_ROWS=${BENCH_ROWS:-readme,tuned,sidekiq,celery,latency-tiny,latency-photos,big,images,memory,hotfolder}
want() {  # ROW: asked for by BENCH_ROWS ("latency" means both latency rows)
    [[ ",$BENCH_ROWS," == *",$1,"* ]] || { [[ $1 == latency-* ]] && [[ ",$BENCH_ROWS," == *",latency,"* ]]; }
}

P1='scale:2048x2048,mode=fill | crop:square | glitch:seed=7'
CORES=$(nproc)
OUT_DIR=$BENCH/out
mkdir -p "$OUT_DIR"
REPORT=$OUT_DIR/system-latest.md
TMP=$(mktemp -d /tmp/darkroom-system.XXXXXX)
RESULTS=$TMP/results.jsonl
: >"$RESULTS"
# shellcheck source=bench/lib/common.sh
. "$BENCH/lib/common.sh"
trap 'stop_everything; [ -n "${BENCH_KEEP:-}" ] && log "scratch kept in $TMP" || rm -rf "$TMP"' EXIT

# ------------------------------------------------------------------ set-up
need_cmd python3 python3 || { log "python3 is needed"; exit 1; }
[ -x /usr/bin/time ] || apt_install time
if [ -n "${DARKROOM_BIN:-}" ]; then
    BIN=$DARKROOM_BIN
else
    (cd "$ROOT" && swift build -c release --product darkroom --static-swift-stdlib >&2) || { log "release build failed"; exit 1; }
    BIN=$ROOT/.build/release/darkroom
fi
if [ -n "${DARKROOM_LOADGEN:-}" ]; then
    LG=$DARKROOM_LOADGEN
elif [ -x "$(dirname "$BIN")/darkroom-loadgen" ] && [ -n "${DARKROOM_BIN:-}" ]; then
    LG=$(dirname "$BIN")/darkroom-loadgen
else
    (cd "$ROOT" && swift build -c release --product darkroom-loadgen --static-swift-stdlib >&2) || { log "release build of darkroom-loadgen failed"; exit 1; }
    LG=$ROOT/.build/release/darkroom-loadgen
fi

DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "$DATE, $CORES cores, load $LOAD_BEFORE, rows $BENCH_ROWS$( [ "$QUICK" = 1 ] && echo ', QUICK')"

# The tiny input: a 64x64 q95 JPEG cut from the corpus, and TINY_JOBS
# files made from it that differ only by a comment segment.
"$BIN" process "$CORPUS/plasma-small.jpg" --ops 'scale:64x64,mode=fill | crop:square' --out "$TMP/tinyout" --thumb 32x32 >/dev/null 2>&1 ||
    "$BIN" process "$(ls "$CORPUS"/*.jpg | head -1)" --ops 'scale:64x64,mode=fill | crop:square' --out "$TMP/tinyout" --thumb 32x32 >/dev/null 2>&1
TINY=$TMP/tiny.jpg
cp "$(ls "$TMP"/tinyout/*.jpg | grep -v thumb | head -1)" "$TINY" || { log "could not make the tiny input"; exit 1; }
TINY_DIR=$TMP/tiny
python3 "$BENCH/lib/make_inputs.py" copies "$TINY" "$TINY_JOBS" "$TINY_DIR"
# photo_set DIR COPIES: the corpus COPIES times over, as symbolic links.
photo_set() {
    local dir=$1 i f
    mkdir -p "$dir"
    for i in $(seq 1 "$2"); do
        for f in "$CORPUS"/*.jpg; do ln -sf "$f" "$dir/r$i-$(basename "$f")"; done
    done
}
TINY_OPS=(--ops grayscale --thumb 32x32)
PHOTO_OPS=(--ops "$P1" --thumb 256x256)

# ------------------------------------------------------------ README path
# Exactly the README's two commands: `darkroom up` with its defaults and
# `darkroom submit DIR --wait` (its text output), timed from the submit's
# start to its exit, so the client's start-up counts. Each run is a second
# or two on a shared machine, so the README path and every tuned
# configuration run REPEAT times, interleaved round by round, and each
# row gives the median run with the spread.
# median_of "RATE EXTRA..." lines on stdin: the line whose rate is the median.
median_of() { sort -g | awk '{ l[NR] = $0 } END { print l[int((NR + 1) / 2)] }'; }
spread_of() { sort -g | awk 'NR == 1 { a = $1 } { b = $1 } END { printf "%s–%s", a, b }'; }
# discard_data NAME: removes a stopped run's data directory (its log
# stays), so that the kernel does not write its files back to disk while
# the next run is being timed.
discard_data() { rm -rf "${TMP:?}/$1"; }
# Each run sets RATE, "-" when it failed, for its round (see below).
readme_run() {
    RATE=-
    if start_up readme; then
        # The server's own CPU over the run (the `up` process: broker,
        # storage node and workers), for the CPU a job costs.
        local server_before server_us
        server_before=$(cpu_seconds "$UP_PID")
        submit_wait "$TINY_DIR" "$TMP/readme.out" "${TINY_OPS[@]}"
        server_us=$(calc "round(($(cpu_seconds "$UP_PID") - $server_before) * 1e6 / $TINY_JOBS)")
        log "README path: $STORED of $TINY_JOBS stored in $SECONDS_TAKEN s (submit exit $SUBMIT_STATUS)"
        if [ "$STORED" = "$TINY_JOBS" ]; then
            RATE=$(calc "round($STORED / $SECONDS_TAKEN, 1)")
            echo "$RATE $SECONDS_TAKEN $SUBMIT_CPU_US $server_us" >>"$TMP/readme.runs"
        else
            failed readme "run stored $STORED of $TINY_JOBS (submit exit $SUBMIT_STATUS): $(tail -3 "$TMP/readme.out.log")"
        fi
        stop "$UP_PID"
        discard_data readme
    else
        failed readme "darkroom up did not answer"
    fi
}
# tuned_run CFG: `darkroom up` in CFG (default or WxC) driven by the load generator.
tuned_run() {
    local cfg=$1 w c up_flags up_text
    w=${cfg%x*}; c=${cfg#*x}
    local keys=()
    RATE=-
    if [ "$cfg" = default ]; then up_flags=(); up_text="darkroom up (defaults)"
    elif [ "$cfg" = keys ]; then up_flags=(); up_text="darkroom up (defaults), load generator with submit keys"; keys=(--submit-keys)
    else up_flags=(-w "$w" -c "$c"); up_text="darkroom up -w $w -c $c"; fi
    if ! start_up "tuned-$cfg" "${up_flags[@]}"; then failed tuned "$up_text did not answer"; return; fi
    local t0 t1 own
    t0=$(now)
    R=$(/usr/bin/time -f "%U %S" -o "$TMP/lg-$cfg.cpu" "$LG" --frontend "$FE" --events "$EV" --image "$TINY" \
          --jobs "$TINY_JOBS" --window "$TUNED_WINDOW" --ops grayscale --thumb 32x32 --timeout 600 "${keys[@]}")
    t1=$(now)
    stop "$UP_PID"
    discard_data "tuned-$cfg"
    own=$(jget "$R" jobsPerSecond)
    if [ -z "$own" ] || [ "$(jget "$R" timedOut)" = True ]; then failed tuned "$up_text: load generator said: $R"; return; fi
    # Timed as the README path is, from the command's start to its exit
    # (the load generator's own timer leaves out its start-up and set-up),
    # less the 0.3 s it sleeps on purpose for its subscription to settle,
    # which `darkroom submit` does not need (it replays what it missed).
    RATE=$(calc "round($TINY_JOBS / ($t1 - $t0 - 0.3), 1)")
    log "tuned $up_text: $RATE jobs/s by wall time less its 0.3 s settling pause ($own by its own timer)"
    echo "$RATE $(jget "$R" p50ms) $(jget "$R" p99ms) $(cpu_us "$TMP/lg-$cfg.cpu" "$TINY_JOBS") $own" >>"$TMP/tuned-$cfg.runs"
}
# Each round's rate goes to NAME.rounds ("-" for a failed run), so that
# the rounds of two rows pair up even then.
if want readme || want tuned; then
    rm -f "$TMP"/readme.runs "$TMP"/tuned-*.runs "$TMP"/readme.rounds "$TMP"/tuned-*.rounds
    for round in $(seq 1 "$REPEAT"); do
        if want readme; then readme_run; echo "$RATE" >>"$TMP/readme.rounds"; fi
        if want tuned; then
            for cfg in $TUNED_CONFIGS; do tuned_run "$cfg"; echo "$RATE" >>"$TMP/tuned-$cfg.rounds"; done
            tuned_run keys
        fi
    done
fi
if want readme && [ -s "$TMP/readme.runs" ]; then
    read -r RATE SECS CPU SERVER_US < <(median_of <"$TMP/readme.runs")
    SPREAD=$(spread_of <"$TMP/readme.runs")
    result readme "setup=darkroom up (defaults: 1 worker, concurrency $CORES; its CPU $SERVER_US µs/job) + darkroom submit DIR --wait (its CPU $CPU µs/job); $UP_ENDPOINTS" \
        jobs="$TINY_JOBS" stored="$TINY_JOBS" seconds="$SECS" rate="$RATE" runs="$(wc -l <"$TMP/readme.runs")" spread="$SPREAD" \
        serverMicros="$SERVER_US" clientMicros="$CPU" cores="$CORES" \
        rates="$(tr '\n' ' ' <"$TMP/readme.rounds")"
fi
if want tuned; then
    BEST_CFG=""; BEST_RATE=0
    for cfg in $TUNED_CONFIGS; do
        [ -s "$TMP/tuned-$cfg.runs" ] || continue
        read -r RATE P50 P99 LG_US OWN < <(median_of <"$TMP/tuned-$cfg.runs")
        if [ "$cfg" = default ]; then up_text="darkroom up (defaults)"; else up_text="darkroom up -w ${cfg%x*} -c ${cfg#*x}"; fi
        result tuned "setup=$up_text + darkroom-loadgen --window $TUNED_WINDOW (its CPU $LG_US µs/job)" \
            jobs="$TINY_JOBS" rate="$RATE" own="$OWN" p50ms="$P50" p99ms="$P99" cfg="$cfg" runs="$(wc -l <"$TMP/tuned-$cfg.runs")" spread="$(spread_of <"$TMP/tuned-$cfg.runs")" \
            rates="$(tr '\n' ' ' <"$TMP/tuned-$cfg.rounds")"
        if python3 -c "import sys; sys.exit(0 if $RATE > $BEST_RATE else 1)"; then BEST_RATE=$RATE; BEST_CFG=$cfg; fi
    done
    # The default server again, the load generator now giving every job a
    # submit key as `darkroom submit` does: what of the README path's gap
    # is the broker's work for the keys, and what is the client.
    if [ -s "$TMP/tuned-keys.runs" ]; then
        read -r RATE P50 P99 LG_US OWN < <(median_of <"$TMP/tuned-keys.runs")
        result tuned-keys "setup=darkroom up (defaults) + darkroom-loadgen --window $TUNED_WINDOW --submit-keys (its CPU $LG_US µs/job)" \
            jobs="$TINY_JOBS" rate="$RATE" own="$OWN" p50ms="$P50" p99ms="$P99" cfg=keys runs="$(wc -l <"$TMP/tuned-keys.runs")" spread="$(spread_of <"$TMP/tuned-keys.runs")"
    fi
    if [ -n "$BEST_CFG" ] && [ "$BEST_CFG" != default ]; then
        w=${BEST_CFG%x*}; c=${BEST_CFG#*x}
        if start_up tuned-submit -w "$w" -c "$c"; then
            submit_wait "$TINY_DIR" "$TMP/tuned-submit.out" "${TINY_OPS[@]}" --window "$TUNED_WINDOW"
            result tuned-submit "setup=darkroom up -w $w -c $c + darkroom submit DIR --wait --window $TUNED_WINDOW (its CPU $SUBMIT_CPU_US µs/job)" \
                jobs="$TINY_JOBS" stored="$STORED" seconds="$SECONDS_TAKEN" rate="$(calc "round($STORED / $SECONDS_TAKEN, 1)")"
            stop "$UP_PID"
        fi
    fi
fi

# ----------------------------------------------------------------- peers
# start_redis: redis-server on a free port, nothing written to disk.
start_redis() {
    REDIS_PORT=$(free_ports 1)
    spawn "$TMP/redis.log" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no
    REDIS_PID=$LAST_PID
    local i
    for i in $(seq 1 50); do
        [ "$(redis-cli -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    return 1
}

# Sidekiq (Debian's ruby-sidekiq): 2 processes of 10 threads; the job
# INCRs a Redis counter, which the driver polls (bench/peers/sidekiq_bench.rb).
if want sidekiq; then
    if need_cmd redis-server redis-server && need_cmd redis-cli redis-tools && need_cmd sidekiq ruby-sidekiq; then
        if start_redis; then
            SK_PIDS=()
            for i in 1 2; do
                spawn "$TMP/sidekiq$i.log" env REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" \
                    sidekiq -r "$BENCH/peers/sidekiq_bench.rb" -c 10 -t 2
                SK_PIDS+=("$LAST_PID")
            done
            R=$(REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" ruby "$BENCH/peers/sidekiq_bench.rb" "$TINY_JOBS" 2 2>"$TMP/sidekiq-driver.log")
            if [ -n "$(jget "$R" jobsPerSecond)" ]; then
                log "Sidekiq: $(jget "$R" jobsPerSecond) jobs/s"
                result sidekiq "setup=Sidekiq $(ruby -e 'require "sidekiq"; print Sidekiq::VERSION' 2>/dev/null), 2 processes × 10 threads, Redis (no persistence), job INCRs a counter" \
                    jobs="$TINY_JOBS" rate="$(jget "$R" jobsPerSecond)" seconds="$(jget "$R" seconds)" enqueueSeconds="$(jget "$R" enqueueSeconds)"
            else
                failed sidekiq "the driver failed: $(tail -2 "$TMP/sidekiq-driver.log" "$TMP/sidekiq1.log" | tr '\n' ' ')"
            fi
            stop "${SK_PIDS[@]}"
            stop "$REDIS_PID"
        else
            failed sidekiq "redis-server did not start"
        fi
    else
        failed sidekiq "needs redis-server and ruby-sidekiq (apt)"
    fi
fi

# Celery 5 (apt python3-celery, or pip): one worker with 2 prefork
# processes, Redis broker, a no-op task counted by a Redis INCR after it
# runs (bench/peers/celery_bench.py).
if want celery; then
    if need_cmd redis-server redis-server && need_cmd redis-cli redis-tools &&
       need_py "celery redis" "python3-celery python3-redis" "celery>=5,<6 redis"; then
        if start_redis; then
            export BENCH_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
            (cd "$BENCH/peers" && exec python3 -m celery -A celery_bench worker --pool prefork --concurrency 2 --loglevel WARNING) >"$TMP/celery.log" 2>&1 &
            CW=$!; PIDS+=("$CW")
            R=$(cd "$BENCH/peers" && python3 celery_bench.py "$TINY_JOBS" 2>"$TMP/celery-driver.log")
            if [ -n "$(jget "$R" jobsPerSecond)" ]; then
                log "Celery: $(jget "$R" jobsPerSecond) jobs/s"
                result celery "setup=Celery $(python3 -c 'import celery; print(celery.__version__)'), 1 worker × 2 prefork processes, Redis broker (no persistence), no-op task, results ignored" \
                    jobs="$TINY_JOBS" rate="$(jget "$R" jobsPerSecond)" seconds="$(jget "$R" seconds)" enqueueSeconds="$(jget "$R" enqueueSeconds)"
            else
                failed celery "the driver failed: $(tail -2 "$TMP/celery-driver.log" "$TMP/celery.log" | tr '\n' ' ')"
            fi
            stop "$CW"
            stop "$REDIS_PID"
            unset BENCH_REDIS_URL
        else
            failed celery "redis-server did not start"
        fi
    else
        failed celery "needs redis-server and Celery 5 with redis (apt python3-celery python3-redis, or pip)"
    fi
fi

# --------------------------------------------------------------- latency
# lat_run KIND MODE DIR JOBS OPS...: `darkroom broker` + `darkroom store`
# and LAT_WORKERS `darkroom worker` processes with default flags, either
# connected directly (MODE direct) or each worker through two delaying
# proxies, one to the broker's backend and one to the store (MODE proxy),
# or through the same proxies without a delay (MODE relay: what forwarding
# every byte through Python costs the machine's two cores, without the
# distance); then `darkroom submit DIR --wait` (the producer connects
# directly).
lat_run() {
    local kind=$1 mode=$2 dir=$3 jobs=$4 be st setup proxy_cpu=0
    shift 4
    LAT_RATE=-
    start_roles "lat-$kind-$mode" || { failed "latency-$kind" "broker or store did not answer"; return; }
    be=$BE; st=$ST; PROXY_PIDS=()
    setup="darkroom broker + darkroom store + $LAT_WORKERS × darkroom worker (default flags)"
    local delay=$LINK_DELAY_MS
    case $mode in
        direct) setup="$setup, direct" ;;
        relay) delay=0; setup="$setup, workers to broker and store through the same proxy with no delay" ;;
        proxy) setup="$setup, workers to broker and store through a +$((2 * LINK_DELAY_MS)) ms round-trip proxy" ;;
    esac
    if [ "$mode" != direct ]; then
        start_proxy "$TMP/lat-$kind.$mode-broker.log" "$BE" "$delay" && be=$PROXY_EP
        start_proxy "$TMP/lat-$kind.$mode-store.log" "$ST" "$delay" && st=$PROXY_EP
    fi
    start_workers "lat-$kind-$mode" "$LAT_WORKERS" "$be" "$st"
    if wait_workers "$LAT_WORKERS"; then
        submit_wait "$dir" "$TMP/lat-$kind-$mode.out" "$@"
        [ ${#PROXY_PIDS[@]} -gt 0 ] && proxy_cpu=$(cpu_seconds "${PROXY_PIDS[@]}")
        log "latency $kind $mode: $STORED of $jobs stored in $SECONDS_TAKEN s (proxies' CPU $proxy_cpu s)"
        if [ "$STORED" = "$jobs" ]; then
            LAT_RATE=$(calc "round($STORED / $SECONDS_TAKEN, 2)")
            echo "$LAT_RATE $SECONDS_TAKEN $proxy_cpu" >>"$TMP/lat-$kind-$mode.runs"
            echo "$setup" >"$TMP/lat-$kind-$mode.setup"
        else
            failed "latency-$kind" "$mode: run stored $STORED of $jobs (submit exit $SUBMIT_STATUS)"
        fi
    else
        failed "latency-$kind" "$mode: the workers did not register"
    fi
    stop "${WORKER_PIDS[@]}"
    [ ${#PROXY_PIDS[@]} -gt 0 ] && stop "${PROXY_PIDS[@]}"
    stop "$BROKER_PID" "$STORE_PID"
}
# lat_rows KIND DIR JOBS OPS...: LAT_REPEAT rounds of the three modes,
# interleaved (direct, relay, proxy, direct, ...), so that the machine's
# drift over the minutes the rows take falls on every mode alike; each
# mode's row is its median run, with the spread, and the rate of each
# round in order ("-" for a failed run), from which the report takes each
# round's ratio.
lat_rows() {
    local kind=$1 dir=$2 jobs=$3 round mode rate secs cpu
    shift 3
    for round in $(seq 1 "$LAT_REPEAT"); do
        for mode in direct relay proxy; do
            lat_run "$kind" "$mode" "$dir" "$jobs" "$@"
            echo "$LAT_RATE" >>"$TMP/lat-$kind-$mode.rounds"
        done
    done
    for mode in direct relay proxy; do
        [ -s "$TMP/lat-$kind-$mode.runs" ] || continue
        read -r rate secs cpu < <(median_of <"$TMP/lat-$kind-$mode.runs")
        result "lat-$kind-$mode" "setup=$(cat "$TMP/lat-$kind-$mode.setup")" jobs="$jobs" stored="$jobs" seconds="$secs" rate="$rate" \
            proxyCpuSeconds="$cpu" runs="$(wc -l <"$TMP/lat-$kind-$mode.runs")" spread="$(cut -d' ' -f1 "$TMP/lat-$kind-$mode.runs" | spread_of)" \
            rates="$(tr '\n' ' ' <"$TMP/lat-$kind-$mode.rounds")"
    done
}
if want latency-tiny; then
    python3 "$BENCH/lib/make_inputs.py" copies "$TINY" "$LAT_TINY_JOBS" "$TMP/lat-tiny"
    lat_rows tiny "$TMP/lat-tiny" "$LAT_TINY_JOBS" "${TINY_OPS[@]}"
fi
if want latency-photos; then
    photo_set "$TMP/lat-photos" "$LAT_PHOTO_REPEAT"
    NPHOTOS=$(ls "$TMP/lat-photos" | wc -l)
    lat_rows photo "$TMP/lat-photos" "$NPHOTOS" "${PHOTO_OPS[@]}"
fi

# ------------------------------------------------------------ big inputs
# BIG_INPUTS ~20 MB JPEGs (24 MP) submitted at once to broker + store +
# one `darkroom worker` with default flags, all separate processes; the
# worker's peak RSS is the kernel's high-water mark (VmHWM).
if want big; then
    if need_py "PIL numpy" "python3-pil python3-numpy" "pillow numpy"; then
        log "making a ~20 MB input (Pillow)"
        python3 "$BENCH/lib/make_inputs.py" big "$TMP/big.jpg" &&
            python3 "$BENCH/lib/make_inputs.py" copies "$TMP/big.jpg" "$BIG_INPUTS" "$TMP/big-inputs"
        rm -f "$TMP/big.jpg"
        MEAN_MB=$(du -cb "$TMP"/big-inputs/*.jpg | awk -v n="$BIG_INPUTS" 'END {printf "%.1f", $1 / n / 1e6}')
        if start_roles big; then
            start_workers big 1 "$BE" "$ST"
            if wait_workers 1; then
                submit_wait "$TMP/big-inputs" "$TMP/big.out" "${PHOTO_OPS[@]}" --timeout 30
                WP=${WORKER_PIDS[0]}
                log "big inputs: $STORED of $BIG_INPUTS stored in $SECONDS_TAKEN s; worker VmHWM $(hwm_mib "$WP") MiB"
                result big "setup=darkroom broker + darkroom store + 1 × darkroom worker (default flags), P1 + thumbnail 256×256" \
                    jobs="$BIG_INPUTS" stored="$STORED" meanMB="$MEAN_MB" width=6000 height=4000 seconds="$SECONDS_TAKEN" \
                    rate="$(calc "round($STORED / $SECONDS_TAKEN, 2)")" \
                    workerMiB="$(hwm_mib "$WP")" brokerMiB="$(hwm_mib "$BROKER_PID")" storeMiB="$(hwm_mib "$STORE_PID")"
            else
                failed big "the worker did not register"
            fi
            stop "${WORKER_PIDS[@]}"
            stop "$BROKER_PID" "$STORE_PID"
        else
            failed big "broker or store did not answer"
        fi
        rm -rf "$TMP/big-inputs" "$TMP/big"
    else
        failed big "needs Pillow and numpy to make the inputs (apt python3-pil python3-numpy, or pip)"
    fi
fi

# ------------------------------------------------------------ image jobs
# The engine alone (`darkroom process --jobs CORES` over the set) against
# the README path (`darkroom up` with defaults: concurrency CORES, and
# `darkroom submit --wait`) on the same photos, runs alternating.
if want images; then
    photo_set "$TMP/img" "$PHOTO_REPEAT"
    NIMG=$(ls "$TMP/img" | wc -l)
    ENGINE_T=(); SYSTEM_T=(); IMG_STORED=0; ENGINE_R=""; SYSTEM_R=""
    for run in $(seq 1 "$IMAGE_RUNS"); do
        rm -rf "$TMP/img-out"
        T0=$(now)
        if "$BIN" process "$TMP"/img/*.jpg --ops "$P1" --thumb 256x256 --jobs "$CORES" --out "$TMP/img-out" >/dev/null 2>"$TMP/img-process.log"; then
            T=$(calc "$(now) - $T0"); ENGINE_T+=("$T"); ENGINE_R+="$(calc "round($NIMG / $T, 2)") "
        else
            ENGINE_R+="- "
        fi
        rm -rf "$TMP/img-out"
        R="-"
        if start_up "img-$run"; then
            submit_wait "$TMP/img" "$TMP/img-$run.out" "${PHOTO_OPS[@]}"
            if [ "$STORED" = "$NIMG" ]; then SYSTEM_T+=("$SECONDS_TAKEN"); R=$(calc "round($NIMG / $SECONDS_TAKEN, 2)"); fi
            IMG_STORED=$STORED
            stop "$UP_PID"
        fi
        SYSTEM_R+="$R "
        rm -rf "$TMP/img-$run"
    done
    if [ ${#ENGINE_T[@]} -gt 0 ] && [ ${#SYSTEM_T[@]} -gt 0 ]; then
        rates() { python3 -c "import statistics, sys; v = [float(x) for x in sys.argv[2:]]; n = int(sys.argv[1]); print(round(n / min(v), 2), round(n / statistics.median(v), 2))" "$NIMG" "$@"; }
        read -r EB EM < <(rates "${ENGINE_T[@]}")
        read -r SB SM < <(rates "${SYSTEM_T[@]}")
        log "images: engine $EB, system $SB images/s (best)"
        result img-engine "setup=darkroom process --jobs $CORES, P1 + thumbnail 256×256" jobs="$NIMG" runs="${#ENGINE_T[@]}" rate="$EB" median="$EM" rates="$ENGINE_R"
        result img-system "setup=darkroom up (defaults) + darkroom submit DIR --wait, same photos" jobs="$NIMG" runs="${#SYSTEM_T[@]}" stored="$IMG_STORED" rate="$SB" median="$SM" rates="$SYSTEM_R"
    else
        failed images "engine runs ${#ENGINE_T[@]}, system runs ${#SYSTEM_T[@]} completed (see $TMP/img-process.log)"
    fi
fi

# ---------------------------------------------------------------- memory
# Broker, store and a worker (default flags) as processes; after a 2,000-job
# warm-up, MEM_JOBS tiny jobs while their VmRSS is sampled every 0.2 s.
if want memory; then
    if start_roles mem; then
        start_workers mem 1 "$BE" "$ST"
        WP=${WORKER_PIDS[0]}
        if wait_workers 1; then
            "$LG" --frontend "$FE" --events "$EV" --image "$TINY" --jobs 2000 --window "$TUNED_WINDOW" >/dev/null
            WB=$(rss_mib "$BROKER_PID"); WS=$(rss_mib "$STORE_PID"); WW=$(rss_mib "$WP")
            ( while :; do echo "$(rss_mib "$BROKER_PID") $(rss_mib "$STORE_PID") $(rss_mib "$WP")"; sleep 0.2; done ) >"$TMP/rss.txt" &
            SAMPLER=$!
            R=$("$LG" --frontend "$FE" --events "$EV" --image "$TINY" --jobs "$MEM_JOBS" --window "$TUNED_WINDOW" --timeout 600)
            kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null
            read -r PB PS PW < <(awk '{ if ($1 > a) a = $1; if ($2 > b) b = $2; if ($3 > c) c = $3 } END { print a + 0, b + 0, c + 0 }' "$TMP/rss.txt")
            result memory "setup=darkroom broker + darkroom store + darkroom worker -c 512 + darkroom-loadgen --window $TUNED_WINDOW" \
                jobs="$MEM_JOBS" rate="$(jget "$R" jobsPerSecond)" brokerWarm="$WB" brokerPeak="$PB" storeWarm="$WS" storePeak="$PS" workerWarm="$WW" workerPeak="$PW"
        else
            failed memory "the worker did not register"
        fi
        stop "$WP"
        stop "$BROKER_PID" "$STORE_PID"
    else
        failed memory "broker or store did not answer"
    fi
fi

# ------------------------------------------------------------- hot folder
# `darkroom submit --follow DIR` started on a folder holding HOT_FILES tiny
# files (a burst, as when a batch is copied in), timed to the last stored
# line, against `darkroom submit DIR --wait` on the same files; each on a
# fresh `darkroom up`, REPEAT rounds interleaved.
if want hotfolder; then
    [ "$HOT_FILES" -gt "$TINY_JOBS" ] && HOT_FILES=$TINY_JOBS
    HOT_DIR=$TMP/hot-inputs
    rm -rf "$HOT_DIR"; mkdir -p "$HOT_DIR"
    ls "$TINY_DIR" | head -n "$HOT_FILES" | while read -r f; do cp "$TINY_DIR/$f" "$HOT_DIR/"; done
    rm -f "$TMP"/hot-follow.runs "$TMP"/hot-submit.runs
    HOT_WHY=""
    for round in $(seq 1 "$REPEAT"); do
        if start_up hot-follow; then
            WATCHED=$TMP/hot-watched
            # The files are there before the hot folder starts, as in the
            # row's setup: copied with their times (-p), so none counts as
            # just written and waits out --settle.
            rm -rf "$WATCHED"; cp -rp "$HOT_DIR" "$WATCHED"
            cat "$WATCHED"/* >/dev/null
            : >"$TMP/hot.out"
            t0=$(now)
            "$BIN" submit --follow "$WATCHED" "${TINY_OPS[@]}" --broker "$FE" --events "$EV" >"$TMP/hot.out" 2>"$TMP/hot.log" &
            HOT_PID=$!
            PIDS+=("$HOT_PID")
            # Polled lightly (the poll's own processes take CPU from the
            # run); the end is the output file's last write, which is the
            # last stored line: nothing else goes to stdout.
            deadline=$(( $(date +%s) + 300 ))
            while n=$(grep -c '^stored ' "$TMP/hot.out"); [ "${n:-0}" -lt "$HOT_FILES" ] && [ "$(date +%s)" -lt "$deadline" ] && kill -0 "$HOT_PID" 2>/dev/null; do
                sleep 0.05
            done
            t1=$(stat -c %.9Y "$TMP/hot.out")
            kill -INT "$HOT_PID" 2>/dev/null; wait "$HOT_PID" 2>/dev/null
            if [ "${n:-0}" = "$HOT_FILES" ]; then
                calc "round($HOT_FILES / ($t1 - $t0), 1)" >>"$TMP/hot-follow.runs"
            else
                HOT_WHY="the hot folder stored ${n:-0} of $HOT_FILES: $(tail -3 "$TMP/hot.log")"
            fi
            stop "$UP_PID"; discard_data hot-follow
        else
            HOT_WHY="darkroom up did not answer"
        fi
        if start_up hot-submit; then
            submit_wait "$HOT_DIR" "$TMP/hot-submit.out" "${TINY_OPS[@]}"
            if [ "$STORED" = "$HOT_FILES" ]; then
                calc "round($STORED / $SECONDS_TAKEN, 1)" >>"$TMP/hot-submit.runs"
            else
                HOT_WHY="submit --wait stored $STORED of $HOT_FILES (exit $SUBMIT_STATUS)"
            fi
            stop "$UP_PID"; discard_data hot-submit
        else
            HOT_WHY="darkroom up did not answer"
        fi
    done
    if [ -s "$TMP/hot-follow.runs" ] && [ -s "$TMP/hot-submit.runs" ]; then
        HF=$(median_of <"$TMP/hot-follow.runs"); HS=$(median_of <"$TMP/hot-submit.runs")
        result hotfolder "setup=darkroom up (defaults) + darkroom submit --follow DIR, DIR holding the files when it starts" \
            jobs="$HOT_FILES" rate="$HF" submitRate="$HS" runs="$(wc -l <"$TMP/hot-follow.runs")" spread="$(spread_of <"$TMP/hot-follow.runs")"
    fi
    [ -n "$HOT_WHY" ] && failed hotfolder "$HOT_WHY (the last failure of $REPEAT rounds)"
fi

# ---------------------------------------------------------------- report
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
NOTES=("$DATE, $CORES cores, load average $LOAD_BEFORE before, $LOAD_AFTER after; release build $BIN")
[ "$QUICK" = 1 ] && NOTES+=("**BENCH_QUICK=1**: fewer jobs, to check that the rows run; not numbers to quote.")
NOTES+=("Tiny job: a 64×64 q95 JPEG, \`--ops grayscale --thumb 32x32\`, submit → stored. Photos: the corpus ($(ls "$CORPUS"/*.jpg | wc -l) files) × $PHOTO_REPEAT (× $LAT_PHOTO_REPEAT in each latency run), P1 = \`$P1\` + thumbnail 256×256.")
python3 "$BENCH/lib/results.py" report "$RESULTS" "${NOTES[@]}" | tee "$REPORT"
cp "$RESULTS" "$OUT_DIR/system-latest.jsonl"
log "report written to $REPORT"
