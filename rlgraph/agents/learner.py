"""The learning role of an agent."""
import numpy as np


class Learner:
    """Learns from items handed in from outside (from a local builder, actor processes or an inference server).

    It owns its update schedule: ``updates_due()`` is the one rule, per algorithm, of when to learn (a replay
    ratio in env steps; a batch of unroll columns), and every engine asks it rather than deciding itself. It
    counts its ``weights_version`` (one per optimizer update), which actors stamp on what they act, and reports
    the policy lag (learner version minus the version that acted) of what it learns from, so the lag stays
    right wherever the actors run. Environment steps are reported to it with ``observe_env_steps`` (update
    schedules and learning-rate schedules run on them).

    A learner holds no reference to its agent: ``from_agent`` passes it the executor and the settings of the
    agent's config its class needs (``settings_of``).

    Args:
        executor: The graph executor of the learner's graph.
        name: A name for messages.
        schedule_timesteps: The env steps over which the learning-rate schedules run (``time_percentage``).
        learning_rate: The optimizer's learning-rate schedule (a ``TimeDependentParameter``), whose value at
            ``time_percentage`` the updates report as "learning_rate"; None: not reported.

    Attributes:
        updates: Optimizer updates so far (= ``weights_version``).
        timesteps: Environment steps reported so far.
    """

    def __init__(self, executor, name="Learner", schedule_timesteps=None, learning_rate=None):
        self.executor = executor
        self.name = name
        self.schedule_timesteps = schedule_timesteps
        self.learning_rate_schedule = learning_rate
        self.updates = 0
        self.timesteps = 0

    @classmethod
    def from_agent(cls, agent):
        """The learner of ``agent``: its executor, name and the settings of its config this class needs."""
        return cls(agent.executor, agent.name, **cls.settings_of(agent))

    @classmethod
    def settings_of(cls, agent):
        """The constructor keywords of this learner class from an agent's config (subclasses add theirs)."""
        return dict(schedule_timesteps=agent.schedule_timesteps, learning_rate=agent.root.optimizer.learning_rate)

    @property
    def time_percentage(self):
        """How far the agent's schedules (learning rate) have run, from the env steps reported: in [0, 1]."""
        return min(1.0, self.timesteps / self.schedule_timesteps) if self.schedule_timesteps else 0.0

    @property
    def learning_rate(self):
        """The learning rate the optimizer steps with now (its schedule at ``time_percentage``), or None where the
        learner was given no schedule."""
        if self.learning_rate_schedule is None:
            return None
        return float(self.learning_rate_schedule.value_at(self.time_percentage))

    def schedule_results(self):
        """What an update reports of the schedules: ``{"learning_rate": ...}`` (empty without a schedule)."""
        rate = self.learning_rate
        return {} if rate is None else {"learning_rate": rate}

    @property
    def weights_version(self):
        """The version of the current weights: the number of updates."""
        return self.updates

    def get_weights(self):
        """The trainable weights (a dict); their version is ``weights_version``."""
        return self.executor.get_weights()

    def observe_env_steps(self, num_steps):
        """Counts environment steps taken by the actors."""
        self.timesteps += int(num_steps)

    def add_items(self, items):
        """Takes a batch of the builder's items (into the memory, or the queue of unrolls)."""
        raise NotImplementedError

    # --- the update schedule ----------------------------------------------------------------------------------
    def updates_due(self):
        """How many ``update()`` calls the learner's schedule asks for now (0: none). The one rule of when to
        learn, which every engine follows."""
        return 0

    def ready_to_update(self):
        """Whether ``update()`` should be called now (``updates_due() > 0``)."""
        return self.updates_due() > 0

    def steps_to_next_update(self):
        """Once the updates the schedule asks for now are made: the env steps until it asks for the next one,
        or None where new items, not env steps, call for updates (learners of unrolls). A learner thread
        (``rlgraph.workers.PipelinedWorker``) asks before it starts those updates, and hands over its next data
        after that many steps."""
        return None

    @property
    def pending_items(self):
        """Item batches handed in and waiting for an update (queued unrolls; 0 where items go into a memory).
        Engines bound what they request from actors by it (back-pressure)."""
        return 0

    def set_batch_columns(self, columns, max_pending=None):
        """How large an update's batch is where actors elsewhere hand in parts of it: learners of unrolls learn
        once ``columns`` environment columns are queued, or ``max_pending`` item batches (None: no bound);
        learners with a replay memory sample their own batches and ignore it."""

    def update(self, batch=None):
        """One learning step on the learner's own data or ``batch``; returns a dict of named results."""
        raise NotImplementedError

    # --- counters and run state ---------------------------------------------------------------------------
    def restore_counters(self, timesteps, updates):
        """Sets the counters after a model was loaded."""
        self.timesteps, self.updates = int(timesteps), int(updates)

    def get_state(self):
        """The learner's run state outside the graph (counters, schedules, queued data), for ``set_state``.

        The memory's contents are the memory component's own state (``Agent.get_run_state`` collects them).
        """
        return dict(timesteps=int(self.timesteps), updates=int(self.updates))

    def get_state_without_replay(self):
        """``get_state`` without the replayed data a learner keeps itself (IMPALA's replay of batches), for run
        states stored without their replay (``train_spec.checkpoint_replay``); the memory of replay agents is a
        component, left out by ``Agent.get_run_state``."""
        return self.get_state()

    def set_state(self, state):
        """Restores what ``get_state`` returned."""
        self.timesteps, self.updates = int(state["timesteps"]), int(state["updates"])

    def forget_replay(self):
        """Called when a run resumes without its replay's contents: counts the (empty) memory as empty."""

    def policy_lag(self, versions):
        """``weights_version - versions`` (the versions that acted)."""
        return self.updates - np.asarray(versions, np.int64)
