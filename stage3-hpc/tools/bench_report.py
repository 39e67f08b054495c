"""What the stage-3 plot scripts share: reading the JSON kc-bench writes with --markdown, and
writing a figure headed by the run it shows (GPU, date, commit)."""
import json
import sys


def read_report(path, tool):
    """The parsed JSON of one kc-bench --markdown run; exits with a sentence if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as error:
        sys.exit(f"{tool}: cannot read {path}: {error.strerror}; run kc-bench with --markdown first")
    except json.JSONDecodeError as error:
        sys.exit(f"{tool}: {path} is not valid JSON ({error})")


def save_figure(figure, report, title, subtitle, output):
    """Heads the figure with `title`, the run's GPU, date and commit, and `subtitle`; writes it."""
    figure.suptitle(f"{title}, {report['gpu']}, {report['date']}, commit {report['commit']}\n{subtitle}",
                    fontsize=9)
    figure.tight_layout()
    figure.savefig(output, dpi=150)
    print(f"wrote {output}")


def timed_rows(report, ops, value):
    """The report's rows of the ops `ops` that kc-bench checked and timed ("status": "ok"), kc's own
    (no baseline or peer row), with a number in `value` ("pct_of_baseline", "pct_of_ceiling", ...)."""
    return [
        r
        for r in report["results"]
        if r.get("status") == "ok"
        and r.get("op") in ops
        and not r.get("is_baseline")
        and not r.get("is_peer")
        and r.get(value) is not None
    ]


def grouped_bars(axes, kernels, shapes, value, ymax, color_of):
    """One group of bars per kernel ((rung, id) pairs, in order), one bar per shape within it, each
    value[(id, shape)]; a kernel without a value at a shape leaves a gap there. Bars past `ymax` are
    cut at it and labelled with their value."""
    width = 0.8 / len(shapes)
    for i, shape in enumerate(shapes):
        xs, ys = [], []
        for k, (_, name) in enumerate(kernels):
            if (name, shape) in value:
                xs.append(k + (i - (len(shapes) - 1) / 2) * width)
                ys.append(value[(name, shape)])
        bars = axes.bar(xs, [min(y, ymax) for y in ys], width, label=shape, color=color_of[shape])
        for bar, y in zip(bars, ys):
            if y > ymax:
                axes.annotate(f"{y:.0f}", (bar.get_x() + bar.get_width() / 2, ymax), ha="center", va="bottom",
                              fontsize=7)
