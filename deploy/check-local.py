#!/usr/bin/env python3
"""Run the exact darkroom command lines from deploy/ on this machine.

For each engine (Kubernetes, Compose with keys, Compose without keys,
systemd) this reads the role commands, probe commands, key mounts and stop
timeouts out of the files, lays the CURVE keys out as that engine mounts
them, and runs everything against a local build:

  * the Kubernetes files render (`kubectl kustomize`, with and without the
    optional components), pass `kubernetes-validate --strict`, and hold no
    --insecure; the NetworkPolicies admit exactly the roles each port needs;
  * keys are made with deploy/make-keys.sh, and for Kubernetes turned into
    Secrets by deploy/kubernetes/create-secrets.sh and laid out like a
    Secret volume (FILE -> ..data/FILE, ..data -> ..TIMESTAMP/, files 0440
    root:fsGroup); Compose bind-mounts keys/ (0440 root:10001); systemd
    copies the secret into a credentials directory (%d, 0400);
  * the probes fail while nothing runs;
  * broker, store and worker start with exactly the files' flags (as user
    10001 with the pod's or container's groups, when run as root) and log no
    warning about their key files;
  * each role's probe then passes with its own key within the probe's
    timeout (timeoutSeconds, the healthcheck's timeout);
  * a key that is not in the allowlist is refused at once;
  * a JPEG submitted with the producer key is processed and stored, and the
    store lists it to the producer key;
  * every role serves /metrics, with the metric names the autoscaler and the
    dashboard use;
  * SIGTERM stops worker, store and broker with exit 0 within the stop
    timeout the files give them.

Only what cannot work outside the engine is rewritten: service host names
become 127.0.0.1, the image's /usr/local/bin/darkroom becomes the local
build, mount paths (/data, /keys/..., /etc/darkroom/keys, %d) become
directories under a scratch directory, and ports 7700-7703 move to a free
block (see --base-port), metrics ports to the block + 10, 11, 12.

A feature the files use that this build lacks (status --check --only
worker; a server accepting its own key; --metrics) shows as FAIL lines that
say so; the rest still runs.

Usage: python3 deploy/check-local.py [--bin .build/release/darkroom] [--base-port 27700] [--only ENGINE]
Needs PyYAML (apt install python3-yaml, or pip install pyyaml) and cjpeg
(libjpeg-turbo-progs); kubectl and kubernetes-validate (pip) for the
rendering checks, which are skipped when they cannot be had.
"""

import argparse
import base64
import glob
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

DEPLOY = os.path.dirname(os.path.abspath(__file__))
IMAGE_BIN = "/usr/local/bin/darkroom"
CONTAINER_UID = 10001   # the image's user (deploy/Dockerfile)

results = []
skipped = []


def check(name, ok, detail=""):
    ok = bool(ok)
    results.append(ok)
    print(("ok    " if ok else "FAIL  ") + name + (f"\n        {detail}" if detail and not ok else ""), flush=True)
    return ok


def skip(name, why):
    skipped.append(name)
    print(f"skip  {name}  ({why})", flush=True)


def one_line(text, limit=400):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


# ---------------------------------------------------------------- the build

