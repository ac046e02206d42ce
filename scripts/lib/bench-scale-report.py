#!/usr/bin/env python3
"""The cost curve's table and plot (scripts/bench-scale.sh): medians over the rounds of each
dimension's steps and targets, each step's same-round ratio to the dimension's first step (how
the cost grows) and to nginx in the same step, and a PNG with a panel per dimension.

  bench-scale-report.py RESULTS.tsv ROUNDS SECONDS CONNECTIONS VERIFY_US PLOT.png
"""
import collections, statistics, sys

results, rounds, seconds, connections, verify_us, plot = sys.argv[1:7]
rows = [line.rstrip("\n").split("\t") for line in open(results) if line.strip()]
# dimension, step, target, round, rps, p99, cpu_us, rss_kib, idle, bad
by = {(r[0], r[1], r[2], r[3]): r for r in rows}
order = collections.OrderedDict()
for r in rows:
    order.setdefault(r[0], collections.OrderedDict()).setdefault(r[1], [])
    if r[2] not in order[r[0]][r[1]]:
        order[r[0]][r[1]].append(r[2])

COLUMN = {"rps": 4, "p99": 5, "cpu": 6, "rss": 7}


def median(dimension, step, target, column):
    values = [float(r[COLUMN[column]]) for r in rows if r[0] == dimension and r[1] == step and r[2] == target]
    return statistics.median(values) if values else None


def same_round(a, b, column):
    """The median over rounds of a's value over b's in the same round (a and b: (dimension, step, target))."""
    ratios = []
    for rnd in sorted({r[3] for r in rows}):
        x, y = by.get(a + (rnd,)), by.get(b + (rnd,))
        if x and y and float(y[COLUMN[column]]) > 0:
            ratios.append(float(x[COLUMN[column]]) / float(y[COLUMN[column]]))
    return statistics.median(ratios) if ratios else None


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


print(f"\nwrk -t2 -c{connections} -d{seconds}s, {rounds} interleaved rounds; medians; ratios are medians of same-round ratios")
if verify_us:
    print(f"one ES256 verification on one core (portcullis bench --alg ES256): {verify_us} us")
print("| dimension | step | target | req/s | p99 ms | CPU us/req | RSS MB | CPU vs first step (of its kind) | CPU vs nginx | req/s vs nginx | p99 vs first step | non-2xx or errors |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
def baseline(dimension, step):
    """The step a step's growth is measured from: the dimension's first, or for routes the first of the
    same kind (`10000 host` beside `1 host`: a request read by its host is another request)."""
    steps = list(order[dimension])
    if dimension == "routes":
        kind = step.split(" ", 1)[-1]
        return next(s for s in steps if s.split(" ", 1)[-1] == kind)
    return steps[0]


for dimension, steps in order.items():
    for step, targets in steps.items():
        first = baseline(dimension, step)
        for target in targets:
            key = (dimension, step, target)
            bad = sum(int(r[9]) for r in rows if r[0] == dimension and r[1] == step and r[2] == target)
            vs_nginx = (dimension, step, "nginx") if target != "nginx" and "nginx" in targets else None
            print("| " + " | ".join([
                dimension, step, target,
                fmt(median(*key, "rps"), ".0f"), fmt(median(*key, "p99"), ".2f"), fmt(median(*key, "cpu"), ".1f"),
                fmt((median(*key, "rss") or 0) / 1024, ".0f"),
                fmt(same_round(key, (dimension, first, target), "cpu"), ".2f") + "x",
                (fmt(same_round(key, vs_nginx, "cpu"), ".2f") + "x") if vs_nginx else "-",
                (fmt(same_round(key, vs_nginx, "rps"), ".2f") + "x") if vs_nginx else "-",
                fmt(same_round(key, (dimension, first, target), "p99"), ".2f") + "x",
                str(bad),
            ]) + " |")
if "people" in order and verify_us:
    steps = list(order["people"])
    one = median("people", steps[0], "Portcullis", "cpu")
    for step in steps[1:]:
        cpu = median("people", step, "Portcullis", "cpu")
        if one is not None and cpu is not None:
            print(f"people {step}: {cpu - one:.1f} us a request more than one person's (one verification: {verify_us} us)")

# COMPARE_BIN (an older build) beside this build's gateway, row by row: the same-round A/B.
compared = [(d, s) for d, steps in order.items() for s, targets in steps.items() if "COMPARE_BIN" in targets and "Portcullis" in targets]
if compared:
    print("\nA/B, this build against COMPARE_BIN, same rounds (below 1.00x is less CPU, fewer req/s or a lower p99)")
    print("| dimension | step | CPU a request | req/s | p99 | RSS |")
    print("|---|---|---|---|---|---|")
    for dimension, step in compared:
        this, other = (dimension, step, "Portcullis"), (dimension, step, "COMPARE_BIN")
        print("| " + " | ".join([dimension, step] + [fmt(same_round(this, other, column), ".3f") + "x" for column in ("cpu", "rps", "p99", "rss")]) + " |")

failed = sum(int(r[9]) for r in rows)
if failed:
    print(f"bench-scale.sh: {failed} answers were not 2xx or 3xx, or failed: the rows with them measured something else", file=sys.stderr)

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("no matplotlib: no plot", file=sys.stderr)
    sys.exit(1 if failed else 0)
dimensions = list(order)
figure, axes = plt.subplots(1, len(dimensions), figsize=(4.2 * len(dimensions), 4), squeeze=False)
for axis, dimension in zip(axes[0], dimensions):
    steps = list(order[dimension])
    targets = []
    for step in steps:
        targets += [t for t in order[dimension][step] if t not in targets]
    for target in targets:
        values = [median(dimension, step, target, "cpu") for step in steps]
        axis.plot(range(len(steps)), [v if v is not None else float("nan") for v in values], marker="o", label=target)
    axis.set_xticks(range(len(steps)))
    axis.set_xticklabels(steps, rotation=20, fontsize=8)
    axis.set_title(dimension)
    axis.set_ylabel("server CPU a request (us)")
    top = max((v for v in (median(dimension, step, target, "cpu") for step in steps for target in targets) if v is not None), default=1)
    axis.set_ylim(0, top * 1.15)
    axis.legend(fontsize=8)
figure.suptitle(f"Portcullis's cost curve: medians of {rounds} rounds of wrk -c{connections}, {seconds} s")
figure.tight_layout()
figure.savefig(plot, dpi=110)
print(f"plot: {plot}")
sys.exit(1 if failed else 0)
