"""IMPALA's experience replay (``replay_proportion``, ``replay_slots``; Schmitt et al. 2019): floor(k p) replayed
batches after k new ones, drawn from the newest ``replay_slots``, each learned from exactly as a new batch is;
APPO's lag limit on new batches only; the replay in the run state (exact resume); bad values refused."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rlgraph.agents import Agent
from rlgraph.agents.impala_learner import IMPALALearner
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.utils.errors import RLGraphError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_exact_resume import _check_straight_equals_resumed  # noqa: E402
from test_execute_steps import batch as unroll_batch  # noqa: E402

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


class RecordingExecutor:
    """Answers ``update`` and records the batch (its rewards' first value names it) of every call."""

    def __init__(self):
        self.learned = []

    def execute(self, name, unroll, *args):
        assert name == "update"
        self.learned.append(int(unroll["rewards"][0, 0]))
        return dict(loss=0.0)


def label_batch(label, version=0):
    return dict(unroll=dict(rewards=np.full((3, 2), float(label))), bootstrap={},
                policy_versions=np.full((3, 2), version, np.int64))


@pytest.mark.parametrize("proportion", [0.5, 1.0, 1.5, 0.3])
def test_replays_floor_k_p_batches_after_k_new_ones_from_the_newest_slots(proportion):
    executor = RecordingExecutor()
    learner = IMPALALearner(executor, "test", unroll_length=3, replay_proportion=proportion, replay_slots=3, seed=2)
    replayed = []
    for k in range(1, 21):
        before = len(executor.learned)
        out = learner.update(label_batch(k, version=learner.updates))
        learned = executor.learned[before:]
        assert learned[0] == k  # The new batch first...
        assert out["replayed_batches"] == len(learned) - 1 == int(np.floor(k * proportion + 1e-9)) - sum(replayed)
        # ... then batches of the newest 3 (this one included).
        assert all(max(1, k - 2) <= label <= k for label in learned[1:]), (k, learned)
        assert out["num_updates"] == len(learned)
        replayed.append(out["replayed_batches"])
    assert sum(replayed) == int(np.floor(20 * proportion + 1e-9))
    assert learner.replay_size == 3 and learner.updates == 20 + sum(replayed)


def test_no_replay_by_default_and_the_replay_in_the_run_state():
    executor = RecordingExecutor()
    plain = IMPALALearner(executor, "test", unroll_length=3)
    out = plain.update(label_batch(1))
    assert "replayed_batches" not in out and plain.replay_size == 0 and executor.learned == [1]
    learner = IMPALALearner(RecordingExecutor(), "test", unroll_length=3, replay_proportion=0.5, replay_slots=4)
    for k in range(1, 8):
        learner.update(label_batch(k))
    other = IMPALALearner(RecordingExecutor(), "test", unroll_length=3, replay_proportion=0.5, replay_slots=4)
    other.set_state(learner.get_state())
    for k in range(8, 14):  # The same draws from the same ring in both.
        learner.update(label_batch(k)), other.update(label_batch(k))
    assert other.executor.learned == learner.executor.learned[-len(other.executor.learned):]
    # A run state from before the replay existed restores as an empty replay.
    old = {k: v for k, v in learner.get_state().items() if k != "replay"}
    other.set_state(old)
    assert other.replay_size == 0


SEED = 5  # The agents' seed; their learners' shuffling generators are seeded with it.


def impala(backend, kind="impala", **changes):
    with open(os.path.join(CONFIGS, f"{kind}_cartpole.json")) as f:
        config = json.load(f)
    config = {k: v for k, v in config.items() if k not in ("environment_spec", "train_spec", "description",
                                                           "execution_spec")}
    config["network_spec"] = [{"type": "dense", "units": 16, "activation": "tanh"}]
    config.update(changes)
    return Agent.from_spec(config, state_space=FloatBox(shape=(4,)), action_space=IntBox(2), backend=backend, seed=SEED)


@pytest.mark.all_backends
def test_a_replayed_batch_is_learned_from_as_a_new_one(backend):
    """One slot and p = 1: each batch is learned from twice in a row, the same as a learner without replay given
    each batch twice (the same weights after every update)."""
    replaying = impala(backend, replay_proportion=1.0, replay_slots=1)
    plain = impala(backend)
    plain.executor.set_weights(replaying.executor.get_weights(trainable_only=False))
    for i in range(3):
        batch = unroll_batch(replaying, version=2 * i, seed=i)
        out = replaying.learner.update(batch)
        plain.learner.update(batch), plain.learner.update(batch)
        assert out["replayed_batches"] == 1 and out["num_updates"] == 2
        assert out["replay_policy_lag_mean"] == 1.0  # Learned once since it was acted on.
        a, b = replaying.executor.get_weights(trainable_only=False), plain.executor.get_weights(trainable_only=False)
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-6, atol=1e-7, err_msg=key)
    assert replaying.learner.updates == plain.learner.updates == 6


