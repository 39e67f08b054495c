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
