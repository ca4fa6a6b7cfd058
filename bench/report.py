#!/usr/bin/env python3
"""Summaries for bench/run.sh (Python standard library only).

    report.py queue <log>             ratio table of queue-bench lines
    report.py controller <log>        ratio table of controller-bench lines
    report.py e2e <dir> <n[,n...]> [rounds]
                                      e2e-bench lines, tables, and latency-<n>.svg (CDF) in <dir>
    report.py scale <log>             tables of scale-bench and scale-floor lines (medians of rounds)
    report.py scale-svg <log> <svg>   peak RSS against objects, one line per implementation and kind
"""

import math
import os
import re
import sys

KV = re.compile(r"(\w+)=(\S+)")


def parse(line, prefix):
    if prefix not in line:
        return None
    return dict(KV.findall(line[line.index(prefix):]))


def fmt_rate(r):
    return f"{r / 1e6:.2f} M/s" if r >= 1e6 else f"{r / 1e3:.1f} k/s" if r >= 1e3 else f"{r:.0f} /s"


def ratio(a, b):
    if not a or not b:
        return "-"
    return f"{a / b:.2f}x"


def queue(path):
    """With lines from several rounds (`round=<r>`), a table per round's rates is replaced by
    the median rate per implementation and the median of the per-round ratios (each ratio
    compares runs of the same round)."""
    rates = {}
    incomplete = set()
    for line in open(path):
        kv = parse(line, "queue-bench ")
        if kv:
            key = (kv["impl"], kv["workload"])
            rates.setdefault(key, {})[kv.get("round", "1")] = float(kv["rate"])
            if kv.get("incomplete"):
                incomplete.add(key)
    rounds = sorted({r for per in rates.values() for r in per}, key=int)
    impls = ["kcr", "kube-runtime", "client-go", "controller-runtime-pq"]
    others = impls[1:]
    many = len(rounds) > 1
    head = "median " if many else ""
    print(f"| workload | " + " | ".join(f"{head}{i}" for i in impls) + " | "
          + " | ".join(f"kcr / {o}" for o in others) + (" | rounds |" if many else " |"))
    print("|---" * (len(impls) + len(others) + 1 + many) + "|")
    for w in ["W1", "W2", "W3", "W4"]:
        cells = []
        for i in impls:
            r = median(list(rates.get((i, w), {}).values()))
            cell = fmt_rate(r) if r else "-"
            if (i, w) in incomplete:
                cell += " (stopped at deadline)"
            cells.append(cell)
        ratios = []
        for o in others:
            mine, theirs = rates.get(("kcr", w), {}), rates.get((o, w), {})
            per_round = [mine[r] / theirs[r] for r in rounds if mine.get(r) and theirs.get(r)]
            m = median(per_round)
            cell = "-" if m is None else f"{m:.2f}x"
            if many and per_round:
                cell += f" ({min(per_round):.2f}-{max(per_round):.2f})"
            ratios.append(cell)
        print(f"| {w} | " + " | ".join(cells) + " | " + " | ".join(ratios) + (f" | {len(rounds)} |" if many else " |"))
    if many:
        print()
        print("(ratios: median of the per-round ratios, with their range)")


def controller(path):
    rates = {}
    for line in open(path):
        kv = parse(line, "controller-bench ")
        if kv:
            rates[(kv["impl"], int(kv["workers"]))] = float(kv["rate"])
    impls = ["kcr", "kube-runtime", "controller-runtime"]
    print("| workers | " + " | ".join(impls) + " | kcr / kube-runtime | kcr / controller-runtime |")
    print("|---" * 6 + "|")
    for w in sorted({w for _, w in rates}):
        cells = [fmt_rate(rates[(i, w)]) if (i, w) in rates else "-" for i in impls]
        print(f"| {w} | " + " | ".join(cells) + " | "
              + ratio(rates.get(("kcr", w)), rates.get(("kube-runtime", w))) + " | "
              + ratio(rates.get(("kcr", w)), rates.get(("controller-runtime", w))) + " |")


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


IMPLS = ["kcr", "kube-runtime", "controller-runtime"]
COLORS = {"kcr": "#d62728", "kube-runtime": "#1f77b4", "controller-runtime": "#2ca02c"}


