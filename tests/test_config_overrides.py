"""``--set KEY.PATH=VALUE``: overrides reach the agent, are checked like a config file, and the effective config is
stored with the run."""
import json

import numpy as np
import pytest

from rlgraph.cli import main as cli_main
from rlgraph.engines.runner import load_config
from rlgraph.utils.config_overrides import apply_overrides, parse_override
from rlgraph.utils.errors import RLGraphSpecError
from small_configs import small_dqn_config

CONFIG = {"type": "dqn", "environment_spec": {"env_spec": "CartPole-v1", "num_envs": 4},
          "network_spec": [{"type": "dense", "units": 64}, {"type": "dense", "units": 64}],
          "optimizer_spec": "adam", "train_spec": {"steps": 1000}}


def test_values_are_json_else_strings():
    assert parse_override("a.b=3e-4") == (["a", "b"], 3e-4)
    assert parse_override("a=true") == (["a"], True)
    assert parse_override("a=null") == (["a"], None)
    assert parse_override('a=[64, {"x": 1}]') == (["a"], [64, {"x": 1}])
    assert parse_override("a=CartPole-v1") == (["a"], "CartPole-v1")
    assert parse_override("a=x=y") == (["a"], "x=y")  # Split at the first "=".
    assert parse_override("a=") == (["a"], "")


def test_paths_reach_nested_objects_and_list_items_without_changing_the_input():
    before = json.dumps(CONFIG, sort_keys=True)
    out = apply_overrides(CONFIG, ["network_spec.0.units=128", "train_spec.steps=5", "environment_spec.env_spec=Acrobot-v1",
                                   "execution_spec.num_actors=3", "optimizer_spec.learning_rate=3e-4",
                                   "network_spec.1=\"dense\"", "dueling=false"])
    assert out["network_spec"][0] == {"type": "dense", "units": 128}
    assert out["network_spec"][1] == "dense"
    assert out["train_spec"]["steps"] == 5
    assert out["environment_spec"] == {"env_spec": "Acrobot-v1", "num_envs": 4}
    assert out["execution_spec"] == {"num_actors": 3}  # A missing object is created.
    assert out["optimizer_spec"] == {"type": "adam", "learning_rate": 3e-4}  # A type name becomes {"type": ...}.
    assert out["dueling"] is False
    assert json.dumps(CONFIG, sort_keys=True) == before
    # Later overrides win.
    assert apply_overrides(CONFIG, ["train_spec.steps=1", "train_spec.steps=2"])["train_spec"]["steps"] == 2


@pytest.mark.parametrize("override, message", [
    ("network_spec.2.units=128", "index 2 is past the end of network_spec, which has 2 items (indices 0..1)"),
    ("network_spec.first.units=128", "network_spec is a list; 'first' is not an index"),
    ("network_spec.-1.units=128", "network_spec is a list; '-1' is not an index"),
    ("train_spec.steps.max=3", "train_spec.steps is 1000 (a number), not a JSON object or list, so it has no key 'max'"),
    ("train_spec.steps", "expected KEY.PATH=VALUE"),
    ("train_spec..steps=3", "has an empty key"),
])
def test_bad_paths_are_one_line_naming_the_path(override, message):
    with pytest.raises(RLGraphSpecError) as info:
        apply_overrides(CONFIG, [override])
    assert message in str(info.value) and override.split("=")[0] in str(info.value)
    assert len(str(info.value).splitlines()) == 1


def test_load_config_checks_the_overridden_config_like_a_file():
    config, train = load_config(CONFIG, overrides=["train_spec.eval_episodes=3"])
    assert train["eval_episodes"] == 3 and train["steps"] == 1000
    with pytest.raises(RLGraphSpecError, match="train_spec.chunk_step: unknown key 'chunk_step'. Did you mean "
                                               "'chunk_steps'"):
        load_config(CONFIG, overrides=["train_spec.chunk_step=10"])
    with pytest.raises(RLGraphSpecError, match="train_spec.steps: expected a positive int or null, got -3"):
        load_config(CONFIG, overrides=["train_spec.steps=-3"])


@pytest.mark.parametrize("override, message", [
    ("optimizer_spec.learnin_rate=1e-3",
     "agent.optimizer_spec.learnin_rate: unknown key 'learnin_rate' for AdamOptimizer. Did you mean 'learning_rate'?"),
    ("network_spec.0.unit=32", "unknown key 'unit' for DenseLayer. Did you mean 'units'?"),
    ("disount=0.9", "agent.disount: unknown key 'disount' for DQNAgent. Did you mean 'discount'?"),
    ("network_spec.0.units=0", "units: expected a positive int, got 0"),
    ("network_spec.5.units=128", "--set network_spec.5.units=128: index 5 is past the end of network_spec"),
    ("train_spec.chunk_step=10", "Did you mean 'chunk_steps'?"),
    ("execution_spec.num_actor=2", "Did you mean 'num_actors'"),
])
def test_cli_errors_of_overrides_are_one_line(tmp_path, capsys, override, message):
    cfg = small_dqn_config(tmp_path)
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "10", "--logdir", str(tmp_path / "r"),
                     "--set", override]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_run_stores_its_effective_config_and_evaluate_takes_the_same_overrides(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path)
    logdir = tmp_path / "run"
    sets = ["--set", "network_spec.0.units=24", "--set", "optimizer_spec.learning_rate=3e-4",
            "--set", "environment_spec.num_envs=2", "--set", "train_spec.eval_episodes=1"]
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "250", "--logdir", str(logdir)] + sets) == 0
    capsys.readouterr()
    stored = json.loads((logdir / "config.json").read_text())
    assert stored["network_spec"][0]["units"] == 24 and stored["optimizer_spec"]["learning_rate"] == 3e-4
    assert stored["environment_spec"] == {"env_spec": "CartPole-v1", "num_envs": 2}
    assert stored["backend"] == "pytorch" and stored["train_spec"]["eval_episodes"] == 1
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["overrides"] == sets[1::2]
    # The override reached the agent: the checkpoint's first layer has 24 units.
    state = np.load(next(logdir.glob("checkpoints/*/model/variables.npz")), allow_pickle=False)
    assert sorted({state[k].shape for k in state.files if state[k].ndim == 2 and 4 in state[k].shape}) == [(4, 24)]
    # The stored config is a config file: evaluate loads the checkpoint with it, or with the same overrides;
    # the file without them describes another agent.
    for args in (["evaluate", str(logdir / "config.json")], ["evaluate", cfg, "--backend", "pytorch"] + sets):
        assert cli_main(args + ["--checkpoint", str(logdir), "--episodes", "1"]) == 0
        assert np.isfinite(json.loads(capsys.readouterr().out)["mean_return"])
    assert cli_main(["evaluate", cfg, "--backend", "pytorch", "--checkpoint", str(logdir), "--episodes", "1"]) == 2
    assert "another config" in capsys.readouterr().err
