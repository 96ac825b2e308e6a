"""The learners' update schedules (``Learner.updates_due``): the one rule every engine follows, checked against
its closed form with a recording executor (no graph is built)."""
import numpy as np
import pytest

from rlgraph.agents.dqn_learner import DQNLearner
from rlgraph.agents.impala_learner import IMPALALearner
from rlgraph.agents.replay_learner import ReplaySpec

SPEC = dict(update_interval=4, updates_per_interval=2, batch_size=8, steps_before_update=20, sync_interval=50)


class RecordingExecutor:
    """Answers ``update_from_memory`` / ``update_from_batch`` / ``sync_target`` and counts the calls."""

    def __init__(self):
        self.calls = []

    def execute(self, name, *args):
        self.calls.append(name)
        if name == "update_from_memory":
            return 0.5, 0.1
        if name == "update_from_batch":
            return 0.5, np.array([-1.0, 2.0], np.float32)
        return None


class Shards:
    """A replay outside the learner, as ``ReplayLearner.attach_replay`` takes it."""

    def __init__(self, sizes):
        self.sizes = np.asarray(sizes)

    @property
    def stored(self):
        return int(self.sizes.sum())

    def can_sample(self, batch_size):
        return bool((self.sizes >= batch_size).any())

    def restore(self, stored):
        pass


def dqn_learner(spec=SPEC):
    replay = ReplaySpec(keys=("states",), capacity=1000, alpha=0.6, beta=0.4, batch_size=spec["batch_size"])
    return DQNLearner(RecordingExecutor(), "test", schedule_timesteps=1000, update_spec=spec, replay_spec=replay,
                      priority_epsilon=1e-3)


def store(learner, n):
    learner.replay.count(n)
    learner.observe_env_steps(n)


def run_local(learner, steps_per_call, calls):
    """A local worker: env steps, then update() while updates are due; returns updates after each call."""
    made = []
    for _ in range(calls):
        store(learner, steps_per_call)
        while learner.ready_to_update():
            learner.update()
        made.append(learner.updates)
    return made


def test_replay_ratio_follows_its_closed_form_for_any_vector_step():
    for steps_per_call in (1, 3, 4, 16):
        learner = dqn_learner()
        made = run_local(learner, steps_per_call, 40)
        anchor = learner.get_state()["anchor"]
        # Starts once steps_before_update are stored (and an interval has passed), at the first call after that.
        assert anchor == -(-SPEC["steps_before_update"] // steps_per_call) * steps_per_call
        for k, updates in enumerate(made):
            t = (k + 1) * steps_per_call
            rounds = 0 if t < anchor else (t - anchor) // SPEC["update_interval"] + 1
            assert updates == rounds * SPEC["updates_per_interval"], (steps_per_call, t)


def test_batches_of_a_replay_outside_the_learner_follow_the_same_ratio_one_update_each():
    local, remote = dqn_learner(), dqn_learner()
    shards = Shards([0, 0])
    remote.attach_replay(shards)
    for _ in range(30):
        store(local, 4)
        while local.ready_to_update():
            local.update()
        shards.sizes += 2
        remote.observe_env_steps(4)
        for _ in range(remote.updates_due()):
            out = remote.update(dict(states=np.zeros((2, 1)), actions=np.zeros(2), rewards=np.zeros(2),
                                     terminals=np.zeros(2, bool), next_states=np.zeros((2, 1)),
                                     importance_weights=np.ones(2, np.float32)))
            np.testing.assert_allclose(out["priorities"], [1.001, 2.001], rtol=1e-6)
        assert remote.updates == local.updates
    assert local.updates > 0


def test_a_replay_that_cannot_serve_a_batch_holds_updates_back():
    learner = dqn_learner()
    learner.attach_replay(Shards([7, 7, 7, 7]))  # 28 stored, but no shard holds a batch of 8
    learner.observe_env_steps(100)
    assert learner.updates_due() == 0 and learner.steps_to_next_update() == SPEC["update_interval"]
    learner.replay.sizes = np.array([8, 7, 7, 7])
    assert learner.updates_due() == SPEC["updates_per_interval"]


def test_a_forgotten_replay_refills_before_updates_resume_without_a_backlog():
    learner = dqn_learner()
    run_local(learner, 4, 10)
    before = learner.updates
    learner.forget_replay()
    assert learner.replay.stored == 0
    store(learner, 4)
    assert learner.updates_due() == 0  # 4 records < steps_before_update
    made = run_local(learner, 4, 5)
    # Refilled at the 4th call (20 records): one round then (not one per interval since the old anchor), and
    # one per interval after it.
    per = SPEC["updates_per_interval"]
    assert [m - before for m in made] == [0, 0, 0, per, 2 * per]


def test_run_state_round_trip_and_the_format_before_the_seam():
    learner = dqn_learner()
    run_local(learner, 4, 12)
    state = learner.get_state()
    other = dqn_learner()
    other.set_state(state)
    assert other.updates_due() == learner.updates_due() == 0
    store(learner, 8), store(other, 8)
    assert other.updates_due() == learner.updates_due() == 2 * SPEC["updates_per_interval"]
    # The older format: no anchor; one round was made at last_update_timestep, stored_records counted.
    old = dict(timesteps=46, updates=8, last_update_timestep=44, last_sync_timestep=0, lags=[], stored_records=46)
    legacy = dqn_learner()
    legacy.set_state(old)
    assert legacy.replay.stored == 46 and legacy.updates_due() == 0
    store(legacy, 2)
    assert legacy.updates_due() == SPEC["updates_per_interval"]


def test_unroll_learners_learn_once_the_batch_columns_are_queued():
    learner = IMPALALearner(RecordingExecutor(), "test", schedule_timesteps=1000, unroll_length=5)

    def unroll(columns):
        return dict(unroll=dict(rewards=np.zeros((5, columns))), bootstrap={}, policy_versions=None)
    assert learner.updates_due() == 0
    learner.queue.append(unroll(2))
    assert learner.updates_due() == 1  # locally: whatever the builder emitted
    learner.set_batch_columns(8, max_pending=5)
    assert learner.updates_due() == 0 and learner.pending_items == 1
    learner.queue += [unroll(2), unroll(2)]
    assert learner.updates_due() == 0 and learner.queued_columns == 6
    learner.queue.append(unroll(2))
    assert learner.updates_due() == 1
    learner.queue = [unroll(1)] * 5  # the queue bound: 5 batches of 1 column
    assert learner.updates_due() == 1


def test_a_learner_holds_no_reference_to_its_agent():
    learner = dqn_learner()
    assert not any(type(v).__name__.endswith("Agent") for v in vars(learner).values())
    with pytest.raises(TypeError):
        DQNLearner(object(), "test", agent=None)
