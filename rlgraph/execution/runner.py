"""One training run from a config on any engine: what ``rlgraph train`` and the example scripts call."""
import json
import os
import time

import numpy as np

from rlgraph.execution.execution_spec import ExecutionSpec
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.validation import Bool, Int, Number, Optional, check_args, check_spec, json_schema

#: The engines ``train`` runs.
EXECUTORS = ("local", "ray", "central", "distributed")

DEFAULT_TRAIN_SPEC = dict(steps=None, seconds=None, target_return=None, stop_at_target=False, eval_episodes=20,
                          eval_every_steps=None, checkpoint_every_seconds=60.0, chunk_steps=2000,
                          keep_checkpoints=3, checkpoint_replay=True)


#: The most environments a greedy evaluation steps at once: up to this many episodes, each runs in its own
#: environment, so an evaluation lasts one episode's length.
MAX_EVAL_ENVS = 32


#: What each ``train_spec`` key accepts.
TRAIN_SPEC_SCHEMA = dict(steps=Optional(Int(min=1)), seconds=Optional(Number(gt=0)),
                         target_return=Optional(Number()), stop_at_target=Bool(), eval_episodes=Optional(Int(min=0)),
                         eval_every_steps=Optional(Int(min=1)), checkpoint_every_seconds=Number(gt=0),
                         chunk_steps=Int(min=1), keep_checkpoints=Int(min=1), checkpoint_replay=Bool())

#: What each ``train_spec`` key means (the JSON Schema's descriptions).
TRAIN_SPEC_DOCS = dict(
    steps="Environment steps to train for (null: see seconds; both null: 100000).",
    seconds="Wall seconds to train for (null: no time limit).",
    target_return="Mean return over recent episodes at which the run counts as solved (null: none).",
    stop_at_target="Stop the run when target_return is reached.",
    eval_episodes="Greedy evaluation episodes at the end of the run and at each periodic evaluation (0/null: none).",
    eval_every_steps="Environment steps between periodic greedy evaluations (null: none).",
    checkpoint_every_seconds="Wall seconds between checkpoints.",
    chunk_steps="Environment steps per training chunk (logging and stop checks happen between chunks).",
    keep_checkpoints="Checkpoints kept in the logdir (the newest ones).",
    checkpoint_replay="Store the replay memory in checkpoints (exact resume of replay agents).")

#: What ``train``'s own arguments accept (the command line's --steps, --seconds, --seed).
RUN_ARG_RULES = dict(steps=Optional(Int(min=1)), seconds=Optional(Number(gt=0)), seed=Int(min=0))


def train_spec_json_schema():
    """The JSON Schema (draft 2020-12) of a ``train_spec`` section."""
    return json_schema(TRAIN_SPEC_SCHEMA, descriptions=TRAIN_SPEC_DOCS, defaults=DEFAULT_TRAIN_SPEC)


def load_config(path_or_dict, name="config", overrides=None):
    """``(config, train_spec)`` of a training config: an agent spec plus ``environment_spec`` and ``train_spec``
    (a dict or a JSON file), with ``overrides`` (``KEY.PATH=VALUE`` strings, ``rlgraph.utils.config_overrides``)
    applied before the config's checks."""
    from rlgraph.utils.config_overrides import apply_overrides
    from rlgraph.utils.specifiable import load_json
    config = load_json(path_or_dict, name) if not isinstance(path_or_dict, dict) else dict(path_or_dict)
    if overrides and isinstance(config, dict):
        config = apply_overrides(config, overrides)
    if not isinstance(config, dict) or "type" not in config:
        raise RLGraphSpecError(f"{name}: a config is a JSON object whose \"type\" names the agent.")
    if not isinstance(config.get("environment_spec"), dict):
        got = "missing" if "environment_spec" not in config else f"{config['environment_spec']!r}"
        raise RLGraphSpecError(f"{name}: environment_spec must be a JSON object (e.g. {{\"env_spec\": "
                               f"\"CartPole-v1\", \"num_envs\": 8}}), got {got}.")
    train = check_spec(config.get("train_spec", {}), TRAIN_SPEC_SCHEMA, "train_spec", defaults=DEFAULT_TRAIN_SPEC)
    return config, train


