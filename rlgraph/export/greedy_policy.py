"""What an exported policy computes: the greedy actions of an agent's acting graph and its action scores.

The function runs the components the agent acts with, on backend tensors: the root's preprocessor (the config's
``preprocessing_spec``) and its policy's deterministic action, whose adapter outputs are the Q-values (DQN, Ape-X)
or the action logits (IMPALA, APPO). A recurrent policy (R2D2) takes its state explicitly, one array per part
(``state_0``, ``state_1``: the LSTM's ``h`` and ``c``, zeros at an episode's start) and returns the next one
(``next_state_0``, ...). Networks fed the previous action and reward are refused.
"""
import numpy as np

from rlgraph.spaces import BoxSpace, IntBox
from rlgraph.utils.errors import RLGraphError


class GreedyPolicy:
    """The greedy policy of a loaded agent, as a function of a batch of observations.

    Args:
        agent: A local agent (its weights loaded).

    Attributes:
        state_space: The (single) observation space; exported models take it as float32, batch first.
        scores_name: The second output's name: "q_values" or "logits".
        recurrent: Whether the policy takes and returns a recurrent state.
        state_shapes: The shapes (without the batch axis) of the recurrent state's parts (float32).
    """

    def __init__(self, agent):
        root = agent.executor.root
        policy, preprocessor = getattr(root, "policy", None), getattr(root, "preprocessor", None)
        name = type(agent).__name__
        if policy is None or preprocessor is None or not hasattr(policy, "get_deterministic_action"):
            raise RLGraphError(f"export: {name} has no policy component to export.")
        self.recurrent = bool(getattr(agent, "recurrent", False) or policy.is_recurrent)
        self.state_shapes = []
        if self.recurrent:
            actor = getattr(agent, "actor", None)
            if actor is None or not hasattr(actor, "initial_internal_states"):
                raise RLGraphError(f"export: {name}'s policy is recurrent, but its actor cannot tell the shape of "
                                   f"its state.")
            self.state_shapes = [tuple(np.shape(s)[1:]) for s in actor.initial_internal_states(1)]
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

    @property
    def state_names(self):
        """The names of the recurrent state's inputs (``state_i``); its outputs are ``next_state_i``."""
        return [f"state_{i}" for i in range(len(self.state_shapes))]

    def __call__(self, observations, *states):
        """``(actions, scores)`` of a batch of observations (backend tensors in the observation space's dtype);
        for a recurrent policy ``(actions, scores, *next_states)`` from ``states``, one tensor per part."""
        if not self.recurrent:
            out = self.policy.get_deterministic_action(self.preprocessor.preprocess(observations))
            return out["action"], out["adapter_outputs"]
        ops = self.root.ops
        sequences = ops.expand_dims(observations, 1)  # One time step, as the agent acts.
        out = self.policy.get_deterministic_action(self.preprocessor.preprocess(sequences), tuple(states))
        return (ops.squeeze(out["action"], 1), ops.squeeze(out["adapter_outputs"], 1)) + tuple(out["internal_states"])
