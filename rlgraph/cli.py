"""The ``rlgraph`` command line: ``rlgraph train CONFIG``, ``rlgraph evaluate CONFIG --checkpoint DIR``."""
import argparse
import json
import logging
import os
import sys
import time

import numpy as np

logger = logging.getLogger("rlgraph")

DEFAULT_TRAIN_SPEC = dict(steps=None, seconds=None, target_return=None, stop_at_target=False, eval_episodes=20,
                          eval_every_steps=None, checkpoint_every_seconds=60.0, chunk_steps=2000)


def load_config(path):
    """Reads a training config: an agent spec plus ``environment_spec`` and ``train_spec``."""
    from rlgraph.utils.errors import RLGraphSpecError
    from rlgraph.utils.specifiable import load_json
    config = load_json(path, "config")
    if not isinstance(config, dict) or "type" not in config:
        raise RLGraphSpecError(f"{path}: a config is a JSON object whose \"type\" names the agent.")
    if "environment_spec" not in config:
        raise RLGraphSpecError(f"{path}: environment_spec is missing (e.g. {{\"env_spec\": \"CartPole-v1\", "
                               f"\"num_envs\": 8}}).")
    train = dict(DEFAULT_TRAIN_SPEC)
    unknown = set(config.get("train_spec", {})) - set(DEFAULT_TRAIN_SPEC)
    if unknown:
        raise RLGraphSpecError(f"{path}: train_spec has unknown key(s) {sorted(unknown)}; accepted: "
                               f"{', '.join(DEFAULT_TRAIN_SPEC)}.")
    train.update(config.get("train_spec", {}))
    return config, train


def make_env(config, args, seed_offset=0, num_envs=None):
    from rlgraph.environments import VectorEnv
    from rlgraph.utils.errors import RLGraphSpecError
    spec = dict(config["environment_spec"])
    if args.env:
        spec["env_spec"] = args.env
    if num_envs is not None:
        spec["num_envs"] = num_envs
    spec["seed"] = args.seed + seed_offset
    try:
        return VectorEnv(**spec)
    except TypeError as e:
        raise RLGraphSpecError(f"environment_spec: {e}") from None


def make_agent(config, env, args):
    from rlgraph.agents import Agent
    return Agent.from_spec(config, state_space=env.state_space, action_space=env.action_space,
                           backend=args.backend, seed=args.seed)


