"""The ``rlgraph`` command line: ``rlgraph train CONFIG``, ``rlgraph evaluate CONFIG --checkpoint DIR``,
``rlgraph tune CONFIG --grid KEY=V1,V2``, ``rlgraph plot RUN [RUN ...]``, ``rlgraph export RUN --format F --output
PATH``, ``rlgraph schema [--output FILE]``
(reference: docs/command_line.md)."""
import argparse
import json
import logging
import os
import sys
import time

import numpy as np

logger = logging.getLogger("rlgraph")


#: The ``rlgraph train`` flags that only some engines use: destination -> (flag, the engines that use it).
ENGINE_FLAGS = dict(num_actors=("--num-actors", ("ray", "central")), ray_address=("--ray-address", ("ray",)),
                    transport=("--transport", ("central",)), num_learners=("--num-learners", ("distributed",)),
                    learner_rank=("--learner-rank", ("distributed",)))


def _check_engine_flags(args):
    """Refuses a flag that the run's engine would ignore, naming the flag and the engines that use it."""
    from rlgraph.utils.errors import RLGraphSpecError
    for dest, (flag, engines) in ENGINE_FLAGS.items():
        value = getattr(args, dest, None)
        if value is not None and args.engine not in engines:
            users = " and ".join(engines) + (" engines use" if len(engines) > 1 else " engine uses")
            raise RLGraphSpecError(f"{flag} {value}: only the {users} it, and this run's engine is {args.engine} "
                                   f"(add --engine {engines[0]}, or leave {flag} out).")


def _check_resume(logdir):
    """``--resume`` needs a logdir that exists and holds a checkpoint: checked before anything is imported or
    built (and before the run would create the logdir)."""
    from rlgraph.training.checkpoint_store import CheckpointStore
    from rlgraph.utils.errors import RLGraphError
    if not os.path.isdir(logdir):
        raise RLGraphError(f"--resume: logdir '{logdir}' does not exist, so there is nothing to resume (leave "
                           f"--resume out to start a new run there).")
    if not CheckpointStore(logdir).exists():
        raise RLGraphError(f"--resume: no checkpoint in '{logdir}'.")


def _remove_if_empty(path):
    """Removes the directory ``path`` if it is empty (a logdir a refused run created); keeps it otherwise."""
    try:
        os.rmdir(path)
    except OSError:
        pass


def _say_stopping(line):
    print(f"rlgraph train: {line}", file=sys.stderr)


def _handled_interrupt(code=130):
    """Tells CPython that the interrupt was handled and returns ``code``. A ``KeyboardInterrupt`` raised inside
    code run by C (``PyRun_*``: some extension modules' start-up) sets CPython's flag
    ``_Py_UnhandledKeyboardInterrupt`` even where Python code catches it, and CPython then ends the process by
    SIGINT (status -2) instead of ``code``."""
    try:
        import ctypes
        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (ImportError, ValueError, AttributeError, OSError):
        pass
    return code


def _train(args):
    """``rlgraph train``: SIGINT (Ctrl-C), SIGTERM and SIGHUP each stop the run the same way
    (``rlgraph.training.stop_signals``): a checkpoint of one moment, the summary, one line on stderr saying what
    was kept, exit status 128 + the signal's number (130, 143, 129)."""
    from rlgraph.training import stop_signals
    # (Run as the program itself, the process ends right after: a repeated signal must not end it by the signal.)
    with stop_signals.handling_stop_signals(say=_say_stopping, then_ignore=args.as_program):
        try:
            code = _run_train(args)
        except KeyboardInterrupt as e:
            # (A RunInterrupted says what was kept; another came before the run started.)
            from rlgraph.engines.runner import RunInterrupted
            name = stop_signals.signal_name(stop_signals.received())
            by = f" by {name}" if name and name != "SIGINT" else ""
            line = str(e) if isinstance(e, RunInterrupted) else \
                f"Interrupted{by} before the run started; nothing was written."
            print(f"rlgraph train: {line}", file=sys.stderr)
            return _handled_interrupt(stop_signals.exit_status(stop_signals.received()))
        return _handled_interrupt(code) if code else code


