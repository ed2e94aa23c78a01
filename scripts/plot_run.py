#!/usr/bin/python3
"""Draw a dsrt (or DeepSpeed) run's loss and learning-rate curves into a PNG.

    scripts/plot_run.py RUN [RUN...] [-o run.png] [--dump]

RUN is what the run's monitors wrote: a csv_monitor folder (Train_Samples_train_loss.csv,
Train_Samples_lr.csv, Train_Samples_eval_loss.csv, one "step,value" row each) or a TensorBoard
event file (events.out.tfevents.*) or a folder holding one. Several RUNs are drawn on the same
axes, labelled by their folder. The x axis is the monitors' step, which is DeepSpeed's global
sample count. --dump prints every series as "tag step value" lines instead of drawing (for
tests and for checking a file by eye).

Exit status 0 when the PNG was written; 2 (with a message naming the path) when a RUN is missing,
holds no loss series, or is not a valid CSV or event file. Uses Debian's python3-matplotlib
(scripts/install_deps.sh); the TensorBoard files are read without TensorFlow: TFRecord framing
around Event protos, decoded here.
"""
import argparse
import csv
import glob
import os
import struct
import sys

LOSS, LR, EVAL = "Train/Samples/train_loss", "Train/Samples/lr", "Train/Samples/eval_loss"


class BadInput(Exception):
    pass


def read_csv_folder(folder):
    series = {}
    for tag in (LOSS, LR, EVAL):
        path = os.path.join(folder, tag.replace("/", "_") + ".csv")
        if not os.path.exists(path):
            continue
        points = []
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        if not rows or len(rows[0]) != 2 or rows[0][0] != "step":
            raise BadInput(f"{path}:1: expected the header 'step,<name>'")
        for n, row in enumerate(rows[1:], start=2):
            if len(row) == 2 and row[0] == "step":  # a later run appended its own header
                continue
            try:
                points.append((int(row[0]), float(row[1])))
            except (ValueError, IndexError):
                raise BadInput(f"{path}:{n}: expected 'step,value', got {','.join(row)!r}")
        series[tag] = points
    return series


def varint(buf, pos):
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def proto_fields(buf):
    """(field number, wire type, value) of one protobuf message; bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated field")
        yield field, wire, value


def read_event_file(path):
    """Scalars of a TensorBoard event file: Event{step=2, summary=5{value=1{tag=1, simple_value=2}}}."""
    series = {}
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise BadInput(f"{path}: truncated record at byte {pos}")
        (length,) = struct.unpack_from("<Q", data, pos)
        record = data[pos + 12:pos + 12 + length]
        if len(record) != length or pos + 16 + length > len(data):
            raise BadInput(f"{path}: truncated record at byte {pos}")
        pos += 16 + length
        try:
            step, values = 0, []
            for field, wire, value in proto_fields(record):
                if field == 2 and wire == 0:
                    step = value
                elif field == 5 and wire == 2:
                    for vf, vw, v in proto_fields(value):
                        if vf != 1 or vw != 2:
                            continue
                        tag, simple = None, None
                        for sf, sw, s in proto_fields(v):
                            if sf == 1 and sw == 2:
                                tag = s.decode()
                            elif sf == 2 and sw == 5:
                                (simple,) = struct.unpack("<f", s)
                        if tag is not None and simple is not None:
                            values.append((tag, simple))
        except (ValueError, UnicodeDecodeError) as e:
            raise BadInput(f"{path}: record at byte {pos - 16 - length} is no Event proto ({e})")
        for tag, simple in values:
            series.setdefault(tag, []).append((step, simple))
    return series


def read_run(path):
    if os.path.isfile(path):
        if "tfevents" not in os.path.basename(path):
            raise BadInput(f"{path}: expected a csv_monitor folder or an events.out.tfevents.* file")
        return read_event_file(path)
    if not os.path.isdir(path):
        raise BadInput(f"{path}: no such file or folder")
    events = sorted(glob.glob(os.path.join(path, "events.out.tfevents.*")))
    series = read_csv_folder(path)
    for event_file in events:
        for tag, points in read_event_file(event_file).items():
            series.setdefault(tag, []).extend(points)
    if LOSS not in series:
        raise BadInput(f"{path}: no train loss series (expected {LOSS.replace('/', '_')}.csv or "
                       "an events.out.tfevents.* file with that tag)")
    return series


def plot(runs, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_lr) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for label, series in runs:
        xs, ys = zip(*series[LOSS])
        ax_loss.plot(xs, ys, label=f"{label} train")
        if series.get(EVAL):
            xs, ys = zip(*series[EVAL])
            ax_loss.plot(xs, ys, "o--", label=f"{label} eval")
        if series.get(LR):
            xs, ys = zip(*series[LR])
            ax_lr.plot(xs, ys, label=label)
    ax_loss.set_ylabel("loss")
    ax_loss.legend()
    ax_loss.grid(alpha=0.3)
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_xlabel("samples (the monitors' step)")
    ax_lr.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN")
    parser.add_argument("-o", "--output", default="run.png", help="the PNG to write [run.png]")
    parser.add_argument("--dump", action="store_true", help="print the series, draw nothing")
    args = parser.parse_args()
    try:
        runs = [(os.path.basename(os.path.normpath(r)), read_run(r)) for r in args.runs]
    except (BadInput, OSError) as e:
        print(f"plot_run: error: {e}", file=sys.stderr)
        return 2
    if args.dump:
        for _, series in runs:
            for tag in sorted(series):
                for step, value in series[tag]:
                    print(f"{tag} {step} {value:.6g}")
        return 0
    plot(runs, args.output)
    n = len(runs[0][1][LOSS])
    print(f"plot_run: wrote {args.output} ({len(runs)} run(s), {n} loss points in the first)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