class Build:
    """What this darkroom binary can do, from its help texts."""

    def __init__(self, binary):
        self.binary = binary
        self.help = {}

    def help_of(self, sub):
        if sub not in self.help:
            r = subprocess.run([self.binary, sub, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.help[sub] = r.stdout
        return self.help[sub]

    def has_option(self, sub, option):
        return re.search(r"(^|[\s\[])" + re.escape(option) + r"\b", self.help_of(sub)) is not None

    @property
    def worker_probe(self):
        return re.search(r"--only\s+\S*worker", self.help_of("status")) is not None


# ---------------------------------------------------------------- extraction

def load_yaml_docs(path_or_text, text=False):
    if text:
        return [d for d in yaml.safe_load_all(path_or_text) if d]
    with open(path_or_text) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def have(tool):
    return shutil.which(tool) is not None


def ensure_kubernetes_validate():
    if have("kubernetes-validate"):
        return True
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "kubernetes-validate"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode == 0 and have("kubernetes-validate")


def kustomize(directory):
    r = subprocess.run(["kubectl", "kustomize", directory], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return r.returncode, r.stdout, r.stderr


def rendered_kubernetes(scratch):
    """The manifests as `kubectl apply -k` would send them (or the files
    named in kustomization.yaml when kubectl is missing)."""
    kdir = os.path.join(DEPLOY, "kubernetes")
    if have("kubectl"):
        code, out, err = kustomize(kdir)
        if check("kubernetes: kubectl kustomize deploy/kubernetes renders", code == 0, one_line(err)):
            path = os.path.join(scratch, "rendered.yaml")
            with open(path, "w") as f:
                f.write(out)
            return load_yaml_docs(out, text=True), path
    else:
        skip("kubernetes: kubectl kustomize deploy/kubernetes renders", "no kubectl")
    with open(os.path.join(kdir, "kustomization.yaml")) as f:
        names = yaml.safe_load(f)["resources"]
    docs = []
    for name in names:
        docs += load_yaml_docs(os.path.join(kdir, name))
    return docs, None


def validate_kubernetes(scratch, rendered_path):
    kdir = os.path.join(DEPLOY, "kubernetes")
    # No --insecure anywhere in the Kubernetes files, components included.
    offenders = []
    for path in glob.glob(os.path.join(kdir, "**", "*"), recursive=True):
        if os.path.isfile(path) and "--insecure" in open(path, errors="replace").read():
            offenders.append(os.path.relpath(path, DEPLOY))
    check("kubernetes: no file under deploy/kubernetes passes --insecure", not offenders, ", ".join(offenders))
    if not have("kubectl"):
        skip("kubernetes: the optional components render", "no kubectl")
        return
    # Every optional component, rendered on top of the default set.
    components = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(kdir, "*", "kustomization.yaml")))
    overlay = os.path.join(scratch, "with-components")
    os.makedirs(overlay)
    rel = os.path.relpath(kdir, overlay)
    with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
        yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                        "resources": [rel], "components": [f"{rel}/{c}" for c in components]}, f)
    code, out, err = kustomize(overlay)
    check(f"kubernetes: renders with the components {', '.join(components)}", code == 0, one_line(err))
    with_components = os.path.join(scratch, "rendered-components.yaml")
    with open(with_components, "w") as f:
        f.write(out)
    docs = load_yaml_docs(out, text=True) if code == 0 else []
    kinds = [d["kind"] for d in docs]
    check("kubernetes: autoscale-backlog replaces the CPU autoscaler with a ScaledObject",
          "ScaledObject" in kinds and "HorizontalPodAutoscaler" not in kinds, str(kinds))
    for doc in docs:
        if doc["kind"] == "ScaledObject":
            trig = doc["spec"]["triggers"][0]
            check("kubernetes: the ScaledObject targets darkroom-worker with a Prometheus query",
                  doc["spec"]["scaleTargetRef"]["name"] == "darkroom-worker" and trig["type"] == "prometheus"
                  and trig["metadata"].get("query") and trig["metadata"].get("threshold"), json.dumps(doc["spec"]))
    if not ensure_kubernetes_validate():
        skip("kubernetes: kubernetes-validate --strict", "kubernetes-validate not installed and pip install failed")
        return
    secrets = os.path.join(scratch, "secrets.yaml")
    for path, what in ((rendered_path, "the rendered manifests"), (with_components, "the manifests with components"),
                       (secrets, "the Secrets from create-secrets.sh")):
        if not path or not os.path.exists(path):
            continue
        r = subprocess.run(["kubernetes-validate", "--strict", "--quiet", path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        problems = [l for l in r.stdout.splitlines() if l.strip() and "Couldn't find schema for kind ScaledObject" not in l]
        check(f"kubernetes: kubernetes-validate --strict passes on {what}", r.returncode == 0 and not problems,
              one_line(" | ".join(problems)))


def check_network_policies(docs):
    """The ports each role's pods may reach, from the NetworkPolicies."""
    pods = {"broker": {"app.kubernetes.io/name": "darkroom", "app.kubernetes.io/component": "broker"},
            "store": {"app.kubernetes.io/name": "darkroom", "app.kubernetes.io/component": "store"}}

    def matches(selector, labels):
        for k, v in selector.get("matchLabels", {}).items():
            if labels.get(k) != v:
                return False
        for e in selector.get("matchExpressions", []):
            if e["operator"] == "In" and labels.get(e["key"]) not in e["values"]:
                return False
        return True

    expected = {("broker", 7700): {"producer", "admin"}, ("broker", 7702): {"producer", "admin"},
                ("broker", 7701): {"worker"}, ("store", 7703): {"worker", "producer", "admin"}}
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    for (target, port), roles in sorted(expected.items()):
        admitted = set()
        selected = False
        for p in policies:
            if not matches(p["spec"]["podSelector"], pods[target]):
                continue
            selected = True
            for rule in p["spec"].get("ingress", []):
                if not any(q.get("port") == port for q in rule.get("ports", [])):
                    continue
                for peer in rule.get("from", []):
                    for role in ("producer", "worker", "admin", "none"):
                        labels = {"darkroom/role": role} if role != "none" else {}
                        if "podSelector" in peer and "namespaceSelector" not in peer and matches(peer["podSelector"], labels):
                            admitted.add(role)
                        elif "podSelector" not in peer:
                            admitted.add("anyone")
        check(f"kubernetes: NetworkPolicy admits to {target} {port} only {', '.join(sorted(roles))}",
              selected and admitted == roles, f"admits {sorted(admitted)}, selected={selected}")


def metric_names_used():
    """Metric names the ScaledObject query and the dashboard rely on."""
    names = set()
    texts = [open(os.path.join(DEPLOY, "kubernetes", "autoscale-backlog", "scaledobject.yaml")).read()]
    with open(os.path.join(DEPLOY, "monitoring", "grafana-dashboard.json")) as f:
        for panel in json.load(f)["panels"]:
            texts += [t["expr"] for t in panel.get("targets", [])]
    for text in texts:
        for name in re.findall(r"\bdarkroom_[a-z0-9_]+", text):
            names.add(re.sub(r"_(bucket|sum|count)$", "", name) if name.endswith("_seconds_bucket") else name)
    return sorted(names)


# --- Kubernetes ---------------------------------------------------------------

def secret_data(secrets_yaml):
    out = {}
    for doc in load_yaml_docs(secrets_yaml, text=True):
        out[doc["metadata"]["name"]] = {k: base64.b64decode(v) for k, v in doc.get("data", {}).items()}
    return out


def write_secret_volume(path, files, mode, fs_group):
    """A Secret volume as the kubelet writes it: the files in a timestamped
    directory, ..data linking to it, and each file name linking through
    ..data. With an fsGroup the files get the group and its read bit."""
    os.makedirs(path)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.000000001", time.gmtime())
    real = os.path.join(path, stamp)
    os.makedirs(real)
    for name, (content, file_mode) in files.items():
        target = os.path.join(real, name)
        with open(target, "wb") as f:
            f.write(content)
        m = file_mode if file_mode is not None else mode
        if fs_group is not None:
            m |= 0o040 if m & 0o400 else 0
            if os.geteuid() == 0:
                os.chown(target, 0, fs_group)
        os.chmod(target, m)
        os.symlink(os.path.join("..data", name), os.path.join(path, name))
    os.symlink(stamp, os.path.join(path, "..data"))
    for d in (path, real):
        os.chmod(d, 0o755)
        if fs_group is not None and os.geteuid() == 0:
            os.chown(d, 0, fs_group)


def kubernetes_commands(docs, secrets, scratch):
    out = {}
    for doc in docs:
        if doc["kind"] not in ("StatefulSet", "Deployment"):
            continue
        pod = doc["spec"]["template"]["spec"]
        c = pod["containers"][0]
        role = c["args"][0]
        sc = pod.get("securityContext", {})
        fs_group = sc.get("fsGroup")
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
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounts, writable = {}, []
        home = os.path.join(scratch, role)
        for vm in c.get("volumeMounts", []):
            v = volumes.get(vm["name"])
            host = os.path.join(home, "volumes", vm["name"])
            if v is None or "emptyDir" in v:   # None: a volumeClaimTemplate, the data volume
                os.makedirs(host)
                writable.append(host)
            elif "secret" in v:
                s = v["secret"]
                data = secrets[s["secretName"]]
                items = s.get("items") or [{"key": k, "path": k} for k in data]
                write_secret_volume(host, {i["path"]: (data[i["key"]], i.get("mode")) for i in items},
                                    s.get("defaultMode", 0o644), fs_group)
            elif "projected" in v:
                files = {}
                for src in v["projected"]["sources"]:
                    data = secrets[src["secret"]["name"]]
                    for i in src["secret"].get("items") or [{"key": k, "path": k} for k in data]:
                        files[i["path"]] = (data[i["key"]], i.get("mode"))
                write_secret_volume(host, files, v["projected"].get("defaultMode", 0o644), fs_group)
            else:
                raise SystemExit(f"check-local: volume {vm['name']} of {role}: a kind this script does not lay out")
            mounts[vm["mountPath"]] = host
        # The secret key files, as the container sees them: links through
        # ..data to files 0440 root:fsGroup.
        for vm in c.get("volumeMounts", []):
            host = mounts[vm["mountPath"]]
            for name in sorted(os.listdir(host)):
                if not name.endswith(".key_secret"):
                    continue
                path = os.path.join(host, name)
                st = os.stat(path)
                want = (0o440, 0, fs_group) if os.geteuid() == 0 else (0o440, os.geteuid(), os.getegid())
                got = (st.st_mode & 0o777, st.st_uid, st.st_gid)
                check(f"kubernetes: {role}: {vm['mountPath']}/{name} links to ..data/{name}, a file 0440 root:{fs_group}",
                      os.readlink(path) == f"..data/{name}" and got == want, f"link {os.readlink(path)}, mode/uid/gid {oct(got[0])}/{got[1]}/{got[2]}")
        probes = []
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            if kind in c:
                probes.append((kind, c[kind]["exec"]["command"], c[kind].get("timeoutSeconds", 1)))
        user = (sc.get("runAsUser"), sc.get("runAsGroup"), [g for g in [sc.get("runAsGroup"), fs_group] if g is not None])
        out[role] = {"argv": [IMAGE_BIN] + args, "probes": probes, "stop": pod["terminationGracePeriodSeconds"],
                     "mounts": mounts, "writable": writable, "user": user, "home": home}
    return out


# --- Compose --------------------------------------------------------------------

def compose_expand(text):
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(text))


def compose_commands(path, keys, scratch):
    doc = load_yaml_docs(path)[0]
    out = {}
    base = os.path.dirname(path)
    for name, svc in doc["services"].items():
        args = [compose_expand(a) for a in svc["command"]]
        role = args[0]
        home = os.path.join(scratch, role)
        mounts, writable = {}, []
        for v in svc.get("volumes", []):
            if isinstance(v, str):
                source, target = v.split(":")[:2]
                kind = "bind" if source.startswith((".", "/")) else "volume"
            else:
                source, target, kind = v["source"], v["target"], v["type"]
            if kind == "volume":
                host = os.path.join(home, "volumes", source)
                os.makedirs(host)
                writable.append(host)
            else:
                host = os.path.normpath(os.path.join(base, source))
                rel = os.path.relpath(host, os.path.join(base, "keys"))
                if not rel.startswith(".."):   # keys/... -> the keys made for this run
                    host = os.path.join(keys, rel)
                if not os.path.isdir(host):
                    raise SystemExit(f"check-local: {path}: bind source {source} ({host}) does not exist")
            mounts[target] = host
        test = svc["healthcheck"]["test"]
        assert test[0] == "CMD", test
        timeout = int(svc["healthcheck"]["timeout"].rstrip("s"))
        stop = int(svc["stop_grace_period"].rstrip("s"))
        uid, gid = (int(x) for x in svc["user"].split(":"))
        out[role] = {"argv": [IMAGE_BIN] + args, "probes": [("healthcheck", [compose_expand(t) for t in test[1:]], timeout)],
                     "stop": stop, "mounts": mounts, "writable": writable, "user": (uid, gid, [gid]), "home": home}
    return out


# --- systemd --------------------------------------------------------------------

def parse_unit(path):
    """ExecStart, Environment defaults, LoadCredential and TimeoutStopSec."""
    env, exec_start, timeout, creds = {}, None, None, {}
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
            elif line.startswith("LoadCredential="):
                ident, _, source = line[len("LoadCredential="):].partition(":")
                creds[ident] = source
    return env, exec_start, timeout, creds


def env_example_multihost():
    """The multi-host settings the env example documents (commented out)."""
    env = {}
    inside = False
    with open(os.path.join(DEPLOY, "systemd", "darkroom.env.example")) as f:
        for line in f:
            if line.startswith("# Example: a multi-host setup"):
                inside = True
                continue
            if inside:
                if not line.startswith("#"):
                    break
                m = re.match(r"#\s+(DARKROOM_\w+)=(.*)$", line.rstrip("\n"))
                if m:
                    env[m.group(1)] = m.group(2)
    return env


def systemd_expand(command, env, creds_dir, instance="1"):
    """systemd's rules: ${VAR} is one word, a lone $VAR splits on spaces."""
    words = []
    for word in shlex.split(command):
        word = word.replace("%H", socket.gethostname()).replace("%i", instance).replace("%d", creds_dir)
        m = re.fullmatch(r"\$(\w+)", word)
        if m:
            words += env.get(m.group(1), "").split()
            continue
        words.append(re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), word))
    return words


