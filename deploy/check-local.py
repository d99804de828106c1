#!/usr/bin/env python3
"""Run the exact darkroom command lines from deploy/ on this machine.

For each engine (Kubernetes, Compose, systemd) this reads the role commands
and probe commands out of the files, then runs them against a local build:

  * probes run before the services start must fail (exit 1);
  * broker and store start with the files' flags, and their probes pass;
  * a worker starts with the files' flags and its probe passes;
  * one JPEG submitted to that broker is processed and stored;
  * SIGTERM stops worker, store and broker cleanly (exit 0) within the
    stop timeout the files give them.

Only what cannot work outside the engine is rewritten: service host names
become 127.0.0.1, the image's /usr/local/bin/darkroom becomes the local
build, /data and /var/lib/darkroom become a temporary directory, and the
ports 7700-7703 move to a free block (see --base-port) so a Darkroom already
running on the defaults is left alone.

Usage: python3 deploy/check-local.py [--bin .build/release/darkroom] [--base-port 27700]
Needs PyYAML (apt install python3-yaml, or pip install pyyaml) and cjpeg
(libjpeg-turbo-progs) to make the test image.
"""

import argparse
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

DEPLOY = os.path.dirname(os.path.abspath(__file__))
IMAGE_BIN = "/usr/local/bin/darkroom"

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok    " if ok else "FAIL  ") + name + (f"  ({detail})" if detail and not ok else ""))
    return ok


# ---------------------------------------------------------------- extraction

def load_yaml_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def kubernetes_commands():
    """Role args, probes and stop timeouts from the Kubernetes manifests."""
    out = {}
    for name in ("broker.yaml", "store.yaml", "worker.yaml"):
        for doc in load_yaml_docs(os.path.join(DEPLOY, "kubernetes", name)):
            if doc["kind"] not in ("StatefulSet", "Deployment"):
                continue
            pod = doc["spec"]["template"]["spec"]
            c = pod["containers"][0]
            env = {}
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("resourceFieldRef")
                if "value" in e:
                    env[e["name"]] = e["value"]
                elif ref:
                    # limits.cpu with divisor 1, as the downward API gives it
                    kind, res = ref["resource"].split(".")
                    env[e["name"]] = str(c["resources"][kind][res])
            args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in c["args"]]
            probes = [c[p]["exec"]["command"] for p in ("startupProbe", "readinessProbe", "livenessProbe") if p in c]
            role = args[0]
            out[role] = {"argv": [IMAGE_BIN] + args, "probes": probes, "stop": pod["terminationGracePeriodSeconds"]}
    return out


def compose_commands():
    doc = load_yaml_docs(os.path.join(DEPLOY, "compose", "compose.yaml"))[0]
    out = {}
    for name, svc in doc["services"].items():
        args = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(a)) for a in svc["command"]]
        test = svc["healthcheck"]["test"]
        assert test[0] == "CMD", test
        stop = int(svc["stop_grace_period"].rstrip("s"))
        out[args[0]] = {"argv": [IMAGE_BIN] + args, "probes": [test[1:]], "stop": stop}
    return out


def parse_unit(path):
    """ExecStart, Environment defaults and TimeoutStopSec of a unit file."""
    env, exec_start, timeout = {}, None, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("Environment="):
                k, _, v = line[len("Environment="):].partition("=")
                env[k] = v
            elif line.startswith("ExecStart="):
                exec_start = line[len("ExecStart="):]
            elif line.startswith("TimeoutStopSec="):
                timeout = int(line[len("TimeoutStopSec="):])
    return env, exec_start, timeout


def systemd_expand(command, env, instance="1"):
    """systemd's rules: ${VAR} is one word, a lone $VAR splits on spaces."""
    words = []
    for word in shlex.split(command):
        word = word.replace("%H", socket.gethostname()).replace("%i", instance)
        m = re.fullmatch(r"\$(\w+)", word)
        if m:
            words += env.get(m.group(1), "").split()
            continue
        words.append(re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), word))
    return words


def systemd_commands():
    out = {}
    for unit, role in (("darkroom-broker.service", "broker"), ("darkroom-store.service", "store"),
                       ("darkroom-worker@.service", "worker")):
        env, exec_start, timeout = parse_unit(os.path.join(DEPLOY, "systemd", unit))
        # The units bind loopback by default; exercise the multi-host setting
        # the env example documents as well (non-loopback bind + --insecure).
        if role == "broker":
            env.update(DARKROOM_FRONTEND="tcp://0.0.0.0:7700", DARKROOM_BACKEND="tcp://0.0.0.0:7701",
                       DARKROOM_EVENTS="tcp://0.0.0.0:7702", DARKROOM_BROKER_FLAGS="--insecure")
        if role == "store":
            env.update(DARKROOM_STORE_BIND="tcp://0.0.0.0:7703", DARKROOM_STORE_FLAGS="--insecure")
        if role == "worker":
            env.update(DARKROOM_WORKER_FLAGS="--concurrency 2")
        out[role] = {"argv": systemd_expand(exec_start, env), "probes": [], "stop": timeout}
    return out


