"""The acting role of Ape-X: fixed epsilons per environment and actor-computed initial priorities."""
import numpy as np
import optree

from rlgraph.agents.dqn_actor import DQNActor
from rlgraph.components.explorations.exploration import apex_epsilon


class ApexActor(DQNActor):
    """Acts with one fixed epsilon per environment row and computes the priorities of what it sends.

    Without ``set_epsilons`` the N rows of a batch are N actors: row i explores with
    ``epsilon_base ** (1 + epsilon_alpha * i / (N - 1))`` (Horgan et al. 2018: 0.4 and 7); an engine that
    places the actor among others (``place``) spreads the formula over all environments of all actors (row i is
    environment ``slot_offset + i`` of ``total_slots``). ``process_items`` adds
    "priorities" = |TD error| + epsilon of the n-step transitions under the actor's own network (the
    actor holds no target network; its online network bootstraps, as in the paper's actors that compute
    priorities with their local copy of the network); ``process_item_list`` does so for many steps' items
    in one call.

    An actor that shares its graph with the learner (``priorities_in_learner``, role "both") leaves
    "priorities" out: the learner computes the same priorities in the same executor call as its insert
    (``ApexLearner.insert``), so a vector step costs one call, not two.

    Args:
        executor, name, schedule_timesteps: See ``DQNActor``.
        epsilon_base: The base of the per-environment epsilons.
        epsilon_alpha: The exponent's scale.
        priorities_in_learner: Whether the learner computes this actor's priorities in its insert (actor and
            learner in one graph).
    """

    def __init__(self, executor, name="ApexActor", schedule_timesteps=None, epsilon_base=0.4, epsilon_alpha=7.0,
                 priorities_in_learner=False):
        super().__init__(executor, name, schedule_timesteps=schedule_timesteps)
        self.epsilon_base, self.epsilon_alpha = epsilon_base, epsilon_alpha
        self.priorities_in_learner = bool(priorities_in_learner)

    @classmethod
    def settings_of(cls, agent):
        return dict(super().settings_of(agent), epsilon_base=agent.epsilon_base, epsilon_alpha=agent.epsilon_alpha,
                    priorities_in_learner=agent.role == "both")

    def row_epsilons(self, num_rows):
        if self.epsilons is None or len(self.epsilons) != num_rows:
            slots, total = self.slot_ids(num_rows)
            self.epsilons = np.atleast_1d(np.asarray(
                apex_epsilon(slots, total, base=self.epsilon_base, alpha=self.epsilon_alpha), np.float32))
        return self.epsilons

    def process_items(self, items):
        if self.priorities_in_learner:
            return items
        records = {k: items[k] for k in ("states", "actions", "rewards", "terminals", "next_states")}
        items["priorities"] = self.executor.execute("get_actor_priorities", records)
        return items

    def process_item_list(self, item_list):
        """The items of many steps as one batch of rows with its priorities from one executor call (a call per
        step would spend most of a small network's acting time on calls)."""
        if self.priorities_in_learner or len(item_list) < 2:
            return super().process_item_list(item_list)
        merged = optree.tree_map(lambda *rows: np.concatenate(rows, axis=0), *item_list)
        return [self.process_items(merged)]
