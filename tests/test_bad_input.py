"""Bad input gets one clear error at the call: observe() arguments, config values, dotted types,
the opt-in pytest plugin, and continuous actions outside the action space (IMPALA on Pendulum)."""
import importlib.metadata
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rlgraph.agents.impala_agent  # noqa: F401  (registers "impala")
from rlgraph.agents import Agent
from rlgraph.components import Memory, Optimizer
from rlgraph.components.layers import Layer
from rlgraph.environments import VectorEnv
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.trajectories.n_step_builder import NStepBuilder
from rlgraph.trajectories.sequence_builder import SequenceBuilder
from rlgraph.trajectories.unroll_builder import UnrollBuilder
from rlgraph.utils import specifiable
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError
from rlgraph.utils.validation import Bool, Int, Number, OneOf, Optional, Schedule, check, check_spec, json_schema
from rlgraph.workers import VectorWorker

ROOT = os.path.join(os.path.dirname(__file__), "..")
STATE, ACTION = FloatBox(shape=(4,)), IntBox(2)
NET = [{"type": "dense", "units": 8, "activation": "tanh"}]
DQN = dict(type="dqn", network_spec=NET, n_step=3, memory_spec={"type": "prioritized-replay", "capacity": 200},
           update_spec={"batch_size": 4, "steps_before_update": 8, "update_interval": 2, "sync_interval": 20})
IMPALA = dict(type="impala", network_spec=NET, unroll_length=3)


# --- 1. observe() checks its arguments at the call ------------------------------------------------------------
def _step(agent, n=2, **changes):
    states = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
    actions, extras = agent.get_actions(states, return_extras=True)
    args = dict(states=states, actions=actions, rewards=np.ones(n, np.float32), next_states=states,
                terminals=np.zeros(n, bool), truncations=np.zeros(n, bool), **extras)
    args.update(changes)
    return args


BAD_STEPS = [
    (dict(actions=np.array([5, 0])), r"argument 'actions': expected IntBox\(2.*got value 5 outside \[0, 2\)"),
    (dict(actions=np.array([0.7, 0.0])), r"argument 'actions': expected dtype int.*got float64 \(values \[0\.7"),
    (dict(actions=np.array([0, 1, 1])), r"argument 'actions': expected shape \(2,\)"),
    (dict(rewards=np.array([np.nan, 1.0])), r"argument 'rewards': expected finite numbers, got nan at row 0"),
    (dict(rewards=np.array([1.0, np.inf])), r"argument 'rewards': expected finite numbers, got inf at row 1"),
    (dict(rewards=np.ones(3)), r"argument 'rewards': expected shape \(2,\)"),
    (dict(rewards=["a", "b"]), r"argument 'rewards': expected numbers"),
    (dict(states=np.zeros((2, 5), np.float32)), r"argument 'states': expected shape \(2, 4\).*got shape \(2, 5\)"),
    (dict(next_states=np.zeros((3, 4), np.float32)), r"argument 'next_states': expected shape \(2, 4\)"),
    (dict(terminals=["no", "no"]), r"argument 'terminals': expected bools \(true/false, or numbers 0/1\)"),
    (dict(terminals=[2, 0]), r"argument 'terminals': expected bools"),
    (dict(truncations=np.zeros(3, bool)), r"argument 'truncations': expected shape \(2,\)"),
    (dict(env_ids=[0.5, 1.5]), r"argument 'env_ids': expected 2 integer ids"),
]


