#!/usr/bin/env python3
"""Results of bench/system.sh: one JSON object per line, then the table.

    results.py add FILE KEY NAME=VALUE...   append one result (numbers stay numbers)
    results.py get JSON FIELD                print one field of a JSON line ("" if absent)
    results.py report FILE [NOTE...]         print the Markdown report

Keys the report knows and what it compares:

    readme           `darkroom up` + `darkroom submit DIR --wait`: the reference,
                     as % of the best tuned (the medians, and the median of
                     each round's ratio), target 90%
    tuned            one line per configuration tried; the fastest is "best tuned"
    tuned-submit     the best tuned server with `darkroom submit --window N`
    tuned-keys       the default server, the load generator with submit keys
    sidekiq, celery  peers: darkroom's README path divided by theirs (Sidekiq:
                     target 2x)
    lat-tiny-direct, lat-tiny-relay, lat-tiny-proxy,
    lat-photo-direct, lat-photo-relay, lat-photo-proxy
                     the proxied runs as % of the direct one (medians, and
                     the median of each round's ratio); the +100 ms run also
                     as % of the same proxy without its delay
    big              peak RSS (VmHWM) of broker, store and worker
    img-engine, img-system
                     the queue's overhead over the engine alone (target < 10%)
    memory           RSS of broker and store over a long run (flat)
    hotfolder        `submit --follow DIR` on a burst of tiny files, as % of
                     `submit DIR --wait` on the same files
    failed           a row that could not run, with why
"""
import json
import sys

OVERHEAD_TARGET = 10.0   # percent, image jobs through the queue vs the engine alone
MEMORY_GROWTH_MIB = 16   # broker and store over a long run
LATENCY_TARGETS = {"tiny": 70.0, "photo": 95.0}   # percent of direct through the +100 ms link
README_TARGET = 90.0     # percent of the best tuned configuration, tiny jobs
SIDEKIQ_TARGET = 2.0     # times Sidekiq's no-op jobs/s, tiny jobs


def value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def add(path, key, pairs):
    entry = {"key": key}
    for pair in pairs:
        name, _, text = pair.partition("=")
        entry[name] = value(text)
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\n")


def get(line, field):
    try:
        v = json.loads(line).get(field, "")
    except (ValueError, AttributeError):
        v = ""
    print(v)


def fmt_rate(r):
    return f"{r:,.0f}" if r >= 100 else f"{r:,.1f}" if r >= 10 else f"{r:,.2f}"


def pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "?"


def times(a, b):
    return f"{a / b:.2f}×" if b else "?"


def up_flags(cfg):
    """`up -w 1 -c 512` for 1x512; `up` for default."""
    if cfg == "default":
        return "up with defaults"
    workers, _, concurrency = cfg.partition("x")
    return f"up -w {workers} -c {concurrency}"


def paired_ratios(e, base):
    """The ratios, in percent and sorted, of the runs of `e` to those of
    `base` made in the same round (the rounds interleave the modes, so a
    pair shares the machine's state of that moment). `rates` lists each
    round's rate in order, "-" for a failed run, whose round is left out;
    [] without rates."""
    a = str(e.get("rates", "")).split()
    b = str(base.get("rates", "")).split()
    if not a or len(a) != len(b):
        return []
    return sorted(100.0 * float(x) / float(y) for x, y in zip(a, b) if x != "-" and y != "-" and float(y) > 0)


def by_round(e, base):
    """`e` against `base` round by round: the row's text ("round by
    round: median …", "" without rounds), and the percentage a target is
    judged by with how it was measured (the median of the rounds' own
    ratios; without rounds, the ratio of the medians)."""
    paired = paired_ratios(e, base)
    if paired:
        got = lower_median(paired)
        return (f"round by round: median {got:.1f}% ({paired[0]:.1f}–{paired[-1]:.1f}%)",
                got, f"median of {len(paired)} rounds' ratios")
    return "", 100.0 * e["rate"] / base["rate"], "ratio of the medians"


