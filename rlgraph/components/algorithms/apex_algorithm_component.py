"""The root component of Ape-X agents: DQN whose actors compute the initial priorities of what they store."""
from rlgraph.components.algorithms.dqn_algorithm_component import DQNAlgorithmComponent
from rlgraph.utils.decorators import rlgraph_api
from rlgraph.utils.errors import RLGraphSpecError


class ApexAlgorithmComponent(DQNAlgorithmComponent):
    """DQN with prioritized replay where new transitions enter with their own |TD error| as priority.

    Horgan et al. 2018, "Distributed Prioritized Experience Replay": actors compute the priorities of the
    transitions they send, so that fresh data is not all inserted at the maximum priority.

    API (besides ``DQNAlgorithmComponent``'s):
        insert_records_with_td_priorities(records): Computes |TD error| + epsilon of the (n-step) transitions
            with the current networks and inserts them with these priorities; returns the priorities.
    """

    default_scope = "apex"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.prioritized:
            raise RLGraphSpecError("Ape-X needs a prioritized memory (memory_spec type 'prioritized-replay'), got "
                                   f"{type(self.memory).__name__}.")

    @rlgraph_api
    def insert_records_with_td_priorities(self, records):
        priorities = self._graph_fn_priorities(self.get_td_errors(records))
        self.memory.insert_records_with_priorities(records, priorities)
        return priorities
