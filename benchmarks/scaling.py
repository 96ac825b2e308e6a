"""Env steps per second with learning at 2 to 64 actors, slow environments, Ray cluster and central inference.

Every point is ``rlgraph train CONFIG --seconds S`` in a fresh process on CartPole-v1 made slow with
``environment_spec.step_delay_ms`` (default 2 ms of sleep per vector step, 4 environments per actor: an actor
can step at most 4 / 2 ms = 2000 env steps/s, so 2 actors can reach 4000/s and 32 actors 64000/s if nothing
else limits them), evaluations and stop-at-target off. Engines:

- ``ray``: APPO and Ape-X joining a local multi-node Ray cluster started here (``ray.cluster_utils.Cluster``,
  ``--nodes`` raylets of ``--node-cpus`` logical CPUs each, no dashboard); actors oversubscribe the cores on
  purpose with a fractional ``execution_spec.actor_resources.num_cpus`` (the cluster's CPUs / actors).
- ``central``: APPO with central inference over shared memory (and gRPC without ``--quick``).

Per point: env steps/s (``summary.json``, start-up excluded), its ratio to perfect scaling from the smallest
actor count, updates/s, env steps per update, the policy lag (mean of the run's ``update/policy_lag_mean``
TensorBoard scalars), the learner's queue depth (APPO: the unroll batches each update learned from, mean of
``update/queue_depth``), the learner process's RSS (sampled from /proc: at 40% of the run and its peak), the
learner process's CPU use (% of one core; and per env step, in microseconds: its updates, its loop over the
actors' results, deserializing) and the whole machine's (% of all cores) over the run, the Ray
object store's peak (plasma usage polled from the raylets) and, for central inference, the mean inference
batch (rows) and latency (from a request's arrival at the server to its answer) and the actors' mean wait per
vector step (from sending a step to receiving its actions: the latency plus the time the request waited to be
read). RLlib's APPO on the same slow environment is added where ``ray.rllib`` imports.

Run: .venv/bin/python benchmarks/scaling.py [--quick] [--seconds 20] [--actors 2 4 8 16 32 64]
     [--delay-ms 2] [--envs-per-actor 4] [--nodes 4] [--node-cpus 2] [--backend pytorch]
"""
import argparse
import copy
import glob
import json
import logging
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
logger = logging.getLogger("scaling")


def _config(agent, actors, delay_ms, envs_per_actor, execution):
    with open(os.path.join(ROOT, "configs", f"{agent}_cartpole.json")) as f:
        config = copy.deepcopy(json.load(f))
    config["environment_spec"] = dict(env_spec="CartPole-v1", num_envs=actors * envs_per_actor,
                                      step_delay_ms=delay_ms)
    config["train_spec"] = dict(config.get("train_spec", {}), eval_every_steps=None, stop_at_target=False,
                                eval_episodes=0)
    config["execution_spec"] = dict(config.get("execution_spec", {}), envs_per_actor=envs_per_actor, **execution)
    return config


def _proc_stat(pid):
    """(RSS in MB, CPU seconds) of process ``pid`` (its own threads), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return rss, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, IndexError):
        return None


def _machine_busy():
    """(busy, total) jiffies of all cores since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def _plasma_mib(address):
    """The object store's use in MiB summed over the cluster's raylets, or None."""
    try:
        from ray._private.internal_api import memory_summary
        text = memory_summary(address, stats_only=True)
    except Exception:  # noqa: BLE001 - a diagnostic: absent where Ray cannot answer.
        return None
    found = re.findall(r"Plasma memory usage (\d+) MiB", text)
    return sum(int(v) for v in found) if found else None


def _scalars(logdir, wanted):
    """The values of TensorBoard scalars named in ``wanted`` from a run's event files (no TensorFlow)."""
    from tensorboard.compat.proto import event_pb2
    out = {}
    for path in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
        with open(path, "rb") as f:
            data = f.read()
        i = 0
        while i + 12 <= len(data):
            (n,) = struct.unpack_from("<Q", data, i)
            event = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
            i += 16 + n
            for v in event.summary.value:
                if v.tag in wanted and v.HasField("simple_value"):
                    out.setdefault(v.tag, []).append(v.simple_value)
    return out


