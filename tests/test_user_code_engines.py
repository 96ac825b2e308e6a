"""A user's own environment and component on every engine: module-qualified gymnasium ids under the import
policy, the driver's modules and registrations carried to actor and learner processes, environment creators."""
import copy
import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import user_envs_for_test
from rlgraph.environments import VectorEnv
from rlgraph.engines.run_config import load_config
from rlgraph.engines.runner import make_engine, train
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.specifiable import allow_import
from rlgraph.utils.user_modules import UserCode
from small_configs import CONFIGS

TESTS = os.path.dirname(os.path.abspath(__file__))
QUALIFIED_ID = "user_envs_for_test:SlowCartPole-v1"


def user_config(env_spec=user_envs_for_test.ENV_ID, num_envs=4, **changes):
    """APPO on the user's environment with the user's layer: a small, short run."""
    config, _ = load_config(os.path.join(CONFIGS, "appo_cartpole.json"))
    config = copy.deepcopy(config)
    config["environment_spec"] = {"env_spec": env_spec, "num_envs": num_envs}
    config["network_spec"] = [{"type": "UserDense", "units": 16, "activation": "tanh"}]
    config["execution_spec"] = {}
    config["train_spec"] = {"eval_episodes": 0, "chunk_steps": 128}
    config.update(changes)
    return config


# --- what the driver records, and what another process installs ---------------------------------------------------
def test_user_code_records_the_modules_of_types_and_environment_and_the_registration():
    code = UserCode.of_run(user_config(), {"env_spec": QUALIFIED_ID, "num_envs": 2})
    assert code.modules == (("user_envs_for_test", TESTS),)
    assert [json.loads(s)["id"] for s in code.gym_specs] == ["SlowCartPole-v1"]
    # rlgraph's own types and gymnasium's own ids need nothing.
    plain, _ = load_config(os.path.join(CONFIGS, "appo_cartpole.json"))
    assert not UserCode.of_run(plain, plain["environment_spec"]).modules
    assert UserCode.from_json(code.to_json("x")) == code


def test_a_fresh_interpreter_installs_the_user_code_and_finds_the_environment_and_the_layer(tmp_path):
    code = UserCode.of_run(user_config(), {"env_spec": QUALIFIED_ID})
    script = ("import sys, json; from rlgraph.utils.user_modules import UserCode; "
              "UserCode.from_json(sys.argv[1]).install(); import gymnasium as gym; "
              "from rlgraph.utils.specifiable import Specifiable; from rlgraph.components import Component; "
              "print(json.dumps([gym.spec('SlowCartPole-v1').max_episode_steps, "
              "Component.lookup_class('user-dense').__module__]))")
    # (A working directory where the tests folder is not on the path: the carried path entry finds the module.)
    out = subprocess.run([sys.executable, "-c", script, code.to_json("test")], capture_output=True, text=True,
                         cwd=str(tmp_path), timeout=120, env=dict(os.environ, PYTHONPATH=""))
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == [200, "user_envs_for_test"]


def test_a_module_that_cannot_be_imported_is_named_with_what_to_do():
    code = UserCode(modules=(("no_such_user_module_x", "/nowhere"),))
    with pytest.raises(RLGraphSpecError, match=r"the run's module 'no_such_user_module_x' .*cannot be imported in "
                                               r"process \d+: ModuleNotFoundError.*Install it"):
        code.install()


def test_classes_of_the_script_cannot_travel_to_fresh_interpreters():
    main_class = type("MainLayer", (user_envs_for_test.UserDense,), {"__module__": "__main__"})
    code = UserCode(main_classes=(main_class,))
    with pytest.raises(RLGraphSpecError, match=r"central inference: MainLayer is defined in the script that started "
                                               r"the run \(__main__\).*Move it to a module"):
        code.to_json("central inference")


