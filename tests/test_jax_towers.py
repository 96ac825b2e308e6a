"""Multi-device towers on JAX: an update sharded over XLA devices equals one device's update.

The towers' devices are logical CPU devices (``XLA_FLAGS=--xla_force_host_platform_device_count=N``), which must be
set before JAX initialises its backend: the checks that need several devices run this file as a script in a
subprocess (``python tests/test_jax_towers.py KIND ...`` prints one JSON line). The refusals run in this process,
whose JAX has the devices it was started with.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
#: Logical CPU devices of the subprocess.
NUM_DEVICES = 3

if __name__ == "__main__":
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={NUM_DEVICES}").strip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

sys.path.insert(0, HERE)
import device_towers_worker as worker  # noqa: E402

pytest.importorskip("jax")

from rlgraph.agents import Agent  # noqa: E402
from rlgraph.spaces import FloatBox, IntBox  # noqa: E402
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError  # noqa: E402

STATE, ACTION = FloatBox(shape=(4,)), IntBox(2)


def dqn_agent(devices, **kwargs):
    strategy = None if devices is None else {"type": "multi_device_sync", "devices": devices}
    return Agent.from_spec(worker.small_config("dqn", **kwargs), state_space=STATE, action_space=ACTION,
                           backend="jax", seed=3, device_strategy=strategy)


def _run_script(*kinds):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *kinds], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check_equal(results, kinds):
    assert sorted(results["updates"]) == sorted(f"{k}/{o}" for k in kinds for o in worker.VARIANTS[k])
    for kind, diffs in results["updates"].items():
        assert diffs["update_size"] > 1e-4, (kind, diffs)  # The updates moved the weights.
        for k in ("2", "3"):
            assert diffs[k] < 1e-5, (kind, k, diffs)
            assert diffs[f"{k}_outputs"] < 1e-5, (kind, k, diffs)


# --- several devices (subprocess) ---------------------------------------------------------------------------------
def test_towers_over_xla_devices_give_the_same_update_as_one_device():
    """DQN's update_from_batch (SGD with momentum and clipping, two updates) on 2 and 3 CPU devices: all variables
    and outputs within 1e-5 of one device on the whole batch; the program is sharded (its batch parameters split
    over the devices, the gradients all-reduced); update_from_memory draws its batch once and steps once; a batch
    that does not divide over the devices is refused before it runs."""
    results = _run_script("dqn")
    _check_equal(results, ["dqn"])
    hlo = results["hlo"]
    assert hlo["all_reduce"], hlo
    assert hlo["sharded_parameters"] >= 5, hlo  # The five record fields and the importance weights.
    memory = results["memory"]
    assert memory["steps"] == [1] and memory["finite"] and memory["moved"] and memory["all_reduce"], memory
    assert "a batch of 10 does not divide over 3 towers" in results["uneven"]["error"], results["uneven"]
    assert results["uneven"]["unchanged"], results["uneven"]


@pytest.mark.slow
def test_appo_towers_over_xla_devices_give_the_same_update_as_one_device():
    """APPO's update (V-trace, time-major unrolls sharded along axis 1) with SGD and the config's Adam."""
    _check_equal(_run_script("appo"), ["appo"])


# --- refusals (this process) ---------------------------------------------------------------------------------------
def test_more_devices_than_exist_are_refused_at_build():
    import jax
    have = len(jax.devices("cpu"))
    with pytest.raises(RLGraphSpecError, match=rf"device_strategy.devices\[1\]: device 'cpu:{have}' does not exist: "
                                               rf"JAX has {have} CPU device\(s\) .*xla_force_host_platform_device"):
        dqn_agent(["cpu:0", f"cpu:{have}"])
    try:
        gpus = len(jax.devices("gpu"))
    except RuntimeError:
        gpus = 0
    with pytest.raises(RLGraphSpecError, match=rf"devices\[0\]: device 'gpu:{gpus}' does not exist: JAX has {gpus} "
                                               rf"GPU device\(s\)"):
        dqn_agent([f"gpu:{gpus}", "cpu"])


def test_towers_on_one_device_refuse_a_batch_that_does_not_divide_and_equal_one_device():
    """Towers repeating one device run the one program there; the batch check is the other backends'."""
    one, three = dqn_agent(None, optimizer="sgd"), dqn_agent(["cpu"] * 3, optimizer="sgd")
    three.executor.set_weights(one.executor.get_weights(trainable_only=False))
    before = three.executor.get_weights(trainable_only=False)
    _, (records, weights, tp), _ = worker.update_call(three, "dqn", np.random.default_rng(0))
    with pytest.raises(RLGraphSpaceError, match=r"argument 'records': a batch of 10 does not divide over 3 towers "
                                                r"\(device_strategy multi_device_sync on \['cpu', 'cpu', 'cpu'\]\)"):
        three.executor.execute("update_from_batch", {k: v[:10] for k, v in records.items()}, weights[:10], tp)
    after = three.executor.get_weights(trainable_only=False)
    assert all(np.array_equal(after[k], v) for k, v in before.items())
    outs = [agent.executor.execute("update_from_batch", records, weights, tp) for agent in (one, three)]
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, atol=1e-6)
    w1, w3 = one.executor.get_weights(), three.executor.get_weights()
    assert max(float(np.max(np.abs(w1[k] - before[k]))) for k in w1) > 1e-4
    for k in w1:
        np.testing.assert_allclose(w3[k], w1[k], atol=1e-6, err_msg=k)