@pytest.mark.parametrize("spec", [DQN, IMPALA], ids=["dqn", "impala"])
def test_observe_refuses_bad_arguments_at_the_call_and_changes_nothing(backend, spec):
    agent = Agent.from_spec(spec, state_space=STATE, action_space=ACTION, backend=backend)
    agent.observe(**_step(agent))
    timesteps = agent.timesteps
    for changes, match in BAD_STEPS:
        with pytest.raises(RLGraphSpaceError, match=match):
            agent.observe(**_step(agent, **changes))
        assert agent.timesteps == timesteps, changes
    # No reset() needed: valid steps go on (0/1 flags are fine), and the learner learns from them.
    agent.observe(**_step(agent, terminals=[0, 1], truncations=np.array([0.0, 0.0])))
    for _ in range(12):
        agent.observe(**_step(agent))
    assert agent.timesteps == timesteps + 26
    assert agent.ready_to_update()
    assert np.isfinite(agent.update()["loss"])
    agent.terminate()


def test_observe_error_is_a_space_error_with_one_line():
    agent = Agent.from_spec(DQN, state_space=STATE, action_space=ACTION, backend="pytorch")
    with pytest.raises(RLGraphSpaceError) as info:
        agent.observe(**_step(agent, terminals=["no", "no"]))
    assert "\n" not in str(info.value) and str(info.value).startswith("DQNAgent.observe(): argument 'terminals'")
    agent.terminate()


# --- 2. config values refused with their config path ----------------------------------------------------------
BAD_CONFIGS = [
    (dict(optimizer_spec={"type": "adam", "learning_rate": -1}),
     r"^agent\.optimizer_spec\.learning_rate: expected a finite number >= 0\.0 or a schedule .*got -1\.$"),
    (dict(optimizer_spec={"type": "adam", "learning_rate": "0.001"}),
     r"^agent\.optimizer_spec\.learning_rate: expected .*got '0\.001' \(a string: write numbers without quotes\)"),
    (dict(optimizer_spec={"type": "adam", "learning_rate": ["linear", 1e-3, -1e-3]}),
     r"^agent\.optimizer_spec\.learning_rate: expected .*got \['linear', 0\.001, -0\.001\]"),
    (dict(optimizer_spec={"type": "adam", "learning_rate": float("nan")}),
     r"^agent\.optimizer_spec\.learning_rate: expected a finite number"),
    (dict(optimizer_spec={"type": "adam", "clip_grad_norm": 0}),
     r"^agent\.optimizer_spec\.clip_grad_norm: expected a finite number > 0\.0 or null, got 0\.$"),
    (dict(dueling="no"), r"^agent\.dueling: expected a bool \(true or false\), got 'no' \(a string\)\.$"),
    (dict(double_q=1), r"^agent\.double_q: expected a bool \(true or false\), got 1\.$"),
    (dict(exploration_spec={"epsilon_spec": "0.1"}),
     r"^agent\.exploration_spec\.epsilon_spec: expected a finite number in \[0\.0, 1\.0\]"),
    (dict(exploration_spec={"epsilon_spec": ["linear", 1.0, 2.0]}),
     r"^agent\.exploration_spec\.epsilon_spec: expected a finite number in \[0\.0, 1\.0\]"),
    (dict(update_spec={"batchsize": 3}),
     r"^agent\.update_spec\.batchsize: unknown key 'batchsize'\. Did you mean 'batch_size'\?"),
    (dict(update_spec={"batch_size": 1e9}),
     r"^agent\.update_spec\.batch_size: expected a positive int, got 1000000000\.0 \(a float\)\.$"),
    (dict(n_step=0), r"^agent\.n_step: expected a positive int, got 0\.$"),
    (dict(discount="0.99"), r"^agent\.discount: expected a finite number in \[0\.0, 1\.0\], got '0\.99' \(a string: "
                            r"write numbers without quotes\)\.$"),
    (dict(seed=-1), r"^agent\.seed: expected an int >= 0, got -1\.$"),
    (dict(memory_spec={"type": "prioritized-replay", "capcity": 5}),
     r"^agent\.memory_spec\.capcity: unknown key 'capcity' for PrioritizedReplay\. Did you mean 'capacity'\?"),
    (dict(optimizer_spec={"type": "adam", "learning_rate": {"type": "linear", "from_": 1e-3, "tox": 0}}),
     r"^agent\.optimizer_spec\.learning_rate\.tox: unknown key 'tox' for Linear\. Did you mean 'to_'\?"),
    (dict(optimizer_spec={"type": "adamm"}), r"^agent\.optimizer_spec\.type: unknown Optimizer type 'adamm'\. "
                                             r"Did you mean: AdamOptimizer\?"),
]


