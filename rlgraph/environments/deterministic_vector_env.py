"""Native vector form of the deterministic chain (gymnasium ``vector_entry_point`` of ``rlgraph/Chain-v0``)."""
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from rlgraph.environments.deterministic_env import CHAIN_RULES, chain_observation_space, check_chain_args


class ChainVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` chains (see ``ChainEnv``) stepped as arrays, with same-step auto-reset.

    Finished envs restart at ``start`` in the same step; ``infos["final_obs"]`` holds the batch of pre-reset
    observations and ``infos["_final_obs"]`` the mask of finished envs. Truncation after
    ``max_episode_steps`` follows gymnasium's ``TimeLimit`` (set even when the step also terminates).

    Args:
        num_envs: Number of chains.
        length, start, observation, goal_reward, step_reward: As for ``ChainEnv``.
        max_episode_steps: Time limit (None: no limit).
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}
    #: What the constructor's arguments must be (``rlgraph.utils.validation``), besides ``num_envs`` and
    #: ``max_episode_steps``.
    ARG_RULES = CHAIN_RULES

    def __init__(self, num_envs=1, length=5, start=0, observation="discrete", goal_reward=1.0, step_reward=0.0,
                 max_episode_steps=None):
        args = check_chain_args(length, start, observation, goal_reward, step_reward, owner="ChainVectorEnv")
        self.num_envs = int(num_envs)
        self.length, self.start, self.observation = args["length"], args["start"], args["observation"]
        self.goal_reward, self.step_reward = args["goal_reward"], args["step_reward"]
        self.max_episode_steps = max_episode_steps
        self.single_observation_space = chain_observation_space(self.length, observation)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.positions = np.full(self.num_envs, self.start, dtype=np.int64)
        self.steps = np.zeros(self.num_envs, dtype=np.int64)
        self._eye = np.eye(self.length, dtype=np.float32)

    def get_state(self):
        """The chains' positions and step counts."""
        return dict(positions=self.positions.copy(), steps=self.steps.copy())

    def set_state(self, state):
        """Restores what ``get_state`` returned."""
        positions, steps = np.array(state["positions"], np.int64), np.array(state["steps"], np.int64)
        if positions.shape != (self.num_envs,) or steps.shape != (self.num_envs,):
            raise ValueError(f"positions {positions.shape} and steps {steps.shape} for {self.num_envs} envs")
        self.positions, self.steps = positions, steps

    def _obs(self):
        return self.positions.copy() if self.observation == "discrete" else self._eye[self.positions]

    def reset(self, *, seed=None, options=None):
        """Moves all chains back to ``start``."""
        super().reset(seed=seed)
        self.positions[:] = self.start
        self.steps[:] = 0
        return self._obs(), {}

    def step(self, actions):
        """Moves chain ``i`` right for ``actions[i] == 1``, else left."""
        actions = np.asarray(actions)
        self.positions = np.maximum(self.positions + np.where(actions == 1, 1, -1), 0)
        self.steps += 1
        terminations = self.positions == self.length - 1
        truncations = (np.zeros(self.num_envs, dtype=np.bool_) if self.max_episode_steps is None
                       else self.steps >= self.max_episode_steps)
        rewards = np.where(terminations, self.goal_reward, self.step_reward).astype(np.float32)
        done = terminations | truncations
        infos = {}
        if done.any():
            infos = {"final_obs": self._obs(), "_final_obs": done}
            self.positions[done] = self.start
            self.steps[done] = 0
        return self._obs(), rewards, terminations, truncations, infos
