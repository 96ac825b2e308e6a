"""A tiny deterministic chain environment for fast tests, registered with gymnasium.

Ids: ``"rlgraph/Chain-v0"`` (discrete observations: the position) and ``"rlgraph/ChainFloat-v0"``
(float one-hot observations); both time out after ``max_episode_steps=20`` (override with
``gymnasium.make(id, max_episode_steps=...)``) and have a native vector form
(:class:`~rlgraph.environments.deterministic_vector_env.ChainVectorEnv`).
"""
import gymnasium as gym
import numpy as np

from rlgraph.utils.errors import RLGraphSpecError

OBSERVATIONS = ("discrete", "float")


def check_chain_args(length, start, observation):
    """Raises RLGraphSpecError for an invalid chain configuration."""
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 2:
        raise RLGraphSpecError(f"Chain: length must be an int >= 2, got {length!r}.")
    if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or not 0 <= start < length - 1:
        raise RLGraphSpecError(f"Chain: start must be an int in [0, {length - 2}] (not the goal), got {start!r}.")
    if observation not in OBSERVATIONS:
        raise RLGraphSpecError(f"Chain: observation must be one of {OBSERVATIONS}, got {observation!r}.")


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

    def __init__(self, length=5, start=0, observation="discrete", goal_reward=1.0, step_reward=0.0):
        check_chain_args(length, start, observation)
        self.length, self.start, self.observation = int(length), int(start), observation
        self.goal_reward, self.step_reward = float(goal_reward), float(step_reward)
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
