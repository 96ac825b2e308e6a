"""The root component of Ape-X agents: DQN whose actors compute the initial priorities of what they store."""
from rlgraph.components.algorithms.dqn_algorithm_component import DQNAlgorithmComponent
from rlgraph.utils.decorators import rlgraph_api
from rlgraph.utils.text import with_article
from rlgraph.utils.validation import spec_error


class ApexAlgorithmComponent(DQNAlgorithmComponent):
    """DQN with prioritized replay where new transitions enter with their own |TD error| as priority.

    Horgan et al. 2018, "Distributed Prioritized Experience Replay": actors compute the priorities of the
    transitions they send, so that fresh data is not all inserted at the maximum priority.

    API (besides ``DQNAlgorithmComponent``'s):
        get_actor_priorities(records): |TD error| + epsilon of (n-step) transitions as an actor computes them:
            with the online network only (it bootstraps from ``max_a Q(s', a)``; actors hold no target
            network), so an actor-only build needs neither memory, target network nor optimizer.
        insert_records_with_priorities(records, priorities): Into the prioritized memory with these priorities.
        insert_records_with_actor_priorities(records): ``get_actor_priorities`` and
            ``insert_records_with_priorities`` in one call (an agent whose actor shares the learner's graph:
            the same priorities, one executor call per batch instead of two); returns the priorities.
    """

    default_scope = "apex"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.prioritized:
            raise spec_error("ApexAlgorithmComponent", "memory_spec", "Ape-X needs a prioritized memory (type "
                             f"'prioritized-replay'), got {with_article(type(self.memory).__name__)}.")

    @rlgraph_api
    def get_actor_priorities(self, records):
        states = self.preprocessor.preprocess(records["states"])
        next_states = self.preprocessor.preprocess(records["next_states"])
        q_s = self.policy.get_adapter_outputs(states)["adapter_outputs"]
        q_sp = self.policy.get_adapter_outputs(next_states)["adapter_outputs"]
        _, td_errors = self.loss_function.loss(q_s, records["actions"], records["rewards"], records["terminals"],
                                               q_sp, q_sp, self._graph_fn_ones_like(records["rewards"]))
        return self._graph_fn_priorities(td_errors)

    @rlgraph_api
    def insert_records_with_priorities(self, records, priorities):
        return self.memory.insert_records_with_priorities(records, priorities)

    @rlgraph_api
    def insert_records_with_actor_priorities(self, records):
        priorities = self.get_actor_priorities(records)
        self.memory.insert_records_with_priorities(records, priorities)
        return priorities
