"""A training run's config, read and checked once (``RunConfig``), and the helpers that read configs.

A training config is an agent spec plus ``environment_spec``, ``train_spec`` and ``execution_spec``.
``RunConfig.load`` applies the ``--set`` overrides, checks the sections, parses ``execution_spec`` with the
command line's values, computes the environments' keywords and checks the engine's name, all before anything
is built; ``rlgraph.engines.runner`` hands the result down to the engine it builds.
"""
import dataclasses
import json
import os
import time
import typing

from rlgraph.engines.execution_spec import SCHEMA as EXECUTION_SCHEMA
from rlgraph.engines.execution_spec import ExecutionSpec
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.validation import Bool, Int, Number, Optional, check_args, check_spec, json_schema

#: The engines a run trains on (``rlgraph train --engine``).
ENGINES = ("local", "ray", "central", "distributed")

#: The ``execution_spec`` keys a run's keyword arguments may override (``RunConfig.load(**execution)``).
EXECUTION_KEYS = tuple(EXECUTION_SCHEMA)

DEFAULT_TRAIN_SPEC = dict(steps=None, seconds=None, target_return=None, stop_at_target=False, eval_episodes=20,
                          eval_every_steps=None, checkpoint_every_seconds=60.0, chunk_steps=2000,
                          keep_checkpoints=3, checkpoint_replay=True)

#: Environment steps a run trains for when neither its arguments nor its ``train_spec`` give a budget.
DEFAULT_STEPS = 100_000

#: The most environments a greedy evaluation steps at once: up to this many episodes, each runs in its own
#: environment, so an evaluation lasts one episode's length.
MAX_EVAL_ENVS = 32

#: Added to the run's seed for the evaluation environments' seed.
EVAL_SEED_OFFSET = 10_000

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

#: What a run's own arguments accept (the command line's --steps, --seconds, --seed).
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
    _check_network_spec(config)
    train = check_spec(config.get("train_spec", {}), TRAIN_SPEC_SCHEMA, "train_spec", defaults=DEFAULT_TRAIN_SPEC)
    return config, train


#: The explicit form of a network without hidden layers (a policy linear in the observations).
LINEAR_NETWORK_SPEC = [{"type": "activation", "activation": "linear"}]


def _check_network_spec(config):
    """Refuses an empty ``network_spec`` (no layers: the agent would train a linear model without a word); a
    linear model on purpose is written ``LINEAR_NETWORK_SPEC``."""
    spec = config.get("network_spec")
    layers = spec.get("layers") if isinstance(spec, dict) and set(spec) <= {"type", "layers"} else spec
    if isinstance(layers, (list, tuple)) and len(layers) == 0:
        raise RLGraphSpecError(f"network_spec: an empty list of layers would train a linear model of the "
                               f"observations; give the layers, e.g. [{{\"type\": \"dense\", \"units\": 64, "
                               f"\"activation\": \"relu\"}}], or, for a linear model on purpose, "
                               f"{json.dumps(LINEAR_NETWORK_SPEC)}.", key="network_spec")


def check_env_id(env_id, flag="--env"):
    """``env_id`` (an environment id overriding the config's) if it is None or a non-empty string.

    Raises:
        RLGraphSpecError: An empty or blank id, or not a string, naming ``flag``.
    """
    if env_id is not None and (not isinstance(env_id, str) or not env_id.strip()):
        raise RLGraphSpecError(f"{flag}: expected an environment id such as 'CartPole-v1', got {env_id!r}.")
    return env_id


def check_environment_spec(spec, path="environment_spec"):
    """Checks the ``environment_spec`` keys that rlgraph itself reads before the environments are made
    (``step_delay_ms``); the environment checks its own keywords when it is made.

    Raises:
        RLGraphSpecError: ``environment_spec.step_delay_ms`` negative or not a number, naming the key.
    """
    if "step_delay_ms" in spec:
        from rlgraph.environments.vector_env import STEP_DELAY_MS
        from rlgraph.utils.validation import check
        check(path, "step_delay_ms", spec["step_delay_ms"], STEP_DELAY_MS)


def env_kwargs_of(config, env_id=None, seed=0, num_envs=None):
    """The ``VectorEnv`` keywords of a config's ``environment_spec`` (with an overriding id, seed, count).

    Raises:
        RLGraphSpecError: A bad ``step_delay_ms`` (``check_environment_spec``).
    """
    spec = dict(config["environment_spec"])
    check_environment_spec(spec)
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