def systemd_commands(keys, scratch):
    out = {}
    example = env_example_multihost()
    for unit, role in (("darkroom-broker.service", "broker"), ("darkroom-store.service", "store"),
                       ("darkroom-worker@.service", "worker")):
        env, exec_start, timeout, creds = parse_unit(os.path.join(DEPLOY, "systemd", unit))
        env.update(example)
        # The example's host addresses, moved to this machine: servers bind
        # every address (a non-loopback bind, which needs keys), clients
        # connect on loopback.
        for k, v in env.items():
            if k in ("DARKROOM_FRONTEND", "DARKROOM_BACKEND", "DARKROOM_EVENTS", "DARKROOM_STORE_BIND"):
                env[k] = re.sub(r"tcp://[^:]+:", "tcp://0.0.0.0:", v)
            elif k in ("DARKROOM_WORKER_BROKER", "DARKROOM_WORKER_STORE"):
                env[k] = re.sub(r"tcp://[^:]+:", "tcp://127.0.0.1:", v)
        if role == "worker":
            env["DARKROOM_WORKER_FLAGS"] = (env.get("DARKROOM_WORKER_FLAGS", "") + " --concurrency 2").strip()
        home = os.path.join(scratch, role)
        creds_dir = os.path.join(home, "credentials")
        os.makedirs(creds_dir)
        uid = CONTAINER_UID if os.geteuid() == 0 else None
        # systemd copies each credential into a directory of the unit's own,
        # readable by the unit's user only.
        for ident, source in creds.items():
            source = source.replace("/etc/darkroom/keys", keys)
            target = os.path.join(creds_dir, ident)
            shutil.copyfile(source, target)
            os.chmod(target, 0o400)
            if uid is not None:
                os.chown(target, uid, uid)
                os.chown(creds_dir, uid, uid)
        os.chmod(creds_dir, 0o500)
        argv = [a.replace("/etc/darkroom/keys", keys) for a in systemd_expand(exec_start, env, creds_dir)]
        data = os.path.join(home, "state")
        os.makedirs(data)
        out[role] = {"argv": argv, "stop": timeout, "mounts": {"/var/lib/darkroom": data}, "writable": [data],
                     "user": (uid, uid, [uid]) if uid is not None else (None, None, []), "home": home,
                     # systemd has no probes: these are the commands deploy/README.md gives
                     # monitoring on the host (as root, with the files in /etc/darkroom/keys).
                     "probes": [("monitoring", p, 5) for p in systemd_probes(role, env, keys)], "probe_as_caller": True}
    return out