def env_kwargs_of(config, env_id=None, seed=0, num_envs=None):
    """The ``VectorEnv`` keywords of a config's ``environment_spec`` (with an overriding id, seed, count)."""
    spec = dict(config["environment_spec"])
    if env_id:
        # A typed environment (e.g. {"type": "atari", "game": "pong"}) takes the id as its game.
        spec["game" if "game" in spec else "env_spec"] = env_id
    if num_envs is not None:
        spec["num_envs"] = num_envs
    spec["seed"] = seed
    return spec


def make_vector_env(env_kwargs):
    """A ``VectorEnv`` from keywords; a wrong keyword is an error naming ``environment_spec``."""
    from rlgraph.environments import VectorEnv
    try:
        return VectorEnv(**env_kwargs)
    except TypeError as e:
        raise RLGraphSpecError(f"environment_spec: {e}") from None
    except RLGraphSpecError as e:
        # An environment's own argument check ("ChainVectorEnv.length: ...") names the config key instead.
        if e.key is not None and e.reason is not None and e.key in env_kwargs:
            raise RLGraphSpecError(f"environment_spec.{e.key}: {e.reason}", key=e.key, reason=e.reason) from None
        raise


def resolve_backend(config, backend=None):
    """The backend a run uses: ``backend``, else the config's ``"backend"``, else the default backend."""
    from rlgraph.utils.backend import get_default_backend, normalize_backend
    return normalize_backend(backend or config.get("backend") or get_default_backend())


def make_agent(config, env, backend=None, seed=0, role="local"):
    from rlgraph.agents import Agent
    return Agent.from_spec(config, state_space=env.state_space, action_space=env.action_space, backend=backend,
                           seed=seed, role=role)


def make_engine(config, executor="local", env_id=None, backend=None, seed=0, num_actors=None, ray_address=None,
                transport=None, num_learners=None, learner_rank=None):
    """``(engine, learner agent, execution spec)`` for a config: the worker a ``Trainer`` drives.

    ``local`` is a ``VectorWorker`` over the config's environments; ``ray`` a Ray engine (``make_ray_engine``)
    with ``num_actors`` actor processes on the cluster at ``ray_address`` (or a local one, or the one this
    process already joined with ``ray.init``); ``central`` the central-inference engine (SEED RL style:
    backend-free actor processes, batched inference here) over ``transport``; ``distributed`` learner 0 of
    ``num_learners`` learner processes (``rlgraph.execution.distributed``). All settings are checked before
    any process starts.
    """
    if executor not in EXECUTORS:
        raise RLGraphSpecError(f"executor: expected one of {EXECUTORS}, got {executor!r}.")
    spec = ExecutionSpec.from_config(config, num_actors=num_actors, ray_address=ray_address, transport=transport,
                                     num_learners=num_learners, learner_rank=learner_rank)
    kwargs = env_kwargs_of(config, env_id, seed)
    if executor == "distributed":
        # The learner group comes first: TensorFlow's must exist before TensorFlow runs anything here.
        from rlgraph.execution.distributed import DistributedEngine
        engine = DistributedEngine(config, kwargs, resolve_backend(config, backend), spec, seed)
        return engine, engine.agent, spec
    if num_learners not in (None, 1) or spec.num_learners != 1:
        raise RLGraphSpecError(f"num_learners {spec.num_learners}: several learners need --executor distributed "
                               f"(the {executor} engine has one learner).")
    if executor == "local":
        env = make_vector_env(kwargs)
        agent = make_agent(config, env, backend, seed)
        if spec.learner_thread:
            from rlgraph.workers import PipelinedWorker
            return PipelinedWorker(agent, make_agent(config, env, backend, seed, role="actor"), env), agent, spec
        from rlgraph.workers import VectorWorker
        return VectorWorker(agent, env), agent, spec
    # The learner's process needs the spaces only: one environment tells them.
    probe = make_vector_env(dict(kwargs, num_envs=1))
    agent = make_agent(config, probe, backend, seed)
    probe.close()
    if executor == "central":
        from rlgraph.execution.central_inference import make_central_engine
        return make_central_engine(config, kwargs, agent, spec, seed), agent, spec
    from rlgraph.execution.ray import make_ray_engine
    return make_ray_engine(config, kwargs, agent, spec, seed), agent, spec