@pytest.mark.all_backends
def test_appo_lag_limit_drops_late_new_samples_but_never_replayed_ones(backend):
    agent = impala(backend, kind="appo", num_epochs=1, num_minibatches=1, max_policy_lag=2, replay_proportion=1.0,
                   replay_slots=1, minibatch_unit="trajectories")
    out = agent.learner.update(unroll_batch(agent, version=0))
    assert out["dropped_samples"] == 0 and out["num_updates"] == 2
    late = agent.learner.update(unroll_batch(agent, version=0, seed=1))  # Acted on 2 updates ago: within the limit.
    assert late["dropped_samples"] == 0 and late["num_updates"] == 2
    stale = agent.learner.update(unroll_batch(agent, version=0, seed=2))  # 4 updates ago: dropped, but replayed anyway.
    assert stale["dropped_samples"] == 6 * 8 and stale["num_updates"] == 1 and stale["replayed_batches"] == 1
    assert stale["replay_policy_lag_mean"] == 4.0


@pytest.mark.parametrize("key, value, says", [("replay_proportion", -0.5, ">= 0"), ("replay_slots", 0, "positive int"),
                                               ("replay_proportion", "half", "number")])
def test_bad_replay_settings_are_refused_naming_the_key(key, value, says):
    with pytest.raises(RLGraphError) as info:
        impala("pytorch", **{key: value})
    message = str(info.value)
    assert key in message and says in message, message


def test_resumed_run_with_replay_equals_straight_run(backend, tmp_path):
    """The replay's batches are part of the run state: 8000 steps straight == 4000, stored, resumed to 8000."""
    summaries = _check_straight_equals_resumed("impala", backend, tmp_path, extra=(
        "--set", "replay_proportion=0.5", "--set", "replay_slots=4"))
    assert summaries[1]["overrides"] == ["replay_proportion=0.5", "replay_slots=4"]


@pytest.mark.slow
def test_impala_with_replay_learns_cartpole(tmp_path):
    logdir = str(tmp_path / "run")
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", os.path.join(CONFIGS, "impala_cartpole.json"),
           "--backend", "pytorch", "--seed", "1", "--steps", "1500000", "--logdir", logdir,
           "--set", "replay_proportion=1", "--set", "replay_slots=32"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        summary = json.load(f)
    assert summary["steps_to_target"] is not None and summary["last_evaluation"][2] >= 450, summary


def test_the_replay_keeps_copies_of_read_only_arrays_only():
    """Batches from Ray's object store hold read-only views of its buffers; the replay must not pin them."""
    learner = IMPALALearner(RecordingExecutor(), "test", unroll_length=3, replay_proportion=0.5, replay_slots=2)
    batch = label_batch(1)
    batch["unroll"]["rewards"].flags.writeable = False
    learner.update(batch)
    kept = learner.get_state()["replay"]["batches"][0]
    assert kept["unroll"]["rewards"] is not batch["unroll"]["rewards"] and kept["unroll"]["rewards"].flags.writeable
    np.testing.assert_array_equal(kept["unroll"]["rewards"], batch["unroll"]["rewards"])
    assert kept["policy_versions"] is batch["policy_versions"]  # Writable arrays are kept as they are.


def test_a_run_state_without_replay_leaves_the_batches_out_and_resumes_with_an_empty_replay():
    agent = impala("pytorch", replay_proportion=1.0, replay_slots=4)
    for i in range(3):
        agent.learner.update(unroll_batch(agent, seed=i))
    assert agent.learner.replay_size == 3
    assert len(agent.get_run_state()["learner"]["replay"]["batches"]) == 3
    state = agent.get_run_state(include_replay=False)
    assert "replay" not in state["learner"]
    other = impala("pytorch", replay_proportion=1.0, replay_slots=4)
    other.set_run_state(state)
    assert other.learner.replay_size == 0 and other.learner.updates == agent.learner.updates == 6
    out = other.learner.update(unroll_batch(other, seed=5))  # Replays the one batch it holds: no backlog of replays.
    assert out["replayed_batches"] == 1 and other.learner.replay_size == 1


def test_appo_refuses_replay_with_normalized_advantages():
    with pytest.raises(RLGraphError) as info:
        impala("pytorch", kind="appo", replay_proportion=0.5, loss_spec=dict(normalize_advantages=True))
    assert "replay_proportion" in str(info.value) and "normalize_advantages" in str(info.value)
    impala("pytorch", kind="appo", replay_proportion=0.5)  # without normalization: accepted
