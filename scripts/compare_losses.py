#!/usr/bin/env python3
"""Compares the per-step train losses of two `dsrt train --summary FILE` run summaries.

Usage:
  compare_losses.py REF.json TEST.json                      print the max relative difference
  compare_losses.py REF.json TEST.json --rtol 1e-4          ... and PASS/FAIL against it
  compare_losses.py REF.json TEST.json --band BF16.json FP32.json [--band-factor 3] [--band-floor 1e-4]
      the tolerance is band-factor x the max relative difference between BF16.json and
      FP32.json (how far bf16 rounding moves the CPU run), but at least band-floor.
  ... [--same-scaling]   also FAIL unless both runs skipped the same steps with the same loss
      scales (fp16: the dynamic loss scaler's schedule must match step for step)

The relative difference of step i is |test_i - ref_i| / max(|ref_i|, 1e-12); both runs must
have the same steps (same first_step and count) and only finite losses. Prints one line:
  max_rel=3.1e-06 at step 7 of 20 (ref 3.456789 test 3.456800) rtol=1e-04 PASS
Exit status: 0 pass (or nothing to judge), 1 fail, 2 unreadable or mismatched input.
Stdlib only (it runs on GPU machines next to the bundle). Not a plotter: scripts/plot_run.py.
"""
import argparse
import json
import math
import sys


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"compare_losses.py: {path}: {e}") from None
    losses = j.get("losses")
    if not isinstance(losses, list) or not losses:
        raise SystemExit(f"compare_losses.py: {path}: no 'losses' list (not a dsrt run summary?)")
    # nlohmann::json writes a NaN or infinite double as null.
    return j, [math.nan if x is None else float(x) for x in losses]


def max_rel(ref_path, test_path):
    """(max relative difference, 1-based index, ref loss, test loss, steps)."""
    rj, ref = load(ref_path)
    tj, test = load(test_path)
    if len(ref) != len(test) or rj.get("first_step", 0) != tj.get("first_step", 0):
        raise SystemExit(
            f"compare_losses.py: {ref_path} has {len(ref)} steps from {rj.get('first_step', 0)}, "
            f"{test_path} has {len(test)} from {tj.get('first_step', 0)}")
    worst = (0.0, 1, ref[0], test[0])
    for i, (a, b) in enumerate(zip(ref, test)):
        if not (math.isfinite(a) and math.isfinite(b)):
            return math.inf, i + 1, a, b, len(ref)
        r = abs(b - a) / max(abs(a), 1e-12)
        if r > worst[0]:
            worst = (r, i + 1, a, b)
    return (*worst, len(ref))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref")
    ap.add_argument("test")
    ap.add_argument("--rtol", type=float)
    ap.add_argument("--band", nargs=2, metavar=("BF16", "FP32"))
    ap.add_argument("--band-factor", type=float, default=3.0)
    ap.add_argument("--band-floor", type=float, default=1e-4)
    ap.add_argument("--same-scaling", action="store_true")
    a = ap.parse_args(argv)
    if a.rtol is not None and a.band:
        ap.error("--rtol and --band exclude each other")
    rtol, how = a.rtol, ""
    if a.band:
        b, _, _, _, _ = max_rel(a.band[1], a.band[0])
        rtol = max(a.band_factor * b, a.band_floor)
        how = f" (band: {a.band_factor:g} x bf16-vs-fp32 {b:.2e}, floor {a.band_floor:.0e})"
    r, step, x, y, n = max_rel(a.ref, a.test)
    line = f"max_rel={r:.2e} at step {step} of {n} (ref {x:.6f} test {y:.6f})"
    if rtol is None:
        print(line)
        return 0
    ok = r <= rtol
    if a.same_scaling:
        rj, tj = load(a.ref)[0], load(a.test)[0]
        skips = [rj.get("skipped_steps"), tj.get("skipped_steps")]
        scales = [rj.get("loss_scale"), tj.get("loss_scale")]
        same = skips[0] == skips[1] and scales[0] == scales[1]
        ok = ok and same
        line += (f" skipped={skips[0]} final_scale={(scales[0] or [None])[-1]}" if same else
                 f" SCALING DIFFERS: skipped {skips[0]} vs {skips[1]}, scales {scales[0]} vs "
                 f"{scales[1]}")
    print(f"{line} rtol={rtol:.2e}{how} {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            sys.exit(2)
        raise
