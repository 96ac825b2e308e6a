"""Environment steps per second with learning on CartPole-v1: rlgraph's agents against a single-file PPO.

Each measurement is a fixed-length run in a fresh process (so that one backend's thread pools and memory do
not weigh on the next run): ``rlgraph.engines.runner.train(config, backend=B, seconds=S, ...)`` on
``configs/<agent>_cartpole.json`` with evaluations, the target stop and periodic checkpoints off, reading
``env_steps_per_second`` from the returned summary (env steps over the training loop's wall time: acting,
environment steps and learning; graph build and the final checkpoint excluded), with
``OMP_NUM_THREADS=1`` unless set (as ``rlgraph train`` runs). The single-file PyTorch PPO
(``benchmarks/ppo_single_file.py``: 256 native vector envs x 16 steps, 4 epochs x 4 minibatches) runs for
as long, interleaved with rlgraph's runs (before each backend's runs and at the end); ratios are against
the mean of its runs in this invocation. It gets as many torch threads as rlgraph's runs (``--ppo-threads``
to change): on an idle 2-core machine 1 and 2 threads give it the same rate, but with another process on a
core, 2 spinning OpenMP threads collapse (measured from 44k down to 0.7k env steps/s), which would flatter
rlgraph. Prints a markdown table with the issue's aims (APPO >= 100k,
IMPALA >= 150k, DQN and Ape-X >= 20k env steps/s on both backends).

Run: .venv/bin/python benchmarks/throughput.py [--agents appo impala dqn apex] [--backends pytorch tf]
[--seconds 20] [--ppo-threads N] [--compare DIR] [--learner-thread] (DIR: another checkout, e.g. the last
commit, whose runs interleave with this one's; ``--learner-thread``: each agent also with
``execution_spec.learner_thread`` toggled from their configs' setting)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
AGENTS = ("appo", "impala", "dqn", "apex")
#: The issue's aims in env steps/s with learning (issue 13).
AIM = {"appo": 100_000, "impala": 150_000, "dqn": 20_000, "apex": 20_000}


def measure_rlgraph(agent, backend, seconds, seed=0, root=ROOT, learner_thread=None):
    """Runs in this process: one fixed-length local training run of the rlgraph in checkout ``root``; returns
    its summary's figures. ``learner_thread``: True/False overrides the config's ``execution_spec``."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, root)
    from rlgraph.engines.runner import load_config, train
    config, _ = load_config(os.path.join(root, "configs", f"{agent}_cartpole.json"))
    config["train_spec"] = dict(config.get("train_spec", {}), stop_at_target=False, eval_every_steps=None,
                                eval_episodes=0, checkpoint_every_seconds=1e9)
    if learner_thread is not None:
        config["execution_spec"] = dict(config.get("execution_spec", {}), learner_thread=learner_thread)
    with tempfile.TemporaryDirectory(prefix=f"throughput-{agent}-{backend}-") as logdir:
        summary = train(config, backend=backend, seconds=seconds, logdir=logdir, seed=seed, progress=False)
    return dict(env_steps=summary["env_steps"], wall_seconds=summary["wall_seconds"],
                env_steps_per_second=summary["env_steps_per_second"], updates=summary["updates"])