def _run_train(args):
    from rlgraph.engines.run_config import check_env_id
    check_env_id(args.env)
    _check_engine_flags(args)
    if args.resume:
        _check_resume(args.logdir)
    created = bool(args.logdir) and not os.path.lexists(args.logdir)
    from rlgraph.engines.runner import interrupted_message, train
    try:
        summary = train(args.config, engine=args.engine, env_id=args.env, backend=args.backend, steps=args.steps,
                        seconds=args.seconds, logdir=args.logdir, seed=args.seed, resume=args.resume,
                        overwrite=args.overwrite,
                        num_actors=args.num_actors, ray_address=args.ray_address, transport=args.transport,
                        num_learners=args.num_learners, learner_rank=args.learner_rank, overrides=args.overrides,
                        loggers=args.loggers, progress=args.progress)
    except BaseException:
        if created:  # A run refused (or stopped) before it wrote anything leaves no empty logdir behind.
            _remove_if_empty(args.logdir)
        raise
    logdir = summary.pop("logdir")
    if summary["interrupted"]:
        # Everything is stopped and the checkpoint written: one line says what was kept.
        print(json.dumps(summary, indent=1))
        line = interrupted_message(summary.get("interrupted_during") or "training", summary["env_steps"], logdir,
                                   summary.get("interrupted_by"))
        print(f"rlgraph train: {line}", file=sys.stderr)
        from rlgraph.training.stop_signals import exit_status, received
        return exit_status(received())
    print(json.dumps(summary, indent=1))
    if logdir:
        print(f"Logs, checkpoint, summary.json and learning_curve.png in {logdir}")
    trackers = summary.get("trackers", {})
    if "mlflow" in trackers:
        print(f"MLflow run {trackers['mlflow']['run_id']} at {trackers['mlflow']['tracking_uri']}")
    if "wandb" in trackers:
        print(f"W&B run {trackers['wandb']['run_id']} ({trackers['wandb']['mode']}) in {trackers['wandb']['run_dir']}")
    return 0


def _tune(args):
    from rlgraph.engines.tune import format_table, run_sweep
    out = run_sweep(args.config, args.grid, logdir=args.logdir, sets=args.overrides, steps=args.steps,
                    seconds=args.seconds, num_samples=args.num_samples, scheduler=args.scheduler,
                    max_concurrent=args.max_concurrent, ray_address=args.ray_address, engine=args.engine,
                    env_id=args.env, backend=args.backend, seed=args.seed, loggers=args.loggers,
                    cpus_per_trial=args.cpus_per_trial, verbose=2 if args.verbose else 1)
    keys = [g.partition("=")[0].strip() for g in args.grid]
    print(f"Trials sorted by {out['target']}:")
    print(format_table(out["rows"], keys))
    print(f"Results in {out['results_path']}" + (f", best config in {out['best_config_path']}"
                                                  if out["best_config_path"] else " (no trial finished an episode)"))
    return 130 if out["interrupted"] else 0


def _model_path(checkpoint):
    """The model directory of ``--checkpoint`` (a run's logdir: its newest checkpoint that passes its checksums;
    a checkpoint; a model); checked before any backend is imported."""
    from rlgraph.training.checkpoint_store import CheckpointStore
    from rlgraph.utils.errors import RLGraphError
    store = CheckpointStore(checkpoint)
    if store.exists():
        found = store.latest()
        if found is None:
            raise RLGraphError(f"--checkpoint '{checkpoint}' holds no complete checkpoint.")
        return os.path.join(found[0], "model")
    if os.path.isdir(os.path.join(checkpoint, "model")):
        return os.path.join(checkpoint, "model")
    if not os.path.isdir(checkpoint):
        raise RLGraphError(f"--checkpoint '{checkpoint}' is not a directory (a run's logdir or a stored model).")
    return checkpoint


def _evaluate(args):
    from rlgraph.engines.run_config import check_env_id, env_kwargs_of, load_config
    from rlgraph.utils.validation import Int, check
    check(None, "--episodes", args.episodes, Int(min=1))
    check_env_id(args.env)
    config, _ = load_config(args.config, overrides=args.overrides)
    path = _model_path(args.checkpoint)
    from rlgraph.engines.runner import make_agent, make_vector_env
    from rlgraph.workers import VectorWorker
    env = make_vector_env(env_kwargs_of(config, args.env, args.seed, num_envs=min(args.episodes, 16)))
    agent = make_agent(config, env, args.backend, args.seed)
    agent.load_model(path)
    returns = VectorWorker(agent, env, learn=False).evaluate(env, args.episodes)
    print(json.dumps(dict(mean_return=float(np.mean(returns)), episodes=len(returns),
                          min_return=float(np.min(returns)), max_return=float(np.max(returns))), indent=1))
    return 0


