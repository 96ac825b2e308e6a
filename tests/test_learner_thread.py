"""The learner thread of local IMPALA/APPO runs (``execution_spec.learner_thread``, ``PipelinedWorker``).

The actor acts with its own weights, handed over at each unroll, while the learner learns from the previous
unroll in a thread: runs repeat exactly, resume exactly, every sample is exactly one update older than in a
run without the thread, errors of the learner thread reach the caller, and APPO still learns CartPole.
"""
import json
import os

import numpy as np
import pytest

from rlgraph.execution.runner import load_config, make_engine
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.workers import PipelinedWorker, VectorWorker
from small_configs import FINAL_EVAL_FLOOR, run_cli
from test_exact_resume import _check_straight_equals_resumed

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


def engine(kind, backend, learner_thread=True, num_envs=8, **changes):
    config, _ = load_config(os.path.join(CONFIGS, f"{kind}_cartpole.json"))
    config["environment_spec"] = dict(config["environment_spec"], num_envs=num_envs)
    config["execution_spec"] = dict(learner_thread=learner_thread)
    config.update(changes)
    worker, agent, _ = make_engine(config, backend=backend, seed=3)
    return worker, agent


@pytest.mark.parametrize("kind", ["appo", "impala"])
def test_runs_repeat_exactly(kind, backend):
    weights = []
    for _ in range(2):
        worker, agent = engine(kind, backend)
        assert isinstance(worker, PipelinedWorker)
        try:
            results = worker.run(2000)["results"]
        finally:
            worker.close()  # Waits for the update in flight.
        results += worker._done
        assert sum(r["num_updates"] for r in results) == agent.learner.updates > 0
        weights.append(agent.get_weights())
    for key in weights[0]:
        np.testing.assert_array_equal(weights[0][key], weights[1][key], err_msg=key)


def test_samples_are_one_update_older_than_without_the_thread(backend):
    """APPO (4 epochs x 2 minibatches: 8 optimizer steps per unroll): the learner thread adds exactly 8
    versions of policy lag to every sample."""
    lags = {}
    for thread in (False, True):
        worker, agent = engine("appo", backend, learner_thread=thread, unroll_length=32, num_epochs=4,
                               num_minibatches=2)
        assert isinstance(worker, PipelinedWorker) == thread
        try:
            results = worker.run(8 * 32 * 4)["results"]
        finally:
            if thread:
                worker.close()  # Waits for the update in flight.
                results += worker._done
        lags[thread] = [r["policy_lag_mean"] for r in results]
    steps = 4 * 2
    assert len(lags[True]) >= 3
    # The first unroll is acted with the initial weights in both runs; from the second on, one update older.
    np.testing.assert_allclose(lags[True][1:3], np.array(lags[False][1:3]) + steps)


def test_a_failing_update_is_raised_in_the_sampling_loop(backend):
    worker, agent = engine("impala", backend)

    def broken(batch=None):
        raise ValueError("learner broke")
    agent.update = broken
    with pytest.raises(ValueError, match="learner broke"):
        worker.run(8 * 32 * 3)
    worker.close()


def test_replay_agents_are_refused_with_the_key():
    with pytest.raises(RLGraphSpecError, match=r"execution_spec.learner_thread.*IMPALA, APPO.*DQNAgent"):
        engine("dqn", "pytorch", num_envs=2)


def test_a_non_boolean_is_refused_with_the_key():
    with pytest.raises(RLGraphSpecError, match=r"execution_spec.learner_thread"):
        engine("appo", "pytorch", learner_thread="yes")


def test_the_local_worker_is_the_default():
    worker, _ = engine("appo", "pytorch", learner_thread=False)
    assert type(worker) is VectorWorker


@pytest.mark.parametrize("kind", ["appo", "impala"])
def test_resume_is_exact(kind, backend, tmp_path):
    summaries = _check_straight_equals_resumed(kind, backend, tmp_path, execution_spec={"learner_thread": True})
    assert summaries[0]["learner_thread"] is True


@pytest.mark.slow
def test_appo_with_the_learner_thread_learns_cartpole(backend, tmp_path):
    config, _ = load_config(os.path.join(CONFIGS, "appo_cartpole.json"))
    config["execution_spec"] = {"learner_thread": True}
    path = tmp_path / "appo.json"
    path.write_text(json.dumps(config))
    logdir = tmp_path / "run"
    proc = run_cli([str(path), "--backend", backend, "--steps", "1500000", "--seed", "1", "--logdir",
                    str(logdir)], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["eval_mean_return"] >= FINAL_EVAL_FLOOR, summary