# ---------------------------------------------------------------- running

def localise(argv, binary, base, data):
    out = []
    for a in argv:
        a = binary if a == IMAGE_BIN else a
        for host in ("darkroom-broker", "darkroom-store", "broker", "store"):
            a = a.replace(f"tcp://{host}:", "tcp://127.0.0.1:")
        a = re.sub(r":770([0-3])\b", lambda m: f":{base + int(m.group(1))}", a)
        if a in ("/data", "/var/lib/darkroom"):
            a = data
        out.append(a)
    return out


def run_probe(argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)


def wait_for(argv, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if run_probe(argv).returncode == 0:
            return True
        time.sleep(0.5)
    return False


def stop(proc, limit):
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None, limit
    return code, time.monotonic() - start


def make_jpeg(path):
    w, h = 96, 64
    ppm = path + ".ppm"
    with open(ppm, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h))
        f.write(bytes(v for y in range(h) for x in range(w) for v in (x * 2 % 256, y * 3 % 256, (x + y) % 256)))
    subprocess.run(["cjpeg", "-quality", "90", "-outfile", path, ppm], check=True)


def exercise(engine, commands, binary, base, scratch):
    print(f"--- {engine}")
    data = os.path.join(scratch, engine)
    os.makedirs(data)
    loc = {role: dict(c, argv=localise(c["argv"], binary, base, data),
                      probes=[localise(p, binary, base, data) for p in c["probes"]])
           for role, c in commands.items()}
    broker_probe = loc["broker"]["probes"] or [[binary, "status", "--check", "--only", "broker", "--broker", f"tcp://127.0.0.1:{base}", "--timeout", "3"]]
    store_probe = loc["store"]["probes"] or [[binary, "status", "--check", "--only", "store", "--store", f"tcp://127.0.0.1:{base + 3}", "--timeout", "3"]]
    for p in broker_probe[:1] + store_probe[:1] + loc["worker"]["probes"][:1]:
        r = run_probe(p)
        check(f"{engine}: probe fails while nothing runs: {' '.join(p[1:6])}", r.returncode == 1, f"exit {r.returncode}")
    logs = {}
    procs = {}
    try:
        for role in ("broker", "store", "worker"):
            logs[role] = open(os.path.join(data, f"{role}.log"), "w")
            procs[role] = subprocess.Popen(loc[role]["argv"], stdout=logs[role], stderr=subprocess.STDOUT)
            probes = {"broker": broker_probe, "store": store_probe, "worker": loc["worker"]["probes"]}[role]
            for i, p in enumerate(probes):
                check(f"{engine}: {role} probe {i + 1} passes: {' '.join(p[1:])}", wait_for(p))
            check(f"{engine}: {role} is running: {' '.join(loc[role]['argv'][1:])}", procs[role].poll() is None,
                  f"exited {procs[role].returncode}")
        jpeg = os.path.join(data, "in.jpg")
        make_jpeg(jpeg)
        r = subprocess.run([binary, "submit", jpeg, "--ops", "scale:48x48,mode=fill | crop:square | glitch:seed=7",
                            "--wait", "--broker", f"tcp://127.0.0.1:{base}", "--events", f"tcp://127.0.0.1:{base + 2}",
                            "--timeout", "30"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        check(f"{engine}: a submitted JPEG is processed and stored", r.returncode == 0 and "stored" in r.stdout, r.stdout.strip())
        r = subprocess.run([binary, "ls", "--store", f"tcp://127.0.0.1:{base + 3}"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        check(f"{engine}: the store lists the record", r.returncode == 0 and "in.jpg" in r.stdout, r.stdout.strip())
    finally:
        for role in ("worker", "store", "broker"):
            if role in procs and procs[role].poll() is None:
                code, took = stop(procs[role], loc[role]["stop"])
                check(f"{engine}: {role} exits 0 on SIGTERM within {loc[role]['stop']} s", code == 0,
                      f"exit {code} after {took:.1f} s")
        for f in logs.values():
            f.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(DEPLOY, "..", ".build", "release", "darkroom"))
    ap.add_argument("--base-port", type=int, default=27700)
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory with the logs")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    if not os.access(binary, os.X_OK):
        sys.exit(f"no darkroom binary at {binary}: swift build -c release --product darkroom")
    for port in range(a.base_port, a.base_port + 4):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                sys.exit(f"port {port} is in use: pick another --base-port")
    scratch = tempfile.mkdtemp(prefix="darkroom-deploy-")
    for engine, commands in (("kubernetes", kubernetes_commands()), ("compose", compose_commands()),
                             ("systemd", systemd_commands())):
        exercise(engine, commands, binary, a.base_port, scratch)
    if a.keep:
        print("logs in", scratch)
    else:
        subprocess.run(["rm", "-rf", scratch])
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
