"""The acting role of DQN-family agents."""
import numpy as np

from rlgraph.agents.actor import Actor
from rlgraph.agents.agent import batch_size_of
from rlgraph.utils.errors import RLGraphSpecError


#: The weights version of a transition the agent did not act on.
NOT_ACTED = -1


class DQNActor(Actor):
    """Epsilon-greedy acting of DQN: the configured epsilon schedule, fixed epsilons per row, or the epsilons a
    call passes.

    Rows for ``NStepBuilder``: states, actions, rewards, next states, terminals, truncations and the weights
    version that acted. Transitions the agent did not act on (demonstrations, another policy's data) are observed
    without extras: their version is ``NOT_ACTED`` and they count in no policy-lag figure.

    Args:
        executor, name: See ``Actor``.
        schedule_timesteps: Env steps over which the epsilon schedule runs.
    """

    steps_without_extras = True

    def __init__(self, executor, name="DQNActor", schedule_timesteps=None):
        super().__init__(executor, name, schedule_timesteps=schedule_timesteps)
        self.epsilons = None

    @classmethod
    def settings_of(cls, agent):
        return dict(super().settings_of(agent), schedule_timesteps=agent.schedule_timesteps)

    def set_epsilons(self, epsilons):
        """Fixes one exploration epsilon per environment row (a setting; None returns to the schedule)."""
        self.epsilons = None if epsilons is None else np.asarray(epsilons, np.float32)

    def get_actions(self, states, explore=True, internal_states=None, epsilons=None, timesteps=None):
        if not explore:
            actions = self.executor.execute("get_greedy_actions", states)
        else:
            if epsilons is None:
                epsilons = self.row_epsilons(batch_size_of(states))
            else:
                epsilons = self._checked_epsilons(epsilons, batch_size_of(states))
            if epsilons is not None:
                actions = self.executor.execute("get_actions_with_epsilon", states, epsilons)
            else:
                actions = self.executor.execute("get_actions", states, self.time_percentage(timesteps))
        return actions, dict(weights_version=self._versions(states))

    def row_epsilons(self, num_rows):
        """The epsilons per row (None: the schedule)."""
        return None if self.epsilons is None else self._checked_epsilons(self.epsilons, num_rows)

    def _checked_epsilons(self, epsilons, num_rows):
        """``epsilons`` as float32, one per row (an ``RLGraphSpecError`` if their number differs)."""
        epsilons = np.asarray(epsilons, np.float32)
        if len(epsilons) != num_rows:
            raise RLGraphSpecError(f"{self.name}: {len(epsilons)} actor epsilons for a batch of {num_rows} states.")
        return epsilons

    def make_step(self, states, actions, rewards, next_states, terminals, truncations, extras):
        versions = extras.get("weights_version")
        if versions is None:
            versions = np.full(len(terminals), NOT_ACTED, np.int64)
        self.timesteps += len(terminals)
        return dict(states=states, actions=actions, rewards=rewards, next_states=next_states, terminals=terminals,
                    truncations=truncations, weights_version=versions)