def _train(args):
    from rlgraph.training import Trainer
    from rlgraph.workers import VectorWorker

    config, train = load_config(args.config)
    env = make_env(config, args)
    agent = make_agent(config, env, args)
    steps = args.steps if args.steps is not None else (None if args.seconds is not None else train["steps"])
    seconds = args.seconds if args.seconds is not None else (None if args.steps is not None else train["seconds"])
    if steps is None and seconds is None:
        steps = 100_000
    name = os.path.splitext(os.path.basename(args.config))[0]
    logdir = args.logdir or os.path.join("runs", f"{name}-{agent.backend}-{time.strftime('%Y%m%d-%H%M%S')}")
    env_id = config["environment_spec"].get("env_spec") if not args.env else args.env
    metadata = dict(agent=config["type"], config=os.path.abspath(args.config), backend=agent.backend,
                    env=str(env_id), seed=args.seed, config_hash=agent.config_hash())
    worker = VectorWorker(agent, env)
    eval_env = make_env(config, args, seed_offset=10_000, num_envs=min(train["eval_episodes"] or 1, 16))
    evaluator = None
    if train["eval_every_steps"]:
        evaluator = lambda: worker.evaluate(eval_env, train["eval_episodes"])  # noqa: E731
    trainer = Trainer(worker, logdir, max_steps=steps, max_seconds=seconds, target_return=train["target_return"],
                      stop_at_target=train["stop_at_target"], chunk_steps=train["chunk_steps"],
                      checkpoint_every_seconds=train["checkpoint_every_seconds"], resume=args.resume,
                      metadata=metadata, evaluator=evaluator, eval_every_steps=train["eval_every_steps"])
    summary = trainer.train()
    if train["eval_episodes"] and not summary["interrupted"]:
        returns = worker.evaluate(eval_env, train["eval_episodes"])
        summary["eval_mean_return"] = round(float(np.mean(returns)), 3)
        summary["eval_episodes"] = len(returns)
        with open(os.path.join(logdir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    print(f"Logs, checkpoint, summary.json and learning_curve.png in {logdir}")
    return 130 if summary["interrupted"] else 0


def _evaluate(args):
    from rlgraph.workers import VectorWorker
    config, train = load_config(args.config)
    env = make_env(config, args, num_envs=min(args.episodes, 16))
    agent = make_agent(config, env, args)
    path = args.checkpoint
    if os.path.isdir(os.path.join(path, "checkpoint", "model")):
        path = os.path.join(path, "checkpoint", "model")
    elif os.path.isdir(os.path.join(path, "model")):
        path = os.path.join(path, "model")
    agent.load_model(path)
    returns = VectorWorker(agent, env, learn=False).evaluate(env, args.episodes)
    print(json.dumps(dict(mean_return=float(np.mean(returns)), episodes=len(returns),
                          min_return=float(np.min(returns)), max_return=float(np.max(returns))), indent=1))
    return 0


def _demo(args):
    from rlgraph.components import Component, NeuralNetwork, ReplayMemory
    from rlgraph.executors import GraphExecutor
    from rlgraph.spaces import Space
    from rlgraph.utils.backend import backend_available
    from rlgraph.utils.decorators import rlgraph_api

    with open(args.config) as f:
        config = json.load(f)
    state_space = Space.from_spec(config["state_space"], _path="state_space")

    class DemoGraph(Component):
        """Stores states in a replay memory and evaluates a network on sampled states."""

        def __init__(self):
            self.network = NeuralNetwork.from_spec(config["network"], _path="network")
            self.memory = ReplayMemory.from_spec(config["memory"], _path="memory")
            super().__init__(self.network, self.memory, scope="demo")

        @rlgraph_api
        def observe(self, states):
            return self.memory.insert_records(states)

        @rlgraph_api
        def sample_and_evaluate(self, num_records):
            return self.network.call(self.memory.get_records(num_records))

        @rlgraph_api
        def evaluate(self, states):
            return self.network.call(states)

    backends = [args.backend] if args.backend else [b for b in ("tf", "pytorch") if backend_available(b)]
    rng = np.random.default_rng(args.seed)
    probe = state_space.with_batch_rank().sample(8, rng=rng)
    outputs = {}
    for backend in backends:
        start = time.perf_counter()
        executor = GraphExecutor.create(backend=backend, root_component=DemoGraph(), seed=args.seed,
                                        input_spaces=dict(states=state_space.with_batch_rank(), num_records=int))
        build = time.perf_counter() - start
        if backend == backends[0]:
            print("Meta graph:\n" + executor.meta_graph.describe())
        start = time.perf_counter()
        executor.execute("observe", state_space.with_batch_rank().sample(config.get("batch_size", 32), rng=rng))
        for _ in range(config.get("steps", 100)):
            executor.execute("observe", state_space.with_batch_rank().sample(16, rng=rng))
            out = executor.execute("sample_and_evaluate", config.get("batch_size", 32))
        run = time.perf_counter() - start
        outputs[backend] = executor.execute("evaluate", probe)
        print(f"[{backend}] built in {build * 1000:.1f} ms; {config.get('steps', 100)} x (observe + sample_and_evaluate)"
              f" in {run * 1000:.1f} ms; last output batch shape {out.shape}")
    if len(outputs) == 2:
        diff = float(np.max(np.abs(outputs["tf"] - outputs["pytorch"])))
        print(f"Same weights on both backends: max |tf - pytorch| of network outputs = {diff:.2e}")
    return 0


def main(argv=None):
    # Small networks on few cores run fastest single-threaded; more threads oversubscribe the cores that the
    # environments and the other backend's pools use. Set OMP_NUM_THREADS yourself to change it.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(prog="rlgraph", description="rlgraph command line")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train an agent from a JSON config")
    train.add_argument("config", help="e.g. configs/dqn_cartpole.json")
    train.add_argument("--env", default=None, help="environment id overriding the config's")
    train.add_argument("--backend", choices=["tf", "pytorch"], default=None)
    train.add_argument("--executor", choices=["local"], default="local",
                       help="execution engine (local: one process, vectorized environments)")
    budget = train.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=None, help="environment steps to train for")
    budget.add_argument("--seconds", type=float, default=None, help="wall seconds to train for")
    train.add_argument("--logdir", default=None, help="directory for logs and checkpoints (default runs/...)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--resume", action="store_true", help="continue from the checkpoint in --logdir")

    evaluate = sub.add_parser("evaluate", help="mean return of the greedy policy of a checkpoint")
    evaluate.add_argument("config")
    evaluate.add_argument("--checkpoint", required=True, help="a run's logdir or a model directory")
    evaluate.add_argument("--episodes", type=int, default=20)
    evaluate.add_argument("--env", default=None)
    evaluate.add_argument("--backend", choices=["tf", "pytorch"], default=None)
    evaluate.add_argument("--seed", type=int, default=12345)

    demo = sub.add_parser("demo", help="build a small component graph from a JSON config on each backend and run it")
    demo.add_argument("config", help="path to a demo config, e.g. configs/demo_network.json")
    demo.add_argument("--backend", choices=["tf", "pytorch"], default=None)
    demo.add_argument("--seed", type=int, default=0)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    from rlgraph.utils.errors import RLGraphError
    if args.command == "train" and args.resume and not args.logdir:
        parser.error("--resume needs --logdir")
    try:
        return {"train": _train, "evaluate": _evaluate, "demo": _demo}[args.command](args)
    except RLGraphError as e:
        print(f"rlgraph {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
