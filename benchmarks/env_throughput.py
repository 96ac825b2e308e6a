"""Environment stepping throughput on one core: rlgraph VectorEnv vs plain gymnasium vector envs.

CartPole-v1 steps/s at 64, 256 and 1024 envs for
  - rlgraph ``VectorEnv`` (native vector form + same-step auto-reset, final obs, episode statistics),
  - the bare native form (``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")``), for overhead,
  - gymnasium ``SyncVectorEnv`` (what one would use without a native form),
with the ratios printed. Actions are pre-drawn, so only stepping is timed.
``--atari`` also times Pong on rlgraph's ``AtariVectorEnv`` (ale-py C++ threads).

Run: .venv/bin/python benchmarks/env_throughput.py [--atari] [--seconds S]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gymnasium as gym  # noqa: E402

from rlgraph.environments import AtariVectorEnv, VectorEnv  # noqa: E402


def steps_per_second(step, num_envs, seconds, num_actions=2):
    """Calls ``step(actions)`` for about ``seconds`` (after a short warm-up); returns env steps per second."""
    actions = np.random.default_rng(0).integers(0, num_actions, size=(256, num_envs))
    for t in range(20):
        step(actions[t])
    calls, start = 0, time.perf_counter()
    while True:
        for t in range(64):
            step(actions[t % 256])
        calls += 64
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * num_envs / elapsed


def best_rates(steps, num_envs, seconds, rounds=5):
    """Interleaves ``rounds`` measurements of each named step function; returns the best rate of each."""
    best = dict.fromkeys(steps, 0.0)
    for _ in range(rounds):
        for name, step in steps.items():
            best[name] = max(best[name], steps_per_second(step, num_envs, seconds / rounds))
    return best


def cartpole(seconds):
    print(f"CartPole-v1, one core, best of 5 interleaved rounds, {seconds:.1f} s per variant (env steps/s)")
    print(f"{'envs':>6} {'VectorEnv':>12} {'bare native':>12} {'SyncVectorEnv':>14} {'vs native':>10} {'vs sync':>8}")
    for num_envs in (64, 256, 1024):
        venv = VectorEnv("CartPole-v1", num_envs, seed=0)
        venv.reset()
        native = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point")
        native.reset(seed=0)
        sync = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")
        sync.reset(seed=0)
        rates = best_rates({"ours": venv.step, "bare": native.step, "sync": sync.step}, num_envs, seconds)
        ours, bare, plain = rates["ours"], rates["bare"], rates["sync"]
        print(f"{num_envs:>6} {ours:>12,.0f} {bare:>12,.0f} {plain:>14,.0f} {ours / bare:>10.2f} {ours / plain:>8.1f}")
        for env in (venv, native, sync):
            env.close()


def atari(seconds):
    for num_envs, threads in ((16, 2), (64, 2)):
        venv = AtariVectorEnv("pong", num_envs, seed=0, num_threads=threads)
        venv.reset()
        rate = max(steps_per_second(venv.step, num_envs, seconds / 2, num_actions=6) for _ in range(2))
        print(f"Pong, AtariVectorEnv, {num_envs} envs, {threads} threads: {rate:,.0f} agent steps/s "
              f"({4 * rate:,.0f} frames/s)")
        venv.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atari", action="store_true", help="also time Pong on ale-py's vector env")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement")
    args = parser.parse_args()
    affinity = hasattr(os, "sched_setaffinity")
    if affinity:
        cores = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {sorted(cores)[0]})
    cartpole(args.seconds)
    if args.atari:
        if affinity:
            os.sched_setaffinity(0, cores)
        atari(args.seconds)


if __name__ == "__main__":
    main()
