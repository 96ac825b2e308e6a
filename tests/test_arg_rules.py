"""Constructor arguments are checked by their declared rules (``ARG_RULES``): a malformed spec of a layer,
preprocessor, memory, loss, agent or environment raises one ``RLGraphSpecError`` whose single line names the
offending key under its config path, and the exported JSON Schema refuses the same values."""
import json
import os
import re

import jsonschema
import pytest

from rlgraph.agents import Agent  # (registers every agent type)
from rlgraph.cli import main as cli_main
from rlgraph.components import Memory, PreprocessorStack
from rlgraph.components.layers import Layer
from rlgraph.components.loss_functions.dqn_loss_function import DQNLossFunction
from rlgraph.components.loss_functions.r2d2_loss_function import R2D2LossFunction
from rlgraph.environments import GymEnv, VectorEnv
from rlgraph.environments.atari import AtariEnv
from rlgraph.engines.config_schema import config_schema
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.utils.errors import RLGraphSpecError
from small_configs import small_dqn_config

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
STATE, ACTION = FloatBox(shape=(4,)), IntBox(2)
NET = [{"type": "dense", "units": 8, "activation": "tanh"}]
SPECS = dict(
    dqn=dict(type="dqn", network_spec=NET, memory_spec={"type": "prioritized-replay", "capacity": 200}),
    apex=dict(type="apex", network_spec=NET, memory_spec={"type": "prioritized-replay", "capacity": 200}),
    impala=dict(type="impala", network_spec=NET, unroll_length=4),
    appo=dict(type="appo", network_spec=NET, unroll_length=4),
    r2d2=dict(type="r2d2", network_spec=NET + [{"type": "lstm", "units": 4}],
              memory_spec={"capacity": 50, "burn_in_length": 2, "train_length": 6, "overlap": 2}, n_step=2),
)


def agent(kind, **changes):
    """Builds (tries to) the small ``kind`` agent of ``SPECS`` with ``changes`` to its config."""
    return lambda: Agent.from_spec(dict(SPECS[kind], **changes), state_space=STATE, action_space=ACTION,
                                   backend="pytorch")


def layer(spec):
    """Builds (tries to) a network's first layer as an agent config's network_spec does."""
    return agent("dqn", network_spec=[spec])


def preprocessor(spec):
    """Builds (tries to) the second preprocessor of an agent config's preprocessing_spec."""
    return agent("dqn", preprocessing_spec=[{"type": "multiply", "factor": 1.0}, spec])


