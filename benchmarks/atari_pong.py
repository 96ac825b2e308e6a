"""Acting and learning throughput of rlgraph's APPO on Atari Pong (Nature CNN) against bare backend code.

For ``configs/appo_pong.json`` (84x84x4 uint8 observations, preprocessing transpose [1, 2, 0] and divide by
255, conv 32x8s4, 64x4s2, 64x3s1, flatten, dense 512 relu, policy and value heads, 6 actions) prints per
backend, with repetitions interleaved (ours, bare, ours, bare, ...), medians, warm-up excluded:

1. Sampling with inference, at batch = ``num_envs`` = 32 observations: samples/s of the call the sampler
   makes per vector step (``agent.actor.get_actions(obs, explore=True)``, as ``RaySampler.sample`` and
   ``VectorWorker.run`` call it; an actor-only agent as the sampler builds it) against a bare forward pass of
   the same CNN from the same numpy uint8 batch (transpose/divide, logits and value, an action sampled
   from the logits and its log-probability, numpy out):

   - PyTorch: ``nn.Sequential`` under ``torch.inference_mode()``. The config's transpose to HWC is PyTorch's
     ``channels_last`` memory format (``--bare-layout channels_last``, default: the uint8 batch is copied to
     it, then cast and divided; model in ``channels_last``), which trains about 25% faster on CPU than NCHW
     (``--bare-layout nchw``: the CHW observations as they are); the dense layer's rows are permuted once to
     the NCHW flattening order of ``nn.Flatten``.
   - TensorFlow: a ``tf.function`` (input signature, no Keras) over ``tf.Variable``s, NHWC as configured.

   A third row shows where a sampler's time goes: rlgraph's whole sampler (``RaySampler``, in this process:
   ``get_actions``, ``AtariVectorEnv.step``, ``make_step``, the unroll builder) in env steps/s, the
   environment alone (pre-drawn random actions) and, from the rows above, the bare CNN inference alone and
   the rate of the two in sequence (``1 / (1 / env + 1 / bare inference)``): the rate a sampler that steps
   and infers in turn would reach with bare inference and no bookkeeping.

2. Learning: ``agent.update(batch)`` on a fixed synthetic batch of one unroll (``unroll_length`` x
   ``num_envs``, uint8 frames, 6 actions, Pong-like rewards in {-1, 0, 1}), learned from in ``num_epochs``
   passes of ``num_minibatches`` optimizer steps (so samples are sample-passes), against a bare training
   pass of the same network, loss (PPO clipping on V-trace advantages with the config's reward clipping and
   advantage normalization) and Adam (``clip_grad_norm``), same batch, same minibatch columns, same number of
   optimizer steps (PyTorch: eager, ``torch.optim.Adam``; TensorFlow: a ``tf.function`` with
   ``GradientTape`` and Adam written out, as ``benchmarks/learner_throughput.py``).

Both sides start from the agent's weights and take and return numpy arrays. Checks printed: the largest
difference of the values the two inference passes compute for one batch, and the first update's mean loss
of both sides. Ratios, not absolute rates, are the result: interleaving cancels machine noise in them.
Math threads: ``OMP_NUM_THREADS`` (default 1, as ``rlgraph train`` sets it); ALE steps on its own threads.
Each backend runs in a fresh subprocess, one after the other.

Run: .venv/bin/python benchmarks/atari_pong.py [--backend tf|pytorch] [--part act|sampler|learn]
     [--rounds 9] [--seconds 0.3] [--sampler-rounds 3] [--learn-rounds 5] [--bare-layout channels_last|nchw]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")
BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(BENCH, "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, BENCH)

import numpy as np  # noqa: E402

from learner_throughput import bare_appo_tf_update, bare_appo_torch_update, network_weights  # noqa: E402
from rlgraph.agents import Agent  # noqa: E402
from rlgraph.spaces import IntBox  # noqa: E402

FRAME_SHAPE, NUM_ACTIONS = (4, 84, 84), 6
#: The aim: rlgraph's rate >= this fraction of the bare rate.
AIM = 0.8
LAYERS = ["neural-network/conv2d", "neural-network/conv2d-1", "neural-network/conv2d-2", "neural-network/dense",
          "action-adapter", "value-head"]


def load_config(**overrides):
    """``configs/appo_pong.json``; overrides: ``num_envs``, ``unroll_length`` (the smoke test shrinks them).

    The learner takes minibatches of whole trajectories, as the bare training pass does (the cost per sample
    of minibatches of samples is the same network pass plus one ``calc_targets`` pass per epoch)."""
    with open(os.path.join(ROOT, "configs", "appo_pong.json")) as f:
        config = json.load(f)
    config["minibatch_unit"] = "trajectories"
    if "num_envs" in overrides:
        config["environment_spec"] = dict(config["environment_spec"], num_envs=overrides.pop("num_envs"))
    config.update(overrides)
    return config


def make_agent(config, backend, role="both", seed=0):
    """The APPO agent with the spaces ``AtariVectorEnv("pong")`` has (uint8 frames, int64 actions)."""
    return Agent.from_spec(config, state_space=IntBox(256, shape=FRAME_SHAPE, dtype="uint8"),
                           action_space=IntBox(NUM_ACTIONS, dtype="int64"), backend=backend, seed=seed,
                           role=role)


def cnn_weights(agent):
    """[(kernel, bias)] of the three convolutions (HWIO), the dense layer ([in, out], NHWC flattening order)
    and the two heads."""
    w = dict(network_weights(agent))
    return [(w[f"appo/policy/{n}/kernel"], w[f"appo/policy/{n}/bias"]) for n in LAYERS]


def frames(rng, *lead):
    return rng.integers(0, 256, size=lead + FRAME_SHAPE, dtype=np.uint8)


# --- fixed batch -------------------------------------------------------------------------------------------------
def pong_batch(config, rng):
    """One unroll as ``IMPALALearner.update`` takes it (no "policy_versions": no lag bookkeeping)."""
    t, b = config["unroll_length"], config["environment_spec"]["num_envs"]
    unroll = dict(states=frames(rng, t, b), actions=rng.integers(0, NUM_ACTIONS, size=(t, b)).astype(np.int64),
                  rewards=rng.choice(np.array([-1.0, 0.0, 1.0], np.float32), size=(t, b), p=[0.02, 0.96, 0.02]),
                  terminals=rng.random((t, b)) < 0.01, truncation_values=np.zeros((t, b), np.float32),
                  behaviour_log_probs=np.full((t, b), -np.log(NUM_ACTIONS), np.float32),
                  behaviour_values=rng.normal(scale=0.1, size=(t, b)).astype(np.float32))
    return dict(unroll=unroll, bootstrap=dict(states=frames(rng, b)))


# --- bare PyTorch -------------------------------------------------------------------------------------------------
def torch_cnn(weights, layout="channels_last"):
    """``(trunk, policy head, value head, to_input)``: the Nature CNN as ``nn.Sequential`` on NCHW tensors in
    ``layout`` and the function from a numpy uint8 batch [N, 4, 84, 84] to its input (transpose, divide)."""
    import torch
    nn = torch.nn
    (c0, cb0), (c1, cb1), (c2, cb2), (kd, bd), (ka, ba), (kv, bv) = weights
    convs = [nn.Conv2d(4, 32, 8, 4), nn.Conv2d(32, 64, 4, 2), nn.Conv2d(64, 64, 3, 1)]
    side = 7
    dense, pi, vf = nn.Linear(kd.shape[0], kd.shape[1]), nn.Linear(*ka.shape), nn.Linear(*kv.shape)
    # rlgraph flattens [H, W, C]; nn.Flatten of NCHW gives [C, H, W]: permute the dense layer's rows to match.
    kd_chw = kd.reshape(side, side, 64, -1).transpose(2, 0, 1, 3).reshape(kd.shape)
    with torch.no_grad():
        for conv, (k, b) in zip(convs, [(c0, cb0), (c1, cb1), (c2, cb2)]):
            conv.weight.copy_(torch.from_numpy(k.transpose(3, 2, 0, 1).copy()))
            conv.bias.copy_(torch.from_numpy(b))
        for layer, (k, b) in zip((dense, pi, vf), [(kd_chw, bd), (ka, ba), (kv, bv)]):
            layer.weight.copy_(torch.from_numpy(k.T.copy()))
            layer.bias.copy_(torch.from_numpy(b))
    trunk = nn.Sequential(convs[0], nn.ReLU(), convs[1], nn.ReLU(), convs[2], nn.ReLU(), nn.Flatten(), dense,
                          nn.ReLU())
    if layout == "channels_last":
        trunk = trunk.to(memory_format=torch.channels_last)

        def to_input(obs):  # HWC memory (the config's transpose) while still uint8, then float / 255.
            return torch.from_numpy(obs).contiguous(memory_format=torch.channels_last).float().div_(255.0)
    else:
        def to_input(obs):
            return torch.from_numpy(obs).float().div_(255.0)
    return trunk, pi, vf, to_input


def bare_act_torch(weights, layout="channels_last"):
    import torch
    trunk, pi, vf, to_input = torch_cnn(weights, layout)

    def act(obs):
        with torch.inference_mode():
            h = trunk(to_input(obs))
            log_pis = torch.log_softmax(pi(h), -1)
            actions = torch.multinomial(log_pis.exp(), 1)
            log_probs = log_pis.gather(-1, actions)[:, 0]
            return actions[:, 0].numpy(), log_probs.numpy(), vf(h)[:, 0].numpy()
    return act


def bare_learn_torch(config, weights, batch, seed, layout="channels_last"):
    trunk, pi, vf, to_input = torch_cnn(weights, layout)
    return bare_appo_torch_update(config, trunk, pi, vf, to_input, FRAME_SHAPE, batch, seed, "default")


# --- bare TensorFlow ----------------------------------------------------------------------------------------------
def tf_cnn(weights):
    """``(variables, trunk(uint8 [N, 4, 84, 84]) -> h [N, 512], heads(h) -> (logits, values))``, NHWC."""
    import tensorflow as tf
    layers = [(tf.Variable(k), tf.Variable(b)) for k, b in weights]
    variables = [x for layer in layers for x in layer]
    strides = (4, 2, 1)

    def trunk(obs):
        x = tf.cast(tf.transpose(obs, [0, 2, 3, 1]), tf.float32) / 255.0
        for (k, b), s in zip(layers[:3], strides):
            x = tf.nn.relu(tf.nn.conv2d(x, k, strides=s, padding="VALID") + b)
        kd, bd = layers[3]
        return tf.nn.relu(tf.matmul(tf.reshape(x, [-1, kd.shape[0]]), kd) + bd)

    def heads(h):
        (ka, ba), (kv, bv) = layers[4:]
        return tf.matmul(h, ka) + ba, (tf.matmul(h, kv) + bv)[:, 0]
    return variables, trunk, heads


def bare_act_tf(weights, seed=0):
    import tensorflow as tf
    _, trunk, heads = tf_cnn(weights)
    tf.random.set_seed(seed)

    @tf.function(input_signature=[tf.TensorSpec([None, *FRAME_SHAPE], tf.uint8)], autograph=False)
    def traced(obs):
        logits, values = heads(trunk(obs))
        actions = tf.random.categorical(logits, 1, dtype=tf.int32)[:, 0]
        log_probs = tf.gather(tf.nn.log_softmax(logits), actions, batch_dims=1)
        return actions, log_probs, values

    fn = traced.get_concrete_function()

    def act(obs):
        return tuple(x.numpy() for x in fn(obs))
    return act


def bare_learn_tf(config, weights, batch, seed):
    import tensorflow as tf
    variables, trunk, heads = tf_cnn(weights)
    return bare_appo_tf_update(config, variables, lambda x: heads(trunk(x)), tf.TensorSpec(FRAME_SHAPE, tf.uint8),
                               tf.int64, NUM_ACTIONS, batch, seed)


# --- measuring ---------------------------------------------------------------------------------------------------
def timed(fn, seconds, min_calls=2):
    """Seconds per call of ``fn`` over at least ``seconds`` (at least ``min_calls`` calls)."""
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if calls >= min_calls and elapsed >= seconds:
            return elapsed / calls


def interleaved(fns, rounds, seconds, warmup=2, min_calls=2):
    """Median seconds per call of each named function, repetitions interleaved, after ``warmup`` calls each."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(timed(fn, seconds, min_calls))
    return {name: statistics.median(t) for name, t in times.items()}


