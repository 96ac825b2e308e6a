"""The acting role of R2D2."""
import numpy as np
import optree

from rlgraph.agents.actor import Actor
from rlgraph.agents.agent import batch_size_of
from rlgraph.components.algorithms.r2d2_algorithm_component import STATE_KEY
from rlgraph.components.explorations.exploration import apex_epsilon
from rlgraph.utils.errors import RLGraphSpecError


class R2D2Actor(Actor):
    """Epsilon-greedy acting with an LSTM Q-network, one recurrent state per environment.

    Extras of ``get_actions``: "internal_states" (the LSTM state after the step), "step_internal_states" (the
    state acted from, stored with each step so that a sequence carries its initial state) and
    "weights_version". ``make_step`` returns the step for ``SequenceBuilder``: the step rows, "dones" (the
    episode ends) and, for time-limit truncations, "bootstrap_rows" and "bootstrap_step": the final observation
    as an extra step to bootstrap from (with the LSTM state after the step).

    Epsilons: fixed per environment row (Ape-X's ``0.4 ** (1 + 7 i / (N - 1))`` with ``actor_epsilons="apex"``,
    or a list), fixed by ``set_epsilons``, passed per call (``get_actions(..., epsilons=...)``), or the
    schedule when ``actor_epsilons`` is None.

    Args:
        executor, name: See ``Actor``.
        schedule_timesteps: Env steps over which the epsilon schedule runs.
        lstm_units: The LSTM's units.
        actor_epsilons: The checked ``R2D2Agent`` setting: None (the schedule), ``{"base", "alpha"}`` (Ape-X
            epsilons over the environment slots) or one epsilon per row.
    """

    extras_keys = ("internal_states", "step_internal_states", "weights_version")

    def __init__(self, executor, name="R2D2Actor", schedule_timesteps=None, lstm_units=None, actor_epsilons=None):
        super().__init__(executor, name, schedule_timesteps=schedule_timesteps)
        self.lstm_units = lstm_units
        self.actor_epsilons = actor_epsilons
        self.epsilons = None
        self._apex_epsilons = None

    @classmethod
    def settings_of(cls, agent):
        return dict(super().settings_of(agent), schedule_timesteps=agent.schedule_timesteps,
                    lstm_units=agent.lstm_units, actor_epsilons=agent.actor_epsilons_spec)

    def set_epsilons(self, epsilons):
        """Fixes one exploration epsilon per environment row (a setting; None returns to ``actor_epsilons``)."""
        self.epsilons = None if epsilons is None else np.asarray(epsilons, np.float32)

    def initial_internal_states(self, num_envs):
        """Zero LSTM states ``(h, c)`` for ``num_envs`` environments."""
        return zero_lstm_states(num_envs, self.lstm_units)

    def row_epsilons(self, num_envs):
        """One epsilon per env row: ``set_epsilons``' values, else the configured ones (None: the schedule)."""
        epsilons = self.epsilons
        if epsilons is None:
            spec = self.actor_epsilons
            if spec is None:
                return None
            if isinstance(spec, dict):
                if self._apex_epsilons is None or len(self._apex_epsilons) != num_envs:
                    slots, total = self.slot_ids(num_envs)
                    self._apex_epsilons = np.atleast_1d(np.asarray(
                        apex_epsilon(slots, total, base=spec["base"], alpha=spec["alpha"]), np.float32))
                return self._apex_epsilons
            epsilons = spec
        return self._checked_epsilons(epsilons, num_envs)

    def _checked_epsilons(self, epsilons, num_envs):
        if len(epsilons) != num_envs:
            raise RLGraphSpecError(f"{self.name}: {len(epsilons)} actor epsilons for a batch of {num_envs} states.")
        return epsilons

    def get_actions(self, states, explore=True, internal_states=None, epsilons=None, timesteps=None):
        num_envs = batch_size_of(states)
        if internal_states is None:
            internal_states = self.initial_internal_states(num_envs)
        internal_states = tuple(internal_states)
        sequences = optree.tree_map(lambda x: np.asarray(x)[:, None], states)  # [N, 1, ...]: one time step.
        if not explore:
            actions, next_states = self.executor.execute("get_greedy_actions", sequences, internal_states)
        else:
            if epsilons is None:
                epsilons = self.row_epsilons(num_envs)
            else:
                epsilons = self._checked_epsilons(np.asarray(epsilons, np.float32), num_envs)
            if epsilons is not None:
                actions, next_states = self.executor.execute("get_actions_with_epsilon", sequences, internal_states,
                                                             epsilons)
            else:
                actions, next_states = self.executor.execute("get_actions", sequences, internal_states,
                                                             self.time_percentage(timesteps))
        actions = actions[:, 0]
        return actions, dict(internal_states=tuple(next_states), step_internal_states=internal_states,
                             weights_version=self._versions(actions))

    def make_step(self, states, actions, rewards, next_states, terminals, truncations, extras):
        self.require_extras(extras, ("internal_states", "step_internal_states", "weights_version"))
        num_envs = len(terminals)
        self.timesteps += num_envs
        actions = np.asarray(actions)
        step = dict(states=states, actions=actions, rewards=np.asarray(rewards, np.float32), terminals=terminals,
                    bootstrap=np.zeros(num_envs, bool), weights_version=extras["weights_version"])
        step[STATE_KEY] = tuple(extras["step_internal_states"])
        step["dones"] = terminals | truncations
        truncated = np.flatnonzero(truncations & ~terminals)
        if truncated.size:
            # The final observation of a time-limit truncation, as an extra step to bootstrap from.
            k = truncated.size
            bootstrap = dict(states=optree.tree_map(lambda x: np.asarray(x)[truncated], next_states),
                             actions=np.zeros(k, actions.dtype), rewards=np.zeros(k, np.float32),
                             terminals=np.zeros(k, bool), bootstrap=np.ones(k, bool),
                             weights_version=np.asarray(extras["weights_version"])[truncated])
            bootstrap[STATE_KEY] = tuple(np.asarray(s)[truncated] for s in extras["internal_states"])
            step.update(bootstrap_rows=truncated, bootstrap_step=bootstrap)
        return step


def zero_lstm_states(num_envs, units):
    """Zero LSTM states ``(h, c)``, each ``[num_envs, units]`` float32."""
    zeros = np.zeros((num_envs, units), np.float32)
    return zeros, zeros.copy()
