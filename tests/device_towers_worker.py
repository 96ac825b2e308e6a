"""Runs one update per agent with 1, 2 and 3 towers on one backend; prints the weight differences as JSON.

Used by ``tests/test_device_strategies.py`` in a subprocess per backend, because TensorFlow's logical CPU
devices must be configured before TensorFlow initialises its devices, which another test in the same
process may already have done. Usage: ``python tests/device_towers_worker.py tf|pytorch [--replicas] [KIND ...]``;
``--replicas`` (PyTorch) runs every tower on per-device weight replicas, as towers on several CUDA devices do,
here as copies on the CPU.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs")
KINDS = ("dqn", "apex", "impala", "appo", "r2d2")
#: Optimizer variants: plain SGD shows any gradient difference in the weights (Adam's first steps are nearly
#: sign(g) and invariant to a gradient scale); its small clip norm makes clipping act on the averaged gradients.
#: The configs' own optimizer (Adam) runs for APPO.
SGD = {"type": "sgd", "learning_rate": 0.1, "momentum": 0.5, "clip_grad_norm": 0.5}
VARIANTS = {kind: ("sgd",) for kind in KINDS}
VARIANTS["appo"] = ("sgd", "config")
#: Updates per run (the second from the weights and optimizer state the first left).
UPDATES = 2
#: Update batch (divides over 1, 2 and 3 towers) and unroll length.
BATCH, UNROLL = 12, 6


def setup_backend(backend, num_cpus=3):
    """On TF and JAX: ``num_cpus`` logical CPU devices (must run before anything initialises their devices)."""
    if backend == "jax":
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={num_cpus}"
    if backend == "tf":
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_cpus)


def devices_for(backend, k):
    return [f"cpu:{i}" for i in range(k)] if backend in ("tf", "jax") else ["cpu"] * k


def small_config(kind, optimizer="config"):
    with open(os.path.join(CONFIGS, f"{kind}_cartpole.json")) as f:
        config = json.load(f)
    config = {k: v for k, v in config.items() if k not in ("environment_spec", "train_spec", "description")}
    # Smaller networks keep the builds fast; the optimizers (Adam, clipping) stay the configs'.
    config["network_spec"] = [dict(layer, units=16) for layer in config["network_spec"]]
    if kind in ("impala", "appo"):
        config["unroll_length"] = UNROLL
    if optimizer == "sgd":
        config["optimizer_spec"] = dict(SGD)
    return config


def make_agent(kind, backend, towers, optimizer="config"):
    from rlgraph.agents import Agent
    from rlgraph.spaces import FloatBox, IntBox
    strategy = None if towers == 1 else {"type": "multi_device_sync", "devices": devices_for(backend, towers)}
    return Agent.from_spec(small_config(kind, optimizer), state_space=FloatBox(shape=(4,)), action_space=IntBox(2),
                           backend=backend, seed=3, device_strategy=strategy)


def update_call(agent, kind, rng):
    """``(api method, args, kwargs)`` of one update on a fixed random batch."""
    if kind in ("dqn", "apex"):
        records = dict(states=rng.normal(size=(BATCH, 4)).astype(np.float32),
                       actions=rng.integers(0, 2, BATCH), rewards=rng.normal(size=BATCH).astype(np.float32),
                       terminals=rng.random(BATCH) < 0.2, next_states=rng.normal(size=(BATCH, 4)).astype(np.float32))
        weights = rng.uniform(0.5, 1.0, BATCH).astype(np.float32)
        return "update_from_batch", (records, weights, 0.3), {}
    if kind in ("impala", "appo"):
        t, b = UNROLL, BATCH
        logits = rng.normal(size=(t, b, 2))
        actions = rng.integers(0, 2, (t, b))
        log_probs = np.take_along_axis(logits, actions[..., None], -1)[..., 0] - np.log(np.exp(logits).sum(-1))
        unroll = dict(states=rng.normal(size=(t, b, 4)).astype(np.float32), actions=actions,
                      rewards=rng.normal(size=(t, b)).astype(np.float32), terminals=rng.random((t, b)) < 0.1,
                      truncation_values=np.zeros((t, b), np.float32),
                      behaviour_log_probs=log_probs.astype(np.float32),
                      behaviour_values=rng.normal(size=(t, b)).astype(np.float32))
        bootstrap = dict(states=rng.normal(size=(b, 4)).astype(np.float32))
        return "update", (unroll, bootstrap, 0.3), {}
    root = agent.root
    b, t, burn_in, units = BATCH, root.memory.train_length, root.burn_in, agent.lstm_units
    bootstrap = np.zeros((b, t), bool)
    bootstrap[:, -root.loss_function.n_step:] = True
    sequences = dict(states=rng.normal(size=(b, t, 4)).astype(np.float32), actions=rng.integers(0, 2, (b, t)),
                     rewards=rng.normal(size=(b, t)).astype(np.float32), terminals=rng.random((b, t)) < 0.1,
                     bootstrap=bootstrap, resets=np.zeros((b, t), bool), mask=np.ones((b, t), bool))
    initial = (rng.normal(size=(b, units)).astype(np.float32), rng.normal(size=(b, units)).astype(np.float32))
    weights = rng.uniform(0.5, 1.0, b).astype(np.float32)
    kwargs = {}
    if burn_in:
        kwargs = dict(burn_in_states=rng.normal(size=(b, burn_in, 4)).astype(np.float32),
                      burn_in_resets=np.zeros((b, burn_in), bool))
    return "update_from_batch", (sequences, initial, weights, 0.3), kwargs


def run(backend, kinds=KINDS):
    """``{kind/optimizer: {towers: max |w_towers - w_1|, ...}}`` after ``UPDATES`` updates from the same
    weights on the same batches (all variables compared: weights, optimizer slots and step counter)."""
    results = {}
    for kind in kinds:
        for optimizer in VARIANTS[kind]:
            results[f"{kind}/{optimizer}"] = compare(kind, backend, optimizer)
    return results


def compare(kind, backend, optimizer):
    """Max abs differences to one device of all variables (``"2"``, ``"3"``) and of the last update's outputs
    (``"2_outputs"``, ...); ``update_size``: how far one device moved the weights."""
    reference, diffs = None, {}
    for towers in (1, 2, 3):
        agent = make_agent(kind, backend, towers, optimizer)
        if reference is None:
            initial = agent.executor.get_weights(trainable_only=False)
        else:
            agent.executor.set_weights(initial)
        rng = np.random.default_rng(7)
        for _ in range(UPDATES):
            name, args, kwargs = update_call(agent, kind, rng)
            out = agent.executor.execute(name, *args, **kwargs)
        weights = agent.executor.get_weights(trainable_only=False)
        if reference is None:
            reference = (weights, out)
            # The updates must move the weights for the comparison to mean anything.
            diffs["update_size"] = max(float(np.max(np.abs(v - initial[k])))
                                       for k, v in agent.executor.get_weights().items())
            continue
        diffs[str(towers)] = max(float(np.max(np.abs(weights[k] - v))) for k, v in reference[0].items())
        diffs[f"{towers}_outputs"] = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b))))
                                         for a, b in zip(_flat(reference[1]), _flat(out)))
    return diffs


def _flat(x):
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in _flat(x[k])]
    if isinstance(x, (tuple, list)):
        return [v for item in x for v in _flat(item)]
    return [x]


if __name__ == "__main__":
    backend, rest = sys.argv[1], sys.argv[2:]
    setup_backend(backend)
    if "--replicas" in rest:
        from rlgraph.executors.multi_device_sync import MultiDeviceSyncStrategy
        MultiDeviceSyncStrategy.replicate_on_one_device = True
        rest.remove("--replicas")
    print(json.dumps(run(backend, rest or KINDS)))
