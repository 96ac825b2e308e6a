"""Device strategies: synchronous multi-device towers (equivalence, placement, bad input, learning)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rlgraph.agents import Agent
from rlgraph.engines.execution_spec import ExecutionSpec
from rlgraph.executors.device_strategy import DeviceStrategy, make_device_strategy, parse_device
from rlgraph.executors.multi_device_sync import MultiDeviceSyncStrategy
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError
from small_configs import FINAL_EVAL_FLOOR

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import device_towers_worker as worker  # noqa: E402

STATE, ACTION = FloatBox(shape=(4,)), IntBox(2)


def towers(k):
    """``k`` towers on the CPU: on TF "cpu" repeated is /device:CPU:0 k times (no logical devices needed)."""
    return {"type": "multi_device_sync", "devices": ["cpu"] * k}


def dqn_agent(backend, strategy=None, **kwargs):
    return Agent.from_spec(dict(worker.small_config("dqn"), **kwargs), state_space=STATE, action_space=ACTION,
                           backend=backend, device_strategy=strategy)


def memory_records(n, seed=0):
    """``n`` random CartPole-shaped transitions for DQN's memory."""
    rng = np.random.default_rng(seed)
    return dict(states=rng.normal(size=(n, 4)).astype(np.float32), actions=rng.integers(0, 2, n),
                rewards=rng.normal(size=n).astype(np.float32), terminals=np.zeros(n, bool),
                next_states=rng.normal(size=(n, 4)).astype(np.float32))


# --- equivalence ---------------------------------------------------------------------------------------------
def test_towers_give_the_same_update_as_one_device(backend):
    """Updates with 2 and 3 towers equal those on the whole batch with one device (every agent; SGD with
    momentum and clipping, and the config's Adam for APPO; TF towers on 3 logical CPU devices).

    A subprocess per backend: TF's logical CPU devices must be set before TF initialises its devices.
    """
    _check_towers_equal_one_device([backend])


def test_pytorch_towers_on_weight_replicas_give_the_same_update_as_one_device():
    """PyTorch towers on other devices than the weights' run on per-device replicas of the variables: here
    every tower runs on copies (on the CPU), the path several CUDA devices take; same updates as one device."""
    _check_towers_equal_one_device(["pytorch", "--replicas"])


def _check_towers_equal_one_device(args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "device_towers_worker.py"), *args],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps(results, indent=1))
    assert sorted(results) == sorted(f"{k}/{o}" for k in worker.KINDS for o in worker.VARIANTS[k])
    for kind, diffs in results.items():
        assert diffs["update_size"] > 1e-4, (kind, diffs)
        for k in ("2", "3"):
            assert diffs[k] < 1e-5, (kind, k, diffs)
            assert diffs[f"{k}_outputs"] < 1e-5, (kind, k, diffs)


def test_update_from_memory_divides_its_batch_size(backend):
    """DQN samples its memory in the graph: each tower draws batch_size / K; one optimizer step."""
    agent = dqn_agent(backend, towers(2))
    agent.executor.execute("insert_records", memory_records(40))
    before = agent.get_weights()
    loss, mean_td = agent.executor.execute("update_from_memory", 16, 0.0)
    assert np.isfinite(loss) and np.isfinite(mean_td) and np.shape(loss) == ()
    steps = [v for k, v in agent.executor.get_weights(trainable_only=False).items() if k.endswith("/steps")]
    assert [int(s) for s in steps] == [1]
    assert any(np.max(np.abs(v - before[k])) > 0 for k, v in agent.get_weights().items())
    with pytest.raises(RLGraphSpaceError, match=r"a batch of 15 does not divide over 2 towers.*multiple of 2"):
        agent.executor.execute("update_from_memory", 15, 0.0)