#: (build, the config path the error names, the rest of its message as a regular expression).
CASES = [
    # --- layers
    (layer({"type": "conv2d", "filters": 0, "kernel_size": 3}), "agent.network_spec.layers[0].filters",
     r"expected a positive int, got 0\."),
    (layer({"type": "conv2d", "filters": 4, "kernel_size": "3"}), "agent.network_spec.layers[0].kernel_size",
     r"expected a positive int or a list of 2 of them, got '3' \(a string: write numbers without quotes\)\."),
    (layer({"type": "conv2d", "filters": 4, "kernel_size": 3, "strides": [2, 2, 2]}),
     "agent.network_spec.layers[0].strides", r"expected a positive int or a list of 2 of them, got \[2, 2, 2\]\."),
    (layer({"type": "conv2d", "filters": 4, "kernel_size": 3, "padding": "full"}),
     "agent.network_spec.layers[0].padding", r"expected one of 'valid', 'same' \(any case\), got 'full'"),
    (layer({"type": "dense", "units": True}), "agent.network_spec.layers[0].units",
     r"expected a positive int, got True \(a bool\)\."),
    (layer({"type": "dense", "units": 8, "activation": "relux"}), "agent.network_spec.layers[0].activation",
     r"expected an activation name \(one of linear, relu, .*\) or null, got 'relux' \(a string\)\. "
     r"Did you mean 'relu'\?"),
    (layer({"type": "lstm", "units": 8.0}), "agent.network_spec.layers[0].units",
     r"expected a positive int, got 8\.0 \(a float\)\."),
    (layer({"type": "concat", "axis": "last"}), "agent.network_spec.layers[0].axis",
     r"expected an int, got 'last' \(a string\)\."),
    (layer({"type": "reshape", "new_shape": [2, -1, -1]}), "agent.network_spec.layers[0].new_shape",
     r"expected a shape: a positive int or a list of positive ints with at most one -1 or null, "
     r"got \[2, -1, -1\]\."),
    (layer({"type": "reshape", "flatten": True, "new_shape": [4]}), "agent.network_spec.layers[0].new_shape",
     r"give either flatten=True or new_shape, not both\."),
    (layer({"type": "dense", "unitz": 8}), "agent.network_spec.layers[0].unitz",
     r"unknown key 'unitz' for DenseLayer\. Did you mean 'units'\?"),
    # --- preprocessors
    (preprocessor({"type": "clip", "min_value": "-1", "max_value": 1}), "agent.preprocessing_spec[1].min_value",
     r"expected a number, got '-1' \(a string: write numbers without quotes\)\."),
    (preprocessor({"type": "clip", "min_value": 1, "max_value": -1}), "agent.preprocessing_spec[1].min_value",
     r"1 is greater than max_value -1\."),
    (preprocessor({"type": "divide", "divisor": 0}), "agent.preprocessing_spec[1].divisor",
     r"expected a non-zero finite number, got 0\."),
    (preprocessor({"type": "multiply", "factor": None}), "agent.preprocessing_spec[1].factor",
     r"expected a finite number, got None\."),
    (preprocessor({"type": "multiply", "factr": 2}), "agent.preprocessing_spec[1].factr",
     r"unknown key 'factr' for Multiply\. Did you mean 'factor'\?"),
    (preprocessor({"type": "image-resize", "width": 0, "height": 84}), "agent.preprocessing_spec[1].width",
     r"expected a positive int, got 0\."),
    (preprocessor({"type": "image-resize", "width": 84, "height": 84, "interpolation": "bicubic"}),
     "agent.preprocessing_spec[1].interpolation", r"expected one of 'bilinear', 'area' \(any case\), got 'bicubic'"),
    (preprocessor({"type": "grayscale", "weights": []}), "agent.preprocessing_spec[1].weights",
     r"expected a non-empty list of numbers, got \[\]\."),
    (preprocessor({"type": "transpose", "axes": [0, 0]}), "agent.preprocessing_spec[1].axes",
     r"expected a permutation of 0\.\.n-1 \(a list of ints such as \[2, 0, 1\]\), got \[0, 0\]\."),
    (preprocessor({"type": "convert-type", "to_dtype": "complex64"}), "agent.preprocessing_spec[1].to_dtype",
     r"expected a dtype, one of float16, .*, bool, got 'complex64' \(a string\)\."),
    (preprocessor({"type": "sequence", "sequence_length": 0}), "agent.preprocessing_spec[1].sequence_length",
     r"expected a positive int, got 0\."),
    # --- memories
    (agent("dqn", memory_spec={"type": "prioritized-replay", "capacity": 200.0}), "agent.memory_spec.capacity",
     r"expected a positive int, got 200\.0 \(a float\)\."),
    (agent("dqn", memory_spec={"type": "prioritized-replay", "alpha": "0.6"}), "agent.memory_spec.alpha",
     r"expected a finite number >= 0\.0, got '0\.6' \(a string: write numbers without quotes\)\."),
    (agent("dqn", memory_spec={"type": "prioritized-replay", "seed": 1.5}), "agent.memory_spec.seed",
     r"expected an int or null, got 1\.5\."),
    (agent("apex", memory_spec={"type": "replay-memory", "capacity": 100}), "agent.memory_spec",
     r"Ape-X needs a prioritized memory \(type 'prioritized-replay'\), got a ReplayMemory\."),
    (lambda: Memory.from_spec({"type": "fifo-queue", "timeout": -1}, _path="memory_spec"), "memory_spec.timeout",
     r"expected a finite number >= 0\.0 or null, got -1\."),
    (agent("r2d2", memory_spec={"burn_in_length": -1}), "agent.memory_spec.burn_in_length",
     r"expected an int >= 0, got -1\."),
    (agent("r2d2", memory_spec={"burn_in_length": 2, "train_length": 6, "overlap": 8}), "agent.memory_spec.overlap",
     r"must be < the sequence length 8 \(burn_in_length \+ train_length\), got 8\."),
    (lambda: Memory.from_spec({"type": "sequence-replay", "mask_key": "a/b"}, _path="memory_spec"),
     "memory_spec.mask_key", r"expected a non-empty record key without '/', got 'a/b' \(a string\)\."),
    (agent("r2d2", memory_spec={"mask_key": "m"}), "agent.memory_spec.mask_key",
     r"is set by the component; leave it out\."),
    (agent("r2d2", memory_spec={"train_length": 2}), "agent.memory_spec.train_length",
     r"must exceed n_step \(2\), got 2; the last n_step steps only bootstrap\."),
    # --- losses
    (agent("impala", loss_spec={"weight_entropy": "0.01"}), "agent.loss_spec.weight_entropy",
     r"expected a finite number, got '0\.01' \(a string: write numbers without quotes\)\."),
    (agent("impala", loss_spec={"time_reduction": "avg"}), "agent.loss_spec.time_reduction",
     r"expected one of 'sum', 'mean', got 'avg' \(a string\)\."),
    (agent("impala", loss_spec={"rho_bar": -1.0}), "agent.loss_spec.rho_bar",
     r"expected a number >= 0\.0 or null, got -1\.0 \(a float\)\."),
    (agent("appo", loss_spec={"clip_ratio": -0.2}), "agent.loss_spec.clip_ratio",
     r"expected a finite number >= 0\.0, got -0\.2\."),
    (agent("appo", loss_spec={"discount": 0.5}), "agent.loss_spec.discount",
     r"is set by the agent \(its 'discount' and 'reward_clipping'\), not by loss_spec\."),
    (lambda: DQNLossFunction(huber_delta=0), "DQNLossFunction.huber_delta",
     r"expected a finite number > 0\.0, got 0\."),
    (lambda: R2D2LossFunction(eta=1.5), "R2D2LossFunction.eta",
     r"expected a finite number in \[0\.0, 1\.0\], got 1\.5\."),
    # --- agents
    (agent("appo", num_epochs=0), "agent.num_epochs", r"expected a positive int, got 0\."),
    (agent("appo", num_minibatches=True), "agent.num_minibatches", r"expected a positive int, got True \(a bool\)\."),
    (agent("appo", max_policy_lag=-1), "agent.max_policy_lag", r"expected an int >= 0 or null, got -1\."),
    (agent("impala", reward_scale=0), "agent.reward_scale", r"expected a finite number > 0\.0, got 0\."),
    (agent("impala", reward_clipping="clamp"), "agent.reward_clipping",
     r"expected one of 'clamp_one', None, got 'clamp' \(a string\)\. Did you mean 'clamp_one'\?"),
    (agent("impala", network_spec=None), "agent.network_spec", r"missing: give the network's layers, e\.g\. "),
    (agent("r2d2", n_step=0), "agent.n_step", r"expected a positive int, got 0\."),
    (agent("r2d2", eta=2), "agent.eta", r"expected a finite number in \[0\.0, 1\.0\], got 2\."),
    (agent("r2d2", actor_epsilons="ape-x"), "agent.actor_epsilons",
     r"expected \"apex\", an Ape-X dict .* or a list of epsilons in \[0, 1\] or null, got 'ape-x' \(a string\)\."),
    (agent("r2d2", actor_epsilons={"base": 0.4, "alpah": 7}), "agent.actor_epsilons",
     r"expected \"apex\", an Ape-X dict .*, got \{'base': 0\.4, 'alpah': 7\}\."),
    (agent("r2d2", network_spec=NET), "agent.network_spec", r"R2D2 needs a recurrent Q-network"),
    (agent("apex", epsilon_base=1.5), "agent.epsilon_base", r"expected a finite number in \[0\.0, 1\.0\], got 1\.5\."),
    (agent("dqn", role="trainer"), "agent.role",
     r"expected one of 'both', 'actor', 'learner', got 'trainer' \(a string\)\."),
    (agent("dqn", exploration_spec={"epsilon_spec": ["exponential", 1.0, 0.1, 1.5]}),
     "agent.exploration_spec.epsilon_spec.decay_rate", r"expected a finite number in \(0\.0, 1\.0\), got 1\.5\."),
    (agent("dqn", exploration_spec={"epsilon_spec": [1.0, 0.1]}), "agent.exploration_spec.epsilon_spec",
     r"expected a finite number in \[0\.0, 1\.0\] or a schedule"),
    # --- environments
    (lambda: VectorEnv("rlgraph/Chain-v0", 2, length=1), "ChainVectorEnv.length", r"expected an int >= 2, got 1\."),
    (lambda: GymEnv("rlgraph/Chain-v0", start=4), "ChainEnv.start",
     r"expected an int in \[0, 3\] \(not the goal at length - 1\), got 4\."),
    (lambda: GymEnv("rlgraph/Chain-v0", observation="image"), "ChainEnv.observation",
     r"expected one of 'discrete', 'float', got 'image' \(a string\)\."),
    (lambda: GymEnv(""), "GymEnv.env_id",
     r"expected a gymnasium id \(a non-empty string such as \"CartPole-v1\"\), got ''"),
    (lambda: VectorEnv("CartPole-v1", 2, vectorization="natve"), "GymEnv.vectorization",
     r"expected one of 'auto', 'native', 'sync', 'async', got 'natve' \(a string\)\. Did you mean 'native'\?"),
    (lambda: VectorEnv({"type": "atari", "game": "pong", "frame_skip": 0}), "AtariEnv.frame_skip",
     r"expected a positive int, got 0\."),
    (lambda: VectorEnv({"type": "atari", "game": "pong"}, vectorization="threads"), "AtariEnv.vectorization",
     r"expected one of 'auto', 'ale', 'sync', 'async', got 'threads' \(a string\)\."),
    (lambda: AtariEnv("pong", repeat_action_probability=1.5), "AtariEnv.repeat_action_probability",
     r"expected a finite number in \[0\.0, 1\.0\], got 1\.5\."),
]


