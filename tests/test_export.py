"""``rlgraph export``: a trained run's greedy policy, loaded without rlgraph (TorchScript, SavedModel, ONNX under
onnxruntime), acts as the agent acts on 1,000 states; refusals are one line."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rlgraph.cli import main as cli_main
from rlgraph.engines.runner import env_kwargs_of, load_config, make_agent, make_vector_env
from rlgraph.export.run_loading import load_run_agent
from rlgraph.utils.backend import backend_available

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

#: Small, short runs of the shipped CartPole configs: a few updates each.
RUN_SETS = {"dqn": ["environment_spec.num_envs=4", "update_spec.steps_before_update=200", "update_spec.batch_size=32"],
            "appo": ["environment_spec.num_envs=8"]}
COMMON_SETS = ["train_spec.eval_episodes=0", "train_spec.eval_every_steps=null", "train_spec.chunk_steps=128",
               "train_spec.stop_at_target=false"]

#: Loads the exported models in a process where rlgraph cannot be imported; writes each one's outputs.
LOADER = r"""
import sys, json
sys.modules["rlgraph"] = None  # Any import of rlgraph fails here.
import numpy as np
states = np.load(sys.argv[1])
out = {}
for fmt, path in json.loads(sys.argv[2]).items():
    if fmt == "torchscript":
        import torch
        got = torch.jit.load(path)(torch.from_numpy(states))
        out.update({f"{fmt}/{k}": v.numpy() for k, v in got.items()})
    elif fmt == "saved_model":
        import tensorflow as tf
        got = tf.saved_model.load(path).signatures["serving_default"](observations=tf.constant(states))
        out.update({f"{fmt}/{k}": v.numpy() for k, v in got.items()})
    else:
        import onnxruntime as ort
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        assert [i.name for i in session.get_inputs()] == ["observations"], session.get_inputs()
        out.update({f"{fmt}/{k}": v for k, v in zip(names, session.run(None, {"observations": states}))})
np.savez(sys.argv[3], **out)
"""


def _train(tmp_path, name, backend, steps):
    logdir = tmp_path / f"{name}-{backend}"
    sets = [a for s in RUN_SETS[name] + COMMON_SETS for a in ("--set", s)]
    assert cli_main(["train", os.path.join(CONFIGS, f"{name}_cartpole.json"), "--backend", backend, "--steps",
                     str(steps), "--logdir", str(logdir), "--seed", "3"] + sets) == 0
    return logdir


def _load_elsewhere(tmp_path, states, paths):
    np.save(tmp_path / "states.npy", states)
    proc = subprocess.run([sys.executable, "-c", LOADER, str(tmp_path / "states.npy"), json.dumps(paths),
                           str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(np.load(tmp_path / "out.npz"))


@pytest.mark.parametrize("kind, formats", [("pytorch", ("torchscript", "onnx")), ("tf", ("saved_model", "onnx"))])
@pytest.mark.parametrize("name", ["dqn", "appo"])
def test_exported_policies_act_as_the_agent(tmp_path, capsys, name, kind, formats):
    backend = kind
    if not backend_available(backend):
        pytest.skip(f"needs {backend}")
    pytest.importorskip("onnxruntime")
    if backend == "tf":
        pytest.importorskip("tf2onnx")
    logdir = _train(tmp_path, name, backend, steps=400 if name == "dqn" else 512)
    paths = {}
    for fmt in formats:
        paths[fmt] = str(tmp_path / f"policy.{fmt}")
        assert cli_main(["export", str(logdir), "--format", fmt, "--output", paths[fmt]]) == 0
        assert f"exported as {fmt}" in capsys.readouterr().out
    agent, _, model = load_run_agent(str(logdir))
    assert agent.backend == backend and agent.updates > 0  # A trained agent, not a fresh one.
    states = agent.state_space.with_batch_rank().sample(1000, rng=np.random.default_rng(1)).astype(np.float32)
    greedy = agent.get_actions(states, explore=False)
    out = _load_elsewhere(tmp_path, states, paths)
    scores_name = "q_values" if name == "dqn" else "logits"
    for fmt in formats:
        actions, scores = out[f"{fmt}/actions"], out[f"{fmt}/{scores_name}"]
        assert actions.dtype == np.int64 and actions.shape == (1000,) and scores.shape == (1000, 2)
        np.testing.assert_array_equal(actions, greedy, err_msg=fmt)
        assert len(set(actions.tolist())) == 2  # Both actions occur: the comparison can tell policies apart.
        if name == "dqn":
            np.testing.assert_allclose(scores, agent.executor.execute("get_q_values", states), rtol=1e-5, atol=1e-5)
        else:
            # The logits give the agent's own log-likelihoods of the actions it samples.
            acted = agent.executor.execute("act", states)
            log_softmax = scores - np.log(np.exp(scores - scores.max(1, keepdims=True)).sum(1, keepdims=True)) \
                - scores.max(1, keepdims=True)
            np.testing.assert_allclose(log_softmax[np.arange(1000), acted["action"]], acted["log_likelihood"],
                                       rtol=1e-5, atol=1e-5)


def _stored_run(tmp_path, name, backend, changes=()):
    """A run directory holding a freshly initialised agent's model and its config.json (no training)."""
    config, _ = load_config(os.path.join(CONFIGS, f"{name}_cartpole.json"),
                            overrides=["environment_spec.num_envs=2"] + list(changes))
    env = make_vector_env(env_kwargs_of(config, num_envs=1))
    agent = make_agent(config, env, backend)
    run = tmp_path / f"{name}-{backend}"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(dict(config, backend=backend)))
    (run / "model").mkdir()
    agent.store_model(str(run / "model"))
    return run, agent


