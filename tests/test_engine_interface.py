"""The engine interface (``rlgraph.training.engine.Engine``) the trainer drives, the engines that implement it, the
run config read once (``RunConfig``) and ``--engine`` with its earlier name ``--executor``."""
import ast
import json
import os

import numpy as np
import pytest

import rlgraph
from rlgraph.cli import main as cli_main
from rlgraph.engines import run_config, runner
from rlgraph.engines.execution_spec import ExecutionSpec
from rlgraph.engines.remote_actors import RemoteActorEngine
from rlgraph.engines.run_config import RunConfig
from rlgraph.training.engine import Engine, WorkerEngine, as_engine
from rlgraph.training.trainer import Trainer
from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphError, RLGraphSpecError
from rlgraph.utils.run_state import save_run_state
from small_configs import CONFIGS, small_dqn_config

PACKAGE = os.path.dirname(os.path.abspath(rlgraph.__file__))


class _Engine(Engine):
    """Ten steps per call, one episode of return 5; records what the trainer asks of it."""

    def __init__(self):
        self.calls = []

    def run(self, num_env_steps):
        self.calls.append("run")
        return dict(env_steps=num_env_steps, episodes=[(5.0, num_env_steps)], results=[{"loss": 0.5}])

    def evaluate(self, env, num_episodes):
        return [1.0] * num_episodes

    def store(self, path):
        os.makedirs(path)
        self.calls.append("store")

    def load(self, path):
        self.calls.append("load")

    def summary(self):
        return dict(engine_key=7)

    def processes(self):
        return dict(actors=[123, 456])

    def close(self):
        self.calls.append("close")


# --- the interface --------------------------------------------------------------------------------------------
def test_an_engine_must_implement_run_evaluate_store_and_load():
    class Partial(Engine):
        def run(self, num_env_steps):
            return {}

    with pytest.raises(TypeError, match="abstract"):
        Partial()
    assert sorted(Engine.__abstractmethods__) == ["evaluate", "load", "run", "store"]
    engine = _Engine()
    assert engine.agent is None and Engine.summary(engine) == {} and Engine.processes(engine) == {}
    assert Engine.close(engine) is None
    with pytest.raises(RLGraphError, match="_Engine hands out no run state"):
        engine.get_run_state()


def test_the_trainer_drives_an_engine_and_records_its_summary_and_processes(tmp_path):
    engine = _Engine()
    logdir = str(tmp_path / "run")
    summary = Trainer(engine, logdir, max_steps=30, chunk_steps=10, progress=False).train()
    assert engine.calls == ["run"] * 3 + ["store"]  # The trainer does not close the engine: its owner does.
    assert summary["engine_key"] == 7 and summary["env_steps"] == 30
    with open(os.path.join(logdir, "processes.json")) as f:
        assert json.load(f) == dict(learner=os.getpid(), actors=[123, 456])


def test_the_trainer_probes_no_engine_attribute():
    with open(os.path.join(PACKAGE, "training", "trainer.py")) as f:
        source = f.read()
    assert "getattr(self.engine" not in source and "getattr(self.worker" not in source


def test_an_object_with_run_store_and_load_is_driven_through_the_adapter(tmp_path):
    class Worker:
        agent = "the agent"

        def run(self, n):
            return dict(env_steps=n, episodes=[], results=[])

        def store(self, path):
            os.makedirs(path)

        def load(self, path):
            pass

    engine = as_engine(Worker())
    assert isinstance(engine, WorkerEngine) and engine.agent == "the agent"
    assert engine.summary() == {} and engine.processes() == {} and engine.close() is None
    with pytest.raises(RLGraphError, match="Worker cannot evaluate"):
        engine.evaluate(None, 1)
    assert as_engine(engine) is engine
    Trainer(Worker(), str(tmp_path / "run"), max_steps=10, chunk_steps=10, progress=False).train()
    assert not (tmp_path / "run" / "processes.json").exists()  # Everything ran in this process.
    with pytest.raises(RLGraphError, match="must be an rlgraph.training.engine.Engine.*object lacks run, store"):
        Trainer(object(), str(tmp_path / "other"), max_steps=10)


