"""Wall seconds (start-up included) and environment steps until each agent solves CartPole-v1.

For each agent config and backend, launches ``rlgraph train configs/<agent>_cartpole.json`` as a fresh
process (so interpreter start, imports and graph build count), and reads ``summary.json``: the target is a
mean return of 450 over 20 greedy evaluation episodes (``train_spec.eval_every_steps``). Prints a table
with seconds to 450 from process launch, env steps to 450, and env steps per second, next to the reference
figures measured on this kind of 2-core machine (RLlib 2.60, Sample Factory, a single-file PyTorch PPO),
as ratios. With several ``--seeds``, one row per seed and then, per agent and backend, how many runs reached
450 within the aim, the median and the worst time (runs of one seed differ too: TF's inter-op threads order
float sums differently from run to run).

``--jobs N`` runs N seeds at once: the runs then share the cores, so their seconds are not the aim's figure
and the summary gives env steps to 450 instead (the median and the worst), which the machine's speed does not
change: a check of a config's sample efficiency on a slow or busy machine.

Run: .venv/bin/python benchmarks/time_to_solve.py [--agents dqn apex impala appo r2d2] [--backends tf pytorch]
     [--seeds 0 1 2 3 4] [--jobs 2]
"""
import argparse
import concurrent.futures
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
#: Seconds to a mean return of 450 on CartPole-v1, measured on a 2-core machine (docs/benchmarks.md).
REFERENCE = {"appo": ("Sample Factory APPO", 62.0), "impala": ("RLlib IMPALA (after start-up)", 118.0),
             "dqn": ("RLlib DQN", 284.0), "apex": ("RLlib DQN", 284.0), "r2d2": ("RLlib DQN", 284.0)}
#: The aims in seconds from launch, per backend.
AIM = {"appo": {"pytorch": 6, "tf": 10}, "impala": {"pytorch": 6, "tf": 10}, "dqn": {"pytorch": 15, "tf": 20},
       "apex": {"pytorch": 15, "tf": 20}, "r2d2": {"pytorch": 40, "tf": 40}}


def run(agent, backend, max_seconds, seed):
    config = os.path.join(ROOT, "configs", f"{agent}_cartpole.json")
    logdir = tempfile.mkdtemp(prefix=f"tts-{agent}-{backend}-")
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", config, "--backend", backend, "--seconds",
           str(max_seconds), "--logdir", logdir, "--seed", str(seed)]
    launched = time.time()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            return dict(error=proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else
                        f"exit {proc.returncode}")
        with open(os.path.join(logdir, "summary.json")) as f:
            summary = json.load(f)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    reached = summary.get("target_reached_unix")
    return dict(seconds=None if reached is None else reached - launched, steps=summary.get("steps_to_target"),
                rate=summary.get("env_steps_per_second"), final=summary.get("eval_mean_return"))


def summarize(values, aim=math.inf):
    """Runs that reached 450 within ``aim``, the median and the worst of ``values`` (seconds or env steps; None:
    never reached 450, counted as infinite)."""
    values = [math.inf if v is None else v for v in values]
    return dict(within=sum(v < math.inf and v <= aim for v in values), runs=len(values),
                median=statistics.median(values), worst=max(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["dqn", "apex", "impala", "appo", "r2d2"])
    parser.add_argument("--backends", nargs="+", default=["pytorch", "tf"])
    parser.add_argument("--max-seconds", type=float, default=300)
    parser.add_argument("--seeds", "--seed", nargs="+", type=int, default=[0])
    parser.add_argument("--jobs", type=int, default=1,
                        help="seeds run at once (>1: seconds not comparable; the summary counts env steps)")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    print(f"{'agent':8} {'backend':8} {'seed':>4} {'s to 450':>9} {'aim':>5} {'steps to 450':>13} {'steps/s':>9} "
          f"{'final eval':>10}  reference (s)      ref/ours")
    for agent in args.agents:
        if not os.path.isfile(os.path.join(ROOT, "configs", f"{agent}_cartpole.json")):
            print(f"{agent:8} (no config)")
            continue
        for backend in args.backends:
            aim, times, steps = AIM[agent].get(backend, math.inf), [], []
            runs = pool.map(lambda seed: run(agent, backend, args.max_seconds, seed), args.seeds)
            for seed, r in zip(args.seeds, runs):
                if "error" in r:
                    print(f"{agent:8} {backend:8} {seed:>4} error: {r['error']}")
                    continue
                times.append(r["seconds"])
                steps.append(r["steps"])
                ref_name, ref_s = REFERENCE[agent]
                secs = "-" if r["seconds"] is None else f"{r['seconds']:.1f}"
                ratio = "-" if r["seconds"] is None else f"{ref_s / r['seconds']:.1f}x"
                print(f"{agent:8} {backend:8} {seed:>4} {secs:>9} {aim:>5} {str(r['steps'] or '-'):>13} "
                      f"{r['rate'] or 0:>9,.0f} {r['final'] if r['final'] is not None else '-':>10}  "
                      f"{ref_name} {ref_s:.0f}  {ratio}", flush=True)
            if len(args.seeds) > 1 and times and args.jobs > 1:  # times and steps: one entry per finished run
                summary = summarize(steps)
                print(f"{agent:8} {backend:8} {summary['within']}/{summary['runs']} runs reached 450 within "
                      f"{args.max_seconds:.0f} s ({args.jobs} at once); env steps to 450: median "
                      f"{summary['median']:,.0f}, worst {summary['worst']:,.0f} (inf: not reached)", flush=True)
            elif len(args.seeds) > 1 and times:
                summary = summarize(times, aim)
                print(f"{agent:8} {backend:8} {summary['within']}/{summary['runs']} runs within {aim} s; "
                      f"median {summary['median']:.1f} s, worst {summary['worst']:.1f} s (inf: not within "
                      f"{args.max_seconds:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
