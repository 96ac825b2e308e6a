"""Env steps per second of central inference (SEED RL style) against the local vector worker and against
per-actor inference (the Ray engine: each actor acts with its own policy copy), at equal total environments.

Learning runs: each is ``rlgraph train CONFIG --seconds S`` in a fresh process, with the config's evaluations
and stop-at-target switched off, so that every run spends its whole budget stepping and learning; the figure
is ``summary.json``'s env steps per second. Central-inference runs also report the server's mean inference
batch size (environment rows per ``get_actions`` call), its mean latency (request seen -> answer sent) and the
actors' mean wait per step (request sent -> actions back, as the actors measure it).

CartPole (APPO, 64 environments) by default; ``--pong`` adds APPO on ALE Pong (Nature CNN, 32 environments),
where inference, not the environment, is the expensive part per step and batching it should pay off.

Run: .venv/bin/python benchmarks/central_inference.py [--seconds 30] [--actors 2] [--backend pytorch]
     [--pong] [--no-ray]
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def learning_run(config_name, backend, executor, num_actors, seconds, execution=None):
    """``summary.json`` figures of one training run in a fresh process (or {"error": ...})."""
    with open(os.path.join(ROOT, "configs", f"{config_name}.json")) as f:
        config = copy.deepcopy(json.load(f))
    config["train_spec"] = dict(config.get("train_spec", {}), eval_every_steps=None, stop_at_target=False,
                                eval_episodes=0)
    if execution:
        config["execution_spec"] = dict(config.get("execution_spec", {}), **execution)
    tmp = tempfile.mkdtemp(prefix=f"central-bench-{config_name}-")
    path = os.path.join(tmp, "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", path, "--backend", backend, "--seconds", str(seconds),
           "--logdir", os.path.join(tmp, "run"), "--executor", executor]
    if executor != "local":
        cmd += ["--num-actors", str(num_actors)]
    env = dict(os.environ, OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return dict(error=(proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1])
    with open(os.path.join(tmp, "run", "summary.json")) as f:
        summary = json.load(f)
    actors = summary.get("actors", [])
    waits = [a["mean_wait_ms"] for a in actors if "mean_wait_ms" in a]
    return dict(rate=summary["env_steps_per_second"], updates=summary["updates"],
                envs=config["environment_spec"]["num_envs"], batch=summary.get("mean_inference_batch_size"),
                latency=summary.get("mean_inference_latency_ms"),
                wait=sum(waits) / len(waits) if waits else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--backend", default="pytorch", choices=["tf", "pytorch"])
    parser.add_argument("--pong", action="store_true", help="also APPO on ALE Pong (Nature CNN)")
    parser.add_argument("--no-ray", action="store_true", help="leave out per-actor inference (the Ray engine)")
    args = parser.parse_args()
    configs = ["appo_cartpole"] + (["appo_pong"] if args.pong else [])
    runs = [("local", "local", None), ("central shm", "central", dict(transport="shm")),
            ("central shm t=0", "central", dict(transport="shm", inference_timeout_ms=0)),
            ("central grpc", "central", dict(transport="grpc"))]
    if not args.no_ray:
        runs.append(("ray (per-actor)", "ray", None))
    print(f"{'config':14} {'engine':16} {'actors':>6} {'envs':>5} {'env steps/s':>12} {'x local':>8} {'updates':>8} "
          f"{'batch':>6} {'latency ms':>10} {'actor wait ms':>13}")
    for name in configs:
        local_rate = None
        for label, executor, execution in runs:
            r = learning_run(name, args.backend, executor, args.actors, args.seconds, execution)
            if "error" in r:
                print(f"{name:14} {label:16} error: {r['error']}")
                continue
            local_rate = local_rate or (r["rate"] if executor == "local" else None)
            ratio = f"{r['rate'] / local_rate:8.2f}" if local_rate else f"{'-':>8}"
            fmt = lambda v, spec: f"{v:{spec}}" if v is not None else "-"  # noqa: E731
            print(f"{name:14} {label:16} {args.actors if executor != 'local' else '-':>6} {r['envs']:>5} "
                  f"{r['rate']:>12,.0f} {ratio} {r['updates']:>8} {fmt(r['batch'], '6.1f'):>6} "
                  f"{fmt(r['latency'], '10.2f'):>10} {fmt(r['wait'], '13.2f'):>13}")


if __name__ == "__main__":
    main()