@pytest.mark.parametrize("build, path, reason", CASES, ids=[f"{i}-{c[1]}" for i, c in enumerate(CASES)])
def test_malformed_specs_raise_one_line_naming_the_key(build, path, reason):
    with pytest.raises(RLGraphSpecError) as info:
        build()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: "), message
    # The error's key is the path relative to what was built (the whole path where built from a config).
    assert info.value.key and path.endswith(info.value.key) and info.value.reason == message[len(path) + 2:]
    assert re.match(reason, info.value.reason), message


def test_direct_construction_names_the_class():
    from rlgraph.components.layers import Conv2DLayer
    from rlgraph.components.preprocessing import Clip
    with pytest.raises(RLGraphSpecError, match=r"^Conv2DLayer\.kernel_size: expected a positive int or a list of 2 "
                                               r"of them, got \(3, 0\)\.$"):
        Conv2DLayer(2, (3, 0))
    with pytest.raises(RLGraphSpecError, match=r"^Clip\.max_value: expected a number, got nan\.$"):
        Clip(0, float("nan"))
    with pytest.raises(RLGraphSpecError, match=r"^PreprocessorStack\.preprocessing_spec: expected a list of "
                                               r"preprocessor specs, got 'grayscale'\.$"):
        PreprocessorStack(preprocessing_spec="grayscale")