def _one_line_error(capsys, args, message):
    assert cli_main(["export"] + [str(a) for a in args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


@pytest.mark.skipif(not backend_available("pytorch"), reason="needs PyTorch")
def test_refusals_are_one_line(tmp_path, capsys):
    run, agent = _stored_run(tmp_path, "dqn", "pytorch")
    if backend_available("tf"):  # Checkpoints are backend-neutral: a PyTorch run exports as a SavedModel too.
        import tensorflow as tf
        assert cli_main(["export", str(run), "--format", "saved_model", "--output", str(tmp_path / "sm")]) == 0
        capsys.readouterr()
        states = agent.state_space.with_batch_rank().sample(50, rng=np.random.default_rng(1)).astype(np.float32)
        served = tf.saved_model.load(str(tmp_path / "sm")).signatures["serving_default"](observations=states)
        np.testing.assert_array_equal(served["actions"].numpy(), agent.get_actions(states, explore=False))
    _one_line_error(capsys, [tmp_path / "missing", "--format", "onnx", "--output", tmp_path / "p.onnx"],
                    "is not a directory")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    _one_line_error(capsys, [tmp_path / "empty", "--format", "onnx", "--output", tmp_path / "p.onnx"],
                    "holds no checkpoint")
    _one_line_error(capsys, [run, "--format", "torchscript", "--output", tmp_path], "is a directory")
    _one_line_error(capsys, [run, "--format", "torchscript", "--output", tmp_path / "no" / "p.pt"], "does not exist")
    (run / "config.json").unlink()
    _one_line_error(capsys, [run / "model", "--format", "torchscript", "--output", tmp_path / "p.pt"],
                    "cannot tell the config of the model")
    # A fresh (checkpointed, untrained) agent exports as well: a stored model directory inside a run.
    (run / "config.json").write_text(json.dumps(dict(load_config(os.path.join(CONFIGS, "dqn_cartpole.json"),
                                                                 overrides=["environment_spec.num_envs=2"])[0])))
    assert cli_main(["export", str(run / "model"), "--format", "torchscript", "--output", str(tmp_path / "p.pt")]) == 0


#: Runs an exported recurrent policy for a few steps in a process where rlgraph cannot be imported, threading its
#: state (zeros at the start) from one step's outputs to the next step's inputs; writes every step's outputs.
RECURRENT_LOADER = r"""
import sys, json
sys.modules["rlgraph"] = None
import numpy as np
steps = np.load(sys.argv[1])  # [T, batch, ...]
fmt, path, units = sys.argv[2], sys.argv[3], int(sys.argv[4])
if fmt == "torchscript":
    import torch
    model = torch.jit.load(path)
    run = lambda feed: {k: v.numpy() for k, v in model(*[torch.from_numpy(feed[n]) for n in
                                                         ("observations", "state_0", "state_1")]).items()}
elif fmt == "saved_model":
    import tensorflow as tf
    serve = tf.saved_model.load(path).signatures["serving_default"]
    run = lambda feed: {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in feed.items()}).items()}
else:
    import onnxruntime as ort
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["observations", "state_0", "state_1"], session.get_inputs()
    names = [o.name for o in session.get_outputs()]
    run = lambda feed: dict(zip(names, session.run(None, feed)))
state = [np.zeros((steps.shape[1], units), np.float32)] * 2
out = {}
for t, obs in enumerate(steps):
    got = run({"observations": obs, "state_0": state[0], "state_1": state[1]})
    state = [got["next_state_0"], got["next_state_1"]]
    out.update({f"{k}/{t}": v for k, v in got.items()})
np.savez(sys.argv[5], **out)
"""


@pytest.mark.parametrize("kind, fmt", [("pytorch", "torchscript"), ("pytorch", "onnx"), ("tf", "saved_model")])
def test_recurrent_policies_take_and_return_their_state(tmp_path, kind, fmt):
    """R2D2's exported policy, stepped 4 times with its state threaded through, gives the agent's greedy actions,
    Q-values and LSTM states at every step."""
    backend = kind
    if not backend_available(backend):
        pytest.skip(f"needs {backend}")
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
        if backend == "tf":
            pytest.importorskip("tf2onnx")
    run, agent = _stored_run(tmp_path, "r2d2", backend)
    path = str(tmp_path / f"policy.{fmt}")
    assert cli_main(["export", str(run), "--format", fmt, "--output", path]) == 0
    steps = agent.state_space.with_batch_rank().sample(4 * 64, rng=np.random.default_rng(2)).astype(np.float32)
    steps = steps.reshape((4, 64) + steps.shape[1:])
    units = agent.lstm_units
    np.save(tmp_path / "steps.npy", steps)
    proc = subprocess.run([sys.executable, "-c", RECURRENT_LOADER, str(tmp_path / "steps.npy"), fmt, path, str(units),
                           str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = dict(np.load(tmp_path / "out.npz"))
    state = agent.actor.initial_internal_states(64)
    for t, obs in enumerate(steps):
        q_values, _ = agent.executor.execute("get_q_values", obs[:, None], tuple(state))
        actions, extras = agent.actor.get_actions(obs, explore=False, internal_states=state)
        state = extras["internal_states"]
        np.testing.assert_array_equal(out[f"actions/{t}"], actions, err_msg=f"{fmt} step {t}")
        np.testing.assert_allclose(out[f"q_values/{t}"], q_values[:, 0], rtol=1e-5, atol=1e-5)
        for i in range(2):
            np.testing.assert_allclose(out[f"next_state_{i}/{t}"], state[i], rtol=1e-5, atol=1e-5)
    assert np.abs(state[0]).max() > 1e-3  # The state moved: a policy that ignored it would not match.


@pytest.mark.skipif(not backend_available("tf"), reason="needs TensorFlow")
def test_recurrent_tf_policies_to_onnx_are_refused_in_one_line(tmp_path, capsys):
    run, _ = _stored_run(tmp_path, "r2d2", "tf")
    _one_line_error(capsys, [run, "--format", "onnx", "--output", tmp_path / "p.onnx"],
                    "tf2onnx cannot convert TensorFlow's fused LSTM kernel")


@pytest.mark.skipif(not backend_available("pytorch"), reason="needs PyTorch")
@pytest.mark.parametrize("name, changes", [
    ("dqn", ['preprocessing_spec=[{"type": "multiply", "factor": 3.0}, {"type": "clip", "min_value": -0.5, '
             '"max_value": 0.5}]']),
    pytest.param("appo_pong", ["environment_spec.num_envs=1"], marks=pytest.mark.slow),
])
def test_the_configs_preprocessing_is_inside_the_exported_policy(tmp_path, name, changes):
    pytest.importorskip("onnxruntime")
    import onnxruntime as ort
    import torch
    config_name = name if name.endswith("pong") else f"{name}_cartpole"
    config, _ = load_config(os.path.join(CONFIGS, f"{config_name}.json"), overrides=changes)
    env = make_vector_env(env_kwargs_of(config, num_envs=1))
    agent = make_agent(config, env, "pytorch")
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(dict(config, backend="pytorch")))
    agent.store_model(str(run / "model"))
    for fmt in ("torchscript", "onnx"):
        assert cli_main(["export", str(run), "--format", fmt, "--output", str(tmp_path / f"p.{fmt}")]) == 0
    states = agent.state_space.with_batch_rank().sample(200, rng=np.random.default_rng(2))
    observations = states.astype(np.float32)  # uint8 frames come in as float32 and are cast inside.
    greedy = agent.get_actions(states, explore=False)
    traced = torch.jit.load(str(tmp_path / "p.torchscript"))(torch.from_numpy(observations))
    actions, scores = ort.InferenceSession(str(tmp_path / "p.onnx")).run(None, {"observations": observations})
    np.testing.assert_array_equal(traced["actions"].numpy(), greedy)
    np.testing.assert_array_equal(actions, greedy)
    np.testing.assert_allclose(scores, traced["q_values" if name == "dqn" else "logits"].numpy(), atol=1e-5)
    if name == "dqn":
        np.testing.assert_allclose(scores, agent.executor.execute("get_q_values", states), atol=1e-5)
        # Without the preprocessing inside, the Q-values would differ.
        plain = agent.executor.root.policy.get_adapter_outputs(torch.from_numpy(observations))["adapter_outputs"]
        assert np.abs(plain.detach().numpy() - scores).max() > 1e-3


#: A small CNN over CartPole's 4 numbers seen as a 2x2 image: reshapes and a convolution, whose sizes a trace must
#: keep symbolic (the Pong policy's layers, at a fraction of the cost).
SMALL_CNN = ('network_spec=[{"type": "reshape", "new_shape": [2, 2, 1]}, {"type": "conv2d", "filters": 3, '
             '"kernel_size": 2, "strides": 1, "padding": "same", "activation": "relu"}, {"type": "reshape", '
             '"flatten": true}, {"type": "dense", "units": 8, "activation": "tanh"}]')


@pytest.mark.skipif(not backend_available("pytorch"), reason="needs PyTorch")
def test_exported_cnn_policies_run_at_any_batch_size(tmp_path):
    """Regression: sizes read off a traced tensor were frozen as the example batch's constants (PyTorchOps turned
    them into Python ints), so a TorchScript/ONNX policy with reshapes or convolutions failed at another batch size."""
    import torch

    from rlgraph.export.greedy_policy import GreedyPolicy

    run, agent = _stored_run(tmp_path, "appo", "pytorch", changes=[SMALL_CNN])
    formats = ["torchscript"] + (["onnx"] if _has("onnxruntime") and _has("onnx") else [])
    for fmt in formats:
        assert cli_main(["export", str(run), "--format", fmt, "--output", str(tmp_path / f"p.{fmt}")]) == 0
    traced = torch.jit.load(str(tmp_path / "p.torchscript"))
    greedy = GreedyPolicy(agent)
    for batch in (1, 5):  # The trace's example batch is 2.
        states = agent.state_space.with_batch_rank().sample(batch, rng=np.random.default_rng(batch))
        observations = states.astype(np.float32)
        with torch.no_grad():
            actions, logits = (t.numpy() for t in greedy(torch.from_numpy(observations)))
        got = traced(torch.from_numpy(observations))
        assert got["actions"].shape == (batch,) and got["logits"].shape == (batch, 2)
        np.testing.assert_array_equal(got["actions"].numpy(), actions)
        np.testing.assert_allclose(got["logits"].numpy(), logits, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(actions, agent.get_actions(states, explore=False))
        if "onnx" in formats:
            import onnxruntime as ort
            onnx_actions, onnx_logits = ort.InferenceSession(str(tmp_path / "p.onnx")).run(
                None, {"observations": observations})
            np.testing.assert_array_equal(onnx_actions, actions)
            np.testing.assert_allclose(onnx_logits, logits, rtol=1e-5, atol=1e-5)


def _has(module):
    import importlib.util
    return importlib.util.find_spec(module) is not None
