"""``rlgraph plot RUN [RUN ...]``: learning curves read back from what runs recorded, overlaid in one PNG."""
import json
import os
import time

import numpy as np
import pytest

from rlgraph.cli import main as cli_main
from rlgraph.training.run_records import run_curve
from small_configs import small_dqn_config


def _write_events(logdir, points, suffix):
    """A session's TensorBoard events as the trainer writes them: ``points`` are ``(step, {tag: value})``."""
    from rlgraph.training.trainer import _ScalarWriter, _summary_writer_class
    writer = _ScalarWriter(_summary_writer_class()(str(logdir), filename_suffix=suffix))
    for step, scalars in points:
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, step)
        writer.flush()
        time.sleep(0.01)
    writer.close()


def test_a_curve_is_read_from_each_session_and_a_run_started_over_keeps_only_its_own(tmp_path):
    # Sessions of one run (--resume) continue its curve; the seconds leave out the time between sessions.
    _write_events(tmp_path / "a", [(100, {"episode/mean_return_100": 10.0}), (200, {"episode/mean_return_100": 20.0,
                                                                                   "evaluation/mean_return": 30.0})],
                  ".1")
    time.sleep(0.3)
    _write_events(tmp_path / "a", [(300, {"episode/mean_return_100": 25.0})], ".2")
    curve = run_curve(str(tmp_path / "a"))
    assert curve["name"] == "a" and curve["summary"] == {}  # A run without summary.json (e.g. still running).
    np.testing.assert_array_equal(curve["steps"], [100, 200, 300])
    np.testing.assert_array_equal(curve["returns"], [10, 20, 25])
    np.testing.assert_array_equal(curve["eval_steps"], [200])
    np.testing.assert_array_equal(curve["eval_returns"], [30])
    assert np.all(np.diff(curve["seconds"]) >= 0) and curve["seconds"][-1] < 0.25  # Not the 0.3 s gap.
    # --overwrite: a session whose steps start below the previous one's begins a new curve.
    _write_events(tmp_path / "a", [(50, {"episode/return": 4.0}), (80, {"episode/return": 8.0})], ".3")
    curve = run_curve(str(tmp_path / "a"))
    np.testing.assert_array_equal(curve["steps"], [50, 80])
    np.testing.assert_array_equal(curve["returns"], [4.0, 6.0])  # Without the mean tag: the running mean.
    assert len(curve["eval_steps"]) == 0


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "is not a directory"),
    (lambda p: (p / "file.txt").write_text("x") and p / "file.txt", "is not a directory"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "is not an rlgraph run: it holds no TensorBoard events"),
])
def test_a_directory_that_is_not_a_run_is_one_line(tmp_path, capsys, make, message):
    path = make(tmp_path)
    assert cli_main(["plot", str(path), "--output", str(tmp_path / "out.png")]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out.png").exists()


def test_a_run_without_episodes_and_a_bad_output_are_one_line(tmp_path, capsys):
    _write_events(tmp_path / "young", [(100, {"update/loss": 1.0})], ".1")
    assert cli_main(["plot", str(tmp_path / "young"), "--output", str(tmp_path / "o.png")]) == 2
    assert "recorded no finished episode yet" in capsys.readouterr().err
    _write_events(tmp_path / "ok", [(100, {"episode/return": 1.0})], ".1")
    assert cli_main(["plot", str(tmp_path / "ok"), "--output", str(tmp_path / "no" / "o.png")]) == 2
    err = capsys.readouterr().err
    assert "cannot be written" in err and len(err.strip().splitlines()) == 1


def test_plot_overlays_real_runs_over_steps_and_seconds(tmp_path, capsys):
    from matplotlib.image import imread
    cfg = small_dqn_config(tmp_path, train_spec={"eval_episodes": 1, "chunk_steps": 200, "eval_every_steps": 400})
    runs = [tmp_path / "lr-1e-3", tmp_path / "lr-3e-4"]
    for run, lr in zip(runs, ("1e-3", "3e-4")):
        assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "800", "--logdir", str(run),
                         "--set", f"optimizer_spec.learning_rate={lr}"]) == 0
    # A resumed run's curve goes on in its second session.
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "1200", "--logdir", str(runs[1]), "--resume",
                     "--set", "optimizer_spec.learning_rate=3e-4"]) == 0
    capsys.readouterr()
    curves = [run_curve(str(r)) for r in runs]
    for curve, steps in zip(curves, (800, 1200)):
        summary = json.loads((tmp_path / curve["name"] / "summary.json").read_text())
        assert curve["steps"][-1] <= steps and np.all(np.diff(curve["steps"]) > 0)
        assert np.all(np.diff(curve["seconds"]) >= 0) and 0 < curve["seconds"][-1] <= summary["wall_seconds"] + 0.5
        assert curve["returns"][-1] == pytest.approx(summary["final_mean_return"], abs=1e-3)
        assert list(curve["eval_steps"]) == [e for e in (400, 800, 1200) if e <= steps]
    assert len(os.listdir(runs[1])) and len([n for n in os.listdir(runs[1]) if n.startswith("events.")]) == 2
    for x in ("steps", "seconds"):
        out = tmp_path / f"cmp-{x}.png"
        assert cli_main(["plot"] + [str(r) for r in runs] + ["--x", x, "--output", str(out)]) == 0
        printed = capsys.readouterr().out
        assert f"Learning curves of 2 runs written to {out}" in printed and str(runs[0]) in printed
        image = imread(str(out))
        assert image.shape[:2] == (500, 900) and image[..., :3].std() > 0.05
    # The default output is runs_comparison.png in the working directory.
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert cli_main(["plot", str(runs[0])]) == 0
    finally:
        os.chdir(cwd)
    assert (tmp_path / "runs_comparison.png").is_file()