@pytest.mark.parametrize("changes,match", BAD_CONFIGS, ids=[str(c) for c, _ in BAD_CONFIGS])
def test_bad_config_values_name_their_config_path(changes, match):
    with pytest.raises(RLGraphSpecError, match=match):
        Agent.from_spec(dict(DQN, **changes), state_space=STATE, action_space=ACTION, backend="pytorch")


def test_bad_impala_flag_names_its_config_path(backend):
    with pytest.raises(RLGraphSpecError, match=r"^agent\.prev_action_reward: expected a bool"):
        Agent.from_spec(dict(IMPALA, prev_action_reward="yes"), state_space=STATE, action_space=ACTION,
                        backend=backend)


def test_direct_construction_names_the_class():
    from rlgraph.components.optimizers import AdamOptimizer
    with pytest.raises(RLGraphSpecError, match=r"^AdamOptimizer\.learning_rate: expected a finite number >= 0"):
        AdamOptimizer(learning_rate=-0.1)


@pytest.mark.parametrize("num_envs,got", [(1e9, r"1000000000\.0 \(a float\)"), (10 ** 9, "1000000000"),
                                          (0, "0"), ("8", r"'8' \(a string: write numbers without quotes\)"),
                                          (True, r"True \(a bool\)"), (2.0, r"2\.0 \(a float\)")])
def test_num_envs_is_an_int_with_a_sane_bound(num_envs, got):
    with pytest.raises(RLGraphSpecError, match=rf"^environment_spec\.num_envs: expected an int in \[1, 65536\], "
                                               rf"got {got}\.$"):
        VectorEnv("CartPole-v1", num_envs=num_envs)


def test_environment_spec_without_env_spec_says_what_to_give():
    with pytest.raises(RLGraphSpecError, match=r"^environment_spec\.env_spec: missing: give a gymnasium id"):
        VectorEnv(num_envs=2)


def test_readme_atari_form_of_environment_spec_builds_pong():
    pytest.importorskip("ale_py")
    # A config's environment_spec as the README writes it, as the runner passes it (plus the run's seed).
    environment_spec = {"type": "atari", "game": "pong", "num_envs": 1}
    with VectorEnv(**environment_spec, seed=0) as env:
        obs = env.reset()
        assert obs.shape == (1, 4, 84, 84) and obs.dtype == np.uint8
        assert env.action_space == IntBox(6, dtype=env.action_space.dtype)
        obs, rewards, terminals, truncations = env.step(np.zeros(1, np.int64))
        assert obs.shape == (1, 4, 84, 84) and rewards.shape == terminals.shape == truncations.shape == (1,)


def test_validation_rules():
    assert check("X", "n", np.int64(3), Int(min=1)) == 3
    assert check("X", "lr", ["linear", 1e-3, 0.0], Schedule(min=0.0)) == ["linear", 1e-3, 0.0]
    assert check("X", "f", None, Optional(Number(gt=0))) is None
    with pytest.raises(RLGraphSpecError, match=r"^X\.mode: expected one of 'mean', 'sum', got 'maen' \(a string\)\. "
                                               r"Did you mean 'mean'\?$"):
        check("X", "mode", "maen", OneOf("mean", "sum"))
    schema = dict(num_envs=Int(min=1, max=8), flag=Bool())
    assert check_spec({"num_envs": 2}, schema, "environment_spec", defaults=dict(flag=False)) == \
        dict(num_envs=2, flag=False)
    with pytest.raises(RLGraphSpecError, match=r"^environment_spec: expected a dict \(JSON object\) such as "
                                               r"\{\"num_envs\": \.\.\.\}, got None\.$"):
        check_spec(None, schema, "environment_spec", required=("num_envs",))
    with pytest.raises(RLGraphSpecError, match=r"^environment_spec\.num_env: unknown key 'num_env'\. Did you mean "
                                               r"'num_envs'\?"):
        check_spec({"num_env": 2}, schema, "environment_spec")
    assert json_schema(schema)["properties"]["num_envs"] == {"type": "integer", "minimum": 1, "maximum": 8}
    assert check("X", "beta", 0.0, Number(min=0.0, lt=1.0)) == 0.0
    with pytest.raises(RLGraphSpecError, match=r"^X\.beta: expected a finite number in \[0\.0, 1\.0\), got 1\.0"):
        check("X", "beta", 1.0, Number(min=0.0, lt=1.0))
    assert Number(min=0.0, lt=1.0).json() == {"type": "number", "minimum": 0.0, "exclusiveMaximum": 1.0}