def measure_act(backend, rounds, seconds, seed=0, layout="channels_last", **overrides):
    """Sampling with inference: the sampler's ``get_actions`` call against the bare forward pass."""
    config = load_config(**overrides)
    n = config["environment_spec"]["num_envs"]
    agent = make_agent(config, backend, role="actor", seed=seed)
    weights = cnn_weights(agent)
    bare = bare_act_torch(weights, layout) if backend == "pytorch" else bare_act_tf(weights, seed)
    batches = [frames(np.random.default_rng(seed + i), n) for i in range(8)]
    actor, it = agent.actor, iter(range(1 << 62))

    def ours():
        return actor.get_actions(batches[next(it) % 8], explore=True)

    def bare_call():
        return bare(batches[next(it) % 8])

    _, extras = actor.get_actions(batches[0], explore=True)
    value_diff = float(np.max(np.abs(extras["values"] - bare(batches[0])[2])))
    t = interleaved(dict(ours=ours, bare=bare_call), rounds, seconds)
    return dict(part="act", backend=backend, batch=n, ours=n / t["ours"], bare=n / t["bare"],
                ratio=t["bare"] / t["ours"], ms_ours=t["ours"] * 1e3, ms_bare=t["bare"] * 1e3,
                value_diff=value_diff)


def measure_sampler(backend, rounds, seconds, seed=0, vector_steps=None, **overrides):
    """rlgraph's whole sampler (``RaySampler``, in this process) on Pong against the environment alone."""
    from rlgraph.engines.ray.ray_sampler import RaySampler
    from rlgraph.engines.runner import env_kwargs_of, make_vector_env
    config = load_config(**overrides)
    kwargs = env_kwargs_of(config, seed=seed)
    n = kwargs["num_envs"]
    steps = vector_steps or config["unroll_length"]
    sampler = RaySampler(0, config, kwargs, backend, seed, 0, n)
    env = make_vector_env(dict(kwargs, seed=seed + 1000))
    env.reset()
    actions = np.random.default_rng(seed).integers(0, NUM_ACTIONS, size=(256, n))
    it = iter(range(1 << 62))

    def run_sampler():
        sampler.sample(steps)

    def run_env():
        for _ in range(steps):
            env.step(actions[next(it) % 256])

    t = interleaved(dict(sampler=run_sampler, env=run_env), rounds, seconds, warmup=1)
    sampler.env.close()
    env.close()
    return dict(part="sampler", backend=backend, num_envs=n, sampler=steps * n / t["sampler"],
                env=steps * n / t["env"])


