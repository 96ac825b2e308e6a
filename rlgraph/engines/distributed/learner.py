"""One learner of a distributed run: its own environments and agent, one set of weights with the others.

Every learner process (rank 0 in the launching process, the others in their own processes, here or on other
machines) joins the learner group (``rlgraph.executors.process_group``) before it builds its agent, then
builds a ``VectorWorker`` over its own environments with an agent whose update methods all-reduce their
gradients (the ``distributed_sync`` device strategy). Ranks above 0 follow rank 0's commands over the
control channel (``serve``).
"""
import logging
import os

from rlgraph.engines.distributed.control import connect
from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphError, RLGraphLearnerGroupError, RLGraphSpecError
from rlgraph.utils.run_state import decode_tree, encode_tree

logger = logging.getLogger(__name__)

def learner_env_kwargs(env_kwargs, spec, rank, seed):
    """The ``VectorEnv`` keywords of learner ``rank``: ``envs_per_learner`` environments (default: the
    config's ``num_envs`` divided over the learners, so that the learners' union is the local run's batch)
    seeded ``seed + 1000 * rank``."""
    num_envs = spec.envs_per_learner or max(1, int(env_kwargs.get("num_envs", 1)) // spec.num_learners)
    return dict(env_kwargs, num_envs=num_envs, seed=int(seed) + 1000 * rank)


def learner_strategy(config):
    """The ``distributed_sync`` device strategy of a config's learners (its ``multi_device_sync`` devices
    become each learner's towers)."""
    execution = config.get("execution_spec") or {}
    devices = execution.get("devices") if execution.get("device_strategy") == "multi_device_sync" else None
    return {"type": "distributed_sync", "devices": devices}


def build_learner(config, env_kwargs, backend, spec, rank, seed, checkpoint_replay=True):
    """``(VectorWorker, agent)`` of learner ``rank`` (after the process joined the learner group);
    ``checkpoint_replay``: its run state holds the replay memory's contents."""
    from rlgraph.agents import Agent
    from rlgraph.environments import VectorEnv
    from rlgraph.workers import VectorWorker
    kwargs = learner_env_kwargs(env_kwargs, spec, rank, seed)
    try:
        env = VectorEnv(**kwargs)
    except TypeError as e:
        raise RLGraphSpecError(f"environment_spec: {e}") from None
    agent = Agent.from_spec(config, state_space=env.state_space, action_space=env.action_space, backend=backend,
                            seed=int(seed) + rank, device_strategy=learner_strategy(config))
    return VectorWorker(agent, env, checkpoint_replay=checkpoint_replay), agent


def encode_state(state):
    """A run state as a control message: ``(JSON-able tree, arrays)`` (``rlgraph.utils.run_state``)."""
    arrays = {}
    return encode_tree(state, arrays), arrays


def decode_state(tree, arrays):
    """The run state of a control message made by ``encode_state``."""
    try:
        return decode_tree(tree, arrays or {})
    except (KeyError, TypeError, ValueError, RLGraphCheckpointError) as e:
        raise RLGraphLearnerGroupError(f"a learner's run state arrived malformed: {e}.") from None


def serve(config, env_kwargs, backend, spec, rank, seed, control_address, addresses):
    """The life of learner ``rank`` > 0: joins rank 0's control channel and the learner group, builds its
    worker, then runs rank 0's commands until told to stop (or rank 0 is gone).

    Commands (JSON headers): ``init`` (``checkpoint_replay``: whether its run state holds the replay's
    contents) first, then ``run`` (``steps``: environment steps of this learner) -> its ``env_steps``,
    ``episodes``, ``updates``; ``set_weights`` (all variables as arrays); ``get_state`` -> its run state;
    ``set_state`` (a run state); ``stop``.
    """
    from rlgraph.executors.process_group import check_group_backend, destroy_process_group, init_process_group
    check_group_backend(backend)  # (JAX: refused where JAX ran already, before it joins anything.)
    host, port = control_address.rsplit(":", 1)
    channel = connect(host, int(port), spec.learner_timeout_s, f"learner 0's control channel")
    channel.send({"cmd": "hello", "rank": rank, "pid": os.getpid()})
    header, _ = channel.recv(spec.learner_timeout_s)
    if header.get("cmd") != "init":
        raise RLGraphLearnerGroupError(f"learner {rank}: rank 0 sent {header.get('cmd')!r} instead of 'init'.")
    init_process_group(backend, rank, spec.num_learners, addresses, spec.learner_timeout_s,
                       all_reduce=spec.all_reduce)
    worker = None
    try:
        worker, agent = build_learner(config, env_kwargs, backend, spec, rank, seed,
                                      checkpoint_replay=bool(header.get("checkpoint_replay", True)))
        channel.send({"cmd": "ready", "rank": rank})
        while True:
            header, arrays = channel.recv(None)
            cmd = header.get("cmd")
            try:
                if cmd == "run":
                    out = worker.run(int(header["steps"]))
                    channel.send({"cmd": "ran", "env_steps": int(out["env_steps"]), "updates": len(out["results"]),
                                  "total_env_steps": int(worker.env_steps),
                                  "episodes": [[float(r), int(n)] for r, n in out["episodes"]]})
                elif cmd == "set_weights":
                    agent.executor.set_weights(arrays or {})
                    channel.send({"cmd": "ok"})
                elif cmd == "get_state":
                    tree, state_arrays = encode_state(worker.get_run_state())
                    channel.send({"cmd": "state", "state": tree}, state_arrays)
                elif cmd == "set_state":
                    worker.set_run_state(decode_state(header["state"], arrays))
                    channel.send({"cmd": "ok"})
                elif cmd == "stop":
                    channel.send({"cmd": "stopped"})
                    return
                else:
                    raise RLGraphLearnerGroupError(f"learner {rank}: unknown command {cmd!r}.")
            except RLGraphError as e:
                channel.send({"cmd": "error", "error": f"{type(e).__name__}: {e}"})
                raise
    finally:
        channel.close()
        if worker is not None:
            close = getattr(worker.env, "close", None)
            if close is not None:
                close()
        destroy_process_group()
