"""Ray actors that die while they start are replaced and counted; one that cannot build ends the run with its
error's own line; a local Ray refuses more actors than the machine's cores."""
import copy
import os
import signal
import time

import pytest

from rlgraph.engines import ExecutionSpec
from rlgraph.engines.run_config import load_config, make_agent, make_vector_env
from rlgraph.engines.runner import make_engine
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from small_configs import CONFIGS, run_cli

ray = pytest.importorskip("ray")


def appo_config(**execution):
    config, _ = load_config(os.path.join(CONFIGS, "appo_cartpole.json"))
    config = copy.deepcopy(config)
    config["execution_spec"] = dict(execution)
    return config


# --- no Ray needed: the local Ray is refused before it starts ------------------------------------------------------
def test_more_actors_than_cores_are_refused_before_a_local_ray_starts(monkeypatch):
    if ray.is_initialized():
        pytest.skip("a Ray of another test module is still running in this process")
    import rlgraph.engines.runner as runner

    def no_build(*args, **kwargs):
        raise AssertionError("the learner was built before the refusal")
    monkeypatch.setattr(runner, "make_agent", no_build)  # The refusal comes before the learner's build.
    cores = os.cpu_count()
    with pytest.raises(RLGraphSpecError) as info:
        make_engine(appo_config(), engine="ray", backend="pytorch", num_actors=64)
    message = str(info.value)
    assert "\n" not in message and message.startswith("--num-actors 64: 64 actors x actor_resources.num_cpus=1 "
                                                      f"need 64, but this machine has {cores} cores"), message
    fraction = float(message.split("actor_resources.num_cpus=")[-1].rstrip(")."))
    assert 64 * fraction <= cores and "oversubscribe on purpose" in message
    assert not ray.is_initialized()  # Nothing was started (nothing is left behind).


@pytest.mark.slow
def test_the_command_line_refuses_64_actors_in_one_line(tmp_path):
    proc = run_cli([os.path.join(CONFIGS, "appo_cartpole.json"), "--backend", "pytorch", "--engine", "ray",
                    "--num-actors", "64", "--steps", "100", "--logdir", str(tmp_path / "run")], timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "--num-actors 64: 64 actors x actor_resources.num_cpus=1 need 64" in proc.stderr, proc.stderr[-2000:]


# --- on a local Ray -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _starting_samplers(count, within=120.0):
    """The pids of ``count`` Ray actor processes still creating a ``RaySampler`` (Ray titles them
    ``ray::RaySampler.__init__``), waiting at most ``within`` seconds for them."""
    deadline = time.perf_counter() + within
    while time.perf_counter() < deadline:
        pids = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as f:
                        title = f.read()
                except OSError:
                    continue
                if title.startswith(b"ray::RaySampler.__init__"):
                    pids.append(int(name))
        if len(pids) >= count:
            return pids
        time.sleep(0.02)
    raise AssertionError(f"no {count} RaySampler actors were being created within {within:g} s")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds actor processes through /proc")
def test_an_actor_killed_while_it_is_created_is_replaced_and_counted(local_ray):
    engine, agent, _ = make_engine(appo_config(num_actors=1, envs_per_actor=2, max_actor_restarts=2),
                                   engine="ray", backend="pytorch")
    try:
        killed = _starting_samplers(1)[0]
        os.kill(killed, signal.SIGKILL)
        # The trainer calls processes() right after the engine is built: it waits for the (new) actor instead of
        # raising Ray's ActorDiedError.
        processes = engine.processes()
        assert processes["actors"][0] != killed and engine.actor_restarts == 1
        out = engine.run(64)
        assert out["env_steps"] >= 64 and engine.summary()["actor_restarts"] == 1
    finally:
        engine.close()


def _engine_with_actor_env(env_kwargs, **execution):
    """A Ray engine whose learner was built on CartPole but whose actors get ``env_kwargs``."""
    from rlgraph.engines.ray import make_ray_engine

    config = appo_config()
    probe = make_vector_env(dict(env_spec="CartPole-v1", num_envs=1))
    agent = make_agent(config, probe, "pytorch")
    probe.close()
    spec = ExecutionSpec.from_config({"execution_spec": dict(num_actors=1, max_actor_restarts=5, **execution)})
    return make_ray_engine(config, dict(env_kwargs, num_envs=2), agent, spec)


def test_an_actor_that_cannot_build_ends_the_run_with_that_errors_own_line(local_ray):
    engine = _engine_with_actor_env(dict(env_spec="NoSuchEnv-v0"))
    try:
        start = time.perf_counter()
        with pytest.raises(RLGraphSpecError) as info:
            engine.processes()
        message = str(info.value)
        assert message.startswith("GymEnv.env_id: unknown gymnasium environment id 'NoSuchEnv-v0'"), message
        assert "\n" not in message and "ray" not in message.lower() and info.value.__cause__ is None
        # Not retried: no restart, and the sample path ends the same way.
        assert engine.actor_restarts == 0
        with pytest.raises(RLGraphSpecError, match="unknown gymnasium environment id 'NoSuchEnv-v0'"):
            engine.run(64)
        assert engine.actor_restarts == 0 and time.perf_counter() - start < 120
    finally:
        engine.close()


def _failing_creator():
    raise ValueError("the simulator licence expired")


def test_a_foreign_build_error_is_named_in_one_rlgraph_line(local_ray):
    engine = _engine_with_actor_env(dict(env_spec=_failing_creator))
    try:
        with pytest.raises(RLGraphError) as info:
            engine.run(64)
        assert str(info.value) == ("Ray engine: actor 0 cannot build its environments or agent: ValueError: the "
                                   "simulator licence expired")
        assert engine.actor_restarts == 0
    finally:
        engine.close()
