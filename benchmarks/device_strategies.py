"""Benchmark of synchronous multi-device towers and learner processes: update throughput (samples/s).

One run times the update API method of APPO (time-major unrolls [T, B]) and DQN (``update_from_batch``)
with the ``multi_device_sync`` device strategy (RLgraph, Schaarschmidt et al. 2019: device strategies as
graph rewrites) at 1, 2 and 4 towers on each backend, and prints a table with the ratio to 1 tower. On
TensorFlow the towers go to the machine's GPUs where it has them (cycling over them), else to logical CPU
devices (one per tower); PyTorch's towers go to its CUDA devices where it has them (cycling over them, the
weights on ``cuda:0``; towers on other devices run on weight replicas), else all on the CPU
(``--torch-device`` pins weights and towers to one device). On a CPU-only machine the towers share the same cores, so the ratios
show the strategy's overhead; on a machine with several GPUs they show the scaling.

Then the same update with 1 and 2 learner processes (``distributed_sync``: each learner updates on its
share of the batch, gradients all-reduced over the processes with ``torch.distributed`` / TF's
``MultiWorkerMirroredStrategy``), samples/s counted over the union batch. On 2 cores the learners share them.

Run: .venv/bin/python benchmarks/device_strategies.py [--backends tf pytorch] [--seconds 3] [--learners 1 2]
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

TOWERS = (1, 2, 4)
UNROLL, COLUMNS = 32, 64       # APPO: one minibatch of the config (64 envs x 32 steps)
DQN_BATCH = 512


def tf_devices(k):
    """TF devices for ``k`` towers: the GPUs (cycled), else logical CPU devices 0..k-1."""
    import tensorflow as tf
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return [gpus[i % len(gpus)].name for i in range(k)]
    return [f"cpu:{i}" for i in range(k)]


def torch_devices(k, torch_device):
    """PyTorch devices for ``k`` towers: ``torch_device`` ("auto": the CUDA devices, cycled, else the CPU)."""
    if torch_device != "auto":
        return [torch_device] * k
    import torch
    n = torch.cuda.device_count()
    return [f"cuda:{i % n}" for i in range(k)] if n else ["cpu"] * k


def make(kind, backend, towers, torch_device):
    from rlgraph.agents import Agent
    from rlgraph.spaces import FloatBox, IntBox
    with open(os.path.join(ROOT, "configs", f"{kind}_cartpole.json")) as f:
        config = json.load(f)
    devices = tf_devices(towers) if backend == "tf" else torch_devices(towers, torch_device)
    strategy = None if towers == 1 else {"type": "multi_device_sync", "devices": devices}
    # The weights where the first tower is.
    kwargs = dict(device=devices[0]) if backend == "pytorch" and devices[0] != "cpu" else {}
    agent = Agent.from_spec(config, state_space=FloatBox(shape=(4,)), action_space=IntBox(2), backend=backend,
                            device_strategy=strategy, **kwargs)
    return agent, devices


def batch(kind, rng):
    """``(api method, args, samples per call)``."""
    if kind == "appo":
        t, b = UNROLL, COLUMNS
        unroll = dict(states=rng.normal(size=(t, b, 4)).astype(np.float32), actions=rng.integers(0, 2, (t, b)),
                      rewards=rng.normal(size=(t, b)).astype(np.float32), terminals=rng.random((t, b)) < 0.05,
                      truncation_values=np.zeros((t, b), np.float32),
                      behaviour_log_probs=np.full((t, b), -0.69, np.float32),
                      behaviour_values=rng.normal(size=(t, b)).astype(np.float32))
        return "update", (unroll, dict(states=rng.normal(size=(b, 4)).astype(np.float32)), 0.1), t * b
    n = DQN_BATCH
    records = dict(states=rng.normal(size=(n, 4)).astype(np.float32), actions=rng.integers(0, 2, n),
                   rewards=rng.normal(size=n).astype(np.float32), terminals=rng.random(n) < 0.05,
                   next_states=rng.normal(size=(n, 4)).astype(np.float32))
    return "update_from_batch", (records, np.ones(n, np.float32), 0.1), n


def throughputs(agents, kind, seconds, rounds=5):
    """Median samples/s of each agent's update over ``rounds`` interleaved rounds (other load on the machine
    then slows every tower count alike)."""
    name, args, samples = batch(kind, np.random.default_rng(0))
    for agent in agents:
        for _ in range(3):  # Warm-up (tracing on TF).
            agent.executor.execute(name, *args)
    rates = [[] for _ in agents]
    for _ in range(rounds):
        for agent, out in zip(agents, rates):
            calls, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds / rounds:
                agent.executor.execute(name, *args)
                calls += 1
            out.append(calls * samples / (time.perf_counter() - start))
    return [float(np.median(r)) for r in rates]


def _share(kind, args, rank, world):
    """Learner ``rank``'s share of an update's arguments (its slice of the batch)."""
    def part(x, axis):
        return np.array_split(x, world, axis=axis)[rank]
    if kind == "appo":
        unroll, bootstrap, tp = args
        return ({k: part(v, 1) for k, v in unroll.items()}, {k: part(v, 0) for k, v in bootstrap.items()}, tp)
    records, weights, tp = args
    return ({k: part(v, 0) for k, v in records.items()}, part(weights, 0), tp)


def learner_worker(kind, backend, rank, world, addresses, calls):
    """One learner process: ``calls`` updates on its share of a fixed batch; rank 0 prints samples/s (union)."""
    from rlgraph.agents import Agent
    from rlgraph.executors.process_group import init_process_group
    from rlgraph.spaces import FloatBox, IntBox
    if world > 1:
        init_process_group(backend, rank, world, addresses.split(","), timeout_s=120)
    with open(os.path.join(ROOT, "configs", f"{kind}_cartpole.json")) as f:
        config = json.load(f)
    agent = Agent.from_spec(config, state_space=FloatBox(shape=(4,)), action_space=IntBox(2), backend=backend,
                            device_strategy={"type": "distributed_sync"} if world > 1 else None)
    name, args, samples = batch(kind, np.random.default_rng(0))
    args = _share(kind, args, rank, world)
    for _ in range(3):
        agent.executor.execute(name, *args)
    start = time.perf_counter()
    for _ in range(calls):
        agent.executor.execute(name, *args)
    if rank == 0:
        print(json.dumps({"samples_per_s": calls * samples / (time.perf_counter() - start)}), flush=True)
    os._exit(0)


def learner_processes(kind, backend, world, calls):
    """Samples/s (union batch) of ``world`` learner processes, each in a fresh process."""
    import subprocess
    from rlgraph.engines.distributed.control import free_port
    addresses = ",".join(f"127.0.0.1:{free_port()}" for _ in range(world))
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 2) // world)))
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--learner-worker", kind, backend, str(r),
                               str(world), addresses, str(calls)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env, text=True) for r in range(world)]
    try:
        out = procs[0].communicate(timeout=600)[0]
        for p in procs[1:]:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return json.loads(lines[-1])["samples_per_s"] if lines else float("nan")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--learner-worker":
        kind, backend, rank, world, addresses, calls = sys.argv[2:8]
        return learner_worker(kind, backend, int(rank), int(world), addresses, int(calls))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["tf", "pytorch"], choices=["tf", "pytorch"])
    parser.add_argument("--agents", nargs="+", default=["appo", "dqn"], choices=["appo", "dqn"])
    parser.add_argument("--seconds", type=float, default=5.0, help="timing per row (over 5 interleaved rounds)")
    parser.add_argument("--torch-device", default="auto",
                        help="PyTorch's device for weights and towers (auto: the CUDA devices, else the CPU)")
    parser.add_argument("--learners", nargs="*", type=int, default=[1, 2],
                        help="learner-process counts to time (none: skip that part)")
    parser.add_argument("--calls", type=int, default=60, help="updates per learner-process row")
    args = parser.parse_args()
    if "tf" in args.backends:
        import tensorflow as tf  # Logical CPU devices must exist before TF initialises its devices.
        if not tf.config.list_physical_devices("GPU"):
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * max(TOWERS))
    print(f"{'agent':6} {'backend':8} {'towers':>6}  {'devices':40} {'samples/s':>11} {'vs 1':>6}")
    for kind in args.agents:
        for backend in args.backends:
            built = [make(kind, backend, k, args.torch_device) for k in TOWERS]
            rates = throughputs([agent for agent, _ in built], kind, args.seconds)
            for k, (agent, devices), rate in zip(TOWERS, built, rates):
                shown = ",".join(devices) if k > 1 else "(one device)"
                print(f"{kind:6} {backend:8} {k:>6}  {shown[:40]:40} {rate:>11,.0f} {rate / rates[0]:>6.2f}")
                agent.terminate()
    if args.learners:
        print(f"\n{'agent':6} {'backend':8} {'learners':>8} {'samples/s':>11} {'vs 1':>6}")
        for kind in args.agents:
            for backend in args.backends:
                rates = [learner_processes(kind, backend, n, args.calls) for n in args.learners]
                for n, rate in zip(args.learners, rates):
                    print(f"{kind:6} {backend:8} {n:>8} {rate:>11,.0f} {rate / rates[0]:>6.2f}")


if __name__ == "__main__":
    main()
