"""Central inference (SEED RL, Espeholt et al. 2020): actors only step environments, the learner infers.

Actor processes (``env_actor``) import no deep-learning backend; they reach the inference server in the
learner's process over a transport (``shm_transport``: shared memory on one machine). The server
(``inference_server``) batches inference for all actors, keeps recurrent state per environment and assembles
trajectories; ``central_engine`` ties them into a worker the ``Trainer`` drives; ``buckets`` pads inference calls to
few batch sizes where the backend compiles per input shape (JAX). Importing this package
imports no backend either (the engine's agent imports happen when an engine is built).
"""


def make_central_engine(config, env_kwargs, learner_agent, spec, seed=0):
    """The central-inference engine for a config (see ``CentralInferenceEngine``)."""
    from rlgraph.engines.central_inference.central_engine import CentralInferenceEngine
    return CentralInferenceEngine(config, env_kwargs, learner_agent, spec, seed)


__all__ = ["make_central_engine"]
