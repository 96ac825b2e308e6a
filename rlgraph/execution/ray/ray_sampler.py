"""What runs inside one Ray actor process: an actor-only agent stepping its own vector of environments."""
import os
import time

import numpy as np


class RaySampler:
    """An actor process of the Ray engine: environments, an actor-only agent and a trajectory builder.

    It steps its environments through an ``ActorLoop`` as ``VectorWorker`` does, but sends its items to the
    engine instead of a learner. It never learns: it acts with the weights (and version) the engine hands in
    with a ``sample`` call, and explores by the run's env steps (``timesteps``) that the engine hands in too,
    counted on by its own steps.

    Args:
        index: The actor's index (0..N-1).
        config: The training config (agent keys; run keys are ignored by ``Agent.from_spec``).
        env_kwargs: ``VectorEnv`` keywords (``env_spec``, ``num_envs``, ``seed``, ...).
        backend: "tf" or "pytorch".
        seed: The agent's seed.
        slot_offset: The global index of this actor's first environment among all actors' environments.
        total_slots: All actors' environments together (Ape-X epsilons are spread over them).
        threads: Math threads of this process (``OMP_NUM_THREADS`` unless set).
    """

    def __init__(self, index, config, env_kwargs, backend, seed, slot_offset, total_slots, threads=1):
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        from rlgraph.agents import Agent
        from rlgraph.environments import VectorEnv
        from rlgraph.workers import ActorLoop

        self.index = index
        self.env = VectorEnv(**env_kwargs)
        self.agent = Agent.from_spec(config, state_space=self.env.state_space, action_space=self.env.action_space,
                                     backend=backend, seed=seed, role="actor")
        self.actor = self.agent.actor
        self.actor.place(slot_offset, total_slots)
        self.loop = ActorLoop(self.actor, self.agent.make_trajectory_builder())
        self.obs = self.env.reset()
        #: The run's env steps as the engine last told them, plus this sampler's steps since (the exploration
        #: schedule's clock).
        self.timesteps = 0

    def pid(self):
        """The process id (the fault tests kill it)."""
        return os.getpid()

    def sample(self, num_vector_steps, weights=None, version=None, timesteps=None):
        """Steps all environments ``num_vector_steps`` times and returns what the steps completed.

        Args:
            num_vector_steps: Vector steps to take.
            weights: New weights (a dict; an object ref resolved by Ray) or None to keep the current ones.
            version: The learner version of ``weights``.
            timesteps: The run's total environment steps so far (drives exploration schedules).

        Returns:
            ``(items, stats)``: the list of the builder's items (completed by the actor) and a dict with
            "env_steps", "num_items" (rows, unroll columns or sequences), "episodes" (list of (return,
            length)), "versions" (the weights versions that acted on the items), "seconds" (spent in this
            call), "index", "weights_version". The engine calls it with two object refs for the two, so that
            items can go to a replay shard without passing through the learner's process.
        """
        start = time.perf_counter()
        if weights is not None:
            self.agent.set_weights(weights, version)
        if timesteps is not None:
            self.timesteps = int(timesteps)
        loop, env = self.loop, self.env
        items, versions = [], []
        for _ in range(int(num_vector_steps)):
            actions, extras = loop.act(self.obs, timesteps=self.timesteps)
            next_obs, rewards, terminals, truncations = env.step(actions)
            out = loop.observe(self.obs, actions, rewards, env.final_obs, terminals, truncations, extras)
            self.timesteps += len(rewards)
            if out is not None:
                items.append(out)
            self.obs = next_obs
        for item in items:
            versions.append(np.ravel(_versions_of(item)))
        versions = np.concatenate(versions) if versions else np.zeros(0, np.int64)
        return items, dict(env_steps=int(num_vector_steps) * self.env.num_envs, num_items=int(versions.size),
                           episodes=self.env.pop_finished_episodes(), versions=versions,
                           seconds=time.perf_counter() - start, index=self.index,
                           weights_version=self.actor.weights_version)


def _versions_of(item):
    """One weights version per item of a batch: per n-step row, per unroll column or per sequence (the newest
    version that acted in it)."""
    if "unroll" in item:
        return np.asarray(item["unroll"]["weights_version"]).max(axis=0)
    if "weights_version" in item:
        versions = np.asarray(item["weights_version"])
        return versions.max(axis=1) if versions.ndim > 1 else versions
    return np.zeros(0, np.int64)
