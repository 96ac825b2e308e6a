"""The learning role of an agent."""
import numpy as np


class Learner:
    """Learns from items handed in from outside (from a local builder, actor processes or an inference server).

    It counts its ``weights_version`` (one per optimizer update), which actors stamp on what they act, and
    reports the policy lag (learner version minus the version that acted) of what it learns from, so the lag
    stays right wherever the actors run. Environment steps are reported to it with ``observe_env_steps``
    (update schedules and learning-rate schedules run on them).

    Args:
        agent: The agent whose config and executor the learner uses.

    Attributes:
        updates: Optimizer updates so far (= ``weights_version``).
        timesteps: Environment steps reported so far.
    """

    def __init__(self, agent):
        self.agent = agent
        self.executor = agent.executor
        self.updates = 0
        self.timesteps = 0

    @property
    def time_percentage(self):
        """How far the agent's schedules (learning rate) have run, from the env steps reported: in [0, 1]."""
        return min(1.0, self.timesteps / self.agent.schedule_timesteps)

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

    def ready_to_update(self):
        """Whether ``update()`` should be called now."""
        return False

    def steps_to_next_update(self):
        """Once the updates the schedule asks for now are made: the env steps until it asks for the next one,
        or None where new items, not env steps, call for updates (learners of unrolls). A learner thread
        (``rlgraph.workers.PipelinedWorker``) asks before it starts those updates, and hands over its next data
        after that many steps."""
        return None

    def update(self, batch=None):
        """One learning step on the learner's own data or ``batch``; returns a dict of named results."""
        raise NotImplementedError

    def restore_counters(self, timesteps, updates):
        """Sets the counters after a model was loaded."""
        self.timesteps, self.updates = int(timesteps), int(updates)

    def get_state(self):
        """The learner's run state outside the graph (counters, schedules, queued data), for ``set_state``.

        The memory's contents are the memory component's own state (``Agent.get_run_state`` collects them).
        """
        return dict(timesteps=int(self.timesteps), updates=int(self.updates))

    def set_state(self, state):
        """Restores what ``get_state`` returned."""
        self.timesteps, self.updates = int(state["timesteps"]), int(state["updates"])

    def forget_replay(self):
        """Called when a run resumes without its replay's contents: counts the (empty) memory as empty."""

    def policy_lag(self, versions):
        """``weights_version - versions`` (the versions that acted)."""
        return self.updates - np.asarray(versions, np.int64)