def train(config, executor="local", env_id=None, backend=None, steps=None, seconds=None, logdir=None, seed=0,
          resume=False, num_actors=None, ray_address=None, progress=None, config_name=None, overwrite=False,
          transport=None, num_learners=None, learner_rank=None, overrides=None, loggers=None):
    """Trains an agent from a config on an engine; returns the run's summary (also in ``logdir/summary.json``).

    The effective config (``overrides`` applied, ``env_id`` in its ``environment_spec``, the run's backend) is
    stored as ``logdir/config.json``: ``rlgraph train`` and ``rlgraph export`` read it as they read a config file.

    Args:
        config: A config dict or the path of a JSON config.
        executor: "local" or "ray".
        env_id: An environment id overriding the config's.
        backend: "tf" or "pytorch" (default: the config's, else the default backend).
        steps, seconds: The budget (default: the config's ``train_spec``, else 100k steps).
        logdir: Where logs, checkpoints, ``summary.json`` and the learning curve go (default ``runs/...``).
        seed: The run's seed.
        resume: Continue from the checkpoint in ``logdir``.
        overwrite: Start a new run in a ``logdir`` that holds a checkpoint (refused without it); the old
            checkpoints are replaced as the new run writes its own.
        num_actors, ray_address: Override the config's ``execution_spec`` (Ray engine).
        num_learners, learner_rank: Override the config's ``execution_spec`` (distributed engine). A learner of
            rank > 0 (on another machine) follows learner 0 until it stops and returns its own summary.
        transport: Overrides ``execution_spec.transport`` (central-inference engine: "shm" or "grpc").
        progress: Show a progress bar (default: when stderr is a terminal).
        config_name: A name for the default logdir (default: the config file's name or its type).
        overrides: ``KEY.PATH=VALUE`` strings applied to the config (``--set``; see ``load_config``).
        loggers: Where the scalars go (``--logger``): "tensorboard", "mlflow", "wandb" and/or ``MetricLogger``
            objects (default TensorBoard only); checked before anything is built.
    """
    from rlgraph.training import Trainer
    from rlgraph.training.loggers import check_loggers

    path = config if not isinstance(config, dict) else None
    config, train_spec = load_config(config, overrides=overrides)
    if resume and not logdir:
        raise RLGraphSpecError("resume needs a logdir (--logdir).")
    check_args(None, RUN_ARG_RULES, dict(steps=steps, seconds=seconds, seed=seed))
    loggers = check_loggers(loggers)
    # Before anything runs on TensorFlow (it reads the allocator once); every engine's learner process takes it.
    execution = ExecutionSpec.from_config(config)
    execution.apply_tf_cpu_allocator()
    if executor == "distributed" and (learner_rank or execution.learner_rank):
        return _follow(config, env_id, backend, seed, num_learners, learner_rank)
    if logdir:
        _check_logdir(logdir, resume, overwrite)
    # A local run takes the config's math threads (the other engines share the cores with other processes).
    restore_threads = execution.apply_math_threads(resolve_backend(config, backend)) \
        if executor == "local" else (lambda: None)
    worker = None
    try:
        worker, agent, spec = make_engine(config, executor, env_id, backend, seed, num_actors, ray_address,
                                          transport, num_learners, learner_rank)
        if steps is None and seconds is None:
            steps, seconds = train_spec["steps"], train_spec["seconds"]
            if steps is None and seconds is None:
                steps = 100_000
        name = config_name or (os.path.splitext(os.path.basename(path))[0] if path else config["type"])
        logdir = logdir or os.path.join("runs", f"{name}-{agent.backend}-{time.strftime('%Y%m%d-%H%M%S')}")
        env_spec = config["environment_spec"]
        env_name = env_id or env_spec.get("env_spec") or env_spec.get("game") or env_spec.get("type")
        environment = json.loads(json.dumps({k: v for k, v in env_kwargs_of(config, env_id).items() if k != "seed"},
                                            sort_keys=True, default=repr))
        metadata = dict(agent=config["type"], config=os.path.abspath(path) if path else None, backend=agent.backend,
                        env=str(env_name), seed=seed, executor=executor, config_hash=agent.config_hash(),
                        environment=environment)
        if overrides:
            metadata["overrides"] = list(overrides)
        processes = getattr(worker, "processes", None)
        if processes is not None:
            # Which processes run the engine's parts (monitoring, fault drills).
            os.makedirs(logdir, exist_ok=True)
            tmp = os.path.join(logdir, "processes.json.tmp")
            with open(tmp, "w") as f:
                json.dump(dict(learner=os.getpid(), **processes()), f)
            os.replace(tmp, os.path.join(logdir, "processes.json"))
        eval_env = make_vector_env(env_kwargs_of(config, env_id, seed + 10_000,
                                                 num_envs=min(train_spec["eval_episodes"] or 1, MAX_EVAL_ENVS)))
        evaluator = None
        if train_spec["eval_every_steps"]:
            evaluator = lambda: worker.evaluate(eval_env, train_spec["eval_episodes"])  # noqa: E731
        worker.checkpoint_replay = train_spec["checkpoint_replay"]
        effective = dict(config, environment_spec=environment, backend=agent.backend)
        trainer = Trainer(worker, logdir, max_steps=steps, max_seconds=seconds,
                          target_return=train_spec["target_return"], stop_at_target=train_spec["stop_at_target"],
                          chunk_steps=train_spec["chunk_steps"],
                          checkpoint_every_seconds=train_spec["checkpoint_every_seconds"], resume=resume,
                          metadata=metadata, evaluator=evaluator, eval_every_steps=train_spec["eval_every_steps"],
                          progress=progress, overwrite=overwrite, keep_checkpoints=train_spec["keep_checkpoints"],
                          loggers=loggers, params=effective)
        _write_config(logdir, effective)
        summary = trainer.train()
        if train_spec["eval_episodes"] and not summary["interrupted"]:
            returns = worker.evaluate(eval_env, train_spec["eval_episodes"])
            summary["eval_mean_return"] = round(float(np.mean(returns)), 3)
            summary["eval_episodes"] = len(returns)
            trainer.write_summary(summary)
        summary["logdir"] = logdir
        return summary
    finally:
        close = getattr(worker, "close", None)
        if close is not None:
            close()
        restore_threads()