def measure_learn(backend, rounds, seconds, seed=0, layout="channels_last", **overrides):
    """Learning: ``agent.update(batch)`` against the bare training pass, same batch and minibatch order."""
    config = load_config(**overrides)
    agent = make_agent(config, backend, seed=seed)
    batch = pong_batch(config, np.random.default_rng(seed))
    weights = cnn_weights(agent)
    bare = (bare_learn_torch(config, weights, batch, seed, layout) if backend == "pytorch"
            else bare_learn_tf(config, weights, batch, seed))

    def ours():
        return agent.update(batch)["loss"]

    first_ours, first_bare = ours(), bare()  # Same weights, batch and minibatch order: the same first update.
    t = interleaved(dict(ours=ours, bare=bare), rounds, seconds, warmup=0, min_calls=1)
    n = config["unroll_length"] * config["environment_spec"]["num_envs"] * config["num_epochs"]
    return dict(part="learn", backend=backend, samples=n, ours=n / t["ours"], bare=n / t["bare"],
                ratio=t["bare"] / t["ours"], ms_ours=t["ours"] * 1e3, ms_bare=t["bare"] * 1e3,
                loss_ours=first_ours, loss_bare=first_bare)


def run_backend(backend, parts, args):
    """Runs in this process: the parts' measurements of one backend (a list of dicts)."""
    rows = []
    if "act" in parts:
        rows.append(measure_act(backend, args.rounds, args.seconds, layout=args.bare_layout))
    if "sampler" in parts:
        rows.append(measure_sampler(backend, args.sampler_rounds, args.seconds))
    if "learn" in parts:
        rows.append(measure_learn(backend, args.learn_rounds, 0.0, layout=args.bare_layout))
    return rows


