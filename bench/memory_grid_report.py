#!/usr/bin/env python3
"""memory_grid_report: the table, checks and plot for bench/memory_grid.sh.

Reads the grid's TSV (size world stage offload dtype params peak_MiB table_MiB act_MiB), takes the
runtime floor per world size from the 'tiny' rows (peak - table - activations of a ~0.1M-param
model: binary, libraries, gloo, threads, allocator), and prints every row with
limit = 1.10 x (table + act) + floor and whether peak <= limit; then the stage 3 / stage 0 ratio
at 124M params, 2 ranks, fp32 (target <= 0.56). Writes a PNG of peak RSS against model size per
stage (2 ranks, fp32, no offload; other worlds dashed) when matplotlib is present.
Usage: memory_grid_report.py GRID.tsv OUT.png
"""
import csv
import sys


def main():
    tsv, png = sys.argv[1], sys.argv[2]
    rows, refused = [], []
    with open(tsv) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            if r["params"] == "REFUSED_OR_FAILED":
                refused.append(r)
                continue
            for k in ("world", "stage", "params"):
                r[k] = int(r[k])
            for k in ("peak_MiB", "table_MiB", "act_MiB"):
                r[k] = float(r[k])
            rows.append(r)
    floor = {}
    for r in rows:
        if r["size"] == "tiny":
            floor[r["world"]] = r["peak_MiB"] - r["table_MiB"] - r["act_MiB"]
    print("# runtime floor per rank (tiny model: peak - table - activations), MiB: " +
          ", ".join(f"{w} rank(s) {v:.0f}" for w, v in sorted(floor.items())))
    print(f"{'size':>5} {'params':>10} {'world':>5} {'stage':>5} {'offload':>7} {'dtype':>5} "
          f"{'peak':>7} {'table':>7} {'act':>6} {'limit':>7} {'peak/(t+a)':>10}  check")
    bad = 0
    for r in rows:
        if r["size"] == "tiny":
            continue
        base = r["table_MiB"] + r["act_MiB"]
        limit = 1.10 * base + floor.get(r["world"], 0.0)
        ok = r["peak_MiB"] <= limit
        bad += not ok
        print(f"{r['size']:>5} {r['params']:>10} {r['world']:>5} {r['stage']:>5} "
              f"{r['offload']:>7} {r['dtype']:>5} {r['peak_MiB']:>7.0f} {r['table_MiB']:>7.0f} "
              f"{r['act_MiB']:>6.0f} {limit:>7.0f} {r['peak_MiB'] / base:>10.3f}  "
              f"{'ok' if ok else 'OVER'}")
    for r in refused:
        print(f"{r['size']:>5} world {r['world']} stage {r['stage']} offload {r['offload']} "
              f"{r['dtype']}: refused or failed: {r.get('peak_MiB', '')}")
    print(f"# rows over 1.10 x (table + act) + floor: {bad} of "
          f"{sum(1 for r in rows if r['size'] != 'tiny')}")

    def peak(size, world, stage, off="none", dt="fp32"):
        for r in rows:
            if (r["size"], r["world"], r["stage"], r["offload"], r["dtype"]) == \
                    (size, world, stage, off, dt):
                return r["peak_MiB"]
        return None

    s0, s3 = peak("124M", 2, 0), peak("124M", 2, 3)
    if s0 and s3:
        print(f"# 124M, 2 ranks, fp32: stage 3 / stage 0 peak = {s3:.0f} / {s0:.0f} = "
              f"{s3 / s0:.3f} (target <= 0.56: {'met' if s3 / s0 <= 0.56 else 'NOT met'})")
    # Issue 15 item 2: stage 2's peak below stage 1's at 2 ranks, for every size, offload and
    # dtype the grid holds.
    pairs = sorted({(r["size"], r["offload"], r["dtype"]) for r in rows
                    if r["size"] != "tiny" and r["world"] == 2 and r["stage"] == 2})
    above = []
    for size, off, dt in pairs:
        s1, s2 = peak(size, 2, 1, off, dt), peak(size, 2, 2, off, dt)
        if s1 and s2:
            print(f"# {size}, 2 ranks, {dt}, offload {off}: stage 2 / stage 1 peak = "
                  f"{s2:.0f} / {s1:.0f} = {s2 / s1:.3f} (target < 1: "
                  f"{'met' if s2 < s1 else 'NOT met'})")
            if s2 >= s1:
                above.append(f"{size} {dt} {off}")
    if pairs:
        print(f"# stage 2 at or above stage 1 at 2 ranks: {len(above)}"
              + (f" ({', '.join(above)})" if above else ""))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# no plot: matplotlib missing (scripts/install_deps.sh installs python3-matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    worlds = sorted({r["world"] for r in rows})
    for stage in range(4):
        for world in worlds:
            pts = sorted((r["params"] / 1e6, r["peak_MiB"]) for r in rows
                         if r["size"] != "tiny" and r["stage"] == stage and r["world"] == world
                         and r["offload"] == "none" and r["dtype"] == "fp32")
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    linestyle={1: ":", 2: "-"}.get(world, "--"), color=f"C{stage}",
                    label=f"stage {stage}, {world} rank(s)")
    ax.set_xlabel("model parameters (M)")
    ax.set_ylabel("peak RSS per rank (MiB)")
    ax.set_title("dsrt train: peak RSS per rank vs model size (fp32, no offload)\n"
                 "dotted: 1 rank, solid: 2 ranks, dashed: 4 ranks", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"# plot: {png}")


if __name__ == "__main__":
    main()
