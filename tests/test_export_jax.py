"""``rlgraph export --format jax_export``: a JAX run's greedy policy as a ``jax.export`` program, loaded by
``rlgraph.export.jax_export.load_policy``'s source in a process where rlgraph cannot be imported, acts as the agent
acts at two batch sizes (and, recurrent, step after step with its state threaded); refusals are one line."""
import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rlgraph.engines.runner import env_kwargs_of, load_config, make_agent, make_vector_env
from rlgraph.export import export_policy
from rlgraph.utils.backend import backend_available
from rlgraph.utils.errors import RLGraphError

pytestmark = pytest.mark.skipif(not backend_available("jax"), reason="needs JAX")

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

#: Runs exported policies with the loader's own source, where any import of rlgraph fails. Argument: a JSON file
#: of jobs ``[{"policy": dir, "inputs": npz of step_t/<input> arrays, "steps": T, "recurrent": bool, "out": npz}]``;
#: a recurrent policy's state starts at zeros and is threaded from each step's outputs into the next step.
DRIVER = r"""
import json
import sys
sys.modules["rlgraph"] = None  # Any import of rlgraph fails here.
import numpy as np
for job in json.load(open(sys.argv[1])):
    policy = load_policy(job["policy"])
    feed = np.load(job["inputs"])
    out, states = {}, None
    for t in range(job["steps"]):
        obs = feed[f"{t}/observations"]
        if job["recurrent"]:
            states = states or [np.zeros([len(obs)] + s["shape"][1:], np.float32)
                                for s in policy.metadata["inputs"][1:]]
            got = policy(obs, *states)
            states = [got[f"next_state_{i}"] for i in range(len(states))]
        else:
            got = policy(obs)
        out.update({f"{t}/{k}": v for k, v in got.items()})
    try:
        policy(np.zeros((2, 3, 3), np.float32))
    except ValueError as e:
        out["wrong_shape_error"] = np.array(str(e))
    np.savez(job["out"], **out)
assert not any(m == "rlgraph" or m.startswith("rlgraph.") for m in sys.modules if sys.modules[m] is not None)
"""


def _stored_run(tmp_path, name, changes=()):
    """A run directory holding a JAX agent's model (its weights moved off their initial values, so that only a
    policy with the stored weights acts as it does) and its config.json."""
    config, _ = load_config(os.path.join(CONFIGS, f"{name}_cartpole.json"),
                            overrides=["environment_spec.num_envs=2"] + list(changes))
    env = make_vector_env(env_kwargs_of(config, num_envs=1))
    agent = make_agent(config, env, "jax")
    env.close()
    rng = np.random.default_rng(7)
    agent.set_weights({k: v + rng.normal(0, 0.3, v.shape).astype(v.dtype) for k, v in agent.get_weights().items()})
    run = tmp_path / f"{name}-jax"
    (run / "model").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(dict(config, backend="jax")))
    agent.store_model(str(run / "model"))
    return run, agent


def _run_loader(tmp_path, jobs):
    from rlgraph.export.jax_export import load_policy
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    code = inspect.getsource(load_policy) + DRIVER
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "jobs.json")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [dict(np.load(job["out"])) for job in jobs]


def _observations(agent, batch, seed):
    return agent.state_space.with_batch_rank().sample(batch, rng=np.random.default_rng(seed)).astype(np.float32)


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory):
    return _stored_run(tmp_path_factory.mktemp("dqn"), "dqn")


def _export(name, run, agent, policy):
    """DQN's policy goes the whole way (``rlgraph export``'s function: a new agent loaded from the run's model);
    the others' are written from the built agent (one build less)."""
    if name == "dqn":
        return export_policy(str(run), "jax_export", str(policy))
    from rlgraph.export.greedy_policy import GreedyPolicy
    from rlgraph.export.jax_export import export_jax, input_names
    greedy = GreedyPolicy(agent)
    export_jax(greedy, str(policy))
    return dict(backend=agent.backend, inputs=input_names(greedy))