def test_the_local_workers_implement_the_whole_interface():
    """The local workers are engines: nothing left abstract, the workers' own methods first."""
    from rlgraph.workers import PipelinedWorker, VectorWorker
    for worker in (VectorWorker, PipelinedWorker):
        assert issubclass(worker, Engine) and not worker.__abstractmethods__, worker.__abstractmethods__
    assert PipelinedWorker.summary is not Engine.summary


def test_the_engines_implement_the_interface():
    from rlgraph.engines.central_inference.central_engine import CentralInferenceEngine
    from rlgraph.engines.distributed import DistributedEngine
    for engine in (CentralInferenceEngine, DistributedEngine):
        assert issubclass(engine, Engine) and not engine.__abstractmethods__
    assert issubclass(CentralInferenceEngine, RemoteActorEngine)
    ray = pytest.importorskip("ray")  # noqa: F841
    from rlgraph.engines.ray import RayEngine, RayReplayEngine, RayUnrollEngine
    assert issubclass(RayEngine, RemoteActorEngine)
    assert not RayReplayEngine.__abstractmethods__ and not RayUnrollEngine.__abstractmethods__


def _imports(path):
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


@pytest.mark.parametrize("package", ["training", "workers", "agents", "trajectories", "components", "executors",
                                     "graphs", "backends", "environments", "spaces", "utils"])
def test_nothing_below_the_engines_imports_them(package):
    bad = [(os.path.relpath(os.path.join(root, name), PACKAGE), module)
           for root, _, files in os.walk(os.path.join(PACKAGE, package)) for name in files if name.endswith(".py")
           for module in _imports(os.path.join(root, name)) if module.startswith("rlgraph.engines")]
    assert bad == []


def test_the_central_engine_does_not_import_the_runner():
    path = os.path.join(PACKAGE, "engines", "central_inference", "central_engine.py")
    assert "rlgraph.engines.runner" not in set(_imports(path))


# --- engines whose actors run elsewhere: settings at construction, checkpoints ----------------------------------
class _Agent:
    backend = "pytorch"

    def __init__(self):
        self.asked, self.restored = [], []

    def get_run_state(self, include_replay=True):
        self.asked.append(include_replay)
        return dict(replay=include_replay, counter=np.arange(3))

    def set_run_state(self, state):
        self.restored.append(state)

    def store_model(self, path):
        os.makedirs(path, exist_ok=True)

    def load_model(self, path):
        pass


class _ActorsHere(RemoteActorEngine):
    ENGINE = "test"
    DISPLAY_NAME = "Test engine"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loaded = 0

    def run(self, num_env_steps):
        return dict(env_steps=0, episodes=[], results=[])

    def actor_pids(self):
        return [1, 2]

    def close(self):
        pass

    def _loaded(self):
        self.loaded += 1


@pytest.mark.parametrize("replay", [True, False])
def test_remote_actor_engines_take_checkpoint_replay_at_construction(tmp_path, replay):
    agent = _Agent()
    spec = ExecutionSpec(num_actors=2)
    engine = _ActorsHere({"type": "x"}, {"num_envs": 8, "seed": 3}, agent, spec, seed=3, checkpoint_replay=replay)
    assert engine.envs_per_actor == 4 and engine.actor_env_kwargs(1) == dict(num_envs=4, seed=2003)
    engine.store(str(tmp_path / "model"))
    assert agent.asked == [replay]
    engine.load(str(tmp_path / "model"))
    assert agent.restored[0]["replay"] is replay and engine.loaded == 1
    assert engine.processes() == dict(actors=[1, 2])
    assert engine.summary() == dict(executor="test", num_actors=2, envs_per_actor=4, actor_restarts=0)


def test_a_remote_actor_engine_refuses_another_engines_run_state(tmp_path):
    path = str(tmp_path / "model")
    save_run_state(path, dict(engine="RayReplayEngine", agent={}))
    engine = _ActorsHere({"type": "x"}, {}, _Agent(), ExecutionSpec())
    with pytest.raises(RLGraphCheckpointError, match=r"model': Test engine: the stored run state belongs to "
                                                     r"'RayReplayEngine', not to a _ActorsHere"):
        engine.load(path)


def test_the_execution_spec_summary_hides_the_token():
    spec = ExecutionSpec(token="secret")
    assert spec.to_dict()["token"] == "secret" and spec.to_dict(redact=True)["token"] == "***"
    assert ExecutionSpec().to_dict(redact=True)["token"] is None