def _schema(args):
    from rlgraph.engines.config_schema import config_schema
    text = json.dumps(config_schema(), indent=1) + "\n"
    if not args.output or args.output == "-":
        sys.stdout.write(text)
        return 0
    from rlgraph.utils.errors import RLGraphError
    try:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.output)
    except OSError as e:
        raise RLGraphError(f"--output '{args.output}' cannot be written: {e.strerror or e}.") from None
    print(f"JSON Schema of training configs written to {args.output}")
    return 0


def _plot(args):
    from rlgraph.training.comparison_plot import plot_runs
    curves = plot_runs(args.runs, output=args.output, x=args.x, bands=not args.no_bands)
    for c in curves:
        last = f"{c['returns'][-1]:.1f} at {c['steps'][-1]:,.0f} steps ({c['seconds'][-1]:.1f} s)"
        evals = f", last greedy evaluation {c['eval_returns'][-1]:.1f}" if len(c["eval_returns"]) else ""
        band = f" [in band {c['band']}]" if c.get("band") else ""
        print(f"{c['logdir']}: mean return {last}{evals}{band}")
    print(f"Learning curves of {len(curves)} run{'s' if len(curves) != 1 else ''} written to {args.output}")
    return 0


def _names(names):
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _export(args):
    from rlgraph.export import export_policy
    out = export_policy(args.run, args.format, args.output, overwrite=args.overwrite)
    print(f"Greedy policy of {out['agent']} ({out['backend']}, {out['model']}) exported as {out['format']} to "
          f"{out['output']}: input{'s' if len(out['inputs']) > 1 else ''} {_names(out['inputs'])} (float32, batch "
          f"first), outputs {_names(out['outputs'])}")
    return 0


#: The keys of a demo config (``examples/demo_network.json``): required, then optional with their defaults.
DEMO_KEYS = dict(required=("state_space", "network", "memory"), optional=dict(steps=100, batch_size=32))


def _demo_config(path):
    """The demo config at ``path``, or an ``RLGraphError`` naming what is wrong with it."""
    from rlgraph.utils.errors import RLGraphError
    try:
        with open(path) as f:
            config = json.load(f)
    except OSError as e:
        raise RLGraphError(f"demo config '{path}' cannot be read: {e.strerror or e}.") from None
    except json.JSONDecodeError as e:
        raise RLGraphError(f"demo config '{path}' is not JSON: {e}.") from None
    if not isinstance(config, dict):
        raise RLGraphError(f"demo config '{path}': expected a JSON object, got {type(config).__name__}.")
    missing = [k for k in DEMO_KEYS["required"] if k not in config]
    unknown = sorted(set(config) - set(DEMO_KEYS["required"]) - set(DEMO_KEYS["optional"]))
    if missing or unknown:
        what = "an agent's training config (use rlgraph train)" if "type" in config or "environment_spec" in config \
            else "not a demo config"
        raise RLGraphError(f"demo config '{path}' is {what}: " + "; ".join(
            ([f"missing {', '.join(repr(k) for k in missing)}"] if missing else []) +
            ([f"unknown {', '.join(repr(k) for k in unknown)}"] if unknown else [])) +
            f" (a demo config has {', '.join(DEMO_KEYS['required'])} and optionally "
            f"{', '.join(DEMO_KEYS['optional'])}; see examples/demo_network.json).")
    return {**DEMO_KEYS["optional"], **config}


def _demo(args):
    from rlgraph.components import Component, NeuralNetwork, ReplayMemory
    from rlgraph.executors import GraphExecutor
    from rlgraph.spaces import Space
    from rlgraph.utils.backend import backend_available
    from rlgraph.utils.decorators import rlgraph_api

    config = _demo_config(args.config)
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


def _engine_option(command, engines, help_text):
    """``--engine`` (default local), and ``--executor``, its earlier name, still accepted (not in the help)."""
    command.add_argument("--engine", choices=engines, default="local", help=f"{help_text} (default local)")
    command.add_argument("--executor", choices=engines, dest="engine", default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS)


