"""Env steps per second of the Ray engine at 1, 2 and 4 actors, beside the local engine, in one run.

Learning runs (CartPole-v1, Ape-X and APPO by default): each is ``rlgraph train CONFIG --seconds S`` in a
fresh process, with the config's evaluations and stop-at-target switched off so that every run spends its
whole budget stepping and learning; the figure is ``summary.json``'s env steps per second (over the
training time, start-up excluded). The local engine runs the same config (same total number of
environments) in the same run, so the ratio ray/local is the engine's overhead or gain.

Sampling only (``--pong``): actor processes running the Pong config's actor-only agent (Nature CNN, ale-py
vector env) for S seconds, against the same sampler in this process.

RLlib: where ``ray[rllib]`` is installed, RLlib's APPO on CartPole-v1 with the same number of env runners
and environments is run for the same time (earlier measured here: ~4.0k env steps/s on 2 cores).

Run: .venv/bin/python benchmarks/ray_scaling.py [--agents apex appo] [--actors 1 2 4] [--seconds 40]
     [--backend pytorch] [--pong]
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RLLIB_EARLIER = 4000.0


def learning_run(agent, backend, executor, num_actors, seconds):
    with open(os.path.join(ROOT, "configs", f"{agent}_cartpole.json")) as f:
        config = json.load(f)
    config = copy.deepcopy(config)
    config["train_spec"] = dict(config.get("train_spec", {}), eval_every_steps=None, stop_at_target=False,
                                eval_episodes=0)
    tmp = tempfile.mkdtemp(prefix=f"ray-scaling-{agent}-")
    path = os.path.join(tmp, "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", path, "--backend", backend, "--seconds", str(seconds),
           "--logdir", os.path.join(tmp, "run"), "--executor", executor]
    if executor == "ray":
        cmd += ["--num-actors", str(num_actors)]
        cores = os.cpu_count() or 1
        if num_actors > cores:  # Oversubscribed on purpose: the local Ray refuses more actors than cores otherwise.
            cmd += ["--set", f"execution_spec.actor_resources.num_cpus={cores / num_actors}"]
    env = dict(os.environ, OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return dict(error=(proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1])
    with open(os.path.join(tmp, "run", "summary.json")) as f:
        summary = json.load(f)
    return dict(rate=summary["env_steps_per_second"], updates=summary["updates"],
                envs=config["environment_spec"]["num_envs"], per_actor=[a["env_steps_per_second"]
                                                                       for a in summary.get("actors", [])])


def pong_sampling(backend, num_actors_list, seconds):
    """Sampling-only steps/s of the Pong actor: in this process vs ``n`` Ray actor processes."""
    import ray

    from rlgraph.engines.ray.ray_sampler import RaySampler
    from rlgraph.engines.runner import env_kwargs_of, load_config

    config, _ = load_config(os.path.join(ROOT, "configs", "apex_pong.json"))
    total_envs = config["environment_spec"].get("num_envs", 8)
    rows = []
    sampler = RaySampler(0, config, env_kwargs_of(config, seed=1), backend, 1, 0, total_envs)
    sampler.sample(4)
    start, steps = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        steps += sampler.sample(16)[1]["env_steps"]
    local = steps / (time.perf_counter() - start)
    rows.append(("local", 1, local))
    del sampler
    ray.init(num_cpus=max(num_actors_list), include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1)(RaySampler)
        for n in num_actors_list:
            per = max(1, total_envs // n)
            actors = [remote.remote(i, config, env_kwargs_of(config, seed=i + 1, num_envs=per), backend, i, i * per,
                                    per * n) for i in range(n)]
            ray.get([a.sample.remote(4)[1] for a in actors])
            start, steps = time.perf_counter(), 0
            refs = {a.sample.options(num_returns=2).remote(16)[1]: a for a in actors}
            while time.perf_counter() - start < seconds:
                ready, _ = ray.wait(list(refs), num_returns=1)
                actor = refs.pop(ready[0])
                steps += ray.get(ready[0])["env_steps"]
                refs[actor.sample.options(num_returns=2).remote(16)[1]] = actor
            rows.append(("ray", n, steps / (time.perf_counter() - start)))
            for a in actors:
                ray.kill(a)
    finally:
        ray.shutdown()
    return rows


def rllib_appo(num_runners, num_envs, seconds):
    try:
        from ray.rllib.algorithms.appo import APPOConfig
    except ImportError:
        return None
    import ray
    ray.init(include_dashboard=False, log_to_driver=False)
    try:
        algo = (APPOConfig().environment("CartPole-v1")
                .env_runners(num_env_runners=num_runners, num_envs_per_env_runner=max(1, num_envs // num_runners))
                .build_algo())
        start, steps = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            result = algo.train()
            steps = result["env_runners"]["num_env_steps_sampled_lifetime"]
        algo.stop()
        return steps / (time.perf_counter() - start)
    finally:
        ray.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["apex", "appo"])
    parser.add_argument("--actors", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--backend", default="pytorch", choices=["tf", "pytorch"])
    parser.add_argument("--pong", action="store_true", help="also measure sampling-only Pong")
    args = parser.parse_args()
    print(f"{'agent':6} {'engine':6} {'actors':>6} {'envs':>5} {'env steps/s':>12} {'updates':>8} {'ray/local':>9}"
          f"  per actor")
    for agent in args.agents:
        local = learning_run(agent, args.backend, "local", 1, args.seconds)
        if "error" in local:
            print(f"{agent:6} local  error: {local['error']}")
            continue
        print(f"{agent:6} {'local':6} {'-':>6} {local['envs']:>5} {local['rate']:>12,.0f} {local['updates']:>8}")
        for n in args.actors:
            r = learning_run(agent, args.backend, "ray", n, args.seconds)
            if "error" in r:
                print(f"{agent:6} {'ray':6} {n:>6} error: {r['error']}")
                continue
            print(f"{agent:6} {'ray':6} {n:>6} {r['envs']:>5} {r['rate']:>12,.0f} {r['updates']:>8} "
                  f"{r['rate'] / local['rate']:>9.2f}  {', '.join(f'{x:,.0f}' for x in r['per_actor'])}")
            if agent == "appo" and n == 2:
                rllib = rllib_appo(2, r["envs"], args.seconds)
                if rllib is None:
                    print(f"       RLlib APPO not installed (pip install 'ray[rllib]==2.60.*'); earlier measured "
                          f"here {RLLIB_EARLIER:,.0f}/s: ours {r['rate'] / RLLIB_EARLIER:.1f}x that")
                else:
                    print(f"       RLlib APPO 2 runners, same run: {rllib:,.0f}/s; ours {r['rate'] / rllib:.1f}x")
    if args.pong:
        print("\nPong sampling only (Nature CNN actor, ale-py vector env):")
        rows = pong_sampling(args.backend, args.actors, args.seconds / 2)
        local = rows[0][2]
        for engine, n, rate in rows:
            print(f"  {engine:6} {n:>3} actor(s) {rate:>10,.0f} env steps/s  {rate / local:.2f}x local")


if __name__ == "__main__":
    main()
