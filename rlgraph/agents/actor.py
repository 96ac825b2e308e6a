"""The acting role of an agent."""
import numpy as np

from rlgraph.agents.agent import batch_size_of
from rlgraph.utils.errors import RLGraphError


class Actor:
    """Acts for a batch of environments and turns each step into the rows its trajectory builder takes.

    An actor holds no learning state: it acts with the weights it was given (``Agent.set_weights(weights,
    version)``) and stamps that ``weights_version`` on every row, so that a learner anywhere can measure the
    policy lag of what it learns from. Engines drive it like ``VectorWorker`` does::

        actions, extras = actor.get_actions(obs, explore=True, internal_states=states)
        next_obs, rewards, terminals, truncations = env.step(actions)
        step = actor.make_step(obs, actions, rewards, env.final_obs, terminals, truncations, extras)
        items = builder.add(env_ids, step)          # agent.make_trajectory_builder()
        if items is not None: send(actor.process_items(items))
        states = actor.next_internal_states(extras, rewards, terminals | truncations)

    Args:
        agent: The agent whose config and executor the actor uses.

    Attributes:
        weights_version: The learner version of the weights the actor acts with.
        timesteps: Environment steps this actor has taken (drives its exploration schedule).
    """

    #: The keys of the extras ``get_actions`` returns (``observe`` refuses other keywords).
    extras_keys = ("weights_version",)

    def __init__(self, agent):
        self.agent = agent
        self.executor = agent.executor
        self.weights_version = 0
        self.timesteps = 0
        # Where this actor's environments sit among all actors' (engines call ``place``).
        self.slot_offset = 0
        self.total_slots = None

    def place(self, slot_offset, total_slots):
        """Tells the actor that its rows are environments ``slot_offset, slot_offset + 1, ...`` of
        ``total_slots`` over all actors of a run (e.g. Ape-X spreads its epsilons over all of them)."""
        self.slot_offset, self.total_slots = int(slot_offset), int(total_slots)

    def slot_ids(self, num_rows):
        """``(global ids of the rows' environments, number of environments over all actors)``."""
        total = self.total_slots if self.total_slots is not None else num_rows
        return self.slot_offset + np.arange(num_rows), max(total, self.slot_offset + num_rows)

    @property
    def time_percentage(self):
        """How far the agent's schedules (exploration) have run, from this actor's env steps: in [0, 1]."""
        return min(1.0, self.timesteps / self.agent.schedule_timesteps)

    def get_actions(self, states, explore=True, internal_states=None):
        """``(actions, extras)`` for a batch of states; extras hold per-row arrays incl. ``weights_version``."""
        raise NotImplementedError

    def initial_internal_states(self, num_envs):
        """The internal states of ``num_envs`` new episodes (None for agents without internal states)."""
        return None

    def next_internal_states(self, extras, rewards, dones):
        """The internal states for the next ``get_actions``: ``extras["internal_states"]`` (copied), zeroed in
        the rows of environments whose episode ended. None if the actor keeps none."""
        states = extras.get("internal_states")
        if states is None:
            return None
        dones = np.asarray(dones, bool)
        return tuple(_zero_rows(s, dones) for s in states)

    def make_step(self, states, actions, rewards, next_states, terminals, truncations, extras):
        """The row dict of one environment step for the trajectory builder (counts the steps)."""
        raise NotImplementedError

    def process_items(self, items):
        """Completes the builder's items before they leave the actor (e.g. Ape-X's initial priorities)."""
        return items

    def restore_counters(self, timesteps, updates):
        """Sets the counters after a model was loaded (a stored model's weights are the learner's ``updates``)."""
        self.timesteps, self.weights_version = int(timesteps), int(updates)

    def get_state(self):
        """The actor's run state (its env steps drive the exploration schedule), for ``set_state``."""
        return dict(timesteps=int(self.timesteps), weights_version=int(self.weights_version))

    def set_state(self, state):
        """Restores what ``get_state`` returned."""
        self.timesteps, self.weights_version = int(state["timesteps"]), int(state["weights_version"])

    def require_extras(self, extras, keys):
        """Raises a clear error if ``extras`` lacks any of ``keys`` (what ``get_actions`` returned)."""
        missing = [k for k in keys if k not in extras]
        if missing:
            raise RLGraphError(f"{self.agent.name}: a step needs the extras {missing} that get_actions(..., "
                               f"explore=True, return_extras=True) returned; got {sorted(extras)}.")

    def _versions(self, states):
        return np.full(batch_size_of(states), self.weights_version, np.int64)


def _zero_rows(x, rows):
    x = np.array(x, copy=True)
    x[rows] = 0
    return x
