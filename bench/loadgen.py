#!/usr/bin/env python3
"""DRK1 load generator for bench/system.sh.

Submits N copies of one JPEG to a broker frontend with a window of jobs in
flight (submitted but not yet stored), follows the events PUB socket, and
reports throughput and submit -> stored latency as one JSON line.

Speaks protocol/drk1.md directly (pyzmq) so that the client costs as little
CPU as possible next to the system under test.
"""
import argparse
import json
import struct
import sys
import time

import zmq

DRK1 = b"DRK1"
SUBMIT, ACCEPTED, REJECTED, ERROR, PING, PONG = b"\x10", b"\x11", b"\x12", b"\x01", b"\x02", b"\x03"
EVENT = b"\x40"
KIND_STORED, KIND_DEAD = 3, 6


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frontend", required=True)
    ap.add_argument("--events", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--window", type=int, default=1000, help="jobs submitted but not yet stored")
    ap.add_argument("--ops", default="grayscale")
    ap.add_argument("--thumb", default="32x32")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--submit-keys", action="store_true", help="give every job a submit key of its own, as darkroom submit does")
    args = ap.parse_args()

    image = open(args.image, "rb").read()
    tw, th = (int(v) for v in args.thumb.split("x"))
    options = struct.pack(">HHBBH", tw, th, 95, 70, 0)
    pipeline = args.ops.encode()
    source = b"bench.jpg"
    priority = b"\x05"
    # With --submit-keys, job N's key is unique to this run and job.
    run = "%x" % time.time_ns()

    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"ev")
    sub.connect(args.events)
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.SNDHWM, 0)
    dealer.setsockopt(zmq.RCVHWM, 0)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(args.frontend)

    # Make sure both connections are up before timing (PUB drops to unjoined SUBs).
    dealer.send_multipart([DRK1, PING, struct.pack(">Q", 0)])
    if not dealer.poll(10000):
        print(json.dumps({"error": "broker did not answer PING"}))
        return 2
    dealer.recv_multipart()
    time.sleep(0.3)

    sent_at = {}        # request id -> send time
    job_sent = {}       # job id -> send time
    early_stored = {}   # job id -> stored time, when the event beat the ACCEPTED
    latencies = []
    accepted_at = []
    rejected = 0
    dead = 0
    next_id = 1
    finished = 0
    n = args.jobs
    poller = zmq.Poller()
    poller.register(dealer, zmq.POLLIN)
    poller.register(sub, zmq.POLLIN)
    now = time.perf_counter
    start = now()
    deadline = start + args.timeout
    in_flight = 0
    while finished < n:
        while next_id <= n and in_flight < args.window:
            sent_at[next_id] = now()
            frames = [DRK1, SUBMIT, struct.pack(">Q", next_id), priority, options, pipeline, source, image]
            if args.submit_keys:
                frames.append(f"{run}-{next_id:09d}".encode())
            dealer.send_multipart(frames)
            next_id += 1
            in_flight += 1
        if now() > deadline:
            break
        events = dict(poller.poll(100))
        if dealer in events:
            while True:
                try:
                    frames = dealer.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                cmd = frames[1]
                rid = struct.unpack(">Q", frames[2])[0]
                t0 = sent_at.pop(rid, None)
                if cmd == ACCEPTED:
                    job = frames[3]
                    accepted_at.append(now() - t0)
                    t1 = early_stored.pop(job, None)
                    if t1 is not None:
                        latencies.append(t1 - t0)
                        finished += 1
                        in_flight -= 1
                    else:
                        job_sent[job] = t0
                else:
                    rejected += 1
                    finished += 1
                    in_flight -= 1
        if sub in events:
            while True:
                try:
                    frames = sub.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                kind = frames[5][0]
                if kind != KIND_STORED and kind != KIND_DEAD:
                    continue
                job = frames[6]
                t1 = now()
                if kind == KIND_DEAD:
                    dead += 1
                t0 = job_sent.pop(job, None)
                if t0 is None:
                    early_stored[job] = t1
                else:
                    latencies.append(t1 - t0)
                    finished += 1
                    in_flight -= 1
    elapsed = now() - start
    latencies.sort()
    accepted_at.sort()
    done = len(latencies)
    out = {
        "jobs": n, "stored": done - dead, "dead": dead, "rejected": rejected, "timedOut": finished < n,
        "seconds": round(elapsed, 3), "jobsPerSecond": round(done / elapsed, 1) if elapsed > 0 else 0,
        "window": args.window,
        "p50ms": round(percentile(latencies, 50) * 1000, 2), "p99ms": round(percentile(latencies, 99) * 1000, 2),
        "acceptP50ms": round(percentile(accepted_at, 50) * 1000, 2), "acceptP99ms": round(percentile(accepted_at, 99) * 1000, 2),
    }
    print(json.dumps(out))
    dealer.close()
    sub.close()
    ctx.term()
    return 0 if not out["timedOut"] and rejected == 0 and dead == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
