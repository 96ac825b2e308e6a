"""Learning benchmark: configs (and the single-file PPO) trained one after another, their curves in one picture.

Each config runs as ``rlgraph train CONFIG --seconds M*60 --seed S --logdir OUTDIR/NAME`` in a process of its
own, one at a time (so that no run takes cores from another); with ``--ppo`` the single-file PPO
(``benchmarks/ppo_atari.py``) runs too, on the same game. ``--runs DIR ...`` adds runs made before (their
logdirs) without training again, ``--curves CSV ...`` the runs of an earlier ``curves.csv`` (as
``docs/figures/pong_appo_seeds_42.csv`` keeps its figure's data, so that a figure can be redrawn with a new run
beside them after the runs' logdirs are gone). Written to OUTDIR: ``curves.csv`` (run, env_steps, seconds,
mean_return_100), ``curves.json`` (the same per run, with each run's summary) and ``learning.png`` (the mean
return of the last 100 training episodes against env steps and against wall seconds).

    .venv/bin/python benchmarks/atari_learning.py configs/appo_pong.json configs/impala_pong.json --ppo \\
        --minutes 60 --outdir runs/pong_learning
"""
import argparse
import csv
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from rlgraph.training.run_records import run_curve  # noqa: E402


def train_config(config, minutes, seed, backend, logdir):
    """Runs ``rlgraph train`` on ``config`` for ``minutes``; returns its curve (``run_records.run_curve``)."""
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", config, "--seconds", str(minutes * 60), "--seed", str(seed),
           "--logdir", logdir, "--overwrite"] + (["--backend", backend] if backend else [])
    subprocess.run(cmd, check=True)
    return run_curve(logdir)


def train_ppo(game, minutes, seed, steps, path):
    """Runs the single-file PPO for ``minutes``; returns its curve from the CSV it writes."""
    cmd = [sys.executable, os.path.join(HERE, "ppo_atari.py"), "--game", game, "--seconds", str(minutes * 60),
           "--seed", str(seed), "--steps", str(steps), "--out", path]
    subprocess.run(cmd, check=True)
    return ppo_curve(path)


def ppo_curve(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    column = lambda key: np.array([float(r[key]) for r in rows])  # noqa: E731
    return dict(name="ppo_single_file", logdir=os.path.dirname(path), steps=column("env_steps"),
                seconds=column("seconds"), returns=column("mean_return_100"), summary={})


def stored_curves(path):
    """The runs of a ``curves.csv`` that ``write_outputs`` wrote, in their order there."""
    runs = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            runs.setdefault(row["run"], []).append((float(row["env_steps"]), float(row["seconds"]),
                                                     float(row["mean_return_100"])))
    return [dict(name=name, logdir=path, steps=np.array([r[0] for r in rows]), seconds=np.array([r[1] for r in rows]),
                 returns=np.array([r[2] for r in rows]), summary={}) for name, rows in runs.items()]


def write_outputs(curves, outdir, title):
    """``curves.csv``, ``curves.json`` and ``learning.png`` in ``outdir``."""
    with open(os.path.join(outdir, "curves.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(("run", "env_steps", "seconds", "mean_return_100"))
        for c in curves:
            writer.writerows((c["name"], int(s), round(float(t), 2), round(float(r), 3))
                             for s, t, r in zip(c["steps"], c["seconds"], c["returns"]))
    with open(os.path.join(outdir, "curves.json"), "w") as f:
        json.dump([dict(name=c["name"], steps=c["steps"].tolist(), seconds=c["seconds"].tolist(),
                        mean_return_100=c["returns"].tolist(), summary=c.get("summary", {})) for c in curves], f)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(12, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    by_steps, by_seconds = fig.subplots(1, 2, sharey=True)
    for c in curves:
        line, = by_steps.plot(c["steps"], c["returns"], linewidth=1.8, label=c["name"])
        by_seconds.plot(np.asarray(c["seconds"]) / 60.0, c["returns"], linewidth=1.8, color=line.get_color())
    by_steps.set_xlabel("agent steps (4 frames each on Atari)")
    by_seconds.set_xlabel("wall minutes")
    by_steps.set_ylabel("mean return of the last 100 training episodes")
    for ax in (by_steps, by_seconds):
        ax.grid(alpha=0.3)
    by_steps.legend(loc="best", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "learning.png"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", help="training configs to run, one after another")
    parser.add_argument("--runs", nargs="*", default=[], help="logdirs of earlier runs to include as they are")
    parser.add_argument("--curves", nargs="*", default=[], help="curves.csv files of earlier benchmark runs to include")
    parser.add_argument("--ppo", action="store_true", help="also run the single-file PPO (benchmarks/ppo_atari.py)")
    parser.add_argument("--ppo-csv", default=None, help="include an earlier single-file PPO run (its --out CSV)")
    parser.add_argument("--game", default="pong", help="the single-file PPO's game")
    parser.add_argument("--minutes", type=float, default=60.0, help="wall minutes per run")
    parser.add_argument("--ppo-steps", type=int, default=10_000_000, help="the PPO's learning-rate annealing horizon")
    parser.add_argument("--backend", default=None, help="the configs' backend (default: rlgraph's default)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--outdir", default="runs/atari_learning")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    curves = [c for path in args.curves for c in stored_curves(path)] + [run_curve(d) for d in args.runs]
    if args.ppo_csv:
        curves.append(ppo_curve(args.ppo_csv))
    for config in args.configs:
        name = os.path.splitext(os.path.basename(config))[0]
        curves.append(train_config(config, args.minutes, args.seed, args.backend, os.path.join(args.outdir, name)))
    if args.ppo:
        curves.append(train_ppo(args.game, args.minutes, args.seed, args.ppo_steps,
                                os.path.join(args.outdir, "ppo_single_file.csv")))
    if not curves:
        parser.error("nothing to draw: give configs, --runs, --curves, --ppo or --ppo-csv.")
    write_outputs(curves, args.outdir, args.title or f"{args.game}: seed {args.seed}, {args.minutes:g} min per run")
    for c in curves:
        print(f"{c['name']}: {int(c['steps'][-1])} env steps in {c['seconds'][-1] / 60:.1f} min, "
              f"mean return (last 100) {c['returns'][-1]:.2f}, best {np.max(c['returns']):.2f}")
    print(f"curves.csv, curves.json and learning.png in {args.outdir}")


if __name__ == "__main__":
    main()