def systemd_probes(role, env, keys):
    env = {k: v.replace("0.0.0.0", "127.0.0.1") for k, v in env.items()}
    if role == "broker":
        return [[IMAGE_BIN, "status", "--check", "--only", "broker", "--broker", env["DARKROOM_FRONTEND"],
                 "--curve-key", f"{keys}/broker/server.key_secret", "--server-key", f"{keys}/broker/server.key", "--timeout", "2"]]
    if role == "store":
        return [[IMAGE_BIN, "status", "--check", "--only", "store", "--store", env["DARKROOM_STORE_BIND"],
                 "--curve-key", f"{keys}/store/server.key_secret", "--store-key", f"{keys}/store/server.key", "--timeout", "2"]]
    return [[IMAGE_BIN, "status", "--check", "--only", "worker", "--broker", env["DARKROOM_WORKER_BROKER"],
             "--store", env["DARKROOM_WORKER_STORE"], "--curve-key", f"{keys}/worker/worker.key_secret",
             "--server-key", f"{keys}/servers/broker.key", "--store-key", f"{keys}/servers/store.key", "--timeout", "2"]]


# ---------------------------------------------------------------- running

METRICS_OFFSET = {"broker": 10, "store": 11, "worker": 12}


def localise(argv, binary, base, mounts, role):
    out = []
    for a in argv:
        if a == IMAGE_BIN:
            # The local build is a path on this machine, not in the
            # container: no mount rewrite applies to it (--bin /tmp/...
            # would otherwise land in the /tmp emptyDir).
            out.append(binary)
            continue
        for host in ("darkroom-broker", "darkroom-store", "broker", "store"):
            a = a.replace(f"tcp://{host}:", "tcp://127.0.0.1:")
        a = re.sub(r":770([0-3])\b", lambda m: f":{base + int(m.group(1))}", a)
        a = re.sub(r"^(\d+\.\d+\.\d+\.\d+):946\d$", lambda m: f"127.0.0.1:{base + METRICS_OFFSET[role]}", a)
        for path in sorted(mounts, key=len, reverse=True):
            if a == path or a.startswith(path + "/"):
                a = mounts[path] + a[len(path):]
                break
        out.append(a)
    return out


