"""Celery peer for bench/system.sh.

As a Celery app (`celery -A celery_bench worker --pool prefork --concurrency 2`):
a no-op task, results ignored (no result backend), and a task_postrun
handler in the worker that INCRs one Redis counter, so the driver knows
exactly when every task ran: the same completion signal as the Sidekiq
peer's job, which INCRs the counter itself.

As a script (`python3 celery_bench.py JOBS`): waits until a worker answers
a ping, enqueues JOBS tasks one `apply_async` each (Celery has no bulk
enqueue), polls the counter until it reaches JOBS and prints one JSON
line: jobs, seconds (first enqueue to the last INCR seen), enqueueSeconds,
jobsPerSecond.

Redis comes from BENCH_REDIS_URL (redis://127.0.0.1:6379/0 by default).
"""
import json
import os
import sys
import time

import redis
from celery import Celery
from celery.signals import task_postrun

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
COUNTER = "darkroom-bench:done"

app = Celery("celery_bench", broker=REDIS_URL)
app.conf.task_ignore_result = True
app.conf.worker_hijack_root_logger = False
app.conf.broker_connection_retry_on_startup = True

_counter = None


@app.task(name="celery_bench.noop")
def noop(n):
    return None


@task_postrun.connect
def _count(**_):
    global _counter
    if _counter is None:
        _counter = redis.Redis.from_url(REDIS_URL)
    _counter.incr(COUNTER)


def main(argv):
    jobs = int(argv[0]) if argv else 5000
    r = redis.Redis.from_url(REDIS_URL)
    start = time.monotonic()
    while not app.control.ping(timeout=0.5):
        if time.monotonic() - start > 60:
            print("celery_bench: no worker answered a ping within 60 s", file=sys.stderr)
            return 1
    r.delete(COUNTER)

    t0 = time.monotonic()
    with app.producer_or_acquire() as producer:
        for i in range(jobs):
            noop.apply_async((i,), producer=producer)
    enqueued = time.monotonic()
    done = 0
    while done < jobs:
        if time.monotonic() - t0 > 600:
            print(f"celery_bench: {done} of {jobs} tasks done after 600 s", file=sys.stderr)
            return 1
        time.sleep(0.002)
        done = int(r.get(COUNTER) or 0)
    t1 = time.monotonic()
    print(json.dumps({"jobs": jobs, "seconds": round(t1 - t0, 3),
                      "enqueueSeconds": round(enqueued - t0, 3),
                      "jobsPerSecond": round(jobs / (t1 - t0), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
