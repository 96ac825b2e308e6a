"""Learning curves of several runs in one picture (``rlgraph plot RUN [RUN ...]``)."""
import logging
import os

from rlgraph.utils.errors import RLGraphError

logger = logging.getLogger(__name__)

#: What ``x`` may be: the axis's label for each.
X_AXES = dict(steps="environment steps", seconds="wall seconds (training)")


def plot_runs(logdirs, output="runs_comparison.png", x="steps", title=None):
    """Writes a PNG overlaying the learning curves of runs: one line per run (the mean return of its last 100
    training episodes), its greedy evaluations as markers of the same colour.

    Args:
        logdirs: The runs' logdirs.
        output: The PNG's path.
        x: "steps" (environment steps) or "seconds" (the run's training seconds).
        title: The plot's title (default: the runs' agents and environments).

    Returns:
        The curves drawn (``run_records.run_curve`` of each run), in order.

    Raises:
        RLGraphError: One line: no runs, an unknown ``x``, a directory that is not a run (``run_curve``), an
            output that cannot be written.
    """
    from rlgraph.training.run_records import run_curve
    if x not in X_AXES:
        raise RLGraphError(f"--x: expected one of {', '.join(X_AXES)}, got {x!r}.")
    if not logdirs:
        raise RLGraphError("no runs to plot: give one or more run logdirs.")
    curves = [run_curve(d) for d in logdirs]
    labels = _labels([c["logdir"] for c in curves])

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for curve, label in zip(curves, labels):
        line, = ax.plot(curve[x], curve["returns"], linewidth=1.8, label=label)
        if len(curve["eval_returns"]):
            ax.plot(curve[f"eval_{x}"], curve["eval_returns"], "o", color=line.get_color(), markersize=4)
    targets = {c["summary"].get("target_return") for c in curves}
    if len(targets) == 1 and None not in targets:
        target = targets.pop()
        ax.axhline(target, linestyle="--", color="gray", label=f"target {target:g}")
    if any(len(c["eval_returns"]) for c in curves):
        ax.plot([], [], "o", color="gray", markersize=4, label="greedy evaluation")
    ax.set_xlabel(X_AXES[x])
    ax.set_ylabel("mean return (last 100 episodes)")
    ax.set_title(title if title is not None else _title(curves))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(output)
    except OSError as e:
        raise RLGraphError(f"--output '{output}' cannot be written: {e.strerror or e}.") from None
    logger.info("Learning curves of %d runs written to %s.", len(curves), output)
    return curves


def _labels(logdirs):
    """Each run's directory name; where names repeat, the path below the runs' common parent."""
    names = [os.path.basename(os.path.normpath(d)) for d in logdirs]
    if len(set(names)) == len(names):
        return names
    paths = [os.path.abspath(d) for d in logdirs]
    common = os.path.commonpath(paths) if len(paths) > 1 else os.path.dirname(paths[0])
    return [os.path.relpath(p, common) if p != common else n for p, n in zip(paths, names)]


def _title(curves):
    parts = []
    for c in curves:
        s = c["summary"]
        part = " ".join(str(s[k]) for k in ("agent", "env") if s.get(k))
        if part and part not in parts:
            parts.append(part)
    return ", ".join(parts[:3]) + (", ..." if len(parts) > 3 else "")