def strip_option(argv, option):
    out, i = [], 0
    while i < len(argv):
        if argv[i] == option:
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def demote(user):
    uid, gid, groups = user
    if os.geteuid() != 0 or uid is None:
        return None

    def run():
        os.setgroups(sorted(set(groups)))
        os.setgid(gid)
        os.setuid(uid)
    return run


def run_probe(argv, timeout=30, user=None):
    start = time.monotonic()
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           preexec_fn=demote(user) if user else None)
        return r.returncode, r.stdout + r.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired:
        return None, f"still running after {timeout} s", time.monotonic() - start


def wait_until(fn, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if fn():
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


def hint(role, output, build):
    """Why a probe failed, when this build lacks what the files rely on."""
    if role == "worker" and not build.worker_probe:
        return "this build's `status --check --only` takes broker|store only; the worker probe needs `--only worker`"
    if "refused this client's key" in output:
        return "the server refused the probe's key: the probe presents the server's own key pair, which needs servers that accept their own public key"
    if "needs --server-key" in output:
        return "`status --check --only store` must not need --server-key (the broker's key) when it checks only the store"
    return ""


class Client:
    """Producer and admin clients, as an operator runs them on the host."""

    def __init__(self, binary, base, keys):
        self.binary, self.base, self.keys = binary, base, keys

    def curve(self, name):
        if self.keys is None:
            return []
        return ["--curve-key", f"{self.keys}/{name}/{name}.key_secret", "--server-key", f"{self.keys}/servers/broker.key",
                "--store-key", f"{self.keys}/servers/store.key"]

    def status(self, name="admin"):
        r = subprocess.run([self.binary, "status", "--json", "--broker", f"tcp://127.0.0.1:{self.base}",
                            "--store", f"tcp://127.0.0.1:{self.base + 3}", "--timeout", "2"] + self.curve(name),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def up(self, role):
        if role == "worker":
            s = self.status()
            return bool(s and s.get("workers"))
        endpoint = ["--broker", f"tcp://127.0.0.1:{self.base}"] if role == "broker" else ["--store", f"tcp://127.0.0.1:{self.base + 3}"]
        r = subprocess.run([self.binary, "status", "--check", "--only", role] + endpoint + ["--timeout", "2"] + self.curve("admin"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        return r.returncode == 0


def exercise(engine, commands, binary, base, scratch, keys, build, names):
    print(f"--- {engine}", flush=True)
    client = Client(binary, base, keys)
    loc = {}
    for role, c in commands.items():
        argv = localise(c["argv"], binary, base, c["mounts"], role)
        if "--metrics" in argv and not build.has_option(role, "--metrics"):
            check(f"{engine}: {role} runs with --metrics", False,
                  f"this build's `darkroom {role}` has no --metrics; started without it to check the rest")
            argv = strip_option(argv, "--metrics")
        loc[role] = dict(c, argv=argv, probes=[(k, localise(p, binary, base, c["mounts"], role), t) for k, p, t in c["probes"]])
    for role in ("broker", "store", "worker"):
        kind, p, timeout = loc[role]["probes"][0]
        code, output, took = run_probe(p, user=None if loc[role].get("probe_as_caller") else loc[role]["user"])
        check(f"{engine}: {role} {kind} fails while nothing runs", code not in (0, None) and code != 64,
              f"exit {code}: {one_line(output)} {hint(role, output, build)}".strip())
    logs, procs = {}, {}
    try:
        for role in ("broker", "store", "worker"):
            c = loc[role]
            if os.geteuid() == 0 and c["user"][0] is not None:
                for path in c["writable"]:
                    os.chown(path, c["user"][0], c["user"][1])
            os.makedirs(c["home"], exist_ok=True)
            logs[role] = os.path.join(c["home"], f"{role}.log")
            with open(logs[role], "w") as log:
                procs[role] = subprocess.Popen(c["argv"], stdout=log, stderr=subprocess.STDOUT, preexec_fn=demote(c["user"]))
            up = wait_until(lambda: client.up(role) or procs[role].poll() is not None)
            if demote(c["user"]) is not None and procs[role].poll() is None:
                with open(f"/proc/{procs[role].pid}/status") as f:
                    status = dict(line.split(":", 1) for line in f if ":" in line)
                ids = (int(status["Uid"].split()[0]), int(status["Gid"].split()[0]), sorted(int(g) for g in status["Groups"].split()))
                check(f"{engine}: {role} runs as user {c['user'][0]}, group {c['user'][1]}, groups {sorted(set(c['user'][2]))}",
                      ids == (c["user"][0], c["user"][1], sorted(set(c["user"][2]))), f"uid/gid/groups {ids}")
            if not check(f"{engine}: {role} starts: {' '.join(c['argv'][1:])}", up and procs[role].poll() is None,
                         f"exited {procs[role].poll()}: {one_line(open(logs[role]).read())}"):
                return
            seen = set()
            for kind, p, timeout in c["probes"]:
                if tuple(p) in seen:
                    continue
                seen.add(tuple(p))
                code, output, took = None, "", 0
                for _ in range(3):
                    code, output, took = run_probe(p, timeout=timeout + 5, user=None if c.get("probe_as_caller") else c["user"])
                    if code == 0 and took < timeout:
                        break
                    time.sleep(1)
                how = "with its own key " if keys is not None else ""
                check(f"{engine}: {role} {kind} passes {how}within {timeout} s", code == 0 and took < timeout,
                      f"exit {code} after {took:.1f} s: {one_line(output)} {hint(role, output, build)}".strip())
            if keys is not None:
                log_text = open(logs[role]).read()
                # A warning about a key file names the file: its mode, its
                # owner, a link that leads nowhere.
                warnings = [l for l in log_text.splitlines() if (" warn " in l or "Warning" in l)
                            and ("key_secret" in l or "/keys/" in l or "mode " in l)]
                check(f"{engine}: {role} logs no warning about its key files", not warnings, one_line(" | ".join(warnings)))
        if keys is not None:
            stranger = os.path.join(scratch, "stranger")
            subprocess.run([binary, "keygen", "stranger", "--role", "admin", "--dir", stranger], stdout=subprocess.DEVNULL, check=True)
            code, output, took = run_probe([binary, "status", "--check", "--only", "broker", "--broker", f"tcp://127.0.0.1:{base}",
                                            "--curve-key", f"{stranger}/stranger.key_secret", "--server-key",
                                            f"{keys}/servers/broker.key", "--timeout", "5"])
            check(f"{engine}: a key missing from the allowlist is refused at once", code == 1 and took < 2 and "refused" in output,
                  f"exit {code} after {took:.1f} s: {one_line(output)}")
        who = "with the producer key " if keys else ""
        ops = "scale:48x48,mode=fill | crop:square | glitch:seed=7"
        jpeg = os.path.join(scratch, "in.jpg")
        make_jpeg(jpeg)
        r = subprocess.run([binary, "submit", jpeg, "--ops", ops, "--broker", f"tcp://127.0.0.1:{base}", "--timeout", "10"]
                           + client.curve("producer"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        check(f"{engine}: a JPEG submitted {who}is accepted", r.returncode == 0, one_line(r.stdout))
        listing = [""]

        def listed():
            r = subprocess.run([binary, "ls", "--store", f"tcp://127.0.0.1:{base + 3}", "--timeout", "2"] + client.curve("producer"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
            listing[0] = r.stdout
            return r.returncode == 0 and "in.jpg" in r.stdout
        check(f"{engine}: it is processed and stored, and the store lists it {who}".rstrip(), wait_until(listed, 60), one_line(listing[0]))
        # submit --wait follows the job on the events endpoint as well.
        jpeg = os.path.join(scratch, "wait.jpg")
        make_jpeg(jpeg)
        r = subprocess.run([binary, "submit", jpeg, "--ops", ops, "--wait", "--broker", f"tcp://127.0.0.1:{base}",
                            "--events", f"tcp://127.0.0.1:{base + 2}", "--timeout", "30"] + client.curve("producer"),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        check(f"{engine}: submit --wait {who}follows a job until it is stored", r.returncode == 0 and "1 stored" in r.stdout,
              one_line(r.stdout))
        exported = set()
        metrics_roles = [role for role in ("broker", "store", "worker") if "--metrics" in loc[role]["argv"]]
        for role in metrics_roles:
            port = base + METRICS_OFFSET[role]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    body = resp.read().decode()
                    ok = resp.status == 200
            except Exception as e:
                body, ok = str(e), False
            exported |= set(re.findall(r"^(darkroom_[a-z0-9_]+?)(?:_bucket|_sum|_count)?[{ ]", body, re.M))
            check(f"{engine}: {role} serves /metrics", ok and "darkroom_" in body, one_line(body))
        if metrics_roles and len(metrics_roles) == 3:
            missing = [n for n in names if n not in exported]
            check(f"{engine}: the metrics the autoscaler and dashboard use are exported", not missing,
                  f"missing: {', '.join(missing)}")
    finally:
        for role in ("worker", "store", "broker"):
            if role in procs and procs[role].poll() is None:
                code, took = stop(procs[role], loc[role]["stop"])
                check(f"{engine}: {role} exits 0 on SIGTERM within {loc[role]['stop']} s", code == 0,
                      f"exit {code} after {took:.1f} s")
        if os.environ.get("CHECK_LOCAL_LOGS"):
            for role, path in logs.items():
                print(f"  {role} log:\n" + open(path).read())


def make_keys(dest, binary, group):
    cmd = [os.path.join(DEPLOY, "make-keys.sh"), "--darkroom", binary]
    if group is not None and os.geteuid() == 0:
        cmd += ["--group", str(group)]
    r = subprocess.run(cmd + [dest], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not check(f"make-keys.sh {' '.join(cmd[3:])} makes the key layout", r.returncode == 0, one_line(r.stdout)):
        raise SystemExit(1)
    return dest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(DEPLOY, "..", ".build", "release", "darkroom"))
    ap.add_argument("--base-port", type=int, default=27700)
    ap.add_argument("--only", choices=["kubernetes", "compose", "compose-insecure", "systemd"], action="append")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory with the logs")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    if not os.access(binary, os.X_OK):
        sys.exit(f"no darkroom binary at {binary}: swift build -c release --product darkroom --static-swift-stdlib")
    ports = list(range(a.base_port, a.base_port + 4)) + [a.base_port + o for o in METRICS_OFFSET.values()]
    for port in ports:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                sys.exit(f"port {port} is in use: pick another --base-port")
    build = Build(binary)
    names = metric_names_used()
    scratch = tempfile.mkdtemp(prefix="darkroom-deploy-")
    os.chmod(scratch, 0o755)
    engines = a.only or ["kubernetes", "compose", "compose-insecure", "systemd"]
    if os.geteuid() != 0:
        print("note: not root, so the roles run as this user and key files stay owned by it "
              "(as root they run as user 10001 with the deployments' groups and ownership)")
    try:
        if "kubernetes" in engines:
            d = os.path.join(scratch, "kubernetes")
            os.makedirs(d)
            keys = make_keys(os.path.join(d, "keys"), binary, None)
            docs, rendered = rendered_kubernetes(d)
            r = subprocess.run([os.path.join(DEPLOY, "kubernetes", "create-secrets.sh"), "--print", keys],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if check("kubernetes: create-secrets.sh --print makes the Secrets", r.returncode == 0, one_line(r.stderr)):
                with open(os.path.join(d, "secrets.yaml"), "w") as f:
                    f.write(r.stdout)
                validate_kubernetes(d, rendered)
                check_network_policies(docs)
                commands = kubernetes_commands(docs, secret_data(r.stdout), d)
                exercise("kubernetes", commands, binary, a.base_port, d, keys, build, names)
        if "compose" in engines:
            d = os.path.join(scratch, "compose")
            os.makedirs(d)
            keys = make_keys(os.path.join(d, "keys"), binary, CONTAINER_UID)
            exercise("compose", compose_commands(os.path.join(DEPLOY, "compose", "compose.yaml"), keys, d),
                     binary, a.base_port, d, keys, build, names)
        if "compose-insecure" in engines:
            d = os.path.join(scratch, "compose-insecure")
            os.makedirs(d)
            exercise("compose-insecure", compose_commands(os.path.join(DEPLOY, "compose", "compose.insecure.yaml"), None, d),
                     binary, a.base_port, d, None, build, names)
        if "systemd" in engines:
            d = os.path.join(scratch, "systemd")
            os.makedirs(d)
            keys = make_keys(os.path.join(d, "keys"), binary, None)
            exercise("systemd", systemd_commands(keys, d), binary, a.base_port, d, keys, build, names)
        # The insecure flag lives only in the keyless Compose profile and in
        # the commented example of the systemd env file.
        flagged = []
        for path in glob.glob(os.path.join(DEPLOY, "**", "*"), recursive=True):
            if not os.path.isfile(path) or path.endswith((".md", ".py")):
                continue
            rel = os.path.relpath(path, DEPLOY)
            for line in open(path, errors="replace"):
                if "--insecure" in line and rel != "compose/compose.insecure.yaml" and not line.lstrip().startswith("#"):
                    flagged.append(rel)
                    break
        check("only compose.insecure.yaml passes --insecure (elsewhere it is in comments only)", not flagged, ", ".join(flagged))
    finally:
        if a.keep:
            print("logs in", scratch)
        else:
            subprocess.run(["rm", "-rf", scratch])
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed" + (f", {len(skipped)} skipped" if skipped else ""))
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