def _write_config(logdir, config):
    """Writes the run's effective config as ``logdir/config.json`` (atomically)."""
    tmp = os.path.join(logdir, "config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(config, f, indent=1, default=repr)
    os.replace(tmp, os.path.join(logdir, "config.json"))


def _follow(config, env_id, backend, seed, num_learners, learner_rank):
    """A distributed learner of rank > 0: follows learner 0 (which trains, evaluates and checkpoints)."""
    from rlgraph.execution.distributed.learner import serve
    spec = ExecutionSpec.from_config(config, num_learners=num_learners, learner_rank=learner_rank)
    host, port = spec.learner_addresses[0].rsplit(":", 1)
    start = time.time()
    serve(config, env_kwargs_of(config, env_id, seed), resolve_backend(config, backend), spec, spec.learner_rank,
          seed, f"{host}:{int(port) + 1}", spec.learner_addresses)
    return dict(learner_rank=spec.learner_rank, seconds=round(time.time() - start, 3), interrupted=False,
                logdir=None)


def _check_logdir(logdir, resume, overwrite):
    """Refuses, before anything is built, a logdir that cannot hold a run or whose checkpoint would be lost."""
    from rlgraph.training.checkpoint_store import CheckpointStore
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        raise RLGraphSpecError(f"logdir '{logdir}' is a file, not a directory.")
    try:
        os.makedirs(logdir, exist_ok=True)
    except OSError as e:
        raise RLGraphSpecError(f"logdir '{logdir}' cannot be created: {e.strerror or e}.") from None
    if not os.access(logdir, os.W_OK):
        raise RLGraphSpecError(f"logdir '{logdir}' is not writable.")
    if resume and overwrite:
        raise RLGraphSpecError("--resume and --overwrite exclude each other.")
    if not resume and not overwrite and CheckpointStore(logdir).exists():
        raise RLGraphSpecError(f"logdir '{logdir}' already holds a checkpoint of an earlier run: continue it with "
                               f"--resume, or start over in it with --overwrite (or choose another --logdir).")
