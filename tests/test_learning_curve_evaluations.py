"""A run's own ``learning_curve.png`` shows its greedy evaluations."""
import numpy as np
from matplotlib.figure import Figure

import rlgraph.training.trainer as trainer_module
from rlgraph.training.learning_curve import plot_learning_curve
from rlgraph.training.trainer import Trainer


def _figures(monkeypatch):
    """Records each figure written by ``plot_learning_curve`` (and still writes it)."""
    figures = []
    save = Figure.savefig

    def savefig(fig, *args, **kwargs):
        figures.append(fig)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figures


def _evaluation_line(fig):
    lines = [line for line in fig.axes[0].get_lines() if line.get_gid() == "evaluations"]
    return lines[0] if lines else None


def test_the_plot_draws_evaluations_as_markers(tmp_path, monkeypatch):
    from matplotlib.image import imread
    figures = _figures(monkeypatch)
    path = tmp_path / "curve.png"
    steps = np.arange(1, 301) * 10
    assert plot_learning_curve(str(path), steps, np.linspace(10, 200, 300), target_return=450,
                               evaluations=[(1000, 3.2, 150.0), (2000, 6.1, 492.0)]) == str(path)
    line = _evaluation_line(figures[-1])
    np.testing.assert_array_equal(line.get_xdata(), [1000, 2000])
    np.testing.assert_array_equal(line.get_ydata(), [150.0, 492.0])
    assert line.get_marker() == "D" and "greedy evaluation" in figures[-1].axes[0].get_legend_handles_labels()[1]
    assert imread(str(path)).shape[:2] == (450, 800)
    # Without evaluations (and without episodes) as before.
    plot_learning_curve(str(tmp_path / "none.png"), [], [])
    assert _evaluation_line(figures[-1]) is None and (tmp_path / "none.png").is_file()


class _FakeWorker:
    def run(self, num_env_steps):
        return dict(env_steps=num_env_steps, episodes=[(5.0, num_env_steps)], results=[])

    def store(self, path):
        pass

    def load(self, path):
        pass


def test_the_trainer_passes_its_evaluations(tmp_path, monkeypatch):
    calls = []
    original = trainer_module.plot_learning_curve
    monkeypatch.setattr(trainer_module, "plot_learning_curve",
                        lambda *args, **kwargs: calls.append(kwargs) or original(*args, **kwargs))
    returns = iter([[1.0], [2.0], [3.0]])
    Trainer(_FakeWorker(), str(tmp_path / "run"), max_steps=60, chunk_steps=10, progress=False,
            evaluator=lambda: next(returns), eval_every_steps=20).train()
    assert [(e[0], e[-1]) for e in calls[0]["evaluations"]] == [(20, 1.0), (40, 2.0), (60, 3.0)]
    assert (tmp_path / "run" / "learning_curve.png").is_file()