def _seed_run(path, seed, points, config_hash="abc123", evals=()):
    """A synthetic run: TensorBoard events of ``(step, mean_return)`` points and a summary.json."""
    scalars = [(step, {"episode/mean_return_100": value}) for step, value in points]
    scalars += [(step, {"evaluation/mean_return": value}) for step, value in evals]
    _write_events(path, sorted(scalars, key=lambda p: p[0]), ".1")
    (path / "summary.json").write_text(json.dumps(dict(agent="DQNAgent", env="CartPole-v1", backend="pytorch",
                                                       executor="local", config_hash=config_hash, seed=seed,
                                                       target_return=None)))
    return str(path)


def _recorded_figure(monkeypatch):
    from matplotlib.figure import Figure
    figures = []
    save = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: figures.append(fig) or save(fig, *a, **k))
    return figures


def test_seeds_of_one_config_are_a_mean_with_a_band(tmp_path, monkeypatch, capsys):
    figures = _recorded_figure(monkeypatch)
    seeds = [_seed_run(tmp_path / f"dqn-seed{s}", s, points, evals=[(200, 50.0)]) for s, points in enumerate([
        [(100, 10.0), (200, 20.0), (300, 30.0), (400, 40.0)],
        [(100, 20.0), (250, 50.0), (400, 60.0)],
        [(50, 0.0), (150, 10.0), (350, 30.0), (450, 45.0)]])]
    other = _seed_run(tmp_path / "other", 0, [(100, 5.0), (400, 8.0)], config_hash="def456")
    same_seed = _seed_run(tmp_path / "again", 0, [(100, 1.0), (400, 2.0)], config_hash="def456")
    out = tmp_path / "bands.png"
    assert cli_main(["plot"] + seeds + [other, same_seed, "--output", str(out)]) == 0
    assert out.is_file() and "[in band dqn (seeds 0, 1, 2: mean, min-max)]" in capsys.readouterr().out
    ax = figures[-1].axes[0]
    means = [line for line in ax.get_lines() if line.get_gid() == "seed-mean"]
    assert len(means) == 1 and means[0].get_label() == "dqn (seeds 0, 1, 2: mean, min-max)"
    xs, ys = means[0].get_xdata(), means[0].get_ydata()
    assert xs[0] == 100 and xs[-1] == 400 and len(xs) == 200  # The range all seeds cover.
    at_250 = np.mean([np.interp(250, [100, 200, 300, 400], [10, 20, 30, 40]), 50.0,
                      np.interp(250, [50, 150, 350, 450], [0, 10, 30, 45])])
    assert np.interp(250, xs, ys) == pytest.approx(at_250, rel=1e-2)
    bands = [c for c in ax.collections if c.get_gid() == "seed-band"]
    assert len(bands) == 1
    band = bands[0].get_paths()[0].vertices  # Lowest: seed 2 at x=100 (5.0), highest: seed 1 at 400.
    assert band[:, 1].min() == pytest.approx(5.0) and band[:, 1].max() == pytest.approx(60.0)
    # The other config, and a second run of its seed, stay lines of their own.
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert "other" in labels and "again" in labels
    # --no-bands: one line per run.
    assert cli_main(["plot"] + seeds + ["--no-bands", "--output", str(tmp_path / "lines.png")]) == 0
    ax = figures[-1].axes[0]
    assert not [c for c in ax.collections if c.get_gid() == "seed-band"]
    assert {"dqn-seed0", "dqn-seed1", "dqn-seed2"} <= {line.get_label() for line in ax.get_lines()}


def test_sessions_started_within_one_second_keep_their_own_event_files(tmp_path, monkeypatch):
    """tensorboardX names an event file after the second it was opened and truncates a file of that name; a run
    resumed within the same second must not erase its first session's events."""
    from rlgraph.training.loggers.tensorboard_logger import TensorBoardLogger
    monkeypatch.setattr(time, "time", lambda: 1795931690.5)  # Both sessions open their files in this second.
    for session, step in enumerate((100, 200)):
        logger = TensorBoardLogger(str(tmp_path))
        logger.add_scalar("episode/return", float(session), step)
        logger.close()
    assert len([n for n in os.listdir(tmp_path) if n.startswith("events.out.tfevents.1795931690.")]) == 2
    curve = run_curve(str(tmp_path))
    assert list(curve["steps"]) == [100, 200] and list(curve["returns"]) == [0.0, 0.5]
