"""The acting role of Ape-X: fixed epsilons per environment and actor-computed initial priorities."""
import numpy as np

from rlgraph.agents.dqn_actor import DQNActor
from rlgraph.components.explorations.exploration import apex_epsilon


class ApexActor(DQNActor):
    """Acts with one fixed epsilon per environment row and computes the priorities of what it sends.

    Without ``set_epsilons`` the N rows of a batch are N actors: row i explores with
    ``epsilon_base ** (1 + epsilon_alpha * i / (N - 1))`` (Horgan et al. 2018: 0.4 and 7); engines set the
    epsilons of all environment slots of all actors with ``set_epsilons``. ``process_items`` adds
    "priorities" = |TD error| + epsilon of the n-step transitions under the actor's own network (the
    actor holds no target network; its online network bootstraps, as in the paper's actors that compute
    priorities with their local copy of the network).
    """

    def row_epsilons(self, num_rows):
        if self.epsilons is None or len(self.epsilons) != num_rows:
            agent = self.agent
            self.epsilons = np.atleast_1d(np.asarray(
                apex_epsilon(np.arange(num_rows), num_rows, base=agent.epsilon_base, alpha=agent.epsilon_alpha),
                np.float32))
        return self.epsilons

    def process_items(self, items):
        records = {k: items[k] for k in ("states", "actions", "rewards", "terminals", "next_states")}
        items["priorities"] = self.executor.execute("get_actor_priorities", records)
        return items
