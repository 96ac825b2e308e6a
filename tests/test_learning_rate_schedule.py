"""A learning-rate schedule runs over the env steps the learner is told of (``observe_env_steps`` against the agent's
``schedule_timesteps``), as configs/impala_pong_42.json's linear decay needs: Adam's first step moves each weight by
``lr * g / (|g| + eps)``, so from the same weights and batch the step at a quarter of the schedule is 0.75 times the
step at its start, and at its end (lr 0) nothing moves."""
import os
import sys

import numpy as np
import pytest

from rlgraph.agents.learner import Learner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_device_strategies import dqn_agent, memory_records  # noqa: E402
from test_execute_steps import batch as unroll_batch  # noqa: E402
from test_impala_replay import impala  # noqa: E402

SCHEDULE_STEPS = 1000


def first_step(backend, env_steps):
    """The weights' change in an IMPALA learner's first update after ``env_steps`` env steps were reported."""
    agent = impala(backend, schedule_timesteps=SCHEDULE_STEPS,
                   optimizer_spec={"type": "adam", "learning_rate": ["linear", 0.01, 0.0]})
    agent.learner.observe_env_steps(env_steps)
    before = agent.executor.get_weights()
    agent.learner.update(unroll_batch(agent, seed=3))
    after = agent.executor.get_weights()
    return agent, {k: after[k] - before[k] for k in before}


@pytest.mark.all_backends
def test_the_learning_rate_follows_its_schedule_over_the_reported_env_steps(backend):
    agent, start = first_step(backend, 0)
    _, quarter = first_step(backend, SCHEDULE_STEPS // 4)
    _, end = first_step(backend, SCHEDULE_STEPS)
    _, past = first_step(backend, 3 * SCHEDULE_STEPS)  # The schedule stays at its end value.
    assert agent.learner.time_percentage == 0.0
    moved = max(float(np.abs(d).max()) for d in start.values())
    assert 0.005 < moved <= 0.01 + 1e-6  # Adam's first step: at most lr per weight.
    for key in start:
        np.testing.assert_allclose(quarter[key], 0.75 * start[key], rtol=1e-4, atol=1e-7, err_msg=key)
        np.testing.assert_array_equal(end[key], 0.0, err_msg=key)
        np.testing.assert_array_equal(past[key], 0.0, err_msg=key)


@pytest.mark.all_backends
@pytest.mark.parametrize("kind", ["impala", "dqn"])
def test_updates_report_the_learning_rate_they_stepped_with(backend, kind):
    """Every update's results carry "learning_rate", the schedule's value at the learner's ``time_percentage``
    (logged as ``update/learning_rate``): IMPALA's updates of unrolls and DQN's of replayed records alike."""
    optimizer = {"type": "adam", "learning_rate": ["polynomial", 0.01, 0.001, 2.0]}
    if kind == "impala":
        agent = impala(backend, schedule_timesteps=SCHEDULE_STEPS, optimizer_spec=optimizer)

        def update():
            return agent.learner.update(unroll_batch(agent, seed=3))
    else:
        agent = dqn_agent(backend, schedule_timesteps=SCHEDULE_STEPS, optimizer_spec=optimizer)

        def update():
            return agent.learner.update(memory_records(8))
    for env_steps, t in ((0, 0.0), (300, 0.3), (700, 1.0), (5000, 1.0)):
        agent.learner.observe_env_steps(env_steps)
        expected = (0.01 - 0.001) * (1.0 - t) ** 2 + 0.001  # Polynomial's closed form.
        assert update()["learning_rate"] == pytest.approx(expected, rel=1e-6), env_steps


def test_a_learner_without_a_schedule_reports_no_learning_rate():
    learner = Learner(executor=None, schedule_timesteps=10)
    assert learner.learning_rate is None and learner.schedule_results() == {}
