"""Exact resume: a run stopped, stored and resumed goes on as the straight run does.

Unit tests: the run-state files (numpy + JSON, no pickle), every memory's and trajectory builder's
``get_state``/``set_state`` round trip (what is sampled or emitted after a restore equals what the original
gives), the backends' random-number state, the native vector CartPole's state. End to end, through the
command line: 8000 steps straight and 4000 + 4000 resumed make the same updates and end with the same
weights (exactly: every random draw of a run, numpy's, torch's and the TF graphs', comes from a generator
whose state the checkpoint holds, and the float computations repeat in the same order).
"""
import json
import logging
import os

import numpy as np
import pytest

from rlgraph.components.memories import FIFOQueue, PrioritizedReplay, ReplayMemory
from rlgraph.environments import VectorEnv
from rlgraph.engines.ray.replay_shard import ReplayShard
from rlgraph.spaces import Dict, FloatBox, IntBox
from rlgraph.tests import ComponentTest
from rlgraph.trajectories import NStepBuilder, SequenceBuilder, UnrollBuilder
from rlgraph.utils.backend import backend_available
from rlgraph.utils.errors import RLGraphCheckpointError
from rlgraph.utils.run_state import ARRAYS_FILE, TREE_FILE, load_run_state, save_run_state

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
RECORDS = Dict(states=FloatBox(shape=(2,)), actions=IntBox(10 ** 6), add_batch_rank=True)


def records(start, n):
    ids = np.arange(start, start + n)
    return {"states": np.stack([ids, -ids], axis=1).astype(np.float32), "actions": ids.astype(np.int32)}


def through_files(tmp_path, state):
    """``state`` written with ``save_run_state`` and read back (what a checkpoint does to it)."""
    save_run_state(str(tmp_path), state)
    return load_run_state(str(tmp_path))