def test_accepted_values_are_normalized():
    from rlgraph.components.layers import Conv2DLayer, ReshapeLayer
    from rlgraph.components.preprocessing import Clip, ConvertType, ImageResize, Transpose
    conv = Layer.from_spec({"type": "conv2d", "filters": 4, "kernel_size": [3, 5], "strides": 2, "padding": "SAME",
                            "activation": "Leaky-ReLU"})
    assert isinstance(conv, Conv2DLayer) and conv.kernel_size == (3, 5) and conv.strides == (2, 2)
    assert conv.padding == "same" and conv.activation == "Leaky-ReLU"
    assert ReshapeLayer(new_shape=4).new_shape == (4,) and ReshapeLayer(one_hot_categories=True).one_hot_categories
    assert ConvertType("f4").to_dtype == "float32" and ImageResize(8, 8, "AREA").interpolation == "area"
    assert Transpose((2, 0, 1)).axes == [2, 0, 1] and Transpose([]).axes == []
    assert Clip(float("-inf"), 1.0).bounds_for() == (float("-inf"), 1.0)


def test_a_bad_component_value_in_a_config_file_is_one_line_on_the_command_line(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path, network_spec=[{"type": "dense", "units": 0}])
    assert cli_main(["train", cfg, "--steps", "10", "--backend", "pytorch", "--logdir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("agent.network_spec.layers[0].units: expected a positive int, got 0.") and \
        len(err.splitlines()) == 1


# --- the exported JSON Schema refuses the same values ----------------------------------------------------------
@pytest.fixture(scope="module")
def validator():
    schema = config_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _config(name, **changes):
    with open(os.path.join(CONFIGS, f"{name}.json")) as f:
        return dict(json.load(f), **changes)


def _errors(validator, config):
    """All messages, also those of the subschemas of the "not valid under any of the given schemas" errors."""
    out = []
    for error in validator.iter_errors(config):
        stack = [error]
        while stack:
            e = stack.pop()
            out.append(e.message)
            stack.extend(e.context)
    return out


@pytest.mark.parametrize("name, changes, message", [
    ("dqn_cartpole", dict(optimizer_spec={"type": "adam", "learning_rate": 1e-3, "beta_1": 1.0}),
     "1.0 is greater than or equal to the maximum of 1.0"),
    ("dqn_cartpole", dict(network_spec=[{"type": "dense", "units": 0}]), "0 is less than the minimum of 1"),
    ("dqn_cartpole", dict(network_spec=[{"type": "dense", "units": 8.5}]), "8.5 is not of type 'integer'"),
    ("dqn_cartpole", dict(network_spec=[{"type": "dense", "unitz": 8}]), "'unitz' was unexpected"),
    ("dqn_cartpole", dict(network_spec=[{"type": "dense"}]), "'units' is a required property"),
    ("dqn_cartpole", dict(network_spec=[{"type": "conv2d", "filters": 4, "kernel_size": "3"}]),
     "'3' is not of type 'integer'"),
    ("dqn_cartpole", dict(network_spec=[{"type": "dense", "units": 8, "activation": "relux"}]),
     "'relux' does not match"),
    ("dqn_cartpole", dict(preprocessing_spec=[{"type": "divide", "divisor": 0}]), "should not be valid under"),
    ("dqn_cartpole", dict(preprocessing_spec=[{"type": "multiply", "factr": 2}]), "'factr' was unexpected"),
    ("dqn_cartpole", dict(memory_spec={"type": "prioritized-replay", "capacity": 1.5}),
     "1.5 is not of type 'integer'"),
    ("dqn_cartpole", dict(memory_spec={"type": "prioritized-replay", "capacity": True}),
     "True is not of type 'integer'"),
    ("appo_cartpole", dict(loss_spec={"clip_ratio": -0.2}), "-0.2 is less than the minimum of 0.0"),
    ("appo_cartpole", dict(loss_spec={"discount": 0.5}), "'discount' was unexpected"),
    ("appo_cartpole", dict(num_epochs=0), "0 is less than the minimum of 1"),
    ("impala_cartpole", dict(reward_clipping="clamp"), "'clamp' is not one of ['clamp_one', None]"),
    ("r2d2_cartpole", dict(actor_epsilons="ape-x"), "'ape-x' is not one of ['apex']"),
])
def test_the_schema_refuses_bad_component_values(validator, name, changes, message):
    found = _errors(validator, _config(name, **changes))
    assert any(message in e for e in found), found


def test_the_schema_accepts_what_the_rules_accept(validator):
    net = [{"type": "Conv2D", "filters": 4, "kernel_size": [3, 5], "strides": 2, "padding": "SAME",
            "activation": "Leaky-ReLU"}, {"type": "reshape", "flatten": True}, {"type": "dense", "units": 8}]
    prep = [{"type": "clip", "min_value": 0, "max_value": 255}, {"type": "transpose", "axes": [1, 2, 0]},
            {"type": "cast", "to_dtype": "float32"}, {"type": "image-resize", "width": 4, "height": 4,
                                                       "interpolation": "Area"}]
    assert _errors(validator, _config("dqn_cartpole", network_spec=net, preprocessing_spec=prep)) == []
    memory = {"type": "fifo-queue", "capacity": 10, "timeout": None, "seed": 3}
    assert _errors(validator, _config("dqn_cartpole", memory_spec=memory)) == []
    assert _errors(validator, _config("r2d2_cartpole", actor_epsilons=[0.1, 0.2])) == []


def test_environment_argument_errors_name_the_config_key():
    """An environment's own argument check, reached from a config, names ``environment_spec.<key>``."""
    from rlgraph.engines.runner import make_vector_env
    with pytest.raises(RLGraphSpecError, match=r"^environment_spec\.length: expected an int >= 2, got 1\.$"):
        make_vector_env(dict(env_spec="rlgraph/Chain-v0", num_envs=2, length=1))