def measure_ppo(seconds, threads, seed=0):
    """Runs in this process: the single-file PPO for ``seconds`` (no evaluations)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import ppo_single_file
    out = ppo_single_file.run(seconds=seconds, target=None, seed=seed, threads=threads)
    return dict(env_steps=out["env_steps"], wall_seconds=out["wall_seconds"],
                env_steps_per_second=out["env_steps_per_second"], updates=out["updates"])


def in_subprocess(*args, root=ROOT):
    """Runs one measurement (``--one ...``) in a fresh process; returns its dict (or one with "error")."""
    cmd = [sys.executable, os.path.abspath(__file__), "--root", root, "--one", *map(str, args)]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = proc.stderr.strip().splitlines()
        return dict(error=err[-1] if err else f"exit {proc.returncode}")
    return json.loads(lines[-1])


def _fmt(rate):
    return f"{rate / 1000:.1f}k"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=AGENTS)
    parser.add_argument("--backends", nargs="+", default=["pytorch", "tf"], choices=["pytorch", "tf", "jax"],
                        help="backends to measure (jax: issue 34, not in the default set yet)")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each run")
    parser.add_argument("--ppo-threads", type=int, default=None,
                        help="torch threads of the single-file PPO (default: rlgraph's, OMP_NUM_THREADS or 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare", metavar="DIR", default=None,
                        help="another checkout of rlgraph (e.g. `git archive HEAD` unpacked), each of its runs right "
                             "after this checkout's")
    parser.add_argument("--learner-thread", action="store_true",
                        help="also run each agent with the learner thread toggled from its config's setting "
                             "(execution_spec.learner_thread)")
    parser.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--root", default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.one:  # A child process: one measurement, printed as JSON.
        if args.one[0] == "ppo":
            out = measure_ppo(float(args.one[1]), int(args.one[2]), int(args.one[3]))
        else:
            thread = None if args.one[4] == "config" else args.one[4] == "on"
            out = measure_rlgraph(args.one[0], args.one[1], float(args.one[2]), int(args.one[3]), args.root, thread)
        print(json.dumps(out))
        return

    if args.ppo_threads is None:
        args.ppo_threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    roots = [("", ROOT)] + ([("compared", os.path.abspath(args.compare))] if args.compare else [])
    ppo_runs, rows = [], []

    def run_ppo():
        out = in_subprocess("ppo", args.seconds, args.ppo_threads, args.seed)
        if "error" in out:
            print(f"single-file PPO failed: {out['error']}", file=sys.stderr)
        else:
            ppo_runs.append(out["env_steps_per_second"])

    for backend in args.backends:
        run_ppo()
        for agent in args.agents:
            threads = ["config"]
            if args.learner_thread:
                with open(os.path.join(ROOT, "configs", f"{agent}_cartpole.json")) as f:
                    on = json.load(f).get("execution_spec", {}).get("learner_thread", False)
                threads.append("off" if on else "on")
            for thread in threads:
                for name, root in roots:
                    out = in_subprocess(agent, backend, args.seconds, args.seed, thread, root=root)
                    label = ", ".join(x for x in (name, "" if thread == "config" else f"learner thread {thread}")
                                      if x)
                    label = f"{agent} ({label})" if label else agent
                    rows.append((label, agent, backend, out))
                print(f"{label} {backend}: " + (out["error"] if "error" in out else
                                                 f"{out['env_steps_per_second']:,.0f} env steps/s"), file=sys.stderr)
    run_ppo()

    ppo = statistics.mean(ppo_runs) if ppo_runs else None
    print(f"\nEnv steps/s with learning on CartPole-v1, {args.seconds:g} s runs, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', '1')}; single-file PyTorch PPO ({args.ppo_threads} threads): "
          + (", ".join(_fmt(r) for r in ppo_runs) + f" (mean {_fmt(ppo)})" if ppo else "failed") + "\n")
    print("| agent | backend | env steps/s | updates | / single-file PPO | aim | |")
    print("|---|---|---|---|---|---|---|")
    for label, agent, backend, out in rows:
        if "error" in out:
            print(f"| {label} | {backend} | error: {out['error']} | | | | |")
            continue
        rate = out["env_steps_per_second"]
        ratio = f"{rate / ppo:.2f}x" if ppo else "-"
        mark = "ok" if rate >= AIM[agent] else "below"
        print(f"| {label} | {backend} | {_fmt(rate)} | {out['updates']} | {ratio} | >= {_fmt(AIM[agent])} | {mark} |")
    if ppo:
        print(f"| single-file PPO | pytorch | {_fmt(ppo)} | | 1.00x | | |")


if __name__ == "__main__":
    main()