def test_weight_replicas_refresh_and_write_back():
    """``WeightReplicas``: a tower sees its replicas (refreshed after the variables change), gradients come out
    for the variables themselves, and what a tower writes in place is copied back into the variable."""
    import torch
    from rlgraph.executors.weight_replicas import WeightReplicas
    from rlgraph.utils.placement import host_data_device
    weight = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    counter = torch.zeros((), dtype=torch.int64)
    replicas = WeightReplicas([weight, counter], "cpu", always_copy=True)
    storage = weight.data
    for step in range(1, 4):
        with replicas.on("cpu"):
            assert weight.data_ptr() != storage.data_ptr()  # A copy, not the variable's own storage.
            assert host_data_device() == torch.device("cpu")
            np.testing.assert_array_equal(weight.detach().numpy(), [step, 2 * step])
            (grad,) = torch.autograd.grad((weight * torch.tensor([3.0, 4.0])).sum(), [weight])
            with torch.no_grad():
                counter.add_(1)  # A write in the tower.
        assert weight.data_ptr() == storage.data_ptr() and host_data_device() is None
        np.testing.assert_array_equal(grad.numpy(), [3.0, 4.0])
        assert int(counter) == step  # Copied back.
        with torch.no_grad():
            weight.add_(torch.tensor([1.0, 2.0]))  # A step outside the towers: the next tower must see it.
    assert not WeightReplicas([weight], "cpu").needed("cpu")


def test_towers_on_replicas_sample_memory_as_without(monkeypatch):
    """DQN's update_from_memory on replicas (records sampled in the tower are placed on the tower's device)
    leaves the same weights, memory and outputs as towers without replicas."""
    results = []
    for replicate in (False, True):
        monkeypatch.setattr(MultiDeviceSyncStrategy, "replicate_on_one_device", replicate)
        agent = dqn_agent("pytorch", towers(2))
        assert (agent.executor.device_strategy.ops.replicas is not None) == replicate
        agent.executor.execute("insert_records", memory_records(40))
        outs = [agent.executor.execute("update_from_memory", 16, 0.0) for _ in range(3)]
        priorities = agent.root.memory.get_state()
        results.append((agent.executor.get_weights(trainable_only=False), outs, priorities))
    (plain, plain_outs, plain_memory), (replicated, replicated_outs, replicated_memory) = results
    assert set(plain) == set(replicated)
    for k in plain:
        np.testing.assert_allclose(replicated[k], plain[k], rtol=1e-6, atol=1e-7, err_msg=k)
    for a, b in zip(plain_outs, replicated_outs):
        np.testing.assert_allclose(np.asarray(b, np.float64), np.asarray(a, np.float64), rtol=1e-6)
    np.testing.assert_array_equal(replicated_memory["sum_tree"], plain_memory["sum_tree"])
    np.testing.assert_array_equal(replicated_memory["min_tree"], plain_memory["min_tree"])
    assert replicated_memory["max_priority"] == plain_memory["max_priority"]


def test_outputs_are_merged_along_the_batch_axis(backend):
    """Batched outputs are concatenated in tower order (td errors [B]); scalars averaged."""
    one, two = dqn_agent(backend), dqn_agent(backend, towers(3))
    two.executor.set_weights(one.executor.get_weights(trainable_only=False))
    _, args, _ = worker.update_call(one, "dqn", np.random.default_rng(1))
    loss1, td1 = one.executor.execute("update_from_batch", *args)
    loss3, td3 = two.executor.execute("update_from_batch", *args)
    assert td3.shape == td1.shape == (worker.BATCH,)
    np.testing.assert_allclose(td3, td1, atol=1e-6)
    np.testing.assert_allclose(loss3, loss1, atol=1e-6)


