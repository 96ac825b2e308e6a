"""Central inference (SEED RL style): backend-free actors, batching, recurrent state, faults, the CLI."""
import copy
import json
import os
import signal
import subprocess
import sys
import time
from multiprocessing import shared_memory

import numpy as np
import optree
import pytest

from rlgraph.engines import ExecutionSpec
from rlgraph.engines.runner import load_config, make_engine
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from small_configs import run_cli, train_on_engine

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


def config_of(name, **changes):
    config, _ = load_config(os.path.join(CONFIGS, f"{name}.json"))
    config = copy.deepcopy(config)
    config.update(changes)
    return config


def engine_for(name, backend="pytorch", seed=0, config_changes=None, **execution):
    config = config_of(name, **(config_changes or {}))
    config["execution_spec"] = dict(execution)
    engine, agent, _ = make_engine(config, executor="central", backend=backend, seed=seed)
    return engine, agent


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def assert_cleaned_up(pids, blocks):
    """No actor process and no shared block is left."""
    deadline = time.time() + 10
    while not all(gone(p) for p in pids) and time.time() < deadline:
        time.sleep(0.05)
    assert all(gone(p) for p in pids), pids
    for name in blocks:
        with pytest.raises(FileNotFoundError):
            shared_memory.SharedMemory(name=name)


# --- execution_spec -------------------------------------------------------------------------------------------
def test_execution_spec_central_keys_have_defaults():
    spec = ExecutionSpec.from_config({"type": "appo"})
    assert spec.transport == "shm" and spec.inference_batch_size is None and spec.inference_timeout_ms == 2.0
    assert spec.server_address is None and spec.token is None
    spec = ExecutionSpec.from_config({"execution_spec": {"transport": "grpc", "inference_batch_size": 16,
                                                         "server_address": "0.0.0.0:7000"}}, transport="shm")
    assert spec.transport == "shm" and spec.inference_batch_size == 16 and spec.server_address == "0.0.0.0:7000"


@pytest.mark.parametrize("spec, message", [
    ({"transport": "tcp"}, "execution_spec.transport: expected one of 'shm', 'grpc', got 'tcp'"),
    ({"transprot": "shm"}, "execution_spec.transprot: unknown key 'transprot'. Did you mean 'transport'"),
    ({"inference_batch_size": 0}, "execution_spec.inference_batch_size: expected a positive int or null, got 0"),
    ({"inference_timeout_ms": -1}, "execution_spec.inference_timeout_ms: expected a finite number >= 0, got -1"),
    ({"server_address": "localhost"}, "execution_spec.server_address: expected a 'HOST:PORT' string"),
    ({"token": ""}, "execution_spec.token: expected a non-empty string or null"),
])
def test_execution_spec_central_errors_name_the_key(spec, message):
    with pytest.raises(RLGraphSpecError) as info:
        ExecutionSpec.from_config({"execution_spec": spec})
    assert message in str(info.value)


def test_an_agent_the_engine_does_not_serve_is_refused():
    from rlgraph.engines.central_inference import make_central_engine

    class Learnerless:
        learner = object()

    with pytest.raises(RLGraphSpecError, match="agent type 'mine' .*not supported"):
        make_central_engine({"type": "mine"}, {}, Learnerless(), ExecutionSpec())