def _version():
    """The installed package's version (setup.py's metadata), else the source tree's ``rlgraph.__version__``."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("rlgraph")
    except PackageNotFoundError:
        from rlgraph import __version__
        return __version__


def main(argv=None):
    # Small networks on few cores run fastest single-threaded; more threads oversubscribe the cores that the
    # environments and the other backend's pools use. Set OMP_NUM_THREADS yourself to change it.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(prog="rlgraph", description="rlgraph command line")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"rlgraph {_version()}",
                        help="print rlgraph's version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    from rlgraph.engines.run_config import ENGINES

    train = sub.add_parser("train", help="train an agent from a JSON config")
    train.add_argument("config", help="e.g. configs/dqn_cartpole.json")
    train.add_argument("--env", default=None, help="environment id overriding the config's")
    train.add_argument("--backend", choices=["tf", "pytorch", "jax"], default=None)
    _engine_option(train, ENGINES, "the engine that runs the training (local: one process, vectorized "
                                   "environments; ray: actor processes on a Ray cluster, the learner here; central: "
                                   "backend-free actor processes, batched inference and learning here; distributed: "
                                   "learner processes with their own environments, gradients all-reduced)")
    train.add_argument("--num-learners", type=int, default=None,
                       help="distributed engine: learner processes (overrides execution_spec.num_learners)")
    train.add_argument("--learner-rank", type=int, default=None,
                       help="distributed engine on several machines: this learner's index in "
                            "execution_spec.learner_addresses (0 trains and writes checkpoints)")
    train.add_argument("--num-actors", type=int, default=None,
                       help="actor processes (overrides execution_spec.num_actors)")
    train.add_argument("--ray-address", default=None,
                       help="Ray cluster HOST:PORT to join (default: start a local one)")
    train.add_argument("--transport", choices=["shm", "grpc"], default=None,
                       help="central engine: how actors reach the inference server (overrides "
                            "execution_spec.transport; default shm)")
    budget = train.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=None, help="environment steps to train for")
    budget.add_argument("--seconds", type=float, default=None, help="wall seconds to train for")
    train.add_argument("--logdir", default=None, help="directory for logs and checkpoints (default runs/...)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--resume", action="store_true", help="continue from the checkpoint in --logdir")
    train.add_argument("--overwrite", action="store_true",
                       help="start a new run in a --logdir that holds an earlier run's checkpoint")
    shown = train.add_mutually_exclusive_group()
    shown.add_argument("--progress", action="store_const", const="bar", dest="progress", default=None,
                       help="show the progress bar even when stderr is not a terminal (default: the bar on a "
                            "terminal, else a one-line status every 30 s)")
    shown.add_argument("--quiet", "-q", action="store_const", const="quiet", dest="progress",
                       help="neither progress bar nor status lines")

    evaluate = sub.add_parser("evaluate", help="mean return of the greedy policy of a checkpoint")
    evaluate.add_argument("config", help="the run's config (its logdir's config.json holds the effective one)")
    evaluate.add_argument("--checkpoint", required=True, help="a run's logdir or a model directory")
    evaluate.add_argument("--episodes", type=int, default=20)
    evaluate.add_argument("--env", default=None)
    evaluate.add_argument("--backend", choices=["tf", "pytorch", "jax"], default=None)
    evaluate.add_argument("--seed", type=int, default=12345)
    tune = sub.add_parser("tune", help="sweep config values on Ray Tune: one rlgraph run per trial")
    tune.add_argument("config", help="e.g. configs/dqn_cartpole.json")
    tune.add_argument("--grid", action="append", required=True, metavar="KEY.PATH=V1,V2",
                      help="values to sweep (repeatable; every combination runs): a dotted path as --set takes it and "
                           "comma-separated JSON values, e.g. --grid optimizer_spec.learning_rate=1e-3,3e-4")
    tune.add_argument("--num-samples", type=int, default=1,
                      help="runs of every grid point, with seeds --seed, --seed + 1, ... (default 1)")
    tune_budget = tune.add_mutually_exclusive_group()
    tune_budget.add_argument("--steps", type=int, default=None, help="environment steps per trial")
    tune_budget.add_argument("--seconds", type=float, default=None, help="wall seconds per trial")
    tune.add_argument("--scheduler", choices=["fifo", "asha"], default="fifo",
                      help="fifo: every trial runs its budget; asha: stop weak trials early on the mean return they "
                           "report after every training chunk")
    tune.add_argument("--max-concurrent", type=int, default=None, help="at most this many trials at once")
    tune.add_argument("--cpus-per-trial", type=float, default=1, help="CPUs Ray Tune reserves per trial (default 1)")
    tune.add_argument("--ray-address", default=None,
                      help="Ray cluster HOST:PORT to run the trials on (default: start a local one)")
    tune.add_argument("--logdir", default=None,
                      help="the sweep's directory: tune_results.json, best_config.json and a logdir per trial "
                           "(default runs/tune-...)")
    # (A trial is one process: the distributed engine's learner group does not fit a trial.)
    _engine_option(tune, tuple(e for e in ENGINES if e != "distributed"), "each trial's engine (as rlgraph train "
                                                                          "--engine)")
    tune.add_argument("--env", default=None, help="environment id overriding the config's")
    tune.add_argument("--backend", choices=["tf", "pytorch", "jax"], default=None)
    tune.add_argument("--seed", type=int, default=0)
    for command in (train, tune):
        command.add_argument("--logger", action="append", dest="loggers", default=None,
                             choices=["tensorboard", "mlflow", "wandb"],
                             help="where the run's scalars and config go (repeatable; default tensorboard): mlflow "
                                  "(MLFLOW_TRACKING_URI, else a file store in the logdir) and wandb (offline without "
                                  "WANDB_API_KEY) need the extras rlgraph[mlflow] / rlgraph[wandb]")
    for command in (train, evaluate, tune):
        command.add_argument("--set", action="append", dest="overrides", default=[], metavar="KEY.PATH=VALUE",
                             help="override a config value (repeatable): a dotted path, list indices allowed, and "
                                  "a JSON value, e.g. --set optimizer_spec.learning_rate=3e-4 --set "
                                  "network_spec.0.units=128 (a value that is not JSON is a string)")

    schema = sub.add_parser("schema", help="print the JSON Schema (draft 2020-12) of training configs, for "
                                           "editors and CI checks")
    schema.add_argument("--output", "-o", default=None, help="write it to this file instead of stdout")

    plot = sub.add_parser("plot", help="overlay the learning curves of runs in one PNG")
    plot.add_argument("runs", nargs="+", metavar="RUN", help="a run's logdir (e.g. runs/appo_cartpole-...)")
    plot.add_argument("--x", choices=["steps", "seconds"], default="steps",
                      help="x axis: environment steps or the runs' training seconds (default steps)")
    plot.add_argument("--output", "-o", default="runs_comparison.png", help="the PNG (default runs_comparison.png)")
    plot.add_argument("--no-bands", action="store_true",
                      help="one line per run also for runs of one config with several seeds (default: their mean "
                           "with a min-max band)")

    export = sub.add_parser("export", help="write a run's greedy policy as a model that loads without rlgraph")
    export.add_argument("run", metavar="RUN_DIR_OR_CHECKPOINT",
                        help="a run's logdir (its newest checkpoint), one of its checkpoints/ckpt-N or a model in it")
    export.add_argument("--format", required=True, choices=["onnx", "torchscript", "saved_model", "jax_export"],
                        help="onnx (PyTorch and TensorFlow runs), torchscript (PyTorch), saved_model (TensorFlow), "
                             "jax_export (JAX)")
    export.add_argument("--output", "-o", required=True,
                        help="the file (a directory for saved_model and jax_export) to write: not inside a run's "
                             "checkpoints or over its files (beside them under a new name is fine)")
    export.add_argument("--overwrite", action="store_true",
                        help="replace an existing --output (a directory only where it holds an export of the same "
                             "format); without it, an existing output is refused")

    demo = sub.add_parser("demo", help="build a small component graph from a JSON config on each backend and run it")
    demo.add_argument("config", help="path to a demo config, e.g. examples/demo_network.json")
    demo.add_argument("--backend", choices=["tf", "pytorch", "jax"], default=None)
    demo.add_argument("--seed", type=int, default=0)

    for command in sub.choices.values():
        # -v after the subcommand too (rlgraph train CONFIG -v); SUPPRESS keeps a -v given before it.
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging")
    args = parser.parse_args(argv)
    args.as_program = argv is None  # (The console script and ``python -m rlgraph.cli``; not a caller's main([...]).)
    from rlgraph.utils.quiet import quiet_libraries
    quiet_libraries(verbose=args.verbose)  # Before any backend or Ray is imported.
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    # A run's status lines (stderr not a terminal, see Trainer's progress) are INFO messages shown by default.
    logging.getLogger("rlgraph.progress").setLevel(logging.INFO)
    from rlgraph.utils.errors import RLGraphError
    if args.command == "train" and args.resume and not args.logdir:
        parser.error("--resume needs --logdir")
    try:
        return {"train": _train, "evaluate": _evaluate, "tune": _tune, "schema": _schema, "plot": _plot,
                "export": _export, "demo": _demo}[args.command](args)
    except RLGraphError as e:
        print(f"rlgraph {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