@pytest.mark.parametrize("build, message", [
    (lambda: Optimizer.from_spec({"type": "adam", "beta_1": 1.0}, _path="optimizer_spec"),
     r"^optimizer_spec\.beta_1: expected a finite number in \[0\.0, 1\.0\), got 1\.0"),
    (lambda: Optimizer.from_spec({"type": "rmsprop", "epsilon": 0}, _path="optimizer_spec"),
     r"^optimizer_spec\.epsilon: expected a finite number > 0\.0, got 0\.$"),
    (lambda: Optimizer.from_spec({"type": "sgd", "nesterov": "yes"}, _path="optimizer_spec"),
     r"^optimizer_spec\.nesterov: expected a bool"),
    (lambda: Memory.from_spec({"type": "replay-memory", "capacity": 1e5}, _path="memory_spec"),
     r"^memory_spec\.capacity: expected a positive int, got 100000\.0 \(a float\)\.$"),
    (lambda: Memory.from_spec({"type": "prioritized-replay", "alpha": -0.5}, _path="memory_spec"),
     r"^memory_spec\.alpha: expected a finite number >= 0\.0, got -0\.5\.$"),
    (lambda: NStepBuilder(0, 0.99), r"^NStepBuilder\.n_step: expected a positive int, got 0\.$"),
    (lambda: SequenceBuilder(8, 4, start_padding=-1), r"^SequenceBuilder\.start_padding: expected an int >= 0"),
    (lambda: UnrollBuilder("32"), r"^UnrollBuilder\.unroll_length: expected a positive int, got '32' \(a string"),
])
def test_component_arguments_are_checked_by_their_rules(build, message):
    with pytest.raises(RLGraphSpecError, match=message):
        build()


# --- 3. a config's dotted "type" imports nothing unless allowed -----------------------------------------------
def _user_module(tmp_path, monkeypatch, name):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent("""
        from rlgraph.components.layers import Layer

        class UserLayer_%s(Layer):
            pass
    """ % name))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(specifiable.ALLOW_IMPORT_ENV, raising=False)
    return f"{name}.UserLayer_{name}"


def test_dotted_type_of_an_unknown_module_is_refused_with_the_way_to_opt_in(tmp_path, monkeypatch):
    dotted = _user_module(tmp_path, monkeypatch, "rlg_user_refused")
    with pytest.raises(RLGraphSpecError, match=r"^Layer\.type: 'rlg_user_refused\.UserLayer_rlg_user_refused' would "
                                               r"import module 'rlg_user_refused'.*RLGRAPH_ALLOW_IMPORT=1"):
        Layer.from_spec({"type": dotted})
    assert "rlg_user_refused" not in sys.modules
    with pytest.raises(RLGraphSpecError, match=r"optimizer_spec\.type: 'this\.Optimizer' would import module 'this'"):
        Agent.from_spec(dict(DQN, optimizer_spec={"type": "this.Optimizer"}), state_space=STATE,
                        action_space=ACTION, backend="pytorch")
    assert "this" not in sys.modules


