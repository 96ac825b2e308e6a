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
rlgraph. Prints a markdown table with the aims (APPO >= 100k,
IMPALA >= 150k, DQN and Ape-X >= 20k env steps/s on both backends).

JAX (``--backends jax``) compiles each API method on its first call, and the update of APPO and
IMPALA (a ``lax.scan`` over the epochs) takes seconds to compile: in a short ``train`` run the compile is most of
the wall time. ``--warmup-steps N`` measures every backend alike without its first calls: each run builds the
local engine (``make_engine``), runs N env steps (the first calls: TF's traces, JAX's compiles), then times
``engine.run`` chunks for ``--seconds`` (the table says which way it measured). ``--startup`` adds, per backend, a
fresh process's bare ``import <backend>`` against rlgraph's start-up: the backend's import, the engine's build,
the first batch (one update, learner thread off: acting and the update traced or compiled) and the same batch
again; their difference is the cost of the first calls.

Run: .venv/bin/python benchmarks/throughput.py [--agents appo impala dqn apex] [--backends pytorch tf jax]
[--seconds 20] [--warmup-steps N] [--startup] [--ppo-threads N] [--compare DIR] [--learner-thread] (DIR:
another checkout, e.g. the last commit, whose runs interleave with this one's; ``--learner-thread``: each agent
also with ``execution_spec.learner_thread`` toggled from their configs' setting)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
AGENTS = ("appo", "impala", "dqn", "apex")
#: The aims in env steps/s with learning.
AIM = {"appo": 100_000, "impala": 150_000, "dqn": 20_000, "apex": 20_000}
#: The bare import of each backend (``--startup``).
IMPORT = {"pytorch": "torch", "tf": "tensorflow", "jax": "jax"}


def _config(agent, root, learner_thread=None):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, root)
    load_config = _runner(root).load_config
    config, _ = load_config(os.path.join(root, "configs", f"{agent}_cartpole.json"))
    config["train_spec"] = dict(config.get("train_spec", {}), stop_at_target=False, eval_every_steps=None,
                                eval_episodes=0, checkpoint_every_seconds=1e9)
    if learner_thread is not None:
        config["execution_spec"] = dict(config.get("execution_spec", {}), learner_thread=learner_thread)
    return config


def _runner(root=ROOT):
    """The runner module of checkout ``root`` (on ``sys.path``; ``rlgraph.execution`` before the engines' rename).
    Decided by the checkout's files: an editable install of another checkout would still resolve the new name."""
    if os.path.isdir(os.path.join(root, "rlgraph", "engines")):
        from rlgraph.engines import runner
    else:
        from rlgraph.execution import runner
    return runner


def measure_rlgraph(agent, backend, seconds, seed=0, root=ROOT, learner_thread=None, warmup_steps=0):
    """Runs in this process: one fixed-length local training run of the rlgraph in checkout ``root``; returns
    its summary's figures. ``learner_thread``: True/False overrides the config's ``execution_spec``.
    ``warmup_steps`` > 0: the local engine runs that many env steps first (its first calls), then ``engine.run``
    is timed for ``seconds`` (in chunks of the config's ``chunk_steps``)."""
    config = _config(agent, root, learner_thread)
    if warmup_steps > 0:
        return _measure_warm(config, backend, seconds, seed, warmup_steps, root)
    train = _runner(root).train
    with tempfile.TemporaryDirectory(prefix=f"throughput-{agent}-{backend}-") as logdir:
        summary = train(config, backend=backend, seconds=seconds, logdir=logdir, seed=seed, progress=False)
    return dict(env_steps=summary["env_steps"], wall_seconds=summary["wall_seconds"],
                env_steps_per_second=summary["env_steps_per_second"], updates=summary["updates"])


def _measure_warm(config, backend, seconds, seed, warmup_steps, root=ROOT):
    make_engine = _runner(root).make_engine
    engine, agent, _ = make_engine(config, engine="local", backend=backend, seed=seed)
    try:
        engine.run(warmup_steps)
        while agent.updates == 0:  # (A learner thread may not have finished its first update yet.)
            engine.run(warmup_steps)
        chunk = int(config["train_spec"].get("chunk_steps") or 8192)
        updates, steps, start = agent.updates, 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += engine.run(chunk)["env_steps"]
        wall = time.perf_counter() - start
        return dict(env_steps=steps, wall_seconds=round(wall, 3), env_steps_per_second=round(steps / wall, 1),
                    updates=agent.updates - updates)
    finally:
        close = getattr(engine, "close", None)
        if close is not None:
            close()


