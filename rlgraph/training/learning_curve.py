"""Learning-curve plot of a training run."""
import numpy as np


def plot_learning_curve(path, env_steps, returns, target_return=None, title="", window=100, evaluations=None):
    """Writes a PNG of episode returns over environment steps, with their running mean and the run's greedy
    evaluations.

    Args:
        path: Output PNG path.
        env_steps: Environment step at which each episode ended.
        returns: Return of each episode.
        target_return: Drawn as a dashed line if given.
        title: Plot title.
        window: Episodes in the running mean.
        evaluations: The greedy evaluations, each ``(env_steps, ...)`` ending with its mean return (the trainer's
            ``(env_steps, seconds, mean_return)``), drawn as markers joined by a thin line.

    Returns:
        The PNG's path.
    """
    # The figure API with the Agg canvas: no pyplot (its import and global figure state), any thread.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    steps, rets = np.asarray(env_steps, dtype=np.float64), np.asarray(returns, dtype=np.float64)
    if len(rets):
        ax.plot(steps, rets, ".", alpha=0.25, markersize=3, label="episode return")
        mean = np.convolve(rets, np.ones(min(window, len(rets))) / min(window, len(rets)), mode="valid")
        ax.plot(steps[len(steps) - len(mean):], mean, linewidth=2, label=f"mean of last {min(window, len(rets))}")
    evaluations = [e for e in (evaluations or []) if e is not None]
    if evaluations:
        eval_steps = np.asarray([e[0] for e in evaluations], dtype=np.float64)
        eval_returns = np.asarray([e[-1] for e in evaluations], dtype=np.float64)
        ax.plot(eval_steps, eval_returns, "D-", color="tab:red", linewidth=0.8, markersize=5,
                label="greedy evaluation", gid="evaluations")
    if target_return is not None:
        ax.axhline(target_return, linestyle="--", color="gray", label=f"target {target_return:g}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path)
    return path