def test_dotted_type_imports_with_the_env_var_or_allow_import(tmp_path, monkeypatch):
    dotted = _user_module(tmp_path, monkeypatch, "rlg_user_allowed")
    with specifiable.allow_import():
        assert type(Layer.from_spec({"type": dotted})).__name__ == "UserLayer_rlg_user_allowed"
    assert not specifiable.import_allowed()
    dotted = _user_module(tmp_path, monkeypatch, "rlg_user_env")
    monkeypatch.setenv(specifiable.ALLOW_IMPORT_ENV, "1")
    assert type(Layer.from_spec({"type": dotted})).__name__ == "UserLayer_rlg_user_env"


def test_imported_and_rlgraph_classes_need_no_opt_in(tmp_path, monkeypatch):
    dotted = _user_module(tmp_path, monkeypatch, "rlg_user_imported")
    import rlg_user_imported  # noqa: F401  (the documented way: import, then name the class)
    assert type(Layer.from_spec({"type": "UserLayer_rlg_user_imported"})).__name__ == "UserLayer_rlg_user_imported"
    assert type(Layer.from_spec({"type": dotted})).__name__ == "UserLayer_rlg_user_imported"
    assert type(Layer.from_spec({"type": "rlgraph.components.layers.dense_layer.DenseLayer", "units": 2})).__name__ \
        == "DenseLayer"


def test_entry_point_packages_register_their_types(tmp_path, monkeypatch):
    dotted = _user_module(tmp_path, monkeypatch, "rlg_user_plugin")
    ep = importlib.metadata.EntryPoint(name="plugin", value="rlg_user_plugin", group=specifiable.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == specifiable.ENTRY_POINT_GROUP else [])
    monkeypatch.setitem(specifiable._state, "plugins", None)
    # A plain name not found yet loads the entry points, whose modules register their classes.
    assert type(Layer.from_spec({"type": "user-layer-rlg-user-plugin"})).__name__ == "UserLayer_rlg_user_plugin"
    assert type(Layer.from_spec({"type": dotted})).__name__ == "UserLayer_rlg_user_plugin"


def test_number_string_is_not_a_type_name():
    with pytest.raises(RLGraphSpecError, match=r"^Layer\.type: expected a type name, got the string '0\.001'; write "
                                               r"numbers without quotes\.$"):
        Layer.from_spec("0.001")


# --- 4. the pytest plugin is opt-in ---------------------------------------------------------------------------
def test_pytest_plugin_is_not_an_entry_point():
    assert not [ep for ep in importlib.metadata.entry_points(group="pytest11") if ep.value.startswith("rlgraph")]
    with open(os.path.join(ROOT, "setup.py")) as f:
        assert "pytest11" not in f.read().split("entry_points=", 1)[1]


