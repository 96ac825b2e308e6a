"""Runs one agent against a vector of environments in one process."""
import logging

import numpy as np

from rlgraph.utils.errors import RLGraphError

logger = logging.getLogger(__name__)


class VectorWorker:
    """Acts with one batched inference call for all environments per step, observes, and updates.

    Per step: ``agent.get_actions`` on all N observations, ``env.step``, ``agent.observe`` of the N
    transitions (``s' = env.final_obs``, so truncated episodes bootstrap correctly), then ``agent.update()``
    as often as ``agent.ready_to_update()`` says (the agent's update schedule: a ratio of env steps to updates
    for off-policy agents, a full unroll for IMPALA/APPO). Recurrent agents get their internal states back
    from the worker, which zeroes them for environments that started a new episode. Nothing here is
    process-specific, so the distributed engines reuse it.

    Args:
        agent: The agent.
        env: A ``rlgraph.environments.VectorEnv``.
        learn: Call ``agent.update()`` when it is ready (False for pure actors).
    """

    def __init__(self, agent, env, learn=True):
        self.agent = agent
        self.env = env
        self.learn = learn
        self.obs = env.reset()
        self.internal_states = None
        self.env_steps = 0

    def run(self, num_env_steps):
        """Runs at least ``num_env_steps`` environment steps (whole vector steps).

        Returns:
            dict with ``env_steps`` (taken), ``episodes`` (list of (return, length) finished), ``results``
            (the update results).
        """
        agent, env = self.agent, self.env
        results = []
        steps = 0
        while steps < num_env_steps:
            actions, extras = agent.get_actions(self.obs, explore=True, internal_states=self.internal_states,
                                                return_extras=True)
            next_obs, rewards, terminals, truncations = env.step(actions)
            agent.observe(self.obs, actions, rewards, env.final_obs, terminals, truncations, **extras)
            self.internal_states = agent.next_internal_states(extras, rewards, terminals | truncations)
            self.obs = next_obs
            steps += len(rewards)
            if self.learn:
                while agent.ready_to_update():
                    results.append(agent.update())
        self.env_steps += steps
        return dict(env_steps=steps, episodes=env.pop_finished_episodes(), results=results)

    def evaluate(self, env, num_episodes):
        """Returns of the greedy policy over ``num_episodes`` episodes of the vector env ``env``.

        Each environment contributes a fixed number of its first episodes (``num_episodes`` spread evenly over
        the environments), so the estimate is unbiased: taking the first episodes to finish over all
        environments would favour short episodes.
        """
        if isinstance(num_episodes, bool) or not isinstance(num_episodes, (int, np.integer)) or num_episodes < 1:
            raise RLGraphError(f"evaluate: num_episodes must be an int >= 1, got {num_episodes!r}.")
        quota = np.full(env.num_envs, num_episodes // env.num_envs, np.int64)
        quota[:num_episodes % env.num_envs] += 1
        taken = np.zeros(env.num_envs, np.int64)
        returns = [[] for _ in range(env.num_envs)]
        obs = env.reset()
        states = None
        env.pop_finished_episodes()
        limit = int(quota.max()) * 100000
        steps = 0
        while (taken < quota).any():
            actions, extras = self.agent.get_actions(obs, explore=False, internal_states=states, return_extras=True)
            obs, rewards, terminals, truncations = env.step(actions)
            states = self.agent.next_internal_states(extras, rewards, terminals | truncations)
            # One step's finished episodes come in the order of ``finished_env_ids``.
            for env_id, (ret, _) in zip(env.finished_env_ids.tolist(), env.pop_finished_episodes()):
                if taken[env_id] < quota[env_id]:
                    returns[env_id].append(ret)
                    taken[env_id] += 1
            steps += 1
            if steps > limit:
                raise RLGraphError("evaluate: episodes do not end.")
        return [ret for env_returns in returns for ret in env_returns]

    def store(self, path):
        self.agent.store_model(path)

    def load(self, path):
        self.agent.load_model(path)