def in_subprocess(backend, argv):
    cmd = [sys.executable, os.path.abspath(__file__), "--one", backend, *argv]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    sys.stderr.write("".join(line + "\n" for line in proc.stderr.splitlines() if line.startswith(f"[{backend}]")))
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = proc.stderr.strip().splitlines()
        return [dict(error=err[-1] if err else f"exit {proc.returncode}", backend=backend)]
    return json.loads(lines[-1])


def report(rows, layout):
    print(f"\nAPPO on Pong (configs/appo_pong.json), OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, bare PyTorch "
          f"layout {layout}; medians of interleaved repetitions; aim: rlgraph >= {AIM:.0%} of bare\n")
    print("| measurement | backend | batch | rlgraph | bare | ratio | aim | check |")
    print("|---|---|---|---|---|---|---|---|")
    act = {r["backend"]: r for r in rows if r.get("part") == "act"}
    for r in rows:
        if "error" in r:
            print(f"| error | {r['backend']} | {r['error']} | | | | | |")
        elif r["part"] == "act":
            mark = "ok" if r["ratio"] >= AIM else "below"
            print(f"| sampling with inference (samples/s) | {r['backend']} | {r['batch']} | {r['ours']:,.0f} | "
                  f"{r['bare']:,.0f} | {r['ratio']:.2f} | {mark} | max value diff {r['value_diff']:.1e} |")
        elif r["part"] == "learn":
            mark = "ok" if r["ratio"] >= AIM else "below"
            print(f"| learning (sample-passes/s) | {r['backend']} | {r['samples']} | {r['ours']:,.0f} | "
                  f"{r['bare']:,.0f} | {r['ratio']:.2f} | {mark} | first loss {r['loss_ours']:.5f} vs "
                  f"{r['loss_bare']:.5f} |")
    samplers = [r for r in rows if r.get("part") == "sampler"]
    if samplers:
        print("\n| sampler on AtariVectorEnv pong (env steps/s) | backend | envs | rlgraph sampler | env alone "
              "(random actions) | bare CNN inference alone | env + bare inference in sequence | sampler / that |")
        print("|---|---|---|---|---|---|---|---|")
        for r in samplers:
            inference = act.get(r["backend"], {}).get("bare")
            both = 1.0 / (1.0 / r["env"] + 1.0 / inference) if inference else None
            print(f"| | {r['backend']} | {r['num_envs']} | {r['sampler']:,.0f} | {r['env']:,.0f} | "
                  + (f"{inference:,.0f} | {both:,.0f} | {r['sampler'] / both:.2f} |" if both else "- | - | - |"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["tf", "pytorch"], action="append")
    parser.add_argument("--part", choices=["act", "sampler", "learn"], action="append")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved repetitions of the inference pair")
    parser.add_argument("--seconds", type=float, default=0.3, help="minimum time of one inference repetition")
    parser.add_argument("--sampler-rounds", type=int, default=3, help="interleaved repetitions of sampler/env")
    parser.add_argument("--learn-rounds", type=int, default=5, help="interleaved updates of each side (timed)")
    parser.add_argument("--bare-layout", choices=["channels_last", "nchw"], default="channels_last",
                        help="memory format of the bare PyTorch CNN's activations")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    parts = args.part or ["act", "sampler", "learn"]
    if args.one:  # A child process: one backend, printed as JSON.
        print(json.dumps(run_backend(args.one, parts, args)))
        return
    argv = [f"--rounds={args.rounds}", f"--seconds={args.seconds}", f"--sampler-rounds={args.sampler_rounds}",
            f"--learn-rounds={args.learn_rounds}", f"--bare-layout={args.bare_layout}"] + [
        f"--part={p}" for p in parts]
    rows = []
    for backend in args.backend or ["pytorch", "tf"]:
        start = time.perf_counter()
        rows += in_subprocess(backend, argv)
        print(f"[{backend}] done in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    report(rows, args.bare_layout)


if __name__ == "__main__":
    main()