def run_point(agent, engine, actors, args, execution, address=None):
    """One training run; its figures (or {"error": ...})."""
    config = _config(agent, actors, args.delay_ms, args.envs_per_actor, execution)
    tmp = tempfile.mkdtemp(prefix=f"scaling-{agent}-{engine}-{actors}-")
    path, logdir = os.path.join(tmp, "config.json"), os.path.join(tmp, "run")
    with open(path, "w") as f:
        json.dump(config, f)
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", path, "--backend", args.backend, "--seconds",
           str(args.seconds), "--logdir", logdir, "--engine", engine, "--num-actors", str(actors)]
    if address:
        cmd += ["--ray-address", address]
    env = dict(os.environ, OMP_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0")
    start, busy0 = time.perf_counter(), _machine_busy()
    with open(os.path.join(tmp, "stderr.txt"), "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, env=env)
        samples, plasma = [], []  # (seconds since start, rss, cpu seconds); object store MiB
        stop = threading.Event()

        def poll_plasma():
            while not stop.wait(3.0):
                value = _plasma_mib(address)
                if value is not None:
                    plasma.append(value)

        poller = threading.Thread(target=poll_plasma, daemon=True) if address else None
        if poller:
            poller.start()
        try:
            while proc.poll() is None:
                stat = _proc_stat(proc.pid)
                if stat:
                    samples.append((time.perf_counter() - start,) + stat)
                time.sleep(0.5)
        finally:
            stop.set()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    busy1 = _machine_busy()
    if proc.returncode != 0:
        with open(os.path.join(tmp, "stderr.txt")) as f:
            lines = [line for line in f.read().strip().splitlines() if line.strip()]
        return dict(error=(lines or [f"exit {proc.returncode}"])[-1][:160])
    with open(os.path.join(logdir, "summary.json")) as f:
        summary = json.load(f)
    rate = summary["env_steps_per_second"]
    train_s = summary["env_steps"] / rate if rate else float("nan")
    scalars = _scalars(logdir, {"update/policy_lag_mean", "update/queue_depth"})
    lags, depths = scalars.get("update/policy_lag_mean", []), scalars.get("update/queue_depth", [])
    wall = samples[-1][0] if samples else float("nan")
    early = next((s for s in samples if s[0] >= 0.4 * wall), samples[-1] if samples else None)
    cpu = (samples[-1][2] - samples[0][2]) / max(samples[-1][0] - samples[0][0], 1e-9) if len(samples) > 1 else None
    return dict(rate=rate, updates_per_s=summary["updates"] / train_s if train_s else None,
                steps_per_update=summary["env_steps"] / max(summary["updates"], 1),
                lag=sum(lags) / len(lags) if lags else None, queue=sum(depths) / len(depths) if depths else None,
                rss_mid=early[1] if early else None, rss_peak=max(s[1] for s in samples) if samples else None,
                learner_cpu=100 * cpu if cpu is not None else None,
                machine_cpu=100 * (busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1),
                plasma_peak=max(plasma) if plasma else None, batch=summary.get("mean_inference_batch_size"),
                latency=summary.get("mean_inference_latency_ms"), wait=_mean_wait_ms(summary),
                lost=summary.get("env_steps_lost", 0),
                restarts=summary.get("actor_restarts", 0))


def start_cluster(nodes, node_cpus):
    """A local Ray cluster of ``nodes`` raylets (no dashboard); this process joins it (object store polls)."""
    import ray
    from ray.cluster_utils import Cluster
    node_args = dict(num_cpus=node_cpus, object_store_memory=200 * 1024 ** 2)
    cluster = Cluster(initialize_head=True, head_node_args=dict(node_args, include_dashboard=False))
    for _ in range(nodes - 1):
        cluster.add_node(**node_args)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    return cluster


def rllib_appo(actors, args):
    """RLlib APPO's env steps/s on the same slow environment (``actors`` env runners), or a reason string."""
    try:
        from ray.rllib.algorithms.appo import APPOConfig
    except Exception as e:  # noqa: BLE001 - any import failure means: not usable here.
        return f"RLlib not importable ({type(e).__name__}: {e}); pip install 'ray[rllib]==2.60.*'"
    import gymnasium as gym

    from ray.tune.registry import register_env

    # The same slow simulator as rlgraph's ``step_delay_ms``: one delay per vector step of all the runner's
    # environments. RLlib steps its sub-environments one after another (gymnasium's SyncVectorEnv), so each
    # sub-environment sleeps its share of the delay.
    delay = args.delay_ms / 1000.0 / args.envs_per_actor

    class SlowCartPole(gym.Wrapper):
        def step(self, action):
            time.sleep(delay)
            return self.env.step(action)

    register_env("rlgraph_slow_cartpole", lambda cfg: SlowCartPole(gym.make("CartPole-v1")))
    # RLlib 2.60 makes IMPALA/APPO's env runners pull their weights from an
    # ``EnvRunnerStateServer`` actor at the start of every sample() (``use_env_runner_state_server``, on by
    # default); on this machine its runs then sampled nothing at all (``num_env_steps_sampled_lifetime`` stayed
    # 0 over minutes of train() calls, with 2 runners on a local Ray of 4 CPUs), and with it off they sample and
    # learn, so the benchmark turns it off: weights go to the runners by RLlib's previous push path.
    # RLlib's learner actor asks for 1 whole CPU by default; with the runners' fractions packed on every raylet no
    # raylet has one left at 32 runners (the build then waits forever), so it asks for 0.01 and the runners for
    # 99% of the cluster, as rlgraph's learner (the driver) takes none of it.
    algo = (APPOConfig().environment("rlgraph_slow_cartpole")
            .env_runners(num_env_runners=actors, num_envs_per_env_runner=args.envs_per_actor,
                         num_cpus_per_env_runner=min(1.0, 0.99 * args.nodes * args.node_cpus / actors),
                         use_env_runner_state_server=False)
            .learners(num_cpus_per_learner=0.01)
            .build_algo())
    start, steps = time.perf_counter(), 0
    while time.perf_counter() - start < args.seconds:
        steps = algo.train()["env_runners"]["num_env_steps_sampled_lifetime"]
    algo.stop()
    return steps / (time.perf_counter() - start)


def per_step_costs(config_name, backend, envs, seconds, delay_ms=0.0):
    """Per env step of one actor in this process: (sampling s, environment s, serialized bytes, serializing s).

    Sampling is ``RaySampler.sample`` (acting, stepping, building items); the environment alone is the same
    ``VectorEnv`` stepped with fixed actions; serializing is ``pickle`` of the items (what goes to Ray's object
    store, which serializes with pickle protocol 5).
    """
    import pickle

    import numpy as np

    from rlgraph.environments import VectorEnv
    from rlgraph.engines.ray.ray_sampler import RaySampler
    from rlgraph.engines.run_config import env_kwargs_of, load_config

    config, _ = load_config(os.path.join(ROOT, "configs", f"{config_name}.json"))
    env_kwargs = dict(env_kwargs_of(config, seed=1, num_envs=envs), step_delay_ms=delay_ms)
    sampler = RaySampler(0, config, env_kwargs, backend, 1, 0, envs)
    sampler.sample(8)
    start, steps, blobs, pickle_s = time.perf_counter(), 0, 0, 0.0
    while time.perf_counter() - start < seconds:
        items, stats = sampler.sample(16)
        steps += stats["env_steps"]
        t = time.perf_counter()
        blobs += len(pickle.dumps(items, protocol=5))
        pickle_s += time.perf_counter() - t
    sample_s = (time.perf_counter() - start - pickle_s) / steps
    env = VectorEnv(**env_kwargs)
    env.reset()
    actions = np.zeros((envs,) + tuple(env.action_space.shape), env.action_space.dtype)
    start, env_steps = time.perf_counter(), 0
    while time.perf_counter() - start < seconds / 2:
        env.step(actions)
        env_steps += envs
    env_s = (time.perf_counter() - start) / env_steps
    env.close()
    return sample_s, env_s, blobs / steps, pickle_s / steps


def _mean_wait_ms(summary):
    """Central inference: the actors' mean wait for actions per vector step (ms), or None."""
    waits = [a["mean_wait_ms"] for a in summary.get("actors", []) if "mean_wait_ms" in a]
    return sum(waits) / len(waits) if waits else None


def _fmt(value, spec, width):
    return f"{value:{spec}}".rjust(width) if value is not None else "-".rjust(width)


HEADER = (f"{'agent':5} {'engine':12} {'actors':>6} {'env steps/s':>11} {'scaling':>7} {'upd/s':>6} "
          f"{'steps/upd':>9} {'lag':>5} {'queue':>5} {'RSS MB mid/peak':>15} {'learner%':>8} {'us/step':>7} {'box%':>5} "
          f"{'plasma MiB':>10} "
          f"{'batch':>6} {'lat ms':>6} {'wait ms':>7}")


def row(agent, label, actors, r, base):
    if "error" in r:
        return f"{agent:5} {label:12} {actors:>6} error: {r['error']}"
    scaling = r["rate"] / (base[1] * actors / base[0]) if base else None
    rss = f"{r['rss_mid']:.0f}/{r['rss_peak']:.0f}" if r["rss_peak"] else "-"
    # The learner process's CPU per env step (its updates, its loop over the actors' results, deserializing).
    per_step = 1e4 * r["learner_cpu"] / r["rate"] if r["learner_cpu"] is not None and r["rate"] else None
    out = (f"{agent:5} {label:12} {actors:>6} {r['rate']:>11,.0f} {_fmt(scaling, '.0%', 7)} "
           f"{_fmt(r['updates_per_s'], '.1f', 6)} {_fmt(r['steps_per_update'], '.0f', 9)} {_fmt(r['lag'], '.1f', 5)} "
           f"{_fmt(r.get('queue'), '.1f', 5)} {rss:>15} {_fmt(r['learner_cpu'], '.0f', 8)} {_fmt(per_step, '.0f', 7)} "
           f"{_fmt(r['machine_cpu'], '.0f', 5)} "
           f"{_fmt(r['plasma_peak'], 'd', 10)} {_fmt(r['batch'], '.1f', 6)} {_fmt(r['latency'], '.2f', 6)} "
           f"{_fmt(r['wait'], '.2f', 7)}")
    if r.get("lost") or r.get("restarts"):
        out += f"  (restarts {r['restarts']}, env steps lost {r['lost']})"
    return out


def main():
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="20 s per point, 2-32 actors: APPO and Ape-X on Ray, APPO central over shm")
    parser.add_argument("--seconds", type=float, default=None, help="training seconds per point (default 40)")
    parser.add_argument("--actors", nargs="+", type=int, default=None, help="default 2 4 8 16 32 64")
    parser.add_argument("--delay-ms", type=float, default=2.0)
    parser.add_argument("--envs-per-actor", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=4, help="raylets of the local Ray cluster")
    parser.add_argument("--node-cpus", type=int, default=2, help="logical CPUs each raylet declares")
    parser.add_argument("--backend", default="pytorch", choices=["tf", "pytorch"])
    parser.add_argument("--costs", action="store_true", help="only the per-step costs of one actor in this process "
                        "(CartPole APPO and Ape-X, and Ape-X on Pong where ale-py has the ROM)")
    parser.add_argument("--only", nargs="+", default=None, help="a subset of: ray-appo ray-apex central-shm "
                                                                 "central-grpc rllib")
    args = parser.parse_args()
    args.seconds = args.seconds or (20 if args.quick else 40)
    if args.costs:
        logger.info("per env step of one actor (%s, this process): sampling = acting + stepping + building",
                    args.backend)
        for name, envs in (("appo_cartpole", 4), ("apex_cartpole", 4), ("apex_pong", 4), ("appo_pong", 4)):
            try:
                sample_s, env_s, nbytes, pickle_s = per_step_costs(name, args.backend, envs, args.seconds / 2)
            except Exception as e:  # noqa: BLE001 - e.g. no Atari ROM: reported, the others measured.
                logger.info("%-14s not measured: %s: %s", name, type(e).__name__, str(e).splitlines()[0][:120])
                continue
            logger.info("%-14s sampling %7.1f us  environment %7.1f us  acting+building %7.1f us  "
                        "serialized %7.0f B  pickling %5.1f us", name, 1e6 * sample_s, 1e6 * env_s,
                        1e6 * (sample_s - env_s), nbytes, 1e6 * pickle_s)
        return
    actors = args.actors or ([2, 4, 8, 16, 32] if args.quick else [2, 4, 8, 16, 32, 64])
    series = ["ray-appo", "ray-apex", "central-shm"] + ([] if args.quick else ["central-grpc", "rllib"])
    series = [s for s in series if args.only is None or s in args.only]
    cluster_cpus = args.nodes * args.node_cpus
    logger.info("slow CartPole: %g ms per vector step, %d envs per actor (%d env steps/s per actor at most); "
                "%d s per point; %d cores on this machine; Ray cluster: %d raylets x %d CPUs", args.delay_ms,
                args.envs_per_actor, args.envs_per_actor * 1000 / args.delay_ms if args.delay_ms else 0,
                args.seconds, os.cpu_count(), args.nodes, args.node_cpus)
    logger.info("%s", HEADER)
    cluster = None
    try:
        for name in series:
            if name == "rllib":  # (On the same local cluster as rlgraph's Ray rows.)
                if cluster is None:
                    cluster = start_cluster(args.nodes, args.node_cpus)
                for n in [a for a in actors if a <= 32]:
                    rate = rllib_appo(n, args)
                    if isinstance(rate, str):
                        logger.info("appo  rllib        %6s %s", "-", rate)
                        break
                    logger.info("appo  rllib        %6d %11s", n, f"{rate:,.0f}")
                continue
            engine, kind = name.split("-")
            agent = kind if engine == "ray" else "appo"
            if engine == "ray" and cluster is None:
                cluster = start_cluster(args.nodes, args.node_cpus)
            base = None
            for n in actors:
                if engine == "ray":
                    execution = dict(actor_resources=dict(num_cpus=min(1.0, cluster_cpus / n)))
                    r = run_point(agent, "ray", n, args, execution, address=cluster.address)
                else:
                    r = run_point(agent, "central", n, args, dict(transport=kind))
                if "error" not in r and base is None:
                    base = (n, r["rate"])
                logger.info("%s", row(agent, name, n, r, base))
    finally:
        if cluster is not None:
            import ray
            ray.shutdown()
            cluster.shutdown()


if __name__ == "__main__":
    main()
