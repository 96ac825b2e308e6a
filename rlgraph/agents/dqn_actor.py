"""The acting role of DQN-family agents."""
import numpy as np

from rlgraph.agents.actor import Actor
from rlgraph.agents.agent import batch_size_of
from rlgraph.utils.errors import RLGraphSpecError


class DQNActor(Actor):
    """Epsilon-greedy acting of DQN: the configured epsilon schedule, or fixed epsilons per row.

    Rows for ``NStepBuilder``: states, actions, rewards, next states, terminals, truncations and the weights
    version that acted.
    """

    def __init__(self, agent):
        super().__init__(agent)
        self.epsilons = None

    def set_epsilons(self, epsilons):
        """Fixes one exploration epsilon per environment row (Ape-X actors); None returns to the schedule."""
        self.epsilons = None if epsilons is None else np.asarray(epsilons, np.float32)

    def get_actions(self, states, explore=True, internal_states=None):
        if not explore:
            actions = self.executor.execute("get_greedy_actions", states)
        else:
            epsilons = self.row_epsilons(batch_size_of(states))
            if epsilons is not None:
                actions = self.executor.execute("get_actions_with_epsilon", states, epsilons)
            else:
                actions = self.executor.execute("get_actions", states, self.time_percentage)
        return actions, dict(weights_version=self._versions(states))

    def row_epsilons(self, num_rows):
        """The epsilons per row (None: the schedule)."""
        if self.epsilons is not None and len(self.epsilons) != num_rows:
            raise RLGraphSpecError(f"{self.agent.name}: {len(self.epsilons)} actor epsilons for a batch of "
                                   f"{num_rows} states.")
        return self.epsilons

    def make_step(self, states, actions, rewards, next_states, terminals, truncations, extras):
        if "weights_version" not in extras:
            self.require_extras(extras, ("weights_version",))
        self.timesteps += len(terminals)
        return dict(states=states, actions=actions, rewards=rewards, next_states=next_states, terminals=terminals,
                    truncations=truncations, weights_version=extras["weights_version"])