def test_other_projects_backend_fixture_is_left_alone(tmp_path):
    (tmp_path / "test_other.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.fixture
        def backend():
            return "sqlite"

        def test_x(backend):
            assert backend == "sqlite"
    """))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr
    help_text = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=tmp_path,
                               capture_output=True, text=True, timeout=120).stdout
    assert "rlgraph backend" not in help_text


def test_pytest_plugin_adds_jax_to_marked_tests_only(tmp_path, monkeypatch):
    """JAX joins the default backends of tests marked ``all_backends`` (where installed); ``--backend`` and
    ``$RLGRAPH_TEST_BACKENDS`` choose for every test; ``$RLGRAPH_JAX_TESTS`` widens or narrows the default."""
    from rlgraph.tests.pytest_plugin import selected_backends
    from rlgraph.utils.backend import backend_available
    if not backend_available("jax"):
        pytest.skip("JAX is not installed")
    # In a project loading the plugin (the marker registered, module-level opt-in).
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["rlgraph.tests.pytest_plugin"]\n')
    (tmp_path / "test_marked.py").write_text("import pytest\npytestmark = pytest.mark.all_backends\n"
                                             "def test_m(backend):\n    pass\n")
    (tmp_path / "test_plain.py").write_text("def test_p(backend):\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RLGRAPH_TEST_BACKENDS", "RLGRAPH_JAX_TESTS")}
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--strict-markers", "-p",
                          "no:cacheprovider", "-p", "no:xdist", "--rootdir", str(tmp_path), "-c", os.devnull,
                          str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert sorted(line.split("::")[1] for line in out.stdout.splitlines() if "::" in line) == \
        ["test_m[jax]", "test_m[pytorch]", "test_m[tf]", "test_p[pytorch]", "test_p[tf]"], out.stdout + out.stderr

    class Config:
        def __init__(self, backends=None):
            self.backends = backends

        def getoption(self, name, default=None):
            return self.backends

    class Definition:
        def __init__(self, marked):
            self.marked = marked

        def get_closest_marker(self, name):
            return object() if self.marked and name == "all_backends" else None

    marked, plain = Definition(True), Definition(False)
    for var in ("RLGRAPH_TEST_BACKENDS", "RLGRAPH_JAX_TESTS"):
        monkeypatch.delenv(var, raising=False)
    assert selected_backends(Config(["jax"]), plain) == ["jax"]
    assert selected_backends(Config(["torch", "tensorflow"]), marked) == ["pytorch", "tf"]
    monkeypatch.setenv("RLGRAPH_TEST_BACKENDS", "tf")
    assert selected_backends(Config(), marked) == ["tf"]
    monkeypatch.delenv("RLGRAPH_TEST_BACKENDS")
    monkeypatch.setenv("RLGRAPH_JAX_TESTS", "none")
    assert selected_backends(Config(), marked) == ["tf", "pytorch"]
    monkeypatch.setenv("RLGRAPH_JAX_TESTS", "all")
    assert selected_backends(Config(), plain) == ["tf", "pytorch", "jax"]
    monkeypatch.setenv("RLGRAPH_JAX_TESTS", "some")
    with pytest.raises(RLGraphSpecError, match=r"^\$RLGRAPH_JAX_TESTS is 'some'; use one of marked, all, none\.$"):
        selected_backends(Config(), marked)


# --- 5. continuous actions outside the action space (IMPALA on Pendulum) ----------------------------------------
def test_vector_env_clips_continuous_actions_to_the_box():
    with VectorEnv("Pendulum-v1", num_envs=2, seed=3) as a, VectorEnv("Pendulum-v1", num_envs=2, seed=3) as b:
        a.reset(), b.reset()
        out_a = a.step(np.array([[3.04], [-7.0]], np.float32))
        out_b = b.step(np.array([[2.0], [-2.0]], np.float32))
        for x, y in zip(out_a, out_b):
            np.testing.assert_array_equal(x, y)


def test_impala_on_pendulum_learns_from_unclipped_samples(backend):
    env = VectorEnv("Pendulum-v1", num_envs=4, seed=0)
    agent = Agent.from_spec(dict(IMPALA, unroll_length=4), state_space=env.state_space,
                            action_space=env.action_space, backend=backend)
    assert agent.action_space.high == 2.0
    # A sample far outside [-2, 2] (as a Gaussian policy draws): observed as sampled, learned from.
    states = env.reset()
    for t in range(4):
        actions, extras = agent.get_actions(states, return_extras=True)
        if t == 0:
            actions = np.full_like(actions, 3.04)
        next_states, rewards, terminals, truncations = env.step(actions)
        agent.observe(states, actions, rewards, env.final_obs, terminals, truncations, **extras)
        states = next_states
    assert agent.ready_to_update()
    assert np.isfinite(agent.update()["loss"])
    # And a short run of the worker (what `rlgraph train --env Pendulum-v1` does) completes.
    out = VectorWorker(agent, env).run(64)
    assert out["env_steps"] == 64 and len(out["results"]) >= 3
    assert all(np.isfinite(r["loss"]) for r in out["results"])
    agent.terminate()
    env.close()
