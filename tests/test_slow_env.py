"""The slow-environment stand-in: ``environment_spec.step_delay_ms`` (a sleep per vector step, any environment)."""
import json
import time

import gymnasium as gym
import numpy as np
import pytest

from rlgraph.environments import AtariVectorEnv, VectorEnv
from rlgraph.engines.config_schema import config_schema
from rlgraph.engines.run_config import RunConfig, make_vector_env
from rlgraph.utils.errors import RLGraphSpecError
from small_configs import run_cli, small_dqn_config


def _seconds_per_step(env, steps):
    env.reset()
    actions = np.zeros(env.num_envs, dtype=np.int64)
    start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    return (time.perf_counter() - start) / steps


@pytest.mark.parametrize("spec", ["CartPole-v1", "rlgraph/Catch-v0", lambda: gym.make("MountainCar-v0")],
                         ids=["native", "catch", "creator"])
def test_delay_is_slept_once_per_vector_step(spec):
    # 8 environments, 20 ms: one sleep per vector step (a vector of simulators stepping in parallel), so a step
    # takes >= 20 ms and far less than 8 x 20 ms (the bounds are generous for a loaded machine).
    with VectorEnv(spec, num_envs=8, step_delay_ms=20) as env:
        per_step = _seconds_per_step(env, 6)
        assert env.step_delay_ms == 20.0 and "step_delay_ms=20" in repr(env)
    assert 0.019 <= per_step < 0.080
    with VectorEnv(spec, num_envs=8) as fast:
        assert fast.step_delay_ms == 0.0
        assert _seconds_per_step(fast, 6) < 0.010


def test_step_async_overlaps_the_delay_with_acting():
    with VectorEnv("CartPole-v1", num_envs=2, step_delay_ms=40) as env:
        env.reset()
        start = time.perf_counter()
        env.step_async(np.zeros(2, dtype=np.int64))
        env.step_wait()
        assert time.perf_counter() - start >= 0.039  # Nothing overlapped: the whole delay.
        env.step_async(np.zeros(2, dtype=np.int64))
        time.sleep(0.05)  # The policy acting on the other half meanwhile.
        start = time.perf_counter()
        env.step_wait()
        assert time.perf_counter() - start < 0.030  # The delay had passed already.


def test_atari_vector_env_takes_the_delay():
    pytest.importorskip("ale_py")
    try:
        env = AtariVectorEnv("pong", num_envs=1, step_delay_ms=1.5, vectorization="sync")
    except RLGraphSpecError as e:  # No ROM installed.
        pytest.skip(str(e))
    with env:
        assert env.step_delay_ms == 1.5 and "step_delay_ms" not in env.env_kwargs


@pytest.mark.parametrize("bad", [-1, -0.5, "2", True, None, float("nan"), float("inf"), [2]])
def test_bad_delay_is_refused_naming_the_key(bad):
    with pytest.raises(RLGraphSpecError) as info:
        VectorEnv("CartPole-v1", step_delay_ms=bad)
    message = str(info.value)
    assert message.startswith("environment_spec.step_delay_ms: expected a finite number >= 0, got ")
    assert "\n" not in message
    # A run's config is refused when it is read, before anything is built.
    config = {"type": "dqn", "environment_spec": {"env_spec": "CartPole-v1", "step_delay_ms": bad}}
    with pytest.raises(RLGraphSpecError, match=r"^environment_spec\.step_delay_ms: expected a finite number"):
        RunConfig.load(config)


def test_delay_from_config_and_from_set():
    config = {"type": "dqn", "environment_spec": {"env_spec": "CartPole-v1", "num_envs": 2, "step_delay_ms": 3}}
    run = RunConfig.load(config)
    assert run.env_kwargs["step_delay_ms"] == 3 and run.environment()["step_delay_ms"] == 3
    with make_vector_env(run.env_kwargs) as env:
        assert env.step_delay_ms == 3.0
    run = RunConfig.load(config, overrides=["environment_spec.step_delay_ms=2"])
    with make_vector_env(run.env_kwargs) as env:
        assert env.step_delay_ms == 2.0
    with pytest.raises(RLGraphSpecError, match=r"^environment_spec\.step_delay_ms: .*got -2"):
        RunConfig.load(config, overrides=["environment_spec.step_delay_ms=-2"])


def test_schema_declares_the_delay():
    prop = config_schema()["properties"]["environment_spec"]["properties"]["step_delay_ms"]
    assert prop["type"] == "number" and prop["minimum"] == 0 and "sleep" in prop["description"]


def test_cli_set_slows_a_local_run(tmp_path):
    # 4 environments, 10 ms per vector step: at most 400 env steps/s whatever the machine; without the delay
    # this config steps thousands per second.
    path = small_dqn_config(tmp_path, train_spec={"eval_episodes": 0, "chunk_steps": 100})
    logdir = tmp_path / "run"
    proc = run_cli([path, "--backend", "pytorch", "--steps", "240", "--logdir", str(logdir),
                    "--set", "environment_spec.step_delay_ms=10"], timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["env_steps"] >= 240
    assert 0 < summary["env_steps_per_second"] <= 4 / 0.010 * 1.05
    proc = run_cli([path, "--steps", "10", "--logdir", str(tmp_path / "bad"),
                    "--set", "environment_spec.step_delay_ms=\"2\""], timeout=120)
    assert proc.returncode == 2
    assert "environment_spec.step_delay_ms: expected a finite number >= 0, got '2'" in proc.stderr
