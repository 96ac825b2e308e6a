"""The Ray engine: actor processes with actor-only agents, sharded replay or unroll queues, one learner.

Only this package imports Ray; nothing below the engines knows it exists.
"""
from rlgraph.engines.ray.ray_engine import RayEngine
from rlgraph.engines.ray.replay_engine import RayReplayEngine
from rlgraph.engines.ray.unroll_engine import RayUnrollEngine
from rlgraph.utils.errors import RLGraphSpecError


def make_ray_engine(config, env_kwargs, learner_agent, spec, seed=0, checkpoint_replay=True):
    """The Ray engine for the learner's kind: sharded replay (DQN, Ape-X, R2D2) or unroll queues (IMPALA, APPO).

    Args: those of ``RemoteActorEngine``.

    Raises:
        RLGraphSpecError: For an agent whose learner neither kind serves (before any actor starts).
    """
    from rlgraph.agents.impala_learner import IMPALALearner
    from rlgraph.agents.replay_learner import ReplayLearner

    learner = learner_agent.learner
    if isinstance(learner, ReplayLearner):
        return RayReplayEngine(config, env_kwargs, learner_agent, spec, seed, checkpoint_replay)
    if isinstance(learner, IMPALALearner):
        return RayUnrollEngine(config, env_kwargs, learner_agent, spec, seed, checkpoint_replay)
    raise RLGraphSpecError(f"--engine ray: agent type {config.get('type')!r} ({type(learner_agent).__name__}) is "
                           f"not supported; the Ray engine runs replay agents (dqn, apex, r2d2) and unroll agents "
                           f"(impala, appo).")


__all__ = ["RayEngine", "RayReplayEngine", "RayUnrollEngine", "make_ray_engine"]
