"""Bad input that would otherwise be accepted silently, end in a traceback, hang or mislead: each gets one clear
line of the project's own error type, naming the key or flag (or, for a learning rate far too high, one warning
naming it)."""
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from rlgraph.cli import main as cli_main
from rlgraph.components import Component
from rlgraph.components.common.time_dependent_parameters import TimeDependentParameter
from rlgraph.components.explorations.epsilon_exploration import EpsilonExploration
from rlgraph.components.optimizers.adam_optimizer import AdamOptimizer
from rlgraph.engines.run_config import LINEAR_NETWORK_SPEC, RunConfig, load_config
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.tests import ComponentTest
from rlgraph.training.checkpoint_store import CheckpointStore
from rlgraph.training.trainer import Trainer
from rlgraph.utils.backend import backend_available
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphAPIError, RLGraphBuildError, RLGraphDivergenceError, RLGraphSpecError
from rlgraph.utils.text import with_article
from small_configs import small_dqn_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATE, ACTION = FloatBox(shape=(4,)), IntBox(2)


def _one_line(err):
    lines = [line for line in err.strip().splitlines() if not line.startswith("WARNING")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _dqn(**changes):
    with open(os.path.join(ROOT, "configs", "dqn_cartpole.json")) as f:
        config = json.load(f)
    config.update(changes)
    return config


# --- silently accepted ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("network_spec", [[], {"layers": []}])
def test_an_empty_network_spec_is_refused_naming_the_key_and_the_linear_opt_in(network_spec):
    with pytest.raises(RLGraphSpecError, match=r"^network_spec: an empty list of layers would train a linear model.*"
                                               r"\"activation\": \"linear\""):
        load_config(_dqn(network_spec=network_spec))
    # The explicit form of a linear model is accepted.
    assert load_config(_dqn(network_spec=LINEAR_NETWORK_SPEC))[0]["network_spec"] == LINEAR_NETWORK_SPEC


@pytest.mark.parametrize("spec, lacks", [
    (["linear", 1.0], r"lacks its end value \(to\)"),
    (["linear"], r"lacks its start value \(from\) and end value \(to\)"),
    ({"type": "linear", "from_": 1.0}, r"lacks its end value \(to_\)"),
    (["polynomial", 1.0], r"lacks its end value \(to\)"),
])
def test_a_half_written_schedule_is_refused_naming_the_key_and_the_form(spec, lacks):
    form = r"would stay constant: write it whole, e\.g\. \[\"\w+\", 1\.0, 0\.05\]"
    with pytest.raises(RLGraphSpecError,
                       match=rf"^EpsilonExploration\.epsilon_spec: the schedule .* {lacks} and {form}"):
        EpsilonExploration(spec)
    with pytest.raises(RLGraphSpecError, match=rf"^AdamOptimizer\.learning_rate: .*{lacks}"):
        AdamOptimizer(learning_rate=spec)
    with pytest.raises(RLGraphSpecError, match=rf"^lr: .*{lacks}"):
        TimeDependentParameter.from_spec(spec, _path="lr")
    # Whole schedules and constants stay accepted (and mean what they say).
    assert EpsilonExploration(["linear", 1.0, 0.1]).epsilon.to_ == 0.1
    assert TimeDependentParameter.from_spec(["constant", 0.5]).from_ == 0.5


def test_a_half_written_schedule_in_a_config_names_its_config_path():
    from rlgraph.agents import Agent
    config = _dqn(exploration_spec={"epsilon_spec": ["linear", 1.0]})
    with pytest.raises(RLGraphSpecError, match=r"^agent\.exploration_spec\.epsilon_spec: the schedule "
                                               r"\['linear', 1\.0\] lacks its end value"):
        Agent.from_spec(config, state_space=STATE, action_space=ACTION, backend="pytorch")


def test_a_learning_rate_far_too_high_is_one_warning_naming_the_key(caplog):
    # A warning, not an error: what is sane depends on the loss's scale, and a run may diverge on purpose.
    with caplog.at_level(logging.WARNING, logger="rlgraph"):
        AdamOptimizer(learning_rate=1e-3)
        AdamOptimizer(learning_rate=["linear", 1e-3, 1e-5])
        assert not caplog.records
        AdamOptimizer(learning_rate=1e8)
        AdamOptimizer(learning_rate=["linear", 5.0, 1e-3])
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and all(m.startswith("AdamOptimizer.learning_rate: ") for m in messages)
    assert "1e+08 is far above any usual learning rate" in messages[0] and "optimizer_spec.learning_rate" in messages[0]
    assert messages[1].startswith("AdamOptimizer.learning_rate: 5 is far above")


@pytest.mark.parametrize("flag, value, engines", [
    ("--transport", "grpc", "only the central engine uses it"),
    ("--num-actors", "3", "only the ray and central engines use it"),
    ("--ray-address", "127.0.0.1:6379", "only the ray engine uses it"),
    ("--learner-rank", "1", "only the distributed engine uses it"),
])
def test_a_flag_the_engine_does_not_use_is_refused_naming_flag_and_engines(tmp_path, capsys, flag, value, engines):
    cfg = small_dqn_config(tmp_path)
    logdir = tmp_path / "run"
    assert cli_main(["train", cfg, "--steps", "10", "--logdir", str(logdir), flag, value]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"error: {flag} {value}: {engines}, and this run's engine is local" in line
    assert not logdir.exists()


@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_an_empty_env_id_is_refused(tmp_path, capsys, command):
    cfg = small_dqn_config(tmp_path)
    extra = ["--steps", "10", "--logdir", str(tmp_path / "run")] if command == "train" else \
        ["--checkpoint", str(tmp_path)]
    assert cli_main([command, cfg, "--env", " "] + extra) == 2
    assert "error: --env: expected an environment id such as 'CartPole-v1', got ' '." in \
        _one_line(capsys.readouterr().err)
    with pytest.raises(RLGraphSpecError, match=r"^env_id \(--env\): expected an environment id"):
        RunConfig.load(_dqn(), env_id="")


# --- tracebacks -------------------------------------------------------------------------------------------------
def test_a_component_that_forgets_super_init_is_told_so_at_construction():
    class NoSuper(Component):
        def __init__(self, units=3):
            self.units = units

    class Child(NoSuper):
        def __init__(self):
            super().__init__(units=4)

    for cls, name in ((NoSuper, "NoSuper"), (Child, "NoSuper")):
        with pytest.raises(RLGraphAPIError, match=rf"^{name}\.__init__ does not call super\(\)\.__init__\(\.\.\.\)"):
            cls()

    class Early(Component):  # Uses the component before calling super().__init__: the same error, not Python's.
        def __init__(self):
            self.add_components(Component(scope="x"))
            super().__init__()

    with pytest.raises(RLGraphAPIError, match=r"^Early\.__init__ does not call super\(\)\.__init__"):
        Early()


# --- misleading -------------------------------------------------------------------------------------------------
def test_evaluate_with_zero_episodes_names_the_flag(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path)
    assert cli_main(["evaluate", cfg, "--checkpoint", str(tmp_path), "--episodes", "0"]) == 2
    assert "error: --episodes: expected a positive int, got 0." in _one_line(capsys.readouterr().err)


# A record: states and next states 2 x 4 float32, an int32 action, a float32 reward, a bool terminal = 41 bytes;
# the trees: 2 trees x 2 x 2**40 leaves x 8 bytes = 32 TiB; 41e12 bytes + 32 TiB = 69.3 TiB. A dense kernel of
# 4 x 1e12 float32 takes 14.6 TiB, made from a float64 array and copied: 4e12 x (8 + 2 x 4) bytes = 58.2 TiB.
@pytest.mark.parametrize("changes, key, size", [
    (dict(memory_spec={"type": "prioritized-replay", "capacity": 10 ** 12}), r"agent\.memory_spec\.capacity",
     r"1,000,000,000,000 records of 41 bytes each plus 32\.0 TiB of priority trees would take 69\.3 TiB"),
    (dict(memory_spec={"type": "replay-memory", "capacity": 10 ** 12}), r"agent\.memory_spec\.capacity",
     r"1,000,000,000,000 records of 41 bytes each would take 37\.3 TiB"),
    (dict(network_spec=[{"type": "dense", "units": 10 ** 12}]), r"agent\.network_spec\.layers\[0\]",
     r"its variable 'kernel' of shape \(4, 1000000000000\) float32 takes 14\.6 TiB and would need 58\.2 TiB"),
])
def test_sizes_beyond_the_machine_are_refused_before_allocating_naming_the_key(changes, key, size):
    from rlgraph.agents import Agent
    with pytest.raises(RLGraphSpecError, match=rf"^{key}: \w+ 'dqn/[\w/-]+': {size}.*more than .* of memory"):
        Agent.from_spec(_dqn(**changes), state_space=STATE, action_space=ACTION, backend="pytorch")


class _DivergingEngine:
    """An engine whose weights go NaN inside its second chunk, which then fails (as a backend op would)."""

    class Agent:
        def __init__(self):
            self.w = np.ones(3)

        def get_weights(self):
            return {"w": self.w}

    def __init__(self):
        self.agent = self.Agent()
        self.chunks = 0

    def run(self, n):
        self.chunks += 1
        if self.chunks == 2:
            self.agent.w[:] = np.nan
            raise ValueError("matmul of NaN")
        return dict(env_steps=n, episodes=[], results=[dict(loss=1.0)])

    def store(self, path):
        os.makedirs(path)
        np.save(os.path.join(path, "w.npy"), self.agent.w)

    def load(self, path):
        self.agent.w = np.load(os.path.join(path, "w.npy"))


def test_a_divergence_inside_a_chunk_names_the_chunks_steps_not_its_start(tmp_path):
    trainer = Trainer(_DivergingEngine(), str(tmp_path / "run"), max_steps=1000, chunk_steps=100)
    with pytest.raises(RLGraphDivergenceError, match=r"^training diverged between env steps 100 and 200: weights "
                                                     r"\['w'\] hold NaN"):
        trainer.train()


def test_evaluate_falling_back_to_an_older_checkpoint_does_not_say_resuming(tmp_path, caplog):
    store = CheckpointStore(str(tmp_path))

    def write_model(path):
        os.makedirs(path)
        with open(os.path.join(path, "w.txt"), "w") as f:
            f.write("weights")

    older = store.save(write_model, dict(step=1))
    newer = store.save(write_model, dict(step=2))
    with open(os.path.join(newer, "model", "w.txt"), "w") as f:
        f.write("damaged")
    with caplog.at_level(logging.WARNING):
        assert store.latest()[0] == older
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "Using the older checkpoint" in messages and "Resuming" not in messages


def test_messages_use_the_right_article():
    assert [with_article(n) for n in ("ApexAgent", "DQNAgent", "IMPALAAgent", "R2D2Agent", "Layer", "int")] == \
        ["an ApexAgent", "a DQNAgent", "an IMPALAAgent", "an R2D2Agent", "a Layer", "an int"]
    from rlgraph.components import Optimizer
    from rlgraph.components.layers import Layer
    with pytest.raises(RLGraphSpecError, match="class DenseLayer is not an Optimizer"):
        Optimizer.lookup_class(Layer.lookup_class("dense"))


class NotALayer(Component):
    """A component that is no layer (a network's layers must subclass ``Layer``)."""


def test_a_component_that_is_no_layer_in_a_network_says_what_to_subclass():
    from rlgraph.agents import Agent
    from rlgraph.components.layers import Layer
    from rlgraph.spaces import FloatBox, IntBox
    expected = (r"agent.network_spec.layers\[1\].type: 'not-a-layer' is a NotALayer \(.*\), not a Layer: make it "
                r"subclass rlgraph.components.layers.Layer to use it here.")
    with pytest.raises(RLGraphSpecError, match=expected):
        Agent.from_spec({"type": "dqn", "network_spec": [{"type": "dense", "units": 4}, {"type": "not-a-layer"}]},
                        state_space=FloatBox(shape=(3,)), action_space=IntBox(2), backend="pytorch")
    with pytest.raises(RLGraphSpecError, match="class NotALayer is not a Layer: make it subclass "
                                               "rlgraph.components.layers.Layer"):
        Layer.lookup_class(NotALayer)


# --- silent in components ---------------------------------------------------------------------------------------
class _NoReturn(Component):
    @rlgraph_api
    def double(self, x):
        self._graph_fn_double(x)

    @graph_fn
    def _graph_fn_double(self, x):
        return x * 2


class _NothingToReturn(Component):
    """Returns nothing and produces nothing: fine."""

    @rlgraph_api
    def touch(self, x):
        self._graph_fn_touch(x)

    @graph_fn(returns=0)
    def _graph_fn_touch(self, x):
        pass

    @rlgraph_api
    def double(self, x):
        return self._graph_fn_double(x)

    @graph_fn
    def _graph_fn_double(self, x):
        return x * 2


@pytest.mark.all_backends  # A component-level test: on JAX too (rlgraph.tests.pytest_plugin).
def test_an_api_method_that_forgets_return_is_refused_at_build(backend):
    with pytest.raises(RLGraphAPIError, match=r"^API method 'double' of '_-no-return' returns None, but the values "
                                              r"of its call of graph function '_graph_fn_double' are used by nothing: "
                                              r"write `return self\._graph_fn_double\(\.\.\.\)`"):
        ComponentTest(_NoReturn(), input_spaces=dict(x=FloatBox(shape=(2,), add_batch_rank=True)), backend=backend)
    test = ComponentTest(_NothingToReturn(), input_spaces=dict(x=FloatBox(shape=(2,), add_batch_rank=True)),
                         backend=backend)
    test.test(("double", [np.ones((1, 2), np.float32)]), expected_outputs=np.full((1, 2), 2.0, np.float32))
    test.terminate()


class _PythonIf(Component):
    @rlgraph_api
    def relu(self, x):
        return self._graph_fn_relu(x)

    @graph_fn
    def _graph_fn_relu(self, x):
        if x[0, 0] > 0:
            return x
        return x * 0


@pytest.mark.skipif(not backend_available("tf"), reason="TensorFlow is not installed")
def test_a_python_if_on_a_tensor_says_what_to_write_instead_on_tensorflow():
    with pytest.raises(RLGraphBuildError, match=r"^Graph function '_graph_fn_relu' of component '_-python-if' .*"
                                                r"uses a tensor as a Python bool.*"
                                                r"Write self\.ops\.where\(condition, x, y\)"):
        ComponentTest(_PythonIf(), input_spaces=dict(x=FloatBox(shape=(2,), add_batch_rank=True)), backend="tf")


# --- slow to say no ---------------------------------------------------------------------------------------------
_NO_BACKEND = """
import sys, time
from rlgraph.cli import main
start = time.perf_counter()
code = main(sys.argv[1:])
print("rc", code, "backends", sorted(m for m in ("tensorflow", "torch", "ray") if m in sys.modules),
      "seconds", round(time.perf_counter() - start, 2))
"""


def _cli_without_backend(args):
    out = subprocess.run([sys.executable, "-c", _NO_BACKEND] + args, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    return out.stdout.strip().splitlines()[-1], _one_line(out.stderr)


def test_errors_that_need_no_backend_come_before_importing_one(tmp_path):
    cfg = small_dqn_config(tmp_path)
    status, err = _cli_without_backend(["evaluate", cfg, "--checkpoint", str(tmp_path / "missing")])
    assert status.startswith("rc 2 backends []") and "--checkpoint" in err and "is not a directory" in err
    (tmp_path / "empty").mkdir()
    status, err = _cli_without_backend(["train", cfg, "--resume", "--logdir", str(tmp_path / "empty")])
    assert status.startswith("rc 2 backends []") and "--resume: no checkpoint in" in err


def test_resume_of_a_missing_logdir_creates_nothing(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path)
    logdir = tmp_path / "never"
    assert cli_main(["train", cfg, "--resume", "--logdir", str(logdir), "--steps", "10"]) == 2
    assert f"--resume: logdir '{logdir}' does not exist" in _one_line(capsys.readouterr().err)
    assert not logdir.exists()


def test_a_config_refused_at_build_leaves_no_empty_logdir(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path, memory_spec={"type": "prioritized-replay", "capacity": 10 ** 12})
    logdir = tmp_path / "run"
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "10", "--logdir", str(logdir)]) == 2
    assert "memory_spec.capacity" in _one_line(capsys.readouterr().err)
    assert not logdir.exists()
    # A logdir that existed before is kept (empty or not).
    logdir.mkdir()
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "10", "--logdir", str(logdir)]) == 2
    assert logdir.is_dir()


def test_the_ray_example_refuses_an_address_that_does_not_answer_at_once():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "ray_apex_pong.py"), "bogus.invalid:1", "2"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"))
    assert out.returncode == 2
    assert _one_line(out.stderr).startswith("ray_apex_pong.py: error: Ray address 'bogus.invalid:1' does not answer")