# --- the run config, read once ----------------------------------------------------------------------------------
def _config():
    with open(os.path.join(CONFIGS, "dqn_cartpole.json")) as f:
        config = json.load(f)
    config["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 4}
    return config


def test_run_config_parses_the_execution_spec_once_with_the_command_lines_values(monkeypatch):
    parsed = []
    original = ExecutionSpec.from_config.__func__
    monkeypatch.setattr(ExecutionSpec, "from_config",
                        classmethod(lambda cls, *a, **k: parsed.append(k) or original(cls, *a, **k)))
    config = dict(_config(), execution_spec={"num_actors": 3}, train_spec={"steps": 500})
    run = RunConfig.load(config, "ray", env_id="CartPole-v0", seed=4, num_actors=5, ray_address=None)
    assert parsed == [dict(num_actors=5, ray_address=None)]
    assert run.execution.num_actors == 5 and run.engine == "ray" and (run.steps, run.seconds) == (500, None)
    assert run.env_kwargs == dict(env_spec="CartPole-v0", num_envs=4, seed=4)
    assert run.environment() == dict(env_spec="CartPole-v0", num_envs=4)
    assert run.eval_env_kwargs() == dict(env_spec="CartPole-v0", num_envs=20, seed=10_004)
    assert RunConfig.load(dict(_config(), train_spec={})).steps == run_config.DEFAULT_STEPS
    assert (RunConfig.load(config, seconds=9).steps, RunConfig.load(config, seconds=9).seconds) == (None, 9)


def test_run_config_errors_name_what_is_wrong():
    with pytest.raises(RLGraphSpecError, match=r"engine: expected one of \('local', 'ray', 'central', "
                                               r"'distributed'\), got 'spark'"):
        RunConfig.load(_config(), "spark")
    with pytest.raises(RLGraphSpecError, match="engine 'ray' and executor 'local'"):
        RunConfig.load(_config(), "ray", executor="local")
    with pytest.raises(RLGraphSpecError, match="num_learners 2: several learners need --engine distributed"):
        RunConfig.load(_config(), "ray", num_learners=2)
    with pytest.raises(TypeError, match="num_actor: neither an argument of the run nor an execution_spec key"):
        RunConfig.load(_config(), num_actor=2)
    with pytest.raises(RLGraphSpecError, match="seed: expected an int >= 0"):
        RunConfig.load(_config(), seed=-1)
    assert RunConfig.load(_config(), executor="central").engine == "central"


def test_make_engine_takes_the_engines_earlier_name():
    from rlgraph.workers import VectorWorker
    with pytest.raises(RLGraphSpecError, match="engine: expected one of"):
        runner.make_engine(_config(), executor="spark")
    config = dict(_config(), train_spec={"checkpoint_replay": False})
    engine, agent, spec = runner.make_engine(config, executor="local", backend="pytorch")
    assert isinstance(engine, VectorWorker) and engine.agent is agent and isinstance(spec, ExecutionSpec)
    assert engine.checkpoint_replay is False  # The config's train_spec, passed at construction.
    assert runner.EXECUTORS == runner.ENGINES == run_config.ENGINES


# --- the command line -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["train", "tune"])
def test_engine_is_the_option_and_executor_its_hidden_alias(capsys, command):
    with pytest.raises(SystemExit):
        cli_main([command, "--help"])
    text = capsys.readouterr().out
    assert "--engine" in text and "--executor" not in text


@pytest.mark.parametrize("option", ["--engine", "--executor"])
def test_rlgraph_train_on_the_local_engine(tmp_path, capsys, option):
    logdir = tmp_path / "run"
    assert cli_main(["train", small_dqn_config(tmp_path), option, "local", "--backend", "pytorch", "--steps", "64",
                     "--logdir", str(logdir), "--quiet"]) == 0
    with open(logdir / "summary.json") as f:
        summary = json.load(f)
    assert summary["executor"] == "local" and summary["env_steps"] >= 64 and summary["eval_episodes"] == 2
    with open(logdir / "config.json") as f:
        assert json.load(f)["environment_spec"] == {"env_spec": "CartPole-v1", "num_envs": 4}
    assert not (logdir / "processes.json").exists()


def test_a_bad_engine_on_the_command_line_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli_main(["train", small_dqn_config(tmp_path), "--executor", "spark"])
    assert "invalid choice: 'spark'" in capsys.readouterr().err
