"""The acting role of an agent."""
import numpy as np

from rlgraph.agents.agent import batch_size_of
from rlgraph.utils.errors import RLGraphError


class Actor:
    """Acts for a batch of environments and turns each step into the rows its trajectory builder takes.

    An actor holds no learning state: it acts with the weights it was given (``Agent.set_weights(weights,
    version)``) and stamps that ``weights_version`` on every row, so that a learner anywhere can measure the
    policy lag of what it learns from. Its settings come at construction (``from_agent`` takes them from an
    agent's config); what varies per call (recurrent state, fixed epsilons, the env steps that drive the
    exploration schedule) comes as arguments of ``get_actions``. ``rlgraph.workers.ActorLoop`` drives it::

        actions, extras = actor.get_actions(obs, explore=True, internal_states=states)
        next_obs, rewards, terminals, truncations = env.step(actions)
        step = actor.make_step(obs, actions, rewards, env.final_obs, terminals, truncations, extras)
        items = builder.add(env_ids, step)          # agent.make_trajectory_builder()
        if items is not None: send(actor.process_items(items))
        states = actor.next_internal_states(extras, rewards, terminals | truncations)

    Args:
        executor: The graph executor whose API methods the actor calls.
        name: Named in error messages (the agent's name).
        schedule_timesteps: Env steps over which the exploration schedule runs (None: the actor has none).

    Attributes:
        weights_version: The learner version of the weights the actor acts with: the version it was last given,
            or, for an actor that shares its learner's executor (``share_learner``), the learner's own count
            (then the learner is its one owner, and writes here are ignored).
        timesteps: Environment steps this actor has taken (drives its exploration schedule unless
            ``get_actions`` is given the run's).
    """

    #: The keys of the extras ``get_actions`` returns (``observe`` refuses other keywords).
    extras_keys = ("weights_version",)
    #: Whether ``make_step`` takes steps without extras: transitions the agent did not act on (an off-policy
    #: learner's demonstrations or another policy's data).
    steps_without_extras = False

    def __init__(self, executor, name="Actor", schedule_timesteps=None):
        self.executor = executor
        self.name = name
        self.schedule_timesteps = schedule_timesteps
        self._weights_version = 0
        self._learner = None
        self.timesteps = 0
        # Where this actor's environments sit among all actors' (engines call ``place``).
        self.slot_offset = 0
        self.total_slots = None

    @classmethod
    def from_agent(cls, agent):
        """The actor of ``agent``: its executor, name and the settings of its config this actor class needs."""
        return cls(agent.executor, agent.name, **cls.settings_of(agent))

    @classmethod
    def settings_of(cls, agent):
        """The constructor keywords of this actor class from an agent's config (subclasses add theirs)."""
        return {}

    @property
    def weights_version(self):
        return self._weights_version if self._learner is None else self._learner.weights_version

    @weights_version.setter
    def weights_version(self, version):
        if self._learner is None:
            self._weights_version = int(version)

    def share_learner(self, learner):
        """Acts with the weights of ``learner``, whose executor this actor shares (a local agent): its weights
        version is the learner's."""
        self._learner = learner

    def place(self, slot_offset, total_slots):
        """Tells the actor that its rows are environments ``slot_offset, slot_offset + 1, ...`` of
        ``total_slots`` over all actors of a run (e.g. Ape-X spreads its epsilons over all of them)."""
        self.slot_offset, self.total_slots = int(slot_offset), int(total_slots)

    def slot_ids(self, num_rows):
        """``(global ids of the rows' environments, number of environments over all actors)``."""
        total = self.total_slots if self.total_slots is not None else num_rows
        return self.slot_offset + np.arange(num_rows), max(total, self.slot_offset + num_rows)

    def time_percentage(self, timesteps=None):
        """How far the exploration schedule has run at ``timesteps`` env steps (None: this actor's own): in
        [0, 1]."""
        if self.schedule_timesteps is None:
            raise RLGraphError(f"{self.name}: {type(self).__name__} was built without schedule_timesteps.")
        return min(1.0, (self.timesteps if timesteps is None else timesteps) / self.schedule_timesteps)

    def get_actions(self, states, explore=True, internal_states=None, epsilons=None, timesteps=None):
        """``(actions, extras)`` for a batch of states; extras hold per-row arrays incl. ``weights_version``.

        Args:
            states: One row per environment.
            explore: Explore (sample, epsilon-greedy) or act greedily.
            internal_states: The rows' recurrent state (None: new episodes).
            epsilons: One exploration epsilon per row (epsilon-greedy actors; None: the actor's own, fixed
                per environment slot or from its schedule).
            timesteps: The env steps that drive the exploration schedule (None: this actor's own count).
        """
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

    def process_item_list(self, item_list):
        """Completes the items of many steps at once (``process_items`` of each, in order), for an engine that
        gathers them before they leave (the Ray sampler); an actor may merge them into fewer, larger calls."""
        return [self.process_items(items) for items in item_list]

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
            raise RLGraphError(f"{self.name}: a step needs the extras {missing} that get_actions(..., "
                               f"explore=True, return_extras=True) returned; got {sorted(extras)}.")

    def _versions(self, states):
        return np.full(batch_size_of(states), self.weights_version, np.int64)


def _zero_rows(x, rows):
    x = np.array(x, copy=True)
    x[rows] = 0
    return x