def make_agent(config, env, backend=None, seed=0, role="both"):
    """The agent of a config for the spaces of ``env`` (``role``: "both" learns and acts, "actor" only acts)."""
    from rlgraph.agents import Agent
    return Agent.from_spec(config, state_space=env.state_space, action_space=env.action_space, backend=backend,
                           seed=seed, role=role)


def engine_name(engine=None, executor=None):
    """The engine a run asks for: ``engine``, else ``executor`` (its earlier name), else "local".

    Raises:
        RLGraphSpecError: Not one of ``ENGINES``, or ``engine`` and ``executor`` name different engines.
    """
    if engine is not None and executor is not None and engine != executor:
        raise RLGraphSpecError(f"engine {engine!r} and executor {executor!r} (the engine's earlier name) disagree; "
                               f"give the engine once.")
    name = engine if engine is not None else executor if executor is not None else "local"
    if name not in ENGINES:
        raise RLGraphSpecError(f"engine: expected one of {ENGINES}, got {name!r}.")
    return name


def _with_env_creator(config, env_creator, env_id):
    """The config with ``env_creator`` as its ``environment_spec.env_spec``.

    Raises:
        RLGraphSpecError: ``env_creator`` is not a creator, or comes with an ``env_id``.
    """
    from rlgraph.environments.creator_env import is_env_creator
    if not is_env_creator(env_creator):
        raise RLGraphSpecError(f"env_creator: expected a callable without arguments returning a gymnasium.Env, got "
                               f"{type(env_creator).__name__} {env_creator!r:.80}.")
    if env_id:
        raise RLGraphSpecError(f"env_creator and env_id {env_id!r} both name the run's environment: give one.")
    environment_spec = dict(config["environment_spec"], env_spec=env_creator)
    environment_spec.pop("type", None)  # A typed environment's keywords (e.g. an Atari game) do not apply.
    environment_spec.pop("game", None)
    return dict(config, environment_spec=environment_spec)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A training run's config, read and checked once (``RunConfig.load``), handed to the engine it runs on.

    Attributes:
        config: The agent spec with its ``environment_spec``, ``train_spec`` and ``execution_spec`` (``--set``
            overrides applied).
        train_spec: The checked ``train_spec`` (every key, defaults filled in).
        execution: The ``ExecutionSpec``: the config's ``execution_spec`` with the command line's values.
        env_kwargs: The ``VectorEnv`` keywords of the run's environments (``env_id`` and ``seed`` applied).
        engine: The engine's name (one of ``ENGINES``).
        env_id: The environment id given instead of the config's (None: the config's).
        backend: The backend asked for (None: the config's, else the default; see ``resolved_backend``).
        seed: The run's seed.
        steps, seconds: The budget (``steps`` defaults to the config's, else ``DEFAULT_STEPS``).
        path: The config file's path (None: given as a dict).
        overrides: The ``--set`` overrides applied.
    """

    config: dict
    train_spec: dict
    execution: ExecutionSpec
    env_kwargs: dict
    engine: str = "local"
    env_id: typing.Optional[str] = None
    backend: typing.Optional[str] = None
    seed: int = 0
    steps: typing.Optional[int] = DEFAULT_STEPS
    seconds: typing.Optional[float] = None
    path: typing.Optional[str] = None
    overrides: tuple = ()

    @classmethod
    def load(cls, config, engine=None, env_id=None, backend=None, seed=0, steps=None, seconds=None, overrides=None,
             name="config", env_creator=None, **execution):
        """Reads and checks a run's config.

        Args:
            config: A config dict or the path of a JSON config.
            engine: One of ``ENGINES`` (default "local"); ``executor=`` is accepted as its earlier name.
            env_id, backend, seed: See the attributes.
            steps, seconds: The budget (both None: the config's ``train_spec``, else ``DEFAULT_STEPS``).
            overrides: ``KEY.PATH=VALUE`` strings applied to the config (``load_config``).
            name: The config's name in error messages.
            env_creator: A callable returning a ``gymnasium.Env``: it becomes the config's
                ``environment_spec.env_spec`` (not with ``env_id``).
            **execution: ``execution_spec`` values overriding the config's (None leaves the config's), e.g.
                ``num_actors``, ``ray_address``, ``transport``, ``num_learners``, ``learner_rank``.

        Raises:
            RLGraphSpecError: A bad config section, argument or engine name, naming it.
        """
        engine = engine_name(engine, execution.pop("executor", None))
        unknown = sorted(set(execution) - set(EXECUTION_KEYS))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}: neither an argument of the run "
                            f"nor an execution_spec key ({', '.join(EXECUTION_KEYS)}).")
        path = config if not isinstance(config, dict) else None
        check_env_id(env_id, "env_id (--env)")
        config, train_spec = load_config(config, name, overrides)
        if env_creator is not None:
            config = _with_env_creator(config, env_creator, env_id)
        check_args(None, RUN_ARG_RULES, dict(steps=steps, seconds=seconds, seed=seed))
        spec = ExecutionSpec.from_config(config, **execution)
        if engine != "distributed" and spec.num_learners != 1:
            raise RLGraphSpecError(f"num_learners {spec.num_learners}: several learners need --engine distributed "
                                   f"(the {engine} engine has one learner).")
        if engine == "ray" and spec.ray_address:
            # A cluster that does not answer is refused now, before the agent is built (the engine checks it
            # again when it joins): one line in seconds, not a hang in ray.init.
            from rlgraph.engines.ray.ray_engine import _check_address
            _check_address(spec.ray_address)
        if steps is None and seconds is None:
            steps, seconds = train_spec["steps"], train_spec["seconds"]
            if steps is None and seconds is None:
                steps = DEFAULT_STEPS
        return cls(config=config, train_spec=train_spec, execution=spec, env_kwargs=env_kwargs_of(config, env_id, seed),
                   engine=engine, env_id=env_id, backend=backend, seed=int(seed), steps=steps, seconds=seconds,
                   path=path, overrides=tuple(overrides or ()))

    @property
    def follows(self):
        """Whether this process is a distributed learner of rank > 0 (it follows learner 0)."""
        return self.engine == "distributed" and self.execution.learner_rank > 0

    def resolved_backend(self):
        """The backend the run uses (``resolve_backend``)."""
        return resolve_backend(self.config, self.backend)

    def environment(self):
        """The run's effective ``environment_spec`` (its environments' keywords but the seed), as JSON values."""
        spec = {k: v for k, v in self.env_kwargs.items() if k != "seed"}
        return json.loads(json.dumps(spec, sort_keys=True, default=repr))

    def eval_env_kwargs(self):
        """The keywords of the greedy evaluations' environments: one per episode, at most ``MAX_EVAL_ENVS``."""
        return dict(self.env_kwargs, seed=self.seed + EVAL_SEED_OFFSET,
                    num_envs=min(self.train_spec["eval_episodes"] or 1, MAX_EVAL_ENVS))

    def effective_config(self, backend):
        """The config as the run uses it (its ``logdir/config.json``): the environment's keywords and the backend."""
        return dict(self.config, environment_spec=self.environment(), backend=backend)

    def metadata(self, agent):
        """What the run's checkpoints and ``summary.json`` record about it (resume compares it)."""
        env_spec = self.config["environment_spec"]
        env_name = self.env_id or env_spec.get("env_spec") or env_spec.get("game") or env_spec.get("type")
        # ("executor": the engine's key in summaries and checkpoints written before the engine had its name.)
        metadata = dict(agent=self.config["type"], config=os.path.abspath(self.path) if self.path else None,
                        backend=agent.backend, env=str(env_name), seed=self.seed, executor=self.engine,
                        config_hash=agent.config_hash(), environment=self.environment())
        if self.overrides:
            metadata["overrides"] = list(self.overrides)
        return metadata

    def trainer_settings(self):
        """The ``Trainer`` keywords of the budget and the ``train_spec``."""
        spec = self.train_spec
        return dict(max_steps=self.steps, max_seconds=self.seconds, target_return=spec["target_return"],
                    stop_at_target=spec["stop_at_target"], chunk_steps=spec["chunk_steps"],
                    checkpoint_every_seconds=spec["checkpoint_every_seconds"],
                    eval_every_steps=spec["eval_every_steps"], keep_checkpoints=spec["keep_checkpoints"])

    def default_logdir(self, backend, name=None):
        """``runs/<name>-<backend>-<time>``; the name defaults to the config file's, else the agent type."""
        name = name or (os.path.splitext(os.path.basename(self.path))[0] if self.path else self.config["type"])
        return os.path.join("runs", f"{name}-{backend}-{time.strftime('%Y%m%d-%H%M%S')}")