def test_impala_reports_the_norm_of_the_averaged_gradients(backend):
    kinds = {}
    for k in (1, 2):
        strategy = None if k == 1 else towers(2)
        agent = Agent.from_spec(worker.small_config("impala"), state_space=STATE, action_space=ACTION,
                                backend=backend, seed=3, device_strategy=strategy)
        _, args, _ = worker.update_call(agent, "impala", np.random.default_rng(2))
        kinds[k] = agent.executor.execute("update", *args)
    for key in ("loss", "grad_norm", "entropy", "mean_value"):
        np.testing.assert_allclose(kinds[2][key], kinds[1][key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", worker.KINDS)
def test_every_agent_learns_through_its_learner_with_towers(kind):
    """The agents' own update paths (memory sampling, minibatches, sequences) run with 2 towers unchanged."""
    from rlgraph.environments import VectorEnv
    from rlgraph.workers import VectorWorker
    config = worker.small_config(kind)
    if "update_spec" in config:
        config["update_spec"] = dict(config["update_spec"], batch_size=16, steps_before_update=64, update_interval=8)
    env = VectorEnv("CartPole-v1", num_envs=4, seed=0)
    agent = Agent.from_spec(config, state_space=env.state_space, action_space=env.action_space, backend="pytorch",
                            device_strategy=towers(2))
    results = VectorWorker(agent, env).run(400)["results"]
    assert agent.updates > 0 and results and np.isfinite(results[-1]["loss"]), results[-1:]


# --- placement and configuration -----------------------------------------------------------------------------
def test_describe_shows_towers_and_devices(backend):
    agent = dqn_agent(backend, towers(2))
    text = agent.executor.meta_graph.describe()
    lines = [ln for ln in text.splitlines() if ln.startswith("[2 towers")]
    assert len(lines) == 2  # update_from_memory and update_from_batch; acting methods are not towered.
    device = {"tf": "/device:CPU:0", "jax": "cpu:0"}.get(backend, "cpu")
    assert f"tower 0: {device}, tower 1: {device}" in lines[0]
    assert set(agent.executor.meta_graph.towers) == {"update_from_memory", "update_from_batch"}


_GRAPH_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
import device_towers_worker as worker
worker.setup_backend("tf", 2)
from rlgraph.executors.graph_summary import write_graph_summaries
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
agent = worker.make_agent("appo", "tf", 2)
write_graph_summaries(agent.executor, {logdir!r})
events = EventAccumulator({logdir!r} + "/graphs/update")
events.Reload()
print(sorted({{node.device for node in events.Graph().node if node.device}}))
"""


def test_tensorboard_graph_shows_the_towers_devices(tmp_path):
    """The update's TF graph, written for TensorBoard, places each tower's ops on its own (logical) device; the
    run's graph.txt lists the towers."""
    script = _GRAPH_SCRIPT.format(here=HERE, logdir=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "['/device:CPU:0', '/device:CPU:1']"
    text = (tmp_path / "graph.txt").read_text()
    assert "[2 towers, gradients averaged, one step] tower 0: /device:CPU:0, tower 1: /device:CPU:1" in text


def test_execution_spec_sets_the_strategy_of_learners_only(backend):
    config = dict(worker.small_config("dqn"),
                  execution_spec={"device_strategy": "multi_device_sync", "devices": ["cpu", "cpu"]})
    ExecutionSpec.from_config(config)  # The engines' check accepts the keys.
    learner = Agent.from_spec(config, state_space=STATE, action_space=ACTION, backend=backend, role="learner")
    assert isinstance(learner.executor.device_strategy, MultiDeviceSyncStrategy)
    assert learner.executor.device_strategy.devices == ["cpu", "cpu"]
    actor = Agent.from_spec(config, state_space=STATE, action_space=ACTION, backend=backend, role="actor")
    assert type(actor.executor.device_strategy) is DeviceStrategy
    # A model stored with towers is the same model: the strategy is a runtime key.
    plain = Agent.from_spec(worker.small_config("dqn"), state_space=STATE, action_space=ACTION, backend=backend)
    assert plain.config_hash() == learner.config_hash()


def test_execution_spec_checks_its_device_keys():
    with pytest.raises(RLGraphSpecError, match=r"execution_spec.devices: .*needs a list of devices"):
        ExecutionSpec.from_config({"execution_spec": {"device_strategy": "multi_device_sync"}})
    with pytest.raises(RLGraphSpecError, match=r"execution_spec.device_strategy: expected one of"):
        ExecutionSpec.from_config({"execution_spec": {"device_strategy": "mirrored"}})
    with pytest.raises(RLGraphSpecError, match=r"execution_spec.devices: devices need device_strategy"):
        ExecutionSpec.from_config({"execution_spec": {"devices": ["gpu:0"]}})
    spec = ExecutionSpec.from_config({})
    assert spec.device_strategy == "default" and spec.devices is None


# --- bad input -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["tpu:0", "gpu:x", "cuda-1", "", 3])
def test_a_device_that_does_not_parse_is_refused(device):
    with pytest.raises(RLGraphSpecError, match=r"cannot parse device"):
        make_device_strategy({"type": "multi_device_sync", "devices": ["cpu", device]})


def test_parse_device_accepts_the_usual_spellings():
    assert parse_device("cpu") == ("cpu", 0) and parse_device("CPU:2") == ("cpu", 2)
    assert parse_device("cuda:1") == parse_device("gpu:1") == parse_device("/device:GPU:1") == ("gpu", 1)
    assert parse_device("/gpu:0") == ("gpu", 0)


def test_bad_strategy_specs_are_refused():
    with pytest.raises(RLGraphSpecError, match=r"unknown device strategy 'mirrored'"):
        make_device_strategy("mirrored")
    with pytest.raises(RLGraphSpecError, match=r"needs a non-empty list of devices"):
        make_device_strategy({"type": "multi_device_sync"})
    with pytest.raises(RLGraphSpecError, match=r"unknown key\(s\) \['num_towers'\]"):
        make_device_strategy({"type": "multi_device_sync", "devices": ["cpu"], "num_towers": 2})
    assert type(make_device_strategy(None)) is DeviceStrategy


def test_more_devices_than_exist_are_refused_at_build(backend):
    # TF in this process has one CPU device (no logical devices configured); PyTorch here has no CUDA device.
    devices = ["cpu:0", "cpu:1"] if backend == "tf" else ["cuda:0", "cuda:1"]
    if backend == "pytorch":
        import torch
        if torch.cuda.device_count() >= 2:
            pytest.skip("this machine has 2 CUDA devices")
    with pytest.raises(RLGraphSpecError, match=r"devices\[\d\]: device '(cpu|cuda):1' does not exist|"
                                               r"devices\[0\]: device 'cuda:0' does not exist"):
        dqn_agent(backend, {"type": "multi_device_sync", "devices": devices})


def test_a_batch_that_does_not_divide_is_refused_before_it_runs(backend):
    agent = dqn_agent(backend, towers(3))
    before = agent.executor.get_weights(trainable_only=False)
    _, (records, weights, tp), _ = worker.update_call(agent, "dqn", np.random.default_rng(0))
    cut = {k: v[:10] for k, v in records.items()}
    with pytest.raises(RLGraphSpaceError, match=r"argument 'records': a batch of 10 does not divide over 3 towers"):
        agent.executor.execute("update_from_batch", cut, weights[:10], tp)
    after = agent.executor.get_weights(trainable_only=False)
    assert all(np.array_equal(after[k], v) for k, v in before.items())


def test_appo_minibatches_that_do_not_divide_name_the_config_keys():
    agent = Agent.from_spec(worker.small_config("appo"), state_space=STATE, action_space=ACTION,
                            backend="pytorch", device_strategy=towers(3))
    _, args, _ = worker.update_call(agent, "appo", np.random.default_rng(0))
    unroll, bootstrap, tp = args
    with pytest.raises(RLGraphSpaceError, match=r"a batch of 8 does not divide over 3 towers.*num_minibatches"):
        agent.executor.execute("update", {k: v[:, :8] for k, v in unroll.items()},
                               {k: v[:8] for k, v in bootstrap.items()}, tp)


# --- learning ----------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_appo_with_two_towers_learns_cartpole(backend, tmp_path):
    with open(os.path.join(worker.CONFIGS, "appo_cartpole.json")) as f:
        config = json.load(f)
    config["execution_spec"] = {"device_strategy": "multi_device_sync", "devices": ["cpu", "cpu"]}
    path = tmp_path / "appo_towers.json"
    path.write_text(json.dumps(config))
    logdir = str(tmp_path / f"appo-towers-{backend}")
    code = "import sys; from rlgraph.cli import main; sys.exit(main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", code, "train", str(path), "--backend", backend, "--steps", "1500000", "--seed", "1",
           "--logdir", logdir]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        summary = json.load(f)
    assert summary["steps_to_target"] is not None, summary
    assert summary["last_evaluation"][2] >= 450 and summary["eval_mean_return"] >= FINAL_EVAL_FLOOR, summary
