"""Learning curves of several runs in one picture (``rlgraph plot RUN [RUN ...]``)."""
import logging
import os
import re

import numpy as np

from rlgraph.utils.errors import RLGraphError

logger = logging.getLogger(__name__)

#: What ``x`` may be: the axis's label for each.
X_AXES = dict(steps="environment steps", seconds="wall seconds (training)")

#: Points of the common x grid that the curves of a config's seeds are interpolated onto.
BAND_POINTS = 200

#: The ``summary.json`` keys that runs of one config with several seeds share.
SEED_GROUP_KEYS = ("config_hash", "agent", "env", "backend", "executor")


def plot_runs(logdirs, output="runs_comparison.png", x="steps", title=None, bands=True):
    """Writes a PNG overlaying the learning curves of runs: one line per run (the mean return of its last 100
    training episodes), its greedy evaluations as markers of the same colour. Runs of one config with several
    seeds (the same ``SEED_GROUP_KEYS`` in their ``summary.json``, different seeds) are one line: the mean of their
    curves interpolated onto a common x grid (where all of them have points), with a min-max band.

    Args:
        logdirs: The runs' logdirs.
        output: The PNG's path.
        x: "steps" (environment steps) or "seconds" (the run's training seconds).
        title: The plot's title (default: the runs' agents and environments).
        bands: Draw a config's seeds as a mean with a band (else one line per run).

    Returns:
        The curves drawn (``run_records.run_curve`` of each run), in order; a run drawn in a band has ``band``, the
        band's label.

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
    for members in (seed_groups(curves) if bands else [[i] for i in range(len(curves))]):
        group = [curves[i] for i in members]
        grid = _band(group, x) if len(members) > 1 else None
        if grid is None:
            for i in members:
                line, = ax.plot(curves[i][x], curves[i]["returns"], linewidth=1.8, label=labels[i])
                _draw_evaluations(ax, [curves[i]], x, line.get_color())
            continue
        xs, ys = grid
        label = _band_label([labels[i] for i in members], group)
        line, = ax.plot(xs, ys.mean(axis=0), linewidth=1.8, label=label, gid="seed-mean")
        ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=line.get_color(), alpha=0.2, linewidth=0,
                        gid="seed-band")
        _draw_evaluations(ax, group, x, line.get_color())
        for c in group:
            c["band"] = label
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


def seed_groups(curves):
    """Indices of the curves grouped by config: runs whose summaries share ``SEED_GROUP_KEYS`` (with a
    ``config_hash``) and differ in their seeds are one group; every other run is a group of its own.

    Args:
        curves: ``run_records.run_curve`` dicts.

    Returns:
        Lists of indices into ``curves``, in the order of each group's first run.
    """
    groups, where = [], {}
    for i, c in enumerate(curves):
        s = c["summary"]
        key = tuple(s.get(k) for k in SEED_GROUP_KEYS) if s.get("config_hash") and "seed" in s else None
        if key is not None and key in where and all(curves[j]["summary"]["seed"] != s["seed"]
                                                    for j in groups[where[key]]):
            groups[where[key]].append(i)
            continue
        if key is not None and key not in where:
            where[key] = len(groups)
        groups.append([i])
    return groups


def _band(group, x):
    """The curves of a group on a common grid over the x range all of them cover: ``(xs, ys)`` with one row of
    ``ys`` per run; None where they share no range."""
    lo = max(float(c[x][0]) for c in group)
    hi = min(float(c[x][-1]) for c in group)
    if hi < lo:
        logger.warning("The seeds of %s cover no common range of %s: drawn one line each.",
                       group[0]["logdir"], X_AXES[x])
        return None
    xs = np.linspace(lo, hi, BAND_POINTS) if hi > lo else np.array([lo])
    return xs, np.stack([np.interp(xs, np.asarray(c[x], dtype=np.float64), np.asarray(c["returns"], np.float64))
                         for c in group])


def _band_label(labels, group):
    """A band's label: what its runs' labels share (else the first one's), and the seeds."""
    shared = re.sub(r"[-_=. /]*(seed)?[-_=. /]*$", "", os.path.commonprefix(labels)) or labels[0]
    seeds = ", ".join(str(c["summary"]["seed"]) for c in group)
    return f"{shared} (seeds {seeds}: mean, min-max)"


def _draw_evaluations(ax, group, x, color):
    for c in group:
        if len(c["eval_returns"]):
            ax.plot(c[f"eval_{x}"], c["eval_returns"], "o", color=color, markersize=4)


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
