"""The Ape-X agent (Horgan et al. 2018), run locally with one actor per environment."""
import numpy as np

from rlgraph.agents.agent import batch_size_of
from rlgraph.agents.dqn_agent import DQNAgent
from rlgraph.components.algorithms.apex_algorithm_component import ApexAlgorithmComponent
from rlgraph.components.explorations.exploration import apex_epsilon


class ApexAgent(DQNAgent):
    """DQN with prioritized replay, actor-computed initial priorities and a fixed epsilon per actor.

    Locally, each row of the vector environment is one actor: actor i of N explores with
    ``epsilon_i = epsilon_base ** (1 + epsilon_alpha * i / (N - 1))`` (0.4 and 7 in the paper), and the
    n-step transitions it produces are inserted with priority |TD error| computed by the current networks.
    The distributed engines reuse the same agent, one per actor process, with ``set_actor_epsilons``.

    Args:
        epsilon_base: The base of the per-actor epsilons.
        epsilon_alpha: The exponent's scale.
        **kwargs: See ``DQNAgent`` (``memory_spec`` must be a prioritized replay; ``exploration_spec`` is
            not used by the actors).
    """

    __aliases__ = ("apex", "ape-x")
    algorithm_component_class = ApexAlgorithmComponent

    def __init__(self, state_space, action_space, epsilon_base=0.4, epsilon_alpha=7.0, **kwargs):
        self.epsilon_base = float(epsilon_base)
        self.epsilon_alpha = float(epsilon_alpha)
        super().__init__(state_space, action_space, **kwargs)

    def get_actions(self, states, explore=True, internal_states=None, return_extras=False):
        if explore and self.actor_epsilons is None:
            n = batch_size_of(states)
            self.set_actor_epsilons(apex_epsilon(np.arange(n), n, base=self.epsilon_base, alpha=self.epsilon_alpha))
        return super().get_actions(states, explore, internal_states, return_extras)

    def insert(self, records):
        self.executor.execute("insert_records_with_td_priorities", records)
        self.stored_records += batch_size_of(records["rewards"])
