"""Checks an SVG chart of cuttle against the numbers it draws (tests/test_plot.sh).

  python3 tests/plot_check.py curves SVG RUN_DIR...
  python3 tests/plot_check.py bars SVG PROFILE_JSON

The SVG must parse as XML (xml.etree: a parse error fails the check), hold no
"nan" or "inf", and state its scales (tools/plot.h): each point drawn is
mapped back through its panel's plot-area and data-x-lo..hi, data-y-lo..hi
and must be a value of the run's metrics.jsonl at that epoch, and every
finite value must be drawn.  For bars, each bar's width mapped back through
the axis must be the op's milliseconds per step in `cuttle profile --json`.
Prints what it checked; exits 1 with the first mismatch.
"""
import json
import math
import re
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
COORD_ROUNDING = 0.006  # pixels: coordinates are written with 2 decimals
METRICS = {"loss": ("train_loss", "test_loss"), "accuracy": ("train_accuracy", "test_accuracy"),
           "lr": ("lr",)}


def fail(message):
    print(f"plot_check: {message}")
    sys.exit(1)


def load_svg(path):
    text = open(path, "rb").read().decode("utf-8")
    if re.search(r"\b(nan|inf|infinity)\b", text, re.IGNORECASE):
        fail(f"{path} has a nan or inf in it")
    return ET.fromstring(text)


def read_metrics(run_dir):
    """The metrics' lines, with C's nan/inf and Python's NaN/Infinity as None."""
    rows = []
    for line in open(f"{run_dir}/metrics.jsonl"):
        if not line.strip():
            continue
        line = re.sub(r'(?<![\w"])-?(nan|inf|NaN|Infinity)(?![\w"])', "null", line)
        row = json.loads(line)
        rows.append({k: (v if isinstance(v, (int, float)) and math.isfinite(v) else None)
                     for k, v in row.items()})
    return rows


def area_of(group):
    rect = group.find(f"{SVG}rect[@class='plot-area']")
    return tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))


def series_points(series):
    """Every vertex of its polylines and every circle, as pixel pairs."""
    points = []
    for line in series.findall(f"{SVG}polyline"):
        for pair in line.get("points").split():
            x, y = pair.split(",")
            points.append((float(x), float(y)))
        if len(line.get("points").split()) < 2:
            fail("a polyline of fewer than 2 points")
    for circle in series.findall(f"{SVG}circle"):
        points.append((float(circle.get("cx")), float(circle.get("cy"))))
    return points


def check_curves(svg_path, run_dirs):
    root = load_svg(svg_path)
    names = [d.rstrip("/") or "/" for d in run_dirs]
    legend = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "legend-label"]
    title = root.find(f"{SVG}title").text
    for name in names:
        if len(names) > 1 and name not in legend:
            fail(f"the legend {legend} does not name the run {name!r}")
        if len(names) == 1 and name not in title:
            fail(f"the title {title!r} does not name the run {name!r}")
    panels = {g.get("data-metric"): g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"}
    if set(panels) != set(METRICS):
        fail(f"panels {sorted(panels)}, expected {sorted(METRICS)}")
    checked = 0
    for metric, panel in panels.items():
        x0, y0, width, height = area_of(panel)
        x_lo, x_hi, y_lo, y_hi, scale = (float(panel.get(k)) for k in (
            "data-x-lo", "data-x-hi", "data-y-lo", "data-y-hi", "data-scale"))
        if not (x_hi > x_lo and y_hi > y_lo):
            fail(f"{metric}: an empty axis range x {x_lo}..{x_hi}, y {y_lo}..{y_hi}")
        x_tol = COORD_ROUNDING / width * (x_hi - x_lo)
        y_tol = COORD_ROUNDING / height * (y_hi - y_lo) / scale
        series = {(g.get("data-run"), g.get("data-split")): g for g in panel.iter(f"{SVG}g")
                  if g.get("class") == "series"}
        for name, run_dir in zip(names, run_dirs):
            rows = read_metrics(run_dir)
            for key in METRICS[metric]:
                split = key.split("_")[0] if "_" in key else "train"
                expected = {row["epoch"]: row.get(key) for row in rows
                            if row.get(key) is not None}
                group = series.get((name, split))
                if group is None:
                    if expected:
                        fail(f"{metric}: no {split} series of {name!r}")
                    continue
                drawn = {}
                for px, py in series_points(group):
                    epoch = x_lo + (px - x0) / width * (x_hi - x_lo)
                    value = (y_lo + (y0 + height - py) / height * (y_hi - y_lo)) / scale
                    nearest = round(epoch)
                    if abs(epoch - nearest) > x_tol:
                        fail(f"{metric} {split} of {name!r}: a point at epoch {epoch}")
                    if not y_lo / scale - y_tol <= value <= y_hi / scale + y_tol:
                        fail(f"{metric} {split}: {value} outside the axis {y_lo}..{y_hi}")
                    drawn.setdefault(nearest, []).append(value)
                if set(drawn) != set(expected):
                    fail(f"{metric} {split} of {name!r}: epochs drawn {sorted(drawn)}, "
                         f"finite in the metrics {sorted(expected)}")
                for epoch, values in drawn.items():
                    for value in values:
                        if abs(value - expected[epoch]) > y_tol:
                            fail(f"{metric} {split} of {name!r} epoch {epoch}: drawn {value}, "
                                 f"metrics {expected[epoch]} (tolerance {y_tol})")
                checked += len(drawn)
    print(f"plot_check: {svg_path}: {checked} points of {len(names)} run(s) match")


def check_bars(svg_path, profile_json):
    root = load_svg(svg_path)
    profile = json.load(open(profile_json))
    expected = {f"{op['op']} ({op['kernel']})": op["total_ms"] / profile["steps"]
                for op in profile["ops"]}
    group = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "bars")
    x0, _, width, _ = area_of(group)
    x_lo, x_hi = float(group.get("data-x-lo")), float(group.get("data-x-hi"))
    tol = COORD_ROUNDING / width * (x_hi - x_lo) + 0.00005 / profile["steps"] * 2
    drawn = []
    for bar in group.iter(f"{SVG}g"):
        if bar.get("class") != "bar":
            continue
        rect = bar.find(f"{SVG}rect")
        if abs(float(rect.get("x")) - x0) > COORD_ROUNDING:
            fail(f"bar {bar.get('data-label')} does not start at the axis")
        drawn.append((bar.get("data-label"),
                      x_lo + float(rect.get("width")) / width * (x_hi - x_lo)))
    if sorted(label for label, _ in drawn) != sorted(expected):
        fail(f"bars {sorted(l for l, _ in drawn)}, ops {sorted(expected)}")
    for label, value in drawn:
        if abs(value - expected[label]) > tol:
            fail(f"bar {label}: drawn {value} ms, profile {expected[label]} ms")
    values = [value for _, value in drawn]
    if values != sorted(values, reverse=True):
        fail(f"bars not longest first: {values}")
    print(f"plot_check: {svg_path}: {len(drawn)} bars match")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "curves":
        check_curves(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] == "bars":
        check_bars(sys.argv[2], sys.argv[3])
    else:
        fail("usage: plot_check.py curves SVG RUN_DIR... | bars SVG PROFILE_JSON")
