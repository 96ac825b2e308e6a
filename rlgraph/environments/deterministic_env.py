"""A tiny deterministic chain environment for fast tests, registered with gymnasium.

Ids: ``"rlgraph/Chain-v0"`` (discrete observations: the position) and ``"rlgraph/ChainFloat-v0"``
(float one-hot observations); both time out after ``max_episode_steps=20`` (override with
``gymnasium.make(id, max_episode_steps=...)``) and have a native vector form
(:class:`~rlgraph.environments.deterministic_vector_env.ChainVectorEnv`).
"""
import gymnasium as gym
import numpy as np

from rlgraph.utils.validation import Int, Number, OneOf, check_args, spec_error

OBSERVATIONS = ("discrete", "float")
#: What the chain's arguments must be (``rlgraph.utils.validation``; ``start`` is also checked against ``length``).
CHAIN_RULES = dict(length=Int(min=2), start=Int(min=0), observation=OneOf(*OBSERVATIONS), goal_reward=Number(),
                   step_reward=Number())


def check_chain_args(length, start, observation, goal_reward=1.0, step_reward=0.0, owner="ChainEnv"):
    """The checked chain arguments (``CHAIN_RULES``) as a dict; raises RLGraphSpecError for an invalid chain."""
    args = check_args(owner, CHAIN_RULES, dict(length=length, start=start, observation=observation,
                                               goal_reward=goal_reward, step_reward=step_reward))
    if args["start"] >= args["length"] - 1:
        raise spec_error(owner, "start", f"expected an int in [0, {args['length'] - 2}] (not the goal at "
                         f"length - 1), got {start!r}.")
    return args


def chain_observation_space(length, observation):
    """Discrete(length) for "discrete", else a one-hot float32 Box of shape (length,)."""
    if observation == "discrete":
        return gym.spaces.Discrete(length)
    return gym.spaces.Box(0.0, 1.0, shape=(length,), dtype=np.float32)


class ChainEnv(gym.Env):
    """States ``0 .. length-1`` in a row; action 1 moves right, 0 moves left (clipped at 0).

    Each episode starts at ``start``. Entering the goal ``length - 1`` gives ``goal_reward`` and terminates;
    every other step gives ``step_reward``. So the optimal (always-right) episode has
    ``optimal_length = length - 1 - start`` steps and return ``optimal_return = goal_reward +
    (optimal_length - 1) * step_reward``.

    Args:
        length: Number of states (>= 2).
        start: Start state (not the goal).
        observation: "discrete" (the position, ``Discrete(length)``) or "float" (one-hot float32 vector).
        goal_reward: Reward for entering the goal.
        step_reward: Reward for every other step.
    """

    metadata = {"render_modes": []}
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = CHAIN_RULES

    def __init__(self, length=5, start=0, observation="discrete", goal_reward=1.0, step_reward=0.0):
        args = check_chain_args(length, start, observation, goal_reward, step_reward)
        self.length, self.start, self.observation = args["length"], args["start"], args["observation"]
        self.goal_reward, self.step_reward = args["goal_reward"], args["step_reward"]
        self.observation_space = chain_observation_space(self.length, observation)
        self.action_space = gym.spaces.Discrete(2)
        self.position = self.start

    @property
    def optimal_length(self):
        """Steps of the optimal episode."""
        return self.length - 1 - self.start

    @property
    def optimal_return(self):
        """Undiscounted return of the optimal episode."""
        return self.goal_reward + (self.optimal_length - 1) * self.step_reward

    def _obs(self):
        if self.observation == "discrete":
            return self.position
        one_hot = np.zeros(self.length, dtype=np.float32)
        one_hot[self.position] = 1.0
        return one_hot

    def reset(self, *, seed=None, options=None):
        """Moves back to ``start``."""
        super().reset(seed=seed)
        self.position = self.start
        return self._obs(), {}

    def step(self, action):
        """Moves right for action 1, left for action 0."""
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        terminated = self.position == self.length - 1
        reward = self.goal_reward if terminated else self.step_reward
        return self._obs(), reward, terminated, False, {}


def register_chain_envs():
    """Registers ``rlgraph/Chain-v0`` and ``rlgraph/ChainFloat-v0`` with gymnasium (once)."""
    for env_id, observation in (("rlgraph/Chain-v0", "discrete"), ("rlgraph/ChainFloat-v0", "float")):
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="rlgraph.environments.deterministic_env:ChainEnv",
                vector_entry_point="rlgraph.environments.deterministic_vector_env:ChainVectorEnv",
                max_episode_steps=20,
                kwargs={"observation": observation},
            )


register_chain_envs()
