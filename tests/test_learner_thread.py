"""The learner thread of local runs (``execution_spec.learner_thread``, ``PipelinedWorker``).

The actor acts with its own weights, handed over at fixed points, while the learner learns in a thread
(IMPALA/APPO: from the previous unroll; DQN, Ape-X, R2D2: the updates their schedule asks for, on the replay
as it was at the hand-over): runs repeat exactly, resume exactly, replay agents make the same updates as
without the thread, every sample is exactly one hand-over's updates older, errors of the learner thread reach
the caller, and APPO and R2D2 still learn CartPole.
"""
import json
import os

import numpy as np
import pytest

from rlgraph.engines.runner import load_config, make_engine
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


@pytest.mark.parametrize("kind", ["impala", "r2d2"])
def test_a_failing_update_is_raised_in_the_sampling_loop(kind, backend):
    worker, agent = engine(kind, backend, **(dict(update_spec=R2D2_UPDATES) if kind == "r2d2" else {}))

    def broken(batch=None):
        raise ValueError("learner broke")
    agent.update = broken
    with pytest.raises(ValueError, match="learner broke"):
        worker.run(8 * 32 * 3)
    worker.close()


#: Small update schedules of the replay agents' configs (8 environments): DQN hands over every 4 vector steps,
#: R2D2 every 8.
DQN_UPDATES = dict(batch_size=32, update_interval=32, steps_before_update=400, sync_interval=400)
R2D2_UPDATES = dict(batch_size=16, update_interval=64, steps_before_update=400, sync_interval=400)


def replay_engine(kind, backend, learner_thread=True):
    if kind in ("dqn", "dqn-uniform"):
        # The uniform replay draws its sample indices in the learner thread while the actor draws its exploration
        # in the sampling loop: each from its own executor's generator, so the order of the threads' draws is moot.
        memory = dict(memory_spec={"type": "replay-memory", "capacity": 5000}) if kind == "dqn-uniform" else {}
        return engine("dqn", backend, learner_thread, update_spec=DQN_UPDATES,
                      network_spec=[{"type": "dense", "units": 16, "activation": "relu"}], **memory)
    return engine("r2d2", backend, learner_thread, update_spec=R2D2_UPDATES,
                  network_spec=[{"type": "dense", "units": 16, "activation": "relu"}, {"type": "lstm", "units": 16}])


def _run_closed(worker, steps):
    """Runs ``steps`` env steps and waits for the updates in flight; returns all update results."""
    try:
        results = worker.run(steps)["results"]
    finally:
        if isinstance(worker, PipelinedWorker):
            worker.close()
            results += worker._done
    return results


@pytest.mark.parametrize("kind", ["dqn", "dqn-uniform", "r2d2"])
def test_replay_runs_repeat_exactly_with_the_updates_of_a_run_without_the_thread(kind, backend):
    weights, updates = [], []
    for thread in (True, True, False):
        worker, agent = replay_engine(kind, backend, thread)
        assert isinstance(worker, PipelinedWorker) == thread
        results = _run_closed(worker, 2000)
        assert len(results) == agent.learner.updates > 10
        updates.append(agent.learner.updates)
        weights.append(agent.get_weights())
    assert updates[0] == updates[1] == updates[2]  # The schedule's updates, with or without the thread.
    for key in weights[0]:
        if backend == "tf":
            # In this process TensorFlow runs with its default pool of math threads, whose kernels (oneDNN's) can
            # split a sum differently while both threads compute: exact with one math thread, which
            # ``test_replay_resume_is_exact`` runs in fresh processes.
            np.testing.assert_allclose(weights[0][key], weights[1][key], rtol=1e-4, atol=1e-6, err_msg=key)
        else:
            np.testing.assert_array_equal(weights[0][key], weights[1][key], err_msg=key)


def test_r2d2_sequences_are_one_update_older_than_without_the_thread(backend):
    """R2D2 with one update per hand-over: a sequence's newest step was acted by the weights before the update
    that runs while it is sampled, so its lag is exactly 1 where it is 0 without the thread."""
    lags = {}
    for thread in (False, True):
        worker, _ = replay_engine("r2d2", backend, thread)
        results = _run_closed(worker, 2000)
        lags[thread] = [r["policy_lag_max"] for r in results if "policy_lag_max" in r]
        lags[thread, "mean"] = [r["policy_lag_mean"] for r in results if "policy_lag_mean" in r]
    assert len(lags[True]) > 5 and set(lags[False]) == set(lags[False, "mean"]) == {0}
    # The first update's sequences were acted before any update.
    assert lags[True][0] == 0 and set(lags[True][1:]) == set(lags[True, "mean"][1:]) == {1}


def test_items_sampled_after_the_last_hand_over_wait_in_the_run_state(backend):
    worker, agent = replay_engine("dqn", backend)
    try:
        worker.run(8 * 4 * 30 + 8)  # One vector step after a hand-over (every 4 once updates have begun).
        state = worker.get_run_state()
    finally:
        worker.close()
    pipeline = state["pipeline"]
    assert pipeline["in_flight"] is True and len(pipeline["waiting"]) == 1 and pipeline["unreported_steps"] == 8
    assert agent.learner.timesteps == 8 * 4 * 30  # The waiting step is not counted yet.


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


def _train_in_a_process(args):
    proc = run_cli(args, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("kind,backend_name", [("dqn", "pytorch"), ("dqn", "tf"), ("r2d2", "pytorch"),
                                               pytest.param("r2d2", "tf", marks=pytest.mark.slow)])
def test_replay_resume_is_exact(kind, backend_name, tmp_path):
    """Straight 8000 steps == 4000 + resumed 4000, each run in a fresh process with one math thread (exact on
    TensorFlow too, see above). DQN hands over every 3 vector steps here, so the checkpoint at 4000 steps (500
    vector steps) holds items waiting for the next hand-over."""
    summaries = _check_straight_equals_resumed(
        kind, backend_name, tmp_path, train=_train_in_a_process,
        execution_spec={"learner_thread": True, "math_threads": 1},
        update_changes=dict(update_interval=24) if kind == "dqn" else None)
    assert summaries[0]["learner_thread"] is True


def _learn_with_the_thread(kind, backend, tmp_path, steps):
    """The summary of ``rlgraph train`` on ``configs/<kind>_cartpole.json`` with the learner thread, seed 1."""
    config, _ = load_config(os.path.join(CONFIGS, f"{kind}_cartpole.json"))
    config["execution_spec"] = dict(config.get("execution_spec", {}), learner_thread=True)
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(config))
    logdir = tmp_path / "run"
    proc = run_cli([str(path), "--backend", backend, "--steps", str(steps), "--seed", "1", "--logdir",
                    str(logdir)], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((logdir / "summary.json").read_text())


@pytest.mark.slow
def test_appo_with_the_learner_thread_learns_cartpole(backend, tmp_path):
    summary = _learn_with_the_thread("appo", backend, tmp_path, 1500000)
    assert summary["eval_mean_return"] >= FINAL_EVAL_FLOOR, summary


@pytest.mark.slow
def test_r2d2_with_the_learner_thread_learns_cartpole(backend, tmp_path):
    summary = _learn_with_the_thread("r2d2", backend, tmp_path, 300000)
    assert summary["steps_to_target"] is not None, summary