def assert_tree_equal(a, b):
    assert type(a) is type(b) or (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_tree_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_tree_equal(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


# ------------------------------------------------------------------------------------------ run-state files


def test_run_state_files_round_trip_without_pickle(tmp_path):
    rng = np.random.default_rng(3)
    state = {"a": np.arange(5, dtype=np.int64), "nested": {"t": (np.ones((2, 3), np.float32), None, 1.5),
                                                          "flags": np.array([True, False])},
             "rng": rng.bit_generator.state, "list": [1, "x", np.zeros(0, np.uint8)], "__array__": 7,
             "scalar": np.float32(0.25)}
    back = through_files(tmp_path, state)
    expected = dict(state, scalar=0.25)
    assert_tree_equal(expected, back)
    np.load(tmp_path / ARRAYS_FILE, allow_pickle=False).close()  # Plain numpy arrays only.
    assert load_run_state(str(tmp_path / "nothing-here")) is None


def test_run_state_files_refuse_what_cannot_be_stored_and_damage(tmp_path):
    with pytest.raises(RLGraphCheckpointError, match="dtype object"):
        save_run_state(str(tmp_path), {"x": np.array([object()], dtype=object)})
    with pytest.raises(RLGraphCheckpointError, match="set cannot be stored"):
        save_run_state(str(tmp_path), {"x": {1, 2}})
    with pytest.raises(RLGraphCheckpointError, match="keys must be str"):
        save_run_state(str(tmp_path), {"x": {1: 2}})
    save_run_state(str(tmp_path), {"x": np.ones(3)})
    (tmp_path / ARRAYS_FILE).write_bytes(b"not a zip file")
    with pytest.raises(RLGraphCheckpointError, match="cannot be read"):
        load_run_state(str(tmp_path))
    (tmp_path / TREE_FILE).write_text(json.dumps({"format": "something else"}))
    with pytest.raises(RLGraphCheckpointError, match="cannot be read"):
        load_run_state(str(tmp_path))


# ----------------------------------------------------------------------------------------------- memories


def test_prioritized_replay_state_round_trip(backend, tmp_path):
    memory = PrioritizedReplay(100, alpha=0.6, beta=0.4)
    test = ComponentTest(memory, input_spaces=dict(records=RECORDS, num_records=int,
                                                   indices=IntBox(shape=(), dtype="int64", add_batch_rank=True),
                                                   priorities=FloatBox(add_batch_rank=True)), backend=backend)
    test.test(("insert_records", [records(0, 30)]))
    _, indices, _ = test.test(("get_records", [8]))
    test.test(("update_records", [indices, np.linspace(0.1, 3.0, 8).astype(np.float32)]))
    state = through_files(tmp_path, memory.get_state())
    first = test.test(("get_records", [16]))
    test.test(("insert_records", [records(100, 20)]))
    memory.set_state(state)
    again = test.test(("get_records", [16]))
    assert test.test("get_size") == 30
    assert_tree_equal(first, again)
    test.terminate()


def test_fifo_queue_state_round_trip(backend, tmp_path):
    queue = FIFOQueue(10, timeout=5.0)
    test = ComponentTest(queue, input_spaces=dict(records=RECORDS, num_records=int), backend=backend)
    test.test(("insert_records", [records(0, 7)]))
    test.test(("get_records", [3]))
    state = through_files(tmp_path, queue.get_state())
    first = test.test(("get_records", [4]))
    queue.set_state(state)
    assert test.test("get_size") == 4
    assert_tree_equal(first, test.test(("get_records", [4])))
    test.terminate()


def test_replay_memory_samples_again_after_backend_rng_restore(backend):
    """ReplayMemory's storage is variables (in the model); its sampling draws from the backend's generator."""
    test = ComponentTest(ReplayMemory(50), input_spaces=dict(records=RECORDS, num_records=int), backend=backend)
    test.test(("insert_records", [records(0, 40)]))
    state = test.executor.get_rng_state()
    first = test.test(("get_records", [12]))
    second = test.test(("get_records", [12]))
    assert not np.array_equal(first["actions"], second["actions"])
    test.executor.set_rng_state(state)
    assert_tree_equal(first, test.test(("get_records", [12])))
    test.terminate()


def test_replay_shard_state_round_trip(tmp_path):
    shard = ReplayShard(("states", "pair"), 50, 0.6, 0.4, seed=5)
    shard.add([{"states": np.arange(20, dtype=np.float32)[:, None],
                "pair": (np.arange(20), np.ones(20, bool)), "priorities": np.linspace(0.5, 2, 20)}])
    state = through_files(tmp_path, shard.get_state())
    first = shard.sample(6)
    other = ReplayShard(("states", "pair"), 50, 0.6, 0.4, seed=99)
    other.set_state(state)
    assert_tree_equal(first, other.sample(6))


# ------------------------------------------------------------------------------------- trajectory builders


def _steps(rng, num_steps, ids, with_state=False):
    out = []
    for _ in range(num_steps):
        n = len(ids)
        step = dict(states=rng.normal(size=(n, 3)).astype(np.float32), actions=rng.integers(0, 2, n),
                    rewards=rng.normal(size=n).astype(np.float32), next_states=rng.normal(size=(n, 3)),
                    terminals=rng.random(n) < 0.1, truncations=rng.random(n) < 0.05)
        if with_state:
            step["internal_states"] = (rng.normal(size=(n, 4)).astype(np.float32), np.zeros((n, 4), np.float32))
        out.append(step)
    return out


def _replay(builder, steps, ids, add):
    return [add(builder, ids, step) for step in steps]


@pytest.mark.parametrize("kind", ["n-step", "unroll", "sequence"])
def test_builder_state_round_trip(kind, tmp_path):
    rng = np.random.default_rng(0)
    ids = np.array([7, 2, 11, 5])
    if kind == "n-step":
        make, add = (lambda: NStepBuilder(3, 0.9)), (lambda b, i, s: b.add(i, s))
    elif kind == "unroll":
        make = lambda: UnrollBuilder(5, first_keys=("states",), last_keys=("next_states",))  # noqa: E731
        add = lambda b, i, s: b.add(i, s)  # noqa: E731
    else:
        make = lambda: SequenceBuilder(6, 3, start_padding=2)  # noqa: E731

        def add(b, i, s):
            s = dict(s)
            s["dones"] = s.pop("terminals") | s.pop("truncations")
            return b.add(i, s)
    original = make()
    _replay(original, _steps(rng, 13, ids, kind == "sequence"), ids, add)
    assert original.num_pending_steps > 0
    state = through_files(tmp_path, original.get_state())
    later = _steps(rng, 17, ids, kind == "sequence")
    restored = make()
    restored.set_state(state)
    assert restored.num_pending_steps == original.num_pending_steps
    for a, b in zip(_replay(original, later, ids, add), _replay(restored, later, ids, add)):
        assert (a is None) == (b is None)
        if a is not None:
            assert_tree_equal(a, b)


def test_builder_refuses_a_state_that_does_not_fit():
    builder = NStepBuilder(3, 0.9)
    builder.add([0, 1], _steps(np.random.default_rng(0), 1, [0, 1])[0])
    state = builder.get_state()
    with pytest.raises(RLGraphCheckpointError, match="does not fit"):
        UnrollBuilder(4).set_state(state)
    bad = dict(state, fields=dict(state["fields"], head=np.zeros(3, np.int64)))
    with pytest.raises(RLGraphCheckpointError, match="field 'head'"):
        NStepBuilder(3, 0.9).set_state(bad)


# ------------------------------------------------------------------------------------------- environments


def test_native_cartpole_state_round_trip(tmp_path):
    env = VectorEnv("CartPole-v1", num_envs=6, seed=3, vectorization="native")
    assert env.state_saveable
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(40):
        env.step(rng.integers(0, 2, 6))
    state = through_files(tmp_path, env.get_state())
    actions = rng.integers(0, 2, (60, 6))

    def play(e):
        out = [e.step(a) for a in actions]
        return out, e.pop_finished_episodes(), e.episode_returns.copy()
    first = play(env)
    other = VectorEnv("CartPole-v1", num_envs=6, seed=99, vectorization="native")
    other.reset()
    other.set_state(state)
    assert_tree_equal(first, play(other))
    with pytest.raises(RLGraphCheckpointError, match="does not fit"):
        VectorEnv("CartPole-v1", num_envs=4, vectorization="native").set_state(state)


def test_an_env_without_a_state_says_so():
    env = VectorEnv("CartPole-v1", num_envs=2, seed=0, vectorization="sync")
    env.reset()
    assert not env.state_saveable and env.get_state() is None
    with pytest.raises(RLGraphCheckpointError, match="cannot restore"):
        env.set_state({})


# ------------------------------------------------------------------------------------- agents and workers


def _small_config(kind, path, execution_spec=None, update_changes=None):
    """A small config of ``configs/<kind>_cartpole.json``: chunks of 2000 steps (4000 is a chunk boundary);
    ``update_changes`` go into its ``update_spec``."""
    with open(os.path.join(CONFIGS, f"{kind}_cartpole.json")) as f:
        config = json.load(f)
    if execution_spec is not None:
        config["execution_spec"] = execution_spec
    config["train_spec"] = dict(chunk_steps=2000, eval_episodes=0, stop_at_target=False,
                                checkpoint_every_seconds=3600)
    config["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 8}
    if kind in ("dqn", "apex"):
        config["network_spec"] = [{"type": "dense", "units": 16, "activation": "relu"}]
        config["memory_spec"]["capacity"] = 4000
        config["update_spec"] = dict(batch_size=16, update_interval=16, steps_before_update=500, sync_interval=500)
    if kind == "r2d2":
        config["network_spec"] = [{"type": "dense", "units": 16, "activation": "relu"},
                                  {"type": "lstm", "units": 16}]
        config["memory_spec"]["capacity"] = 500
        config["update_spec"] = dict(batch_size=16, update_interval=64, steps_before_update=1000, sync_interval=500)
    if update_changes:
        config["update_spec"] = dict(config["update_spec"], **update_changes)
    with open(path, "w") as f:
        json.dump(config, f)
    return str(path)


def _stored_weights(logdir):
    """The weights of the run's current checkpoint, read without an agent (numpy arrays by name, any backend)."""
    with np.load(os.path.join(logdir, "checkpoint", "model", "variables.npz"), allow_pickle=False) as stored:
        return {k: stored[k] for k in stored.files}


@pytest.mark.parametrize("kind", ["dqn", "apex", "impala", "appo"])
def test_resumed_run_equals_straight_run(kind, backend, tmp_path):
    """8000 steps straight == 4000 steps, stored, resumed to 8000: same updates and the very same weights."""
    _check_straight_equals_resumed(kind, backend, tmp_path)


@pytest.mark.parametrize("backend_name", ["pytorch", pytest.param("tf", marks=pytest.mark.slow)])
def test_resumed_r2d2_equals_straight_run(backend_name, tmp_path):
    """R2D2 too (partial sequences with their recurrent states, the worker's internal states); on TF its three
    runs take ~35 s, so that one counts as slow."""
    if not backend_available(backend_name):
        pytest.skip(f"backend {backend_name} is not installed")
    _check_straight_equals_resumed("r2d2", backend_name, tmp_path)


def _train_in_process(args):
    from rlgraph import cli
    assert cli.main(["train", *args]) in (0, None)


def _check_straight_equals_resumed(kind, backend, tmp_path, extra=(), train=_train_in_process, execution_spec=None,
                                   update_changes=None):
    """Runs 8000 steps straight and 4000 + resumed 4000 (``train(args)`` runs ``rlgraph train ARGS``); checks
    that both make the same updates and end with the same weights; returns both summaries."""
    config = _small_config(kind, tmp_path / "config.json", execution_spec, update_changes)
    common = ["--backend", backend, "--seed", "0", *extra]
    straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
    train([config, *common, "--steps", "8000", "--logdir", straight])
    train([config, *common, "--steps", "4000", "--logdir", resumed])
    train([config, *common, "--steps", "8000", "--logdir", resumed, "--resume"])
    summaries = [json.load(open(os.path.join(d, "summary.json"))) for d in (straight, resumed)]
    assert summaries[0]["env_steps"] == summaries[1]["env_steps"] == 8000
    assert summaries[0]["updates"] == summaries[1]["updates"] > 0
    assert summaries[0]["episodes"] == summaries[1]["episodes"]
    a, b = _stored_weights(straight), _stored_weights(resumed)
    assert sorted(a) == sorted(b)
    for key in a:
        # Exact: the resumed run repeats the straight run's computations in the same order on the same data.
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    return summaries


def _worker(backend, vectorization):
    from rlgraph.agents import Agent
    from rlgraph.workers import VectorWorker
    env = VectorEnv("CartPole-v1", num_envs=4, seed=0, vectorization=vectorization)
    config = json.load(open(os.path.join(CONFIGS, "dqn_cartpole.json")))
    config.update(network_spec=[{"type": "dense", "units": 8}], memory_spec={"type": "prioritized-replay",
                                                                               "capacity": 500},
                  update_spec=dict(batch_size=8, update_interval=4, steps_before_update=100, sync_interval=100))
    agent = Agent.from_spec(config, state_space=env.state_space, action_space=env.action_space, backend=backend)
    return VectorWorker(agent, env)


def test_worker_without_env_state_warns_once_and_resumes_from_fresh_envs(tmp_path, caplog):
    worker = _worker("pytorch", "sync")
    worker.run(300)
    with caplog.at_level(logging.WARNING, logger="rlgraph.workers.vector_worker"):
        worker.store(str(tmp_path / "m1"))
        worker.store(str(tmp_path / "m2"))
    assert sum("cannot be saved" in r.getMessage() for r in caplog.records) == 1
    other = _worker("pytorch", "sync")
    with caplog.at_level(logging.WARNING, logger="rlgraph.workers.vector_worker"):
        other.load(str(tmp_path / "m2"))
    assert any("fresh environments" in r.getMessage() for r in caplog.records)
    learner = other.agent.learner
    assert learner.stored_records == worker.agent.learner.stored_records
    assert learner.last_update_timestep == worker.agent.learner.last_update_timestep
    assert other.agent.builder.num_pending_steps == 0  # The stored run's partial episodes are gone.
    assert other.agent.root.memory.get_state()["size"] == worker.agent.root.memory.get_state()["size"]
    other.run(100)


def test_agent_refuses_a_run_state_of_another_agent(tmp_path):
    worker = _worker("pytorch", "native")
    worker.run(50)
    state = worker.agent.get_run_state()
    with pytest.raises(RLGraphCheckpointError, match="belongs to"):
        worker.agent.set_run_state(dict(state, agent="IMPALAAgent"))
    bad = dict(state, components={"no-such-component": {}})
    with pytest.raises(RLGraphCheckpointError, match="does not fit"):
        worker.agent.set_run_state(bad)


def test_ray_replay_engine_stores_and_restores_the_learners_replay(tmp_path):
    """On Ray, the learner's side (replay shards, counters, schedules) is stored and restored; the actors'
    environments start afresh (a Ray run's timing makes it irreproducible anyway)."""
    ray = pytest.importorskip("ray")
    from rlgraph.engines.runner import load_config, make_engine
    config, _ = load_config(_small_config("apex", tmp_path / "config.json"))
    config["execution_spec"] = dict(num_actors=1, envs_per_actor=4, num_replay_shards=2, sample_steps=16)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    engines = []
    try:
        engine, agent, _ = make_engine(config, executor="ray", backend="pytorch", seed=0)
        engines.append(engine)
        engine.run(1500)
        path = str(tmp_path / "model")
        engine.store(path)
        stored = load_run_state(path)
        assert sum(s["buffer"]["size"] for s in stored["shards"]) > 0
        other, other_agent, _ = make_engine(config, executor="ray", backend="pytorch", seed=1)
        engines.append(other)
        other.load(path)
        assert_tree_equal(stored["shards"], ray.get([s.get_state.remote() for s in other.shards]))
        assert other_agent.learner.get_state()["anchor"] == stored["agent"]["learner"]["anchor"] is not None
        np.testing.assert_array_equal(other.shard_sizes, stored["shard_sizes"])
        assert other_agent.learner.get_state()["timesteps"] == stored["agent"]["learner"]["timesteps"]
        assert other_agent.learner.last_sync_timestep == stored["agent"]["learner"]["last_sync_timestep"]
        other.run(500)
    finally:
        for engine in engines:
            engine.close()
        if started and ray.is_initialized():
            ray.shutdown()