def test_exported_jax_policies_act_as_the_agent(tmp_path, dqn_run):
    """DQN (Q-values) and APPO (logits): the exported program's actions are the agent's greedy actions on random
    observations at batch sizes 1000 and 3 (one program, a symbolic batch); its scores are the agent's."""
    runs = {"dqn": dqn_run, "appo": _stored_run(tmp_path, "appo")}
    jobs, expected = [], {}
    for name, (run, agent) in runs.items():
        policy = tmp_path / f"{name}.policy"
        out = _export(name, run, agent, policy)
        assert out["backend"] == "jax" and out["inputs"] == ["observations"]
        metadata = json.loads((policy / "policy.json").read_text())
        assert metadata["inputs"] == [dict(name="observations", shape=["b", 4], dtype="float32")]
        assert metadata["outputs"][0] == dict(name="actions", shape=["b"], dtype="int64")
        assert metadata["action_space"]["num_categories"] == 2 and metadata["observation_space"]["shape"] == [4]
        feed = {f"{t}/observations": _observations(agent, batch, seed=t) for t, batch in enumerate((1000, 3))}
        np.savez(tmp_path / f"{name}-in.npz", **feed)
        jobs.append(dict(policy=str(policy), inputs=str(tmp_path / f"{name}-in.npz"), steps=2, recurrent=False,
                         out=str(tmp_path / f"{name}-out.npz")))
        expected[name] = feed
    results = dict(zip(runs, _run_loader(tmp_path, jobs)))
    for name, (run, agent) in runs.items():
        got, scores_name = results[name], "q_values" if name == "dqn" else "logits"
        assert "input 'observations' has shape [2, 3, 3]; expected ['b', 4]" in str(got["wrong_shape_error"])
        for t, batch in enumerate((1000, 3)):
            states = expected[name][f"{t}/observations"]
            actions, scores = got[f"{t}/actions"], got[f"{t}/{scores_name}"]
            assert actions.dtype == np.int64 and actions.shape == (batch,) and scores.shape == (batch, 2)
            np.testing.assert_array_equal(actions, agent.get_actions(states, explore=False), err_msg=name)
            if batch == 1000:
                assert len(set(actions.tolist())) == 2  # Both actions occur: the comparison tells policies apart.
            if name == "dqn":
                np.testing.assert_allclose(scores, agent.executor.execute("get_q_values", states), rtol=1e-5,
                                           atol=1e-5)
            else:  # The logits give the agent's own log-likelihoods of the actions it samples.
                acted = agent.executor.execute("act", states)
                log_softmax = scores - np.log(np.exp(scores - scores.max(1, keepdims=True)).sum(1, keepdims=True)) \
                    - scores.max(1, keepdims=True)
                np.testing.assert_allclose(log_softmax[np.arange(batch), acted["action"]], acted["log_likelihood"],
                                           rtol=1e-5, atol=1e-5)


def test_exported_recurrent_jax_policies_take_and_return_their_state(tmp_path):
    """R2D2's exported program, stepped 3 times on a batch of 16 with its LSTM state threaded through, gives the
    agent's greedy actions, Q-values and states at every step."""
    run, agent = _stored_run(tmp_path, "r2d2")
    policy = tmp_path / "r2d2.policy"
    assert _export("r2d2", run, agent, policy)["inputs"] == ["observations", "state_0", "state_1"]
    metadata = json.loads((policy / "policy.json").read_text())
    assert [o["name"] for o in metadata["outputs"]] == ["actions", "q_values", "next_state_0", "next_state_1"]
    feed = {f"{t}/observations": _observations(agent, 16, seed=t) for t in range(3)}
    np.savez(tmp_path / "in.npz", **feed)
    got, = _run_loader(tmp_path, [dict(policy=str(policy), inputs=str(tmp_path / "in.npz"), steps=3, recurrent=True,
                                       out=str(tmp_path / "out.npz"))])
    state = agent.actor.initial_internal_states(16)
    for t in range(3):
        obs = feed[f"{t}/observations"]
        q_values, _ = agent.executor.execute("get_q_values", obs[:, None], tuple(state))
        actions, extras = agent.actor.get_actions(obs, explore=False, internal_states=state)
        state = extras["internal_states"]
        np.testing.assert_array_equal(got[f"{t}/actions"], actions, err_msg=f"step {t}")
        np.testing.assert_allclose(got[f"{t}/q_values"], q_values[:, 0], rtol=1e-5, atol=1e-5)
        for i in range(2):
            np.testing.assert_allclose(got[f"{t}/next_state_{i}"], state[i], rtol=1e-5, atol=1e-5)
    assert np.abs(state[0]).max() > 1e-3  # The state moved: a program that ignored it would not match.


def test_jax_export_refusals_are_one_line(tmp_path, dqn_run):
    run, _ = dqn_run
    (tmp_path / "file").write_text("")
    with pytest.raises(RLGraphError, match="is a file; a jax_export policy is a directory"):
        export_policy(str(run), "jax_export", str(tmp_path / "file"))


def test_a_jax_run_exports_as_onnx(tmp_path, dqn_run):
    """Checkpoints are backend-neutral: a JAX run's model is loaded on a backend that writes ONNX, and the file acts
    as the JAX agent does."""
    ort = pytest.importorskip("onnxruntime")
    run, agent = dqn_run
    out = export_policy(str(run), "onnx", str(tmp_path / "p.onnx"))
    assert out["backend"] in ("tf", "pytorch")
    observations = _observations(agent, 300, seed=3)
    actions, scores = ort.InferenceSession(str(tmp_path / "p.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"observations": observations})
    np.testing.assert_array_equal(actions, agent.get_actions(observations, explore=False))
    np.testing.assert_allclose(scores, agent.executor.execute("get_q_values", observations), rtol=1e-4, atol=1e-4)
