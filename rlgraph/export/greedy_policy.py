"""What an exported policy computes: the greedy actions of an agent's acting graph and its action scores.

The function runs the components the agent acts with, on backend tensors: the root's preprocessor (the config's
``preprocessing_spec``) and its policy's deterministic action, whose adapter outputs are the Q-values (DQN, Ape-X)
or the action logits (IMPALA, APPO). Recurrent policies (R2D2, LSTM networks) and networks fed previous actions
and rewards are refused: their state would have to be passed in and out explicitly.
"""
from rlgraph.spaces import BoxSpace, IntBox
from rlgraph.utils.errors import RLGraphError


class GreedyPolicy:
    """The greedy policy of a loaded agent, as a function of a batch of observations.

    Args:
        agent: A local agent (its weights loaded).

    Attributes:
        state_space: The (single) observation space; exported models take it as float32, batch first.
        scores_name: The second output's name: "q_values" or "logits".
    """

    def __init__(self, agent):
        root = agent.executor.root
        policy, preprocessor = getattr(root, "policy", None), getattr(root, "preprocessor", None)
        name = type(agent).__name__
        if policy is None or preprocessor is None or not hasattr(policy, "get_deterministic_action"):
            raise RLGraphError(f"export: {name} has no policy component to export.")
        if getattr(agent, "recurrent", False) or policy.is_recurrent:
            raise RLGraphError(f"export: {name}'s policy is recurrent (LSTM state in and out); exporting recurrent "
                               f"policies is not supported yet.")
        if getattr(agent, "prev_action_reward", False):
            raise RLGraphError(f"export: {name}'s network also takes the previous action and reward; exporting it "
                               f"is not supported yet.")
        if not isinstance(agent.state_space, BoxSpace) or not agent.state_space.shape:
            raise RLGraphError(f"export: the observation space {agent.state_space!r} is not a single array; an "
                               f"exported policy takes one float32 array of observations.")
        if not isinstance(agent.action_space, IntBox) or agent.action_space.shape:
            raise RLGraphError(f"export: the action space {agent.action_space!r} is not a single discrete action; "
                               f"only those are exported.")
        self.agent, self.root, self.policy, self.preprocessor = agent, root, policy, preprocessor
        self.state_space = agent.state_space
        self.scores_name = "q_values" if hasattr(root, "get_q_values") else "logits"

    def __call__(self, observations):
        """``(actions, scores)`` of a batch of observations (backend tensors in the observation space's dtype)."""
        out = self.policy.get_deterministic_action(self.preprocessor.preprocess(observations))
        return out["action"], out["adapter_outputs"]
