"""The Ape-X agent (Horgan et al. 2018)."""
from rlgraph.agents.apex_actor import ApexActor
from rlgraph.agents.dqn_agent import DQNAgent
from rlgraph.agents.dqn_learner import RECORD_KEYS, DQNLearner
from rlgraph.agents.agent import batch_size_of
from rlgraph.components.algorithms.apex_algorithm_component import ApexAlgorithmComponent
from rlgraph.spaces import FloatBox
from rlgraph.utils.validation import Number, check_args


class ApexLearner(DQNLearner):
    """``DQNLearner`` whose transitions enter the prioritized replay with the actors' priorities.

    Items with "priorities" (from actor processes) are inserted with them; items without (from an actor that
    shares this learner's graph, ``ApexActor.priorities_in_learner``) get the actor's priorities computed
    and inserted in one executor call (``insert_records_with_actor_priorities``).
    """

    def insert(self, items):
        records = {k: items[k] for k in RECORD_KEYS}
        if "priorities" in items:
            self.executor.execute("insert_records_with_priorities", records, items["priorities"])
        else:
            self.executor.execute("insert_records_with_actor_priorities", records)
        self.replay.count(batch_size_of(items["rewards"]))


class ApexAgent(DQNAgent):
    """DQN with prioritized replay, actor-computed initial priorities and a fixed epsilon per actor.

    Locally, each row of the vector environment is one actor (``ApexActor``); the n-step transitions it
    produces are inserted with the priorities the actor computes (``ApexLearner``; locally, actor and learner
    share one graph, so they are computed within the insert's executor call). Distributed engines run
    ``role="actor"`` agents and place each one's rows among all actors' environments (``Actor.place``), so the
    epsilons spread over every environment of the run.

    Args:
        epsilon_base: The base of the per-actor epsilons.
        epsilon_alpha: The exponent's scale.
        **kwargs: See ``DQNAgent`` (``memory_spec`` must be a prioritized replay; ``exploration_spec`` is
            not used by the actors).
    """

    __aliases__ = ("apex", "ape-x")
    algorithm_class = ApexAlgorithmComponent
    actor_class = ApexActor
    learner_class = ApexLearner
    actor_api_methods = DQNAgent.actor_api_methods + ("get_actor_priorities",)
    #: What the checked constructor arguments accept (besides DQN's).
    ARG_RULES = dict(epsilon_base=Number(min=0.0, max=1.0), epsilon_alpha=Number())

    def __init__(self, state_space, action_space, epsilon_base=0.4, epsilon_alpha=7.0, **kwargs):
        args = check_args(type(self).__name__, ApexAgent.ARG_RULES,
                          dict(epsilon_base=epsilon_base, epsilon_alpha=epsilon_alpha))
        self.epsilon_base, self.epsilon_alpha = args["epsilon_base"], args["epsilon_alpha"]
        super().__init__(state_space, action_space, **kwargs)

    def build_root(self):
        root, spaces = super().build_root()
        return root, dict(spaces, priorities=FloatBox(add_batch_rank=True))