def test_distributed_sync_on_jax_needs_a_learner_group():
    """JAX runs distributed_sync (tests/test_jax_distributed.py), in a learner process only: outside one, the strategy
    says how to start learners."""
    from rlgraph.executors.distributed_sync import DistributedSyncStrategy
    from rlgraph.executors.jax_executor import JaxExecutor
    from rlgraph.components.layers import DenseLayer
    with pytest.raises(RLGraphSpecError, match=r"'distributed_sync' needs this process to be one of a run's learners"):
        JaxExecutor(DenseLayer(units=2), input_spaces={"inputs": FloatBox(shape=(3,), add_batch_rank=True)},
                    device_strategy=DistributedSyncStrategy(["cpu"]))


# --- the subprocess ---------------------------------------------------------------------------------------------
def _sharding_report(executor, method):
    """Whether the method's last program all-reduces, and how many of its parameters are split over the devices."""
    text = executor.program_text(method)
    parameters = [ln for ln in text[text.index("ENTRY"):].splitlines() if " parameter(" in ln]
    return {"all_reduce": "all-reduce" in text,
            "sharded_parameters": sum(f"sharding={{devices=[{NUM_DEVICES}" in ln for ln in parameters)}


def _main(kinds):
    import jax
    assert len(jax.devices("cpu")) == NUM_DEVICES, jax.devices()
    worker.devices_for = lambda backend, k: [f"cpu:{i}" for i in range(k)]
    results = {"updates": worker.run("jax", kinds)}
    if "dqn" in kinds:
        devices = [f"cpu:{i}" for i in range(NUM_DEVICES)]
        agent = dqn_agent(devices, optimizer="sgd")
        name, args, _ = worker.update_call(agent, "dqn", np.random.default_rng(0))
        agent.executor.execute(name, *args)
        results["hlo"] = _sharding_report(agent.executor, name)
        rng = np.random.default_rng(0)
        n = 40
        agent.executor.execute("insert_records", dict(
            states=rng.normal(size=(n, 4)).astype(np.float32), actions=rng.integers(0, 2, n),
            rewards=rng.normal(size=n).astype(np.float32), terminals=np.zeros(n, bool),
            next_states=rng.normal(size=(n, 4)).astype(np.float32)))
        before = agent.executor.get_weights(trainable_only=False)
        loss, mean_td = agent.executor.execute("update_from_memory", 12, 0.0)
        after = agent.executor.get_weights(trainable_only=False)
        steps = [int(v) for k, v in after.items() if k.endswith("/steps")]
        steps_before = [int(v) for k, v in before.items() if k.endswith("/steps")]
        results["memory"] = {"steps": [a - b for a, b in zip(steps, steps_before)],
                             "finite": bool(np.isfinite(loss) and np.isfinite(mean_td)),
                             "moved": any(np.max(np.abs(v - before[k])) > 0 for k, v in after.items()),
                             "all_reduce": _sharding_report(agent.executor, "update_from_memory")["all_reduce"]}
        records, weights, tp = args
        try:
            agent.executor.execute(name, {k: v[:10] for k, v in records.items()}, weights[:10], tp)
            error = None
        except RLGraphSpaceError as e:
            error = str(e)
        now = agent.executor.get_weights(trainable_only=False)
        unchanged = all(np.array_equal(v, after[k]) for k, v in now.items())
        results["uneven"] = {"error": error, "unchanged": unchanged}
    print(json.dumps(results))


if __name__ == "__main__":
    _main(sys.argv[1:] or ["dqn"])