def svg_cdf(path, n, series):
    """A CDF of latencies (log x axis), one line per implementation."""
    w, h, left, right, top, bottom = 720, 420, 70, 20, 40, 50
    values = [v for vs in series.values() for v in vs if v > 0]
    if not values:
        return
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    def x(v):
        return left + (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (w - left - right)
    def y(q):
        return top + (1 - q) * (h - top - bottom)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">Creation to status write, {n} objects (CDF)</text>']
    decade = lo
    while decade <= hi * 1.001:
        for m in range(1, 10):
            v = decade * m
            if v > hi * 1.001:
                break
            xv = x(v)
            parts.append(f'<line x1="{xv:.1f}" y1="{top}" x2="{xv:.1f}" y2="{h - bottom}" stroke="#eee"/>')
        xv = x(decade)
        parts.append(f'<line x1="{xv:.1f}" y1="{top}" x2="{xv:.1f}" y2="{h - bottom}" stroke="#ccc"/>')
        label = f"{decade:g} ms"
        parts.append(f'<text x="{xv:.1f}" y="{h - bottom + 16}" text-anchor="middle">{label}</text>')
        decade *= 10
    for q in [0, 0.25, 0.5, 0.75, 0.9, 0.99, 1]:
        parts.append(f'<line x1="{left}" y1="{y(q):.1f}" x2="{w - right}" y2="{y(q):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 6}" y="{y(q) + 4:.1f}" text-anchor="end">{q:g}</text>')
    parts.append(f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">latency (log scale)</text>')
    for k, (impl, vs) in enumerate(series.items()):
        s = sorted(vs)
        if not s:
            continue
        step = max(1, len(s) // 400)
        pts = [(x(s[i]), y((i + 1) / len(s))) for i in range(0, len(s), step)] + [(x(s[-1]), y(1))]
        d = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
        parts.append(f'<polyline fill="none" stroke="{COLORS.get(impl, "black")}" stroke-width="2" points="{d}"/>')
        ly = top + 16 + 16 * k
        parts.append(f'<line x1="{left + 10}" y1="{ly - 4}" x2="{left + 30}" y2="{ly - 4}" stroke="{COLORS.get(impl, "black")}" stroke-width="2"/>')
        parts.append(f'<text x="{left + 36}" y="{ly}">{impl} (p50 {percentile(s, 50):.0f} ms, p99 {percentile(s, 99):.0f} ms)</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def e2e_row(directory, impl, n, suffix):
    """One implementation's run (live, restart, metadata restart) from its log, or None."""
    log = os.path.join(directory, f"e2e-{impl}-{n}{suffix}.txt")
    if not os.path.exists(log):
        return None
    live = restart = meta = create = None
    for line in open(log):
        kv = parse(line, "e2e-run ")
        if line.startswith("e2e-create"):
            create = parse(line, "e2e-create ")
        elif kv and line.startswith("restart:"):
            restart = kv
        elif kv and line.startswith("meta:"):
            meta = kv
        elif kv:
            live = kv
    lat_path = os.path.join(directory, f"latency-{impl}-{n}{suffix}.txt")
    lat = [float(v) for v in open(lat_path)] if os.path.exists(lat_path) else []
    return {
        "impl": impl, "objects": n, "latencies": lat,
        "all_reconciled_s": live["all_reconciled_s"] if live else "nan",
        "p50_ms": f"{percentile(lat, 50):.1f}", "p99_ms": f"{percentile(lat, 99):.1f}",
        "peak_rss_mib": restart["rss_hwm_mib"] if restart else "nan",
        "meta_rss_mib": meta["rss_hwm_mib"] if meta else "nan",
        "sync_s": restart["synced_s"] if restart else "nan",
        "live_rss_mib": live["rss_hwm_mib"] if live else "nan",
        "live_cpu_s": live.get("cpu_s", "nan") if live else "nan",
        "writes": live["writes"] if live else "nan",
        "create_s": create["secs"] if create else "nan",
        "incomplete": any(r and r.get("incomplete") for r in (live, restart, meta)),
    }


RATIO_KEYS = ["all_reconciled_s", "p99_ms", "peak_rss_mib", "meta_rss_mib", "sync_s", "live_cpu_s"]
KUBE_RATIO_KEYS = ["all_reconciled_s", "p99_ms", "peak_rss_mib", "sync_s", "live_cpu_s"]


def quotient(a, b, key):
    try:
        value = float(a[key]) / float(b[key])
    except (TypeError, ValueError, ZeroDivisionError, KeyError):
        return None
    return None if math.isnan(value) else value


def median(values):
    values = sorted(v for v in values if v is not None and not math.isnan(v))
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def show(value):
    return "-" if value is None else f"{value:.2f}"


def e2e(directory, counts, rounds=1):
    """With several rounds, each (objects, round) is one row set; ratios are taken within a
    round (same minutes, same server) and their median is the headline."""
    suffixes = [""] if rounds == 1 else [f"-r{r}" for r in range(1, rounds + 1)]
    rows = []
    for n in counts.split(","):
        series = {}
        for round_no, suffix in enumerate(suffixes, 1):
            for impl in IMPLS:
                row = e2e_row(directory, impl, n, suffix)
                if row is None:
                    continue
                row["round"] = round_no
                rows.append(row)
                series.setdefault(impl, []).extend(row["latencies"])
                print(f"e2e-bench impl={impl} objects={n} all_reconciled_s={row['all_reconciled_s']} "
                      f"p50_ms={row['p50_ms']} p99_ms={row['p99_ms']} peak_rss_mib={row['peak_rss_mib']} "
                      f"meta_rss_mib={row['meta_rss_mib']} sync_s={row['sync_s']}"
                      + (f" round={round_no}" if rounds > 1 else "")
                      + (" incomplete=1" if row["incomplete"] else ""))
        # With several rounds the plot pools every round's latencies per implementation.
        svg_cdf(os.path.join(directory, f"latency-{n}.svg"), n, series)
    print()
    round_col = "round | " if rounds > 1 else ""
    print(f"| objects | {round_col}impl | all reconciled (s) | p50 (ms) | p99 (ms) | peak RSS, full watch (MiB) | peak RSS, metadata watch (MiB) | cache sync (s) | creation of N (s) | status writes | peak RSS, live run (MiB) | CPU, live run (s) |")
    print("|---" * (13 if rounds > 1 else 12) + "|")
    for r in rows:
        round_cell = f"{r['round']} | " if rounds > 1 else ""
        print(f"| {r['objects']} | {round_cell}{r['impl']} | {r['all_reconciled_s']} | {r['p50_ms']} | {r['p99_ms']} | "
              f"{r['peak_rss_mib']} | {r['meta_rss_mib']} | {r['sync_s']} | {r['create_s']} | {r['writes']} | {r['live_rss_mib']} | {r['live_cpu_s']} |")
    print()
    print(f"| objects | {round_col}kcr / controller-runtime: all reconciled | p99 | peak RSS | meta RSS | sync | CPU | kcr / kube-runtime: all reconciled | p99 | peak RSS | sync | CPU |")
    print("|---" * (13 if rounds > 1 else 12) + "|")
    by = {(r["objects"], r["round"], r["impl"]): r for r in rows}
    for n in counts.split(","):
        per_round = []
        for round_no in range(1, rounds + 1):
            k = by.get((n, round_no, "kcr"))
            c = by.get((n, round_no, "controller-runtime"))
            u = by.get((n, round_no, "kube-runtime"))
            cells = [quotient(k, c, key) for key in RATIO_KEYS]
            cells += [quotient(k, u, key) for key in KUBE_RATIO_KEYS]
            per_round.append(cells)
            round_cell = f"{round_no} | " if rounds > 1 else ""
            print(f"| {n} | {round_cell}" + " | ".join(show(v) for v in cells) + " |")
        if rounds > 1:
            medians = [median(column) for column in zip(*per_round)]
            print(f"| {n} | **median** | " + " | ".join(f"**{show(v)}**" for v in medians) + " |")
    print()
    print("(ratios below 1 mean kcr is faster / smaller"
          + ("; each round's ratios compare runs of the same round" if rounds > 1 else "") + ")")


def scale_runs(path):
    """scale-bench lines grouped by (impl, kind, mode, list, managed_fields, objects), and scale-floor lines
    by (kind, mode)."""
    runs, floors = {}, {}
    for line in open(path):
        kv = parse(line, "scale-bench ")
        if kv:
            key = (kv["impl"], kv["kind"], kv["mode"], kv["list"], kv["managed_fields"], int(kv["objects"]))
            runs.setdefault(key, []).append(kv)
            continue
        kv = parse(line, "scale-floor ")
        if kv:
            floors[(kv["kind"], kv["mode"])] = kv
    return runs, floors


def scale_median(rows, key):
    values = []
    for r in rows:
        try:
            values.append(float(r[key]))
        except (KeyError, ValueError):
            pass
    return median(values)


def scale(path):
    runs, floors = scale_runs(path)
    if not runs:
        print("no scale-bench lines")
        return
    kinds = sorted({k[1] for k in runs})
    modes = sorted({k[2] for k in runs})
    order = ["paginated", "cache", "streaming"]
    lists = sorted({k[3] for k in runs}, key=lambda l: order.index(l) if l in order else len(order))
    counts = sorted({k[5] for k in runs})
    mfs = ["strip", "keep"]
    keys = ["sync_s", "peak_rss_mib", "steady_rss_mib", "cpu_s", "bytes_per_object"]
    print("Scale curve (paged lists; medians over rounds; bytes per object = (steady RSS - base RSS) / N):")
    print()
    print("| kind | mode | objects | impl | managed fields | sync (s) | peak RSS (MiB) | steady RSS (MiB) | CPU (s) | bytes / object | floor (bytes) | runs |")
    print("|---" * 12 + "|")
    for kind in kinds:
        for mode in modes:
            floor = floors.get((kind, mode), {})
            for n in counts:
                for impl in IMPLS:
                    for mf in mfs:
                        rows = runs.get((impl, kind, mode, "paginated", mf, n))
                        if not rows:
                            continue
                        fl = floor.get("stripped_bytes" if mf == "strip" else "decoded_bytes", "-")
                        cells = [show(scale_median(rows, k)) for k in keys[:-1]]
                        per_object = scale_median(rows, "bytes_per_object")
                        cells.append("-" if per_object is None else f"{per_object:.0f}")
                        bad = " (incomplete)" if any(r.get("incomplete") for r in rows) else ""
                        print(f"| {kind} | {mode} | {n} | {impl}{bad} | {mf} | " + " | ".join(cells) + f" | {fl} | {len(rows)} |")

    def ratio_cells(kind, mode, n, kcr_mf, peer_mf):
        mine = runs.get(("kcr", kind, mode, "paginated", kcr_mf, n), [])
        cells = []
        for key in ["peak_rss_mib", "sync_s", "cpu_s"]:
            for peer in ["kube-runtime", "controller-runtime"]:
                theirs = {r.get("round"): r for r in runs.get((peer, kind, mode, "paginated", peer_mf, n), [])}
                cells.append(show(median([quotient(r, theirs[r.get("round")], key)
                                          for r in mine if r.get("round") in theirs])))
        return cells

    print()
    print("Ratios kcr / peer, paged lists (medians of the per-round ratios; below 1: kcr smaller or faster). "
          "`defaults`: each as it comes (kcr strips managedFields, the peers keep them); "
          "`all strip`: the peers told to strip them too:")
    print()
    print("| kind | mode | objects | compared | peak RSS / kube-runtime | peak RSS / controller-runtime | sync / kube-runtime | sync / controller-runtime | CPU / kube-runtime | CPU / controller-runtime |")
    print("|---" * 10 + "|")
    for kind in kinds:
        for mode in modes:
            for n in counts:
                for label, kcr_mf, peer_mf in [("defaults", "strip", "keep"), ("all strip", "strip", "strip"),
                                               ("all keep", "keep", "keep")]:
                    if label != "defaults" and not (runs.get(("kcr", kind, mode, "paginated", kcr_mf, n))
                                                    and runs.get(("kube-runtime", kind, mode, "paginated", peer_mf, n))):
                        continue
                    print(f"| {kind} | {mode} | {n} | {label} | " + " | ".join(ratio_cells(kind, mode, n, kcr_mf, peer_mf)) + " |")
    if len(lists) > 1:
        print()
        print("List modes: the controller's cost and the API server's (its CPU during the run, "
              "its peak RSS with the peak reset just before the run), each implementation's managedFields default:")
        print()
        print("| kind | mode | objects | impl | list | sync (s) | peak RSS (MiB) | steady RSS (MiB) | CPU (s) | API server CPU (s) | API server peak RSS (MiB) |")
        print("|---" * 11 + "|")
        for kind in kinds:
            for mode in modes:
                for n in counts:
                    for impl in IMPLS:
                        mf = "strip" if impl == "kcr" else "keep"
                        if not any(runs.get((impl, kind, mode, lst, mf, n)) for lst in lists[1:]):
                            continue
                        for lst in lists:
                            rows = runs.get((impl, kind, mode, lst, mf, n))
                            if not rows:
                                continue
                            cells = [show(scale_median(rows, k)) for k in
                                     ["sync_s", "peak_rss_mib", "steady_rss_mib", "cpu_s", "apiserver_cpu_s", "apiserver_peak_rss_mib"]]
                            print(f"| {kind} | {mode} | {n} | {impl} | {lst} | " + " | ".join(cells) + " |")
    if floors:
        print()
        print("Floors (one object decoded by kube-rs under a counting allocator, bytes on the heap + the object in an Arc):")
        print()
        print("| kind | mode | JSON (bytes) | decoded (bytes) | decoded without managedFields (bytes) |")
        print("|---" * 5 + "|")
        for (kind, mode), f in sorted(floors.items()):
            print(f"| {kind} | {mode} | {f['json_bytes']} | {f['decoded_bytes']} | {f['stripped_bytes']} |")


def scale_svg(path, out):
    """Peak RSS against objects (log x), full watch and paginated lists: one line per
    implementation and kind."""
    runs, _ = scale_runs(path)
    series = {}
    for (impl, kind, mode, lst, mf, n), rows in runs.items():
        if mode != "full" or lst != "paginated" or mf != ("strip" if impl == "kcr" else "keep"):
            continue
        v = scale_median(rows, "peak_rss_mib")
        if v is not None:
            series.setdefault((impl, kind), []).append((n, v))
    if not series:
        return
    w, h, left, right, top, bottom = 720, 440, 70, 20, 40, 50
    counts = sorted({n for pts in series.values() for n, _ in pts})
    top_v = max(v for pts in series.values() for _, v in pts) * 1.1
    lo, hi = math.log10(min(counts)), math.log10(max(counts))
    hi = hi if hi > lo else lo + 1
    def x(n):
        return left + (math.log10(n) - lo) / (hi - lo) * (w - left - right)
    def y(v):
        return top + (1 - v / top_v) * (h - top - bottom)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">Peak RSS of a synced cache (full objects, paged lists, defaults)</text>']
    for n in counts:
        parts.append(f'<line x1="{x(n):.1f}" y1="{top}" x2="{x(n):.1f}" y2="{h - bottom}" stroke="#ddd"/>')
        parts.append(f'<text x="{x(n):.1f}" y="{h - bottom + 16}" text-anchor="middle">{n:,}</text>')
    step = 10 ** math.floor(math.log10(top_v / 4)) if top_v > 0 else 1
    for mult in (1, 2, 5):
        if top_v / (step * mult) <= 8:
            step *= mult
            break
    v = 0.0
    while v <= top_v:
        parts.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{w - right}" y2="{y(v):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    parts.append(f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">objects in the cache (log scale)</text>')
    parts.append(f'<text x="16" y="{h / 2}" text-anchor="middle" transform="rotate(-90 16 {h / 2})">peak RSS (MiB)</text>')
    dashes = {"bench": "", "configmap": ' stroke-dasharray="6 4"'}
    for k, ((impl, kind), pts) in enumerate(sorted(series.items())):
        pts.sort()
        color = COLORS.get(impl, "black")
        d = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dashes.get(kind, "")} points="{d}"/>')
        for n, v in pts:
            parts.append(f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="3" fill="{color}"/>')
        ly = top + 16 + 16 * k
        parts.append(f'<line x1="{left + 10}" y1="{ly - 4}" x2="{left + 30}" y2="{ly - 4}" stroke="{color}" stroke-width="2"{dashes.get(kind, "")}/>')
        parts.append(f'<text x="{left + 36}" y="{ly}">{impl}, {kind} ({pts[-1][1]:.0f} MiB at {pts[-1][0]:,})</text>')
    parts.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    kind = sys.argv[1]
    if kind == "queue":
        queue(sys.argv[2])
    elif kind == "controller":
        controller(sys.argv[2])
    elif kind == "e2e":
        e2e(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "1000",
            int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    elif kind == "scale":
        scale(sys.argv[2])
    elif kind == "scale-svg" and len(sys.argv) > 3:
        scale_svg(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