# --- module-qualified gymnasium ids ------------------------------------------------------------------------------
def test_module_qualified_ids_follow_the_import_policy(tmp_path, monkeypatch):
    env = VectorEnv(env_spec=QUALIFIED_ID, num_envs=2, seed=3)
    assert isinstance(env.backend.envs[0].unwrapped, user_envs_for_test.SlowCartPole) and env.reset().shape == (2, 4)
    env.close()
    # A module nobody imported: refused by default, imported with the explicit opt-in.
    (tmp_path / "fresh_user_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('FreshCartPole-v0', entry_point='gymnasium.envs.classic_control.cartpole:CartPoleEnv')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("RLGRAPH_ALLOW_IMPORT", raising=False)
    with pytest.raises(RLGraphSpecError, match=r"env_id: 'fresh_user_envs:FreshCartPole-v0' would "
                                               r"import module 'fresh_user_envs', which is neither imported nor "
                                               r"registered .*opt in with RLGRAPH_ALLOW_IMPORT=1"):
        VectorEnv(env_spec="fresh_user_envs:FreshCartPole-v0")
    assert "fresh_user_envs" not in sys.modules
    with allow_import():
        env = VectorEnv(env_spec="fresh_user_envs:FreshCartPole-v0", num_envs=1)
    assert env.num_envs == 1 and "FreshCartPole-v0" in gym.registry
    env.close()
    with pytest.raises(RLGraphSpecError, match=r"unknown gymnasium environment id 'Nope-v0' \(module "
                                               r"'user_envs_for_test' was imported; it registers no such id\)"):
        VectorEnv(env_spec="user_envs_for_test:Nope-v0")


def test_an_environment_creator_runs_locally_and_a_bad_one_is_named():
    env = VectorEnv(env_spec=lambda: user_envs_for_test.SlowCartPole(), num_envs=3, seed=0)
    assert env.num_envs == 3 and env.state_space.shape == (4,)
    env.reset()
    _, rewards, _, _ = env.step(np.zeros(3, np.int64))
    np.testing.assert_array_equal(rewards, np.ones(3, np.float32))
    env.close()
    with pytest.raises(RLGraphSpecError, match="the environment creator .*returned a int, not a gymnasium.Env"):
        VectorEnv(env_spec=lambda: 3)


def test_engines_that_start_fresh_interpreters_refuse_an_environment_creator():
    config = user_config(env_spec=lambda: user_envs_for_test.SlowCartPole(), num_envs=2)
    with pytest.raises(RLGraphSpecError, match=r"environment_spec.env_spec: --engine central cannot use an "
                                               r"environment creator \(a callable\): central inference's actor "
                                               r"processes are fresh Python interpreters"):
        make_engine(config, engine="central", backend="pytorch", num_actors=1)
    with pytest.raises(RLGraphSpecError, match=r"environment_spec.env_spec: --engine distributed cannot use an "
                                               r"environment creator \(a callable\): the learner processes"):
        make_engine(config, engine="distributed", backend="pytorch", num_learners=2)


# --- short runs on each engine ------------------------------------------------------------------------------------
def _trained(config, tmp_path, engine, steps=512, **execution):
    summary = train(config, engine=engine, backend="pytorch", steps=steps, logdir=str(tmp_path / engine),
                    progress=False, **execution)
    assert summary["env_steps"] >= steps and summary["updates"] > 0, summary
    return summary


def test_trains_locally_on_a_module_qualified_id_with_the_users_layer(tmp_path):
    _trained(user_config(env_spec=QUALIFIED_ID), tmp_path, "local")


def test_the_env_flag_takes_a_module_qualified_id():
    config = user_config(env_spec="CartPole-v1", num_envs=2)
    worker, agent, _ = make_engine(config, engine="local", backend="pytorch", env_id=QUALIFIED_ID)
    try:
        assert isinstance(worker.env.backend.envs[0].unwrapped, user_envs_for_test.SlowCartPole)
        layers = [c for c in agent.root.get_all_sub_components() if isinstance(c, user_envs_for_test.UserDense)]
        assert layers and all(layer.built_in == os.getpid() for layer in layers)
    finally:
        worker.close()


def test_trains_centrally_on_a_module_qualified_id(tmp_path):
    summary = _trained(user_config(env_spec=QUALIFIED_ID), tmp_path, "central", num_actors=1)
    assert summary["actor_restarts"] == 0


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_trains_on_ray_with_the_users_registered_environment_and_layer(tmp_path, local_ray):
    # The actors never imported user_envs_for_test: the run carries it (and SlowCartPole-v1's registration).
    summary = _trained(user_config(), tmp_path, "ray", num_actors=1)
    assert summary["actor_restarts"] == 0 and summary["actors"][0]["env_steps"] > 0


def test_trains_on_ray_with_an_environment_creator(tmp_path, local_ray):
    creator = lambda: gym.wrappers.TimeLimit(user_envs_for_test.SlowCartPole(), 100)  # noqa: E731
    summary = _trained(user_config(env_spec=creator), tmp_path, "ray", num_actors=1)
    assert summary["actor_restarts"] == 0


@pytest.mark.slow
def test_trains_with_distributed_learners_on_the_users_environment_and_layer(tmp_path):
    summary = _trained(user_config(env_spec=QUALIFIED_ID), tmp_path, "distributed", num_learners=2)
    assert summary["num_learners"] == 2 and min(summary["learner_env_steps"]) > 0


@pytest.mark.slow
def test_trains_on_a_two_node_cluster_with_the_users_code_travelling_with_the_job(tmp_path, monkeypatch):
    """Two Ray nodes (the actor's node has the only CPU): the user's module goes with the job as Ray's
    ``py_modules``. The driver is made to record a path that exists nowhere, so actors can find the module only
    through what travelled with the job, as on a machine where it is not installed."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from rlgraph.engines.ray.ray_engine import _travelling_modules
    from rlgraph.utils import user_modules

    if ray.is_initialized():
        pytest.skip("a Ray of another test is still running in this process")
    monkeypatch.setattr(user_modules, "module_root", lambda name: "/nonexistent/user/site")
    code = UserCode.of_run(user_config(), {"env_spec": user_envs_for_test.ENV_ID})
    assert _travelling_modules(code) == [os.path.join(TESTS, "user_envs_for_test.py")]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        summary = _trained(user_config(), tmp_path, "ray", num_actors=1, ray_address=cluster.address)
        assert summary["actor_restarts"] == 0 and summary["actors"][0]["env_steps"] > 0
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_train_takes_an_environment_creator_keyword(tmp_path):
    made = []

    def creator():
        made.append(1)
        return gym.wrappers.TimeLimit(user_envs_for_test.SlowCartPole(), 100)

    summary = _trained(user_config(env_spec="CartPole-v1"), tmp_path, "local", env_creator=creator)
    assert made, "the creator was not called"
    with open(tmp_path / "local" / "config.json") as f:
        assert "creator" in json.load(f)["environment_spec"]["env_spec"]
    assert summary["env_steps"] >= 512
    with pytest.raises(RLGraphSpecError, match="env_creator: expected a callable .* got str"):
        train(user_config(), env_creator="CartPole-v1", steps=8)
    with pytest.raises(RLGraphSpecError, match="env_creator and env_id 'CartPole-v1' both name"):
        train(user_config(), env_creator=creator, env_id="CartPole-v1", steps=8)