def test_the_package_imports_no_backend():
    code = ("import sys; import rlgraph.engines.central_inference.shm_transport, rlgraph.engines.central_inference;"
            "print(sorted(m for m in ('torch', 'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- the server and the shared-memory transport, with a recording agent ---------------------------------------------
class RecordingActor:
    """Random actions; records the size of every inference call."""

    def __init__(self):
        self.rng = np.random.default_rng(0)
        self.call_sizes = []

    def place(self, offset, total):
        pass

    def initial_internal_states(self, num_envs):
        return None

    def next_internal_states(self, extras, rewards, dones):
        return None

    def get_actions(self, states, explore=True, internal_states=None):
        self.call_sizes.append(len(states))
        return self.rng.integers(0, 2, len(states)), dict(weights_version=np.zeros(len(states), np.int64))

    def make_step(self, states, actions, rewards, next_states, terminals, truncations, extras):
        return dict(states=np.array(states), actions=np.array(actions), next_states=np.array(next_states),
                    dones=np.asarray(terminals | truncations))

    def process_items(self, items):
        return items


class RecordingBuilder:
    def __init__(self):
        self.steps = []

    def add(self, env_ids, step):
        self.steps.append((np.array(env_ids), step))

    def drop(self, env_ids):
        return 0

    def reset(self):
        pass


class RecordingAgent:
    def __init__(self):
        self.actor = RecordingActor()
        self.builder = RecordingBuilder()
        self.learner = self
        self.timesteps = 0

    def make_trajectory_builder(self):
        return self.builder

    def observe_env_steps(self, n):
        self.timesteps += n

    def add_items(self, items):
        pass

    def ready_to_update(self):
        return False


def chain_server(env_counts, batch_rows, timeout_s, env_spec="rlgraph/Chain-v0"):
    from rlgraph.engines.central_inference.inference_server import InferenceServer
    from rlgraph.engines.central_inference.shm_transport import ShmTransport

    transport = ShmTransport(env_counts, [((), np.dtype(np.int64).str)], (), np.dtype(np.int64).str)
    agent = RecordingAgent()
    server = InferenceServer(agent, transport, env_counts, optree.tree_structure(np.zeros(1)), batch_rows, timeout_s)
    return transport, server, agent


@pytest.mark.timeout(120)
@pytest.mark.parametrize("batch_rows", [6, 3])
def test_three_actors_with_different_env_counts_get_their_own_rows_back(batch_rows):
    counts = [1, 2, 3]
    transport, server, agent = chain_server(counts, batch_rows, timeout_s=5.0)
    pids, blocks = [], [b.name for b in transport.blocks]
    try:
        for i in range(3):
            transport.start(i, dict(env_spec="rlgraph/Chain-v0", length=4, max_episode_steps=7, seed=i))
        pids = transport.pids()

        def on_dead(index, why, said_hello):
            raise AssertionError(f"actor {index} died: {why}")

        steps, all_started = 0, False
        while not all_started or steps < 600:
            requests = server.collect(on_dead)
            if requests:
                steps += server.serve(requests)[0]
            if not all_started and all(transport.ready(i) for i in range(3)):
                all_started, steps = True, 0
                agent.actor.call_sizes.clear()  # batch sizes once every actor runs
        assert all(transport.info(i)["num_envs"] == n for i, n in enumerate(counts))
    finally:
        transport.close()
    assert_cleaned_up(pids, blocks)
    # Every transition of every environment id follows the chain's rule from the action the server sent to that
    # id: a misrouted action (to another actor or row) would break it.
    last = {}
    for ids, step in agent.builder.steps:
        expected = np.maximum(step["states"] + 2 * step["actions"] - 1, 0)
        np.testing.assert_array_equal(step["next_states"], expected)
        for j, s, nxt, done in zip(ids, step["states"], step["next_states"], step["dones"]):
            if j in last:  # the next state of an id continues its own trajectory (auto-reset to 0 at an end)
                assert s == last[j], (j, s, last[j])
            last[j] = 0 if done else nxt
    assert sorted(last) == list(range(6))
    sizes = agent.actor.call_sizes
    assert max(sizes) <= batch_rows
    if batch_rows == 6:  # The server waits for all running actors: (nearly) every call serves all 6 rows.
        assert sizes.count(6) >= 0.9 * len(sizes), sizes
    else:  # Calls of at most 3 rows: mostly actors 0 and 1 together, actor 2 alone. (When actors 2 and 0 are
        # ready before actor 1, actor 0 is served alone: how often depends on the machine's load.)
        assert sizes.count(3) >= 0.5 * len(sizes), sizes


@pytest.mark.timeout(120)
def test_an_actor_that_fails_before_it_starts_is_reported_as_such():
    transport, server, _ = chain_server([2], 2, 0.01)
    try:
        transport.start(0, dict(env_spec="NoSuchEnv-v0"))
        dead = []
        deadline = time.time() + 60
        while not dead and time.time() < deadline:
            server.collect(lambda index, why, said_hello: dead.append((index, why, said_hello)))
        assert dead and dead[0][0] == 0 and dead[0][2] is False and "exit code 1" in dead[0][1]
    finally:
        transport.close()


# --- the engine ---------------------------------------------------------------------------------------------------
@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", ["shm", "grpc"])
def test_actors_import_no_backend_and_appo_learns_from_batched_inference(transport):
    engine, agent = engine_for("appo_cartpole", num_actors=2, envs_per_actor=8, transport=transport)
    try:
        assert engine.batch_columns == 16
        out = engine.run(3000)
        assert out["env_steps"] >= 3000 and out["env_steps"] % 8 == 0
        assert engine.actor_backends() == [[], []]
        assert agent.updates == sum(r["num_updates"] for r in out["results"]) > 0
        assert all(np.isfinite(r["loss"]) for r in out["results"])
        assert agent.learner.timesteps == out["env_steps"]
        summary = engine.summary()
        assert summary["executor"] == "central" and summary["transport"] == transport
        assert 8 <= summary["mean_inference_batch_size"] <= 16 and summary["actor_restarts"] == 0
        assert sum(a["env_steps"] for a in summary["actors"]) == out["env_steps"]
        assert {"central/mean_batch_size", "actors/0/env_steps_per_second"} <= set(out["scalars"])
        pids, blocks = engine.actor_pids(), [b.name for b in getattr(engine.transport, "blocks", [])]
        assert len(set(pids)) == 2 and os.getpid() not in pids
    finally:
        engine.close()
    assert_cleaned_up(pids, blocks)


@pytest.mark.timeout(180)
def test_recurrent_state_is_kept_per_environment_and_zeroed_at_episode_starts():
    engine, agent = engine_for("r2d2_cartpole", num_actors=2, envs_per_actor=3)
    server = engine.server
    calls = []
    get_actions, serve_batch = server.actor.get_actions, server._serve_batch

    def recording_get_actions(states, explore=True, internal_states=None, **kwargs):
        actions, extras = get_actions(states, explore=explore, internal_states=internal_states, **kwargs)
        calls[-1].update(states_in=[np.array(s) for s in internal_states],
                         states_out=[np.array(s) for s in extras["internal_states"]])
        return actions, extras

    def recording_serve_batch(requests):
        dones = {}
        for r in requests:
            if not r.first:
                dones.update(zip(server.env_ids(r.index).tolist(), (r.terminals | r.truncations).tolist()))
        calls.append(dict(ids=np.concatenate([server.env_ids(r.index) for r in requests]), dones=dones))
        return serve_batch(requests)

    server.actor.get_actions, server._serve_batch = recording_get_actions, recording_serve_batch
    try:
        engine.run(1200)
    finally:
        engine.close()
    carried = zeroed = 0
    previous = {}  # env id -> its LSTM state after the last call that served it
    for call in calls:
        for row, j in enumerate(call["ids"].tolist()):
            given = [s[row] for s in call["states_in"]]
            if j not in previous or call["dones"].get(j, False):
                assert all(np.all(g == 0) for g in given), (j, call["dones"].get(j))
                zeroed += j in previous
            else:
                for g, p in zip(given, previous[j]):
                    np.testing.assert_array_equal(g, p)
                carried += 1
            previous[j] = [s[row] for s in call["states_out"]]
    assert sorted(previous) == list(range(6))
    assert carried > 100 and zeroed > 5, (carried, zeroed)  # episodes of a random policy end every ~20 steps


@pytest.mark.timeout(240)
@pytest.mark.parametrize("transport", ["shm", "grpc"])
def test_a_killed_actor_is_replaced_and_counted_and_the_run_continues(transport):
    # Unrolls longer than the run: every step of the killed actor is still pending when it dies.
    engine, agent = engine_for("appo_cartpole", config_changes=dict(unroll_length=1000), num_actors=2,
                               envs_per_actor=4, max_actor_restarts=2, transport=transport)
    blocks = [b.name for b in getattr(engine.transport, "blocks", [])]
    all_pids = []
    try:
        engine.run(2000)
        pids = engine.processes()["actors"]
        all_pids += pids
        os.kill(pids[1], signal.SIGKILL)
        out = engine.run(3000)
        assert out["env_steps"] >= 3000
        summary = engine.summary()
        assert summary["actor_restarts"] == 1 and summary["env_steps_lost"] > 0, summary
        assert summary["env_steps_lost"] % 4 == 0
        new = engine.processes()["actors"]
        all_pids += new
        assert new[0] == pids[0] and new[1] != pids[1] and gone(pids[1])
        assert engine.actor_backends() == [[], []]
        # The replacement's environments start over: their partial trajectories are not those of the dead one.
        assert engine.server.builder.num_pending_steps < 1000 * 8
    finally:
        engine.close()
    assert_cleaned_up(all_pids, blocks)


@pytest.mark.timeout(180)
def test_too_many_actor_deaths_end_the_run_with_a_clear_error():
    engine, agent = engine_for("appo_cartpole", num_actors=1, envs_per_actor=2, max_actor_restarts=0)
    try:
        engine.run(64)
        os.kill(engine.processes()["actors"][0], signal.SIGKILL)
        with pytest.raises(RLGraphError, match="actor 0 failed .* after 0 restarts"):
            engine.run(10_000)
    finally:
        engine.close()


# --- the gRPC transport: the wire format and what the server rejects ------------------------------------------------
def test_wire_round_trip_and_malformed_messages_are_rejected():
    from rlgraph.engines.central_inference import wire

    arrays = [np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros(0, np.int64), np.array([True, False]),
              np.frombuffer(b"xyz", np.uint8)]
    kind, index, out = wire.decode(wire.encode(wire.STEP, 7, arrays))
    assert kind == wire.STEP and index == 7 and len(out) == 4
    for a, b in zip(arrays, out):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    good = wire.encode(wire.FIRST, 1, [np.zeros((2, 3), np.float32)])
    bad = {"garbage": b"hello world, not a message", "short": good[:-1], "trailing": good + b"\0",
           "magic": b"XXXX" + good[4:], "kind": good[:5] + b"Z" + good[6:], "dtype": good[:12] + b"\x63" + good[13:],
           "empty": b""}
    for name, data in bad.items():
        with pytest.raises(wire.WireError):
            wire.decode(data)
    with pytest.raises(wire.WireError, match="larger than"):
        wire.decode(good, max_bytes=len(good) - 1)
    with pytest.raises(wire.WireError, match="cannot be sent"):
        wire.encode(wire.STEP, 0, [np.array(["a"], dtype=object)])


def grpc_chain_server(env_counts, token=None):
    from rlgraph.engines.central_inference.grpc_transport import GrpcTransport
    from rlgraph.engines.central_inference.inference_server import InferenceServer

    transport = GrpcTransport(env_counts, [((), np.dtype(np.int64).str)], (), np.dtype(np.int64).str, token=token)
    agent = RecordingAgent()
    server = InferenceServer(agent, transport, env_counts, optree.tree_structure(np.zeros(1)), sum(env_counts), 0.01)
    return transport, server, agent


@pytest.mark.timeout(120)
def test_grpc_server_rejects_garbage_wrong_tokens_and_unknown_actors_and_goes_on():
    import grpc

    from rlgraph.engines.central_inference import wire

    transport, server, agent = grpc_chain_server([2], token="s3cret")
    assert transport.address.startswith("127.0.0.1:")
    channel = grpc.insecure_channel(transport.address)
    act = channel.stream_stream("/rlgraph.CentralInference/Act")

    def stream(messages, token="s3cret"):
        with pytest.raises(grpc.RpcError) as info:
            list(act(iter(messages), metadata=[("rlgraph-token", token)] if token else None, timeout=30))
        return info.value.code()

    def hello(index, num_envs=2):
        return wire.encode(wire.HELLO, index, [np.frombuffer(json.dumps(dict(num_envs=num_envs)).encode(), np.uint8)])

    try:
        assert stream([hello(0)], token="wrong") == grpc.StatusCode.UNAUTHENTICATED
        assert stream([hello(0)], token=None) == grpc.StatusCode.UNAUTHENTICATED
        assert stream([b"garbage, not a message"]) == grpc.StatusCode.INVALID_ARGUMENT
        assert stream([hello(5)]) == grpc.StatusCode.NOT_FOUND
        assert stream([hello(0, num_envs=3)]) == grpc.StatusCode.INVALID_ARGUMENT
        # A known actor whose request has the wrong shape: rejected; the stream's end is reported once.
        wrong = wire.encode(wire.FIRST, 0, [np.zeros(5, np.int64)])
        assert stream([hello(0), wrong]) == grpc.StatusCode.INVALID_ARGUMENT
        oversized = wire.encode(wire.FIRST, 0, [np.zeros(transport.max_bytes, np.uint8)])
        assert stream([hello(0), oversized]) == grpc.StatusCode.RESOURCE_EXHAUSTED  # (gRPC's own limit)
        assert transport.rejected == 6
        # Each connected stream's end is reported, the last connection's only (the earlier one was replaced).
        requests, dead = transport.poll(1.0)
        assert not requests and [d[0] for d in dead] == [0]
        # The server goes on: a real actor connects and is served.
        transport.start(0, dict(env_spec="rlgraph/Chain-v0", length=4, seed=0))
        steps, deadline = 0, time.time() + 60
        while steps < 200 and time.time() < deadline:
            requests = server.collect(lambda index, why, said_hello: pytest.fail(f"actor {index} died: {why}"))
            if requests:
                steps += server.serve(requests)[0]
        assert steps >= 200 and transport.info(0)["backends"] == []
        for ids, step in agent.builder.steps:
            np.testing.assert_array_equal(step["next_states"], np.maximum(step["states"] + 2 * step["actions"] - 1, 0))
        pid = transport.pids()[0]
    finally:
        channel.close()
        transport.close()
    assert_cleaned_up([pid], [])


# --- the command line ---------------------------------------------------------------------------------------------
@pytest.mark.timeout(600)
def test_cli_trains_with_central_inference_checkpoints_and_resumes(tmp_path):
    logdir = str(tmp_path / "run")
    args = [os.path.join(CONFIGS, "appo_cartpole.json"), "--backend", "pytorch", "--executor", "central",
            "--num-actors", "2", "--transport", "shm", "--logdir", logdir]
    proc = run_cli(args + ["--steps", "4096"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        summary = json.load(f)
    assert summary["executor"] == "central" and summary["num_actors"] == 2 and summary["env_steps"] >= 4096
    assert summary["transport"] == "shm" and summary["actor_restarts"] == 0
    with open(os.path.join(logdir, "processes.json")) as f:
        assert len(json.load(f)["actors"]) == 2
    proc = run_cli(args + ["--steps", "8192", "--resume"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        resumed = json.load(f)
    assert resumed["env_steps"] >= 8192 and resumed["updates"] > summary["updates"]


@pytest.mark.timeout(600)
def test_a_central_replay_learner_resumes_with_its_replay_and_counters(tmp_path):
    from rlgraph.utils.run_state import load_run_state
    with open(os.path.join(CONFIGS, "dqn_cartpole.json")) as f:
        config = json.load(f)
    config["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 4}
    config["train_spec"] = {"eval_episodes": 2, "chunk_steps": 1000}
    config["update_spec"] = dict(config["update_spec"], steps_before_update=500)
    path = tmp_path / "dqn.json"
    path.write_text(json.dumps(config))
    logdir = str(tmp_path / "run")
    args = [str(path), "--backend", "pytorch", "--executor", "central", "--num-actors", "2", "--logdir", logdir]
    proc = run_cli(args + ["--steps", "2000"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        first = json.load(f)
    state = load_run_state(os.path.join(logdir, "checkpoint", "model"))
    assert state["engine"] == "CentralInferenceEngine" and state["agent"]["replay"] is True
    stored = state["agent"]["learner"]["stored"]
    assert stored >= first["env_steps"] - 4 * 64 and first["updates"] > 0  # (minus steps still in n-step windows)
    proc = run_cli(args + ["--steps", "3000", "--resume"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        second = json.load(f)
    # The replay came back: updates go on at once (an empty memory would wait for steps_before_update=500).
    per_step = first["updates"] / (first["env_steps"] - 500)
    assert second["updates"] - first["updates"] >= 0.8 * per_step * (second["env_steps"] - first["env_steps"])


def test_cli_names_a_bad_central_execution_spec_value(tmp_path):
    config = config_of("appo_cartpole", execution_spec={"inference_timeout_ms": "fast"})
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    proc = run_cli([str(path), "--executor", "central", "--steps", "10", "--logdir", str(tmp_path / "x")], timeout=120)
    assert proc.returncode == 2
    assert "execution_spec.inference_timeout_ms: expected a finite number >= 0, got 'fast'" in proc.stderr
    assert "Traceback" not in proc.stderr


# --- learning (slow) ----------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name, backend_name, max_steps, transport", [
    ("appo_cartpole", "pytorch", 1_500_000, "shm"),
    ("appo_cartpole", "pytorch", 1_500_000, "grpc"),
    ("r2d2_cartpole", "pytorch", 300_000, "shm"),
])
def test_learns_cartpole_with_central_inference(name, backend_name, max_steps, transport, tmp_path):
    summary = train_on_engine("central", name, backend_name, tmp_path, max_steps, extra=["--transport", transport])
    assert summary["executor"] == "central" and summary["transport"] == transport
    assert summary["target_measured_on"] == "greedy evaluation"
    assert summary["steps_to_target"] is not None, summary
    assert summary["last_evaluation"][2] >= 450, summary