def measure_startup(agent, backend, launched, seed=0, root=ROOT):
    """Runs in a fresh process launched at wall time ``launched``: seconds of the launch to here, the backend's
    import, the local engine's build (rlgraph's imports, environments, the agent), the first batch (one update's
    env steps with the learner thread off: the first calls of acting and the update) and the same batch again."""
    import importlib
    here = time.time() - launched
    start = time.perf_counter()
    importlib.import_module(IMPORT[backend])
    imported = time.perf_counter()
    config = _config(agent, root, learner_thread=False)
    from rlgraph.engines.runner import make_engine
    engine, learner, _ = make_engine(config, engine="local", backend=backend, seed=seed)
    built = time.perf_counter()
    batch = int(config["environment_spec"]["num_envs"]) * int(config.get("unroll_length", 1))
    updates = learner.updates
    while learner.updates == updates:  # (Replay agents: until their first update.)
        engine.run(batch)
    first = time.perf_counter()
    steps = learner.updates
    while learner.updates == steps:
        engine.run(batch)
    second = time.perf_counter()
    return dict(launch=round(here, 3), backend_import=round(imported - start, 3), build=round(built - imported, 3),
                first_batch=round(first - built, 3), second_batch=round(second - first, 3),
                launch_to_first_update=round(time.time() - launched - (second - first), 3))


def bare_import(backend):
    """Seconds from launch to exit of ``python -c "import <backend>"`` (a fresh process)."""
    start = time.time()
    subprocess.run([sys.executable, "-c", f"import {IMPORT[backend]}"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return time.time() - start


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
                        help="backends to measure (jax is not in the default set)")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each run")
    parser.add_argument("--warmup-steps", type=int, default=0,
                        help="env steps each run takes before it is timed (its first calls: JAX's compiles); 0: a "
                             "whole `train` run is timed, first calls included")
    parser.add_argument("--startup", action="store_true",
                        help="also measure each backend's start-up against its bare import (first agent only)")
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
        elif args.one[0] == "startup":
            out = measure_startup(args.one[1], args.one[2], float(args.one[3]), int(args.one[4]), args.root)
        else:
            thread = None if args.one[4] == "config" else args.one[4] == "on"
            out = measure_rlgraph(args.one[0], args.one[1], float(args.one[2]), int(args.one[3]), args.root, thread,
                                  int(args.one[5]))
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
                    out = in_subprocess(agent, backend, args.seconds, args.seed, thread, args.warmup_steps,
                                        root=root)
                    label = ", ".join(x for x in (name, "" if thread == "config" else f"learner thread {thread}")
                                      if x)
                    label = f"{agent} ({label})" if label else agent
                    rows.append((label, agent, backend, out))
                print(f"{label} {backend}: " + (out["error"] if "error" in out else
                                                 f"{out['env_steps_per_second']:,.0f} env steps/s"), file=sys.stderr)
    run_ppo()

    startups = []
    if args.startup:
        for backend in args.backends:
            bare = bare_import(backend)
            startups.append((backend, bare, in_subprocess("startup", args.agents[0], backend, time.time(), args.seed)))

    ppo = statistics.mean(ppo_runs) if ppo_runs else None
    how = (f"{args.warmup_steps} env steps of warm-up (first calls) first, then {args.seconds:g} s timed"
           if args.warmup_steps else f"{args.seconds:g} s `train` runs, first calls included")
    print(f"\nEnv steps/s with learning on CartPole-v1, {how}, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', '1')}; single-file PyTorch PPO ({args.ppo_threads} threads): "
          + (", ".join(_fmt(r) for r in ppo_runs) + f" (mean {_fmt(ppo)})" if ppo else "failed") + "\n")
    torch_rate = {label: out["env_steps_per_second"] for label, _, backend, out in rows
                  if backend == "pytorch" and "error" not in out}
    print("| agent | backend | env steps/s | updates | / PyTorch | / single-file PPO | aim | |")
    print("|---|---|---|---|---|---|---|---|")
    for label, agent, backend, out in rows:
        if "error" in out:
            print(f"| {label} | {backend} | error: {out['error']} | | | | | |")
            continue
        rate = out["env_steps_per_second"]
        ratio = f"{rate / ppo:.2f}x" if ppo else "-"
        vs_torch = f"{rate / torch_rate[label]:.2f}x" if torch_rate.get(label) else "-"
        mark = "ok" if rate >= AIM[agent] else "below"
        print(f"| {label} | {backend} | {_fmt(rate)} | {out['updates']} | {vs_torch} | {ratio} | "
              f">= {_fmt(AIM[agent])} | {mark} |")
    if ppo:
        print(f"| single-file PPO | pytorch | {_fmt(ppo)} | | | 1.00x | | |")
    if startups:
        print(f"\nStart-up of {args.agents[0]} (fresh processes, seconds): the bare import's launch to exit against "
              f"rlgraph's launch, backend import, engine build, first batch (first calls of acting and the update) "
              f"and the same batch again\n")
        print("| backend | bare import | launch | backend import | build | first batch | second batch | "
              "launch to first update | over the bare import |")
        print("|---|---|---|---|---|---|---|---|---|")
        for backend, bare, out in startups:
            if "error" in out:
                print(f"| {backend} | {bare:.2f} | error: {out['error']} | | | | | | |")
                continue
            print(f"| {backend} | {bare:.2f} | {out['launch']:.2f} | {out['backend_import']:.2f} | {out['build']:.2f} "
                  f"| {out['first_batch']:.2f} | {out['second_batch']:.2f} | {out['launch_to_first_update']:.2f} | "
                  f"+{out['launch_to_first_update'] - bare:.2f} |")


if __name__ == "__main__":
    main()