def lower_median(values):
    """The median of sorted values, the lower one of an even count (as the
    shell's median_of picks its runs)."""
    return values[(len(values) - 1) // 2]


def report(path, notes):
    entries = [json.loads(line) for line in open(path) if line.strip()]
    by = {}
    for e in entries:
        by.setdefault(e["key"], []).append(e)
    first = {k: v[0] for k, v in by.items()}
    tuned = by.get("tuned", [])
    best = max(tuned, key=lambda e: e["rate"]) if tuned else None
    readme = first.get("readme")
    rows, verdicts = [], []

    def runs(e):
        # Rows run several times: the median run, and the spread of all.
        return f"; median of {e['runs']} runs ({e['spread']} jobs/s)" if e.get("runs", 1) > 1 else ""

    def own(e):
        # The load generator's own timer starts at its first submit.
        return f" ({fmt_rate(e['own'])} by its own timer)" if "own" in e else ""

    def row(name, setup, work, result, ratio=""):
        rows.append(f"| {name} | {setup} | {work} | {result} | {ratio} |")

    for e in entries:
        k = e["key"]
        if k == "readme":
            ratio = ""
            if best:
                ratio = f"{pct(e['rate'], best['rate'])} of best tuned ({up_flags(best['cfg'])})"
                rounds, got, how_measured = by_round(e, best)
                if rounds:
                    ratio += f"; {rounds}"
                verdicts.append(f"{'PASS' if got >= README_TARGET else 'FAIL'} README path: {got:.1f}% of the best tuned configuration ({how_measured}), target {README_TARGET:g}%")
            row("README path", e["setup"], f"{e['jobs']:,} tiny jobs, {e['stored']:,} stored", f"{fmt_rate(e['rate'])} jobs/s ({e['seconds']} s){runs(e)}", ratio)
        elif k == "tuned":
            mark = " **(best)**" if e is best else ""
            ratio = f"README path is {pct(readme['rate'], e['rate'])} of this" if readme else ""
            row(("default server, load generator" if e["cfg"] == "default" else "tuned") + mark, e["setup"], f"{e['jobs']:,} tiny jobs", f"{fmt_rate(e['rate'])} jobs/s by wall time less 0.3 s of settling{own(e)}; p50 {e['p50ms']} ms, p99 {e['p99ms']} ms{runs(e)}", ratio)
        elif k == "tuned-keys":
            ratio = f"README path is {pct(readme['rate'], e['rate'])} of this" if readme else ""
            row("default server, load generator with submit keys", e["setup"], f"{e['jobs']:,} tiny jobs", f"{fmt_rate(e['rate'])} jobs/s by wall time less 0.3 s of settling{own(e)}; p50 {e['p50ms']} ms, p99 {e['p99ms']} ms{runs(e)}", ratio)
        elif k == "tuned-submit":
            ratio = f"{pct(e['rate'], best['rate'])} of best tuned" if best else ""
            row("tuned server, submit client", e["setup"], f"{e['jobs']:,} tiny jobs, {e['stored']:,} stored", f"{fmt_rate(e['rate'])} jobs/s ({e['seconds']} s)", ratio)
        elif k in ("sidekiq", "celery"):
            ratio = f"darkroom README path ÷ {k.capitalize()} = {times(readme['rate'], e['rate'])}" if readme else ""
            if k == "sidekiq" and readme and e["rate"]:
                got = readme["rate"] / e["rate"]
                budget = ""
                if readme.get("serverMicros") not in (None, "?") and readme.get("cores"):
                    # What the target leaves a job: every core busy, at
                    # SIDEKIQ_TARGET times Sidekiq's rate.
                    allowed = float(readme["cores"]) * 1e6 / (SIDEKIQ_TARGET * e["rate"])
                    used = float(readme["serverMicros"]) + float(readme.get("clientMicros") or 0)
                    budget = (f"; at {SIDEKIQ_TARGET:g}× on {readme['cores']} cores a job may cost at most {allowed:.0f} µs of CPU, client included,"
                              f" and the README path's median run used {used:.0f} (server {float(readme['serverMicros']):.0f}, client {float(readme.get('clientMicros') or 0):.0f})")
                verdicts.append(f"{'PASS' if got >= SIDEKIQ_TARGET else 'FAIL'} README path ÷ Sidekiq: {got:.2f}× (the README path's median run, Sidekiq's one run), target {SIDEKIQ_TARGET:g}×{budget}")
            row(f"peer: {k.capitalize()}", e["setup"], f"{e['jobs']:,} jobs", f"{fmt_rate(e['rate'])} jobs/s ({e['seconds']} s, enqueue {e['enqueueSeconds']} s)", ratio)
        elif k.startswith("lat-"):
            kind, how = k.split("-")[1:]
            direct = first.get(f"lat-{kind}-direct")
            what = "tiny jobs" if kind == "tiny" else "photos"
            relay = first.get(f"lat-{kind}-relay")
            ratios = []
            if how in ("proxy", "relay") and direct:
                ratios.append(f"{pct(e['rate'], direct['rate'])} of direct")
                rounds, got, how_measured = by_round(e, direct)
                if rounds:
                    ratios.append(rounds)
                if how == "proxy":
                    target = LATENCY_TARGETS[kind]
                    verdicts.append(f"{'PASS' if got >= target else 'FAIL'} {what} through +100 ms: {got:.1f}% of direct ({how_measured}), target {target:g}%")
            if how == "proxy" and relay:
                ratios.append(f"{pct(e['rate'], relay['rate'])} of the same proxy without its delay")
            ratio = "; ".join(ratios)
            result = f"{fmt_rate(e['rate'])} jobs/s ({e['seconds']} s){runs(e)}"
            if float(e.get("proxyCpuSeconds") or 0) > 0:
                result += f"; the proxies used {e['proxyCpuSeconds']} s of CPU"
            label = {"proxy": "+100 ms link", "relay": "relayed, no delay"}.get(how, "direct")
            row(f"{what}, {label}", e["setup"], f"{e['jobs']:,} jobs, {e['stored']:,} stored", result, ratio)
        elif k == "big":
            decoded = e["width"] * e["height"] * 3 / 2**20
            row("big inputs", e["setup"], f"{e['jobs']} inputs of {e['meanMB']} MB, {e['stored']} stored",
                f"worker peak RSS {e['workerMiB']} MiB; broker {e['brokerMiB']} MiB, store {e['storeMiB']} MiB; {fmt_rate(e['rate'])} jobs/s",
                f"worker peak = {e['workerMiB'] / decoded:.1f}× one decoded input ({decoded:.0f} MiB)")
        elif k == "img-engine":
            row("image jobs, engine alone", e["setup"], f"{e['jobs']} photos × {e['runs']} runs", f"best {fmt_rate(e['rate'])}, median {fmt_rate(e['median'])} images/s")
        elif k == "img-system":
            engine = first.get("img-engine")
            ratio = ""
            if engine:
                best = 100.0 - 100.0 * e["rate"] / engine["rate"]
                rounds, got, how = by_round(e, engine)
                over = 100.0 - got
                ratio = (f"overhead {over:.1f}% ({how}{'; ' + rounds if rounds else ''}); "
                         f"best against best {best:.1f}%, median against median {100.0 - 100.0 * e['median'] / engine['median']:.1f}%")
                ok = over < OVERHEAD_TARGET and e["stored"] == e["jobs"]
                verdicts.append(f"{'PASS' if ok else 'FAIL'} image jobs: queue overhead {over:.1f}% ({how}), target under {OVERHEAD_TARGET:g}%")
            row("image jobs, through the queue", e["setup"], f"{e['jobs']} photos × {e['runs']} runs, {e['stored']} stored", f"best {fmt_rate(e['rate'])}, median {fmt_rate(e['median'])} images/s", ratio)
        elif k == "memory":
            row("memory over a long run", e["setup"], f"{e['jobs']:,} tiny jobs",
                f"RSS after warm-up → peak, MiB: broker {e['brokerWarm']} → {e['brokerPeak']}, store {e['storeWarm']} → {e['storePeak']}, worker {e['workerWarm']} → {e['workerPeak']}",
                f"{fmt_rate(e['rate'])} jobs/s")
            for role in ("broker", "store"):
                grew = e[f"{role}Peak"] - e[f"{role}Warm"]
                verdicts.append(f"{'PASS' if grew <= MEMORY_GROWTH_MIB else 'FAIL'} {role} RSS flat: {grew} MiB over its RSS after warm-up (limit {MEMORY_GROWTH_MIB})")
        elif k == "hotfolder":
            row("hot folder, a burst", e["setup"], f"{e['jobs']:,} tiny files", f"{fmt_rate(e['rate'])} jobs/s to the last stored line{runs(e)}",
                f"{pct(e['rate'], e['submitRate'])} of `submit DIR --wait` on the same files ({fmt_rate(e['submitRate'])} jobs/s)")
        elif k == "failed":
            row(e.get("row", "?"), e.get("setup", ""), "", f"did not run: {e.get('why', '?')}")
    print("# darkroom system benchmark")
    print()
    for n in notes:
        print(n)
        print()
    print("| row | setup | work | result | comparison |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(r)
    if verdicts:
        print()
        for v in verdicts:
            print(f"- {v}")


def main(argv):
    if len(argv) >= 3 and argv[0] == "add":
        add(argv[1], argv[2], argv[3:])
    elif len(argv) == 3 and argv[0] == "get":
        get(argv[1], argv[2])
    elif len(argv) >= 2 and argv[0] == "report":
        report(argv[1], argv[2:])
    else:
        sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main(sys.argv[1:])
