"""Hyperparameter sweeps on Ray Tune (``rlgraph tune CONFIG --grid KEY=V1,V2 ...``).

Each trial is an ordinary run of ``runner.train`` (its own logdir with ``config.json``, ``summary.json``,
TensorBoard events and checkpoints) that Ray Tune's ``Tuner`` places on the cluster. A grid key is a dotted config
path as ``--set`` takes it, each value JSON (a plain string where it is not JSON); every combination of the grids
runs ``num_samples`` times, with seeds ``seed, seed + 1, ...``. The trials report the mean return of their last 100
training episodes after every training chunk (a ``MetricLogger`` that calls ``ray.tune.report``), so that ASHA can
stop the weak ones early. The sweep writes ``tune_results.json`` (one row per trial) and ``best_config.json`` (the
config with the best trial's values) into its directory.
"""
import json
import logging
import math
import os
import re
import signal
import time

from rlgraph.training.loggers import DEFAULT_LOGGERS, MetricLogger, check_loggers
from rlgraph.utils.config_overrides import apply_overrides, parse_override
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError

logger = logging.getLogger(__name__)

#: What ASHA compares trials on (reported after every chunk) and what the results are sorted by.
REPORT_METRIC = "mean_return"
TARGET_METRICS = ("eval_mean_return", "final_mean_return")
SCHEDULERS = ("fifo", "asha")
RESULTS_FILE, BEST_CONFIG_FILE = "tune_results.json", "best_config.json"


def parse_grid(texts):
    """``{key: [(text, value), ...]}`` of ``--grid KEY=V1,V2,...`` options, in order.

    Each value is parsed as ``--set`` parses one (JSON, else a plain string); values are split at commas outside
    brackets and quotes, so ``--grid network_spec.0.units=[32],[64]`` and ``--grid x='"a,b"',c`` work.

    Raises:
        RLGraphSpecError: Not ``KEY=V1[,V2...]``, an empty value, a key given twice.
    """
    grid = {}
    for text in texts or ():
        if not isinstance(text, str) or "=" not in text:
            raise RLGraphSpecError(f"--grid {text!r}: expected KEY.PATH=V1,V2,... (e.g. "
                                   f"optimizer_spec.learning_rate=1e-3,3e-4).")
        key, _, raw = text.partition("=")
        key = key.strip()
        values = _split_values(raw)
        if not values or any(not v.strip() for v in values):
            raise RLGraphSpecError(f"--grid {text}: an empty value; write KEY.PATH=V1,V2,...")
        if key in grid:
            raise RLGraphSpecError(f"--grid {key} is given twice; list all its values in one --grid.")
        grid[key] = [(v.strip(), parse_override(f"{key}={v.strip()}")[1]) for v in values]
    return grid


def _split_values(raw):
    values, depth, quote, current = [], 0, None, ""
    for c in raw:
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            values.append(current)
            current = ""
            continue
        current += c
    return values + [current]


def check_sweep(config, sets, grid, env_id=None, backend=None, seed=0, engine=None):
    """Checks a sweep's config and every grid value the way ``rlgraph train --set`` checks an override, before any
    trial starts: the config's sections (``RunConfig.load``), the environment and the agent (built once per grid
    value, on a single environment), so that a bad key gets the same "did you mean" error.

    Raises:
        RLGraphSpecError: The first bad override or value.
    """
    from rlgraph.engines.run_config import RunConfig, make_agent, make_vector_env

    checks = [list(sets)] + [list(sets) + [f"{key}={text}"] for key, values in grid.items() for text, _ in values]
    for overrides in checks:
        run = RunConfig.load(config, engine, env_id=env_id, backend=backend, seed=seed, overrides=overrides)
        env = make_vector_env(dict(run.env_kwargs, num_envs=1))
        try:
            make_agent(run.config, env, backend, seed)
        finally:
            env.close()


class TuneReporter(MetricLogger):
    """Reports a trial's progress to Ray Tune after every training chunk: ``mean_return`` (the mean return of its
    last 100 training episodes), ``env_steps``, ``progress`` (the share of its budget spent, below 1 until the
    trial's final report) and, once evaluated, ``eval_mean_return``. Chunks that finished no episode yet report
    nothing. A trial that the scheduler stops ends inside ``flush`` (Ray Tune's doing).

    Args:
        logdir: The trial's logdir (reported with every result).
        steps, seconds: The trial's budget.
    """

    name = "ray_tune"

    def __init__(self, logdir, steps=None, seconds=None):
        self.logdir, self.steps, self.seconds = logdir, steps, seconds
        self.start = time.monotonic()
        self.latest = {}
        self.fresh = False

    def add_scalar(self, tag, value, step):
        if tag == "episode/mean_return_100":
            self.latest.update(mean_return=float(value), env_steps=int(step))
            self.fresh = True
        elif tag == "evaluation/mean_return":
            self.latest.update(eval_mean_return=float(value), env_steps=int(step))

    def progress(self):
        """The share of the budget spent, at most 0.999 (1 is the final report's)."""
        spent = [self.latest.get("env_steps", 0) / self.steps if self.steps else 0.0,
                 (time.monotonic() - self.start) / self.seconds if self.seconds else 0.0]
        return min(0.999, max(spent))

    def flush(self):
        if self.fresh:
            from ray import tune
            self.fresh = False
            tune.report(dict(self.latest, progress=self.progress(), logdir=self.logdir, finished=False))


def trial_name(params, seed):
    """A trial's directory name: its grid values (last path key = value) and its seed."""
    parts = [f"{key.split('.')[-1]}={json.dumps(value) if not isinstance(value, str) else value}"
             for key, value in params.items()]
    name = "_".join(parts + [f"seed={seed}"])
    return re.sub(r"[^-\w.=,]", "", name.replace(" ", ""))[:180]


def _run_trial(trial, spec):
    """A Ray Tune trial: one ``runner.train`` with the trial's grid values applied, then its final report."""
    from ray import tune

    from rlgraph.engines.runner import train

    params = {key: spec["grid"][key][trial[f"g{i}"]][1] for i, key in enumerate(spec["grid"])}
    texts = [f"{key}={spec['grid'][key][trial[f'g{i}']][0]}" for i, key in enumerate(spec["grid"])]
    logdir = os.path.join(spec["logdir"], trial_name(params, trial["seed"]))
    summary = train(spec["config"], engine=spec["engine"], env_id=spec["env_id"], backend=spec["backend"],
                    steps=spec["steps"], seconds=spec["seconds"], logdir=logdir, seed=trial["seed"], progress=False,
                    overwrite=True, overrides=spec["sets"] + texts, ray_address=spec["ray_address"],
                    loggers=list(spec["loggers"]) + [TuneReporter(logdir, spec["steps"], spec["seconds"])])
    final = summary.get("final_mean_return")
    tune.report({REPORT_METRIC: float("nan") if final is None else final, "env_steps": summary["env_steps"],
                 "final_mean_return": final, "eval_mean_return": summary.get("eval_mean_return"),
                 "progress": 1.0, "logdir": logdir, "finished": True})


class _InterruptWatch:
    """A Ray Tune callback that notes a Ctrl-C: Tune's own handler stops the trials and returns the results so far;
    this one, put in front of it once the run is set up, only remembers that it happened."""

    def __new__(cls):
        from ray.tune import Callback

        class Watch(Callback):
            interrupted = False

            def setup(self, **info):
                import threading
                tune_handler = signal.getsignal(signal.SIGINT)
                if threading.current_thread() is not threading.main_thread() or not callable(tune_handler):
                    return

                def handler(sig, frame):
                    Watch.interrupted = True
                    tune_handler(sig, frame)
                signal.signal(signal.SIGINT, handler)

        return Watch()


def run_sweep(config, grid, logdir=None, sets=(), steps=None, seconds=None, num_samples=1, scheduler=None,
              max_concurrent=None, ray_address=None, engine=None, env_id=None, backend=None, seed=0,
              loggers=None, cpus_per_trial=1, verbose=0, executor=None):
    """Runs a grid sweep on Ray Tune and writes ``tune_results.json`` and ``best_config.json`` into ``logdir``.

    Args:
        config: A config dict or the path of a JSON config.
        grid: ``--grid KEY=V1,V2`` strings, or ``parse_grid``'s dict.
        logdir: The sweep's directory (default ``runs/tune-<config>-<time>``); trial ``i`` runs in a subdirectory
            named after its values (``trial_name``).
        sets: ``--set KEY.PATH=VALUE`` overrides applied to every trial (before its grid values).
        steps, seconds: Each trial's budget (default: the config's ``train_spec``).
        num_samples: Runs of every grid point, with seeds ``seed``, ``seed + 1``, ...
        scheduler: None or "fifo" (every trial runs its budget) or "asha" (trials are stopped early on the mean
            return they report after every chunk).
        max_concurrent: At most this many trials at once (default: as many as the cluster's CPUs hold).
        ray_address: A Ray cluster to join (default: the one this process joined, else a local one).
        engine, env_id, backend: As ``runner.train`` takes them, for every trial (engine None: local;
            ``executor``: the engine's earlier name, accepted too).
        loggers: Each trial's loggers (``--logger``; default TensorBoard).
        cpus_per_trial: CPUs Ray Tune reserves for each trial.
        verbose: Ray Tune's verbosity (0 silent, 1 a status table now and then).

    Returns:
        A dict: ``rows`` (sorted, best first), ``best`` (the best row, or None), ``logdir``, ``results_path``,
        ``best_config_path`` (None without a best row), ``target`` (the metric sorted by), ``interrupted``.

    Raises:
        RLGraphSpecError: A bad grid, override or argument, before Ray starts.
        RLGraphError: Ray Tune is not installed.
    """
    from rlgraph.engines.run_config import engine_name, load_config
    from rlgraph.utils.specifiable import load_json

    engine = engine_name(engine, executor)
    grid = parse_grid(grid) if not isinstance(grid, dict) else grid
    if not grid:
        raise RLGraphSpecError("rlgraph tune needs at least one --grid KEY=V1,V2,...")
    if int(num_samples) < 1:
        raise RLGraphSpecError(f"--num-samples: expected a positive int, got {num_samples}.")
    if scheduler not in (None,) + SCHEDULERS:
        raise RLGraphSpecError(f"--scheduler: expected one of {SCHEDULERS}, got {scheduler!r}.")
    if max_concurrent is not None and int(max_concurrent) < 1:
        raise RLGraphSpecError(f"--max-concurrent: expected a positive int, got {max_concurrent}.")
    if steps is not None and seconds is not None:
        raise RLGraphSpecError("--steps and --seconds exclude each other.")
    loggers = check_loggers(loggers or DEFAULT_LOGGERS)
    try:
        import ray
        from ray import tune
    except ImportError as e:
        raise RLGraphError(f"rlgraph tune needs Ray Tune ({e}): pip install 'rlgraph[ray]'") from None
    name = os.path.splitext(os.path.basename(config))[0] if isinstance(config, str) else config.get("type", "config")
    base = load_json(config, "config") if not isinstance(config, dict) else dict(config)
    check_sweep(base, list(sets), grid, env_id, backend, seed, engine)
    _, train_spec = load_config(base, overrides=list(sets))
    if steps is None and seconds is None:
        steps, seconds = train_spec["steps"], train_spec["seconds"]
        if steps is None and seconds is None:
            steps = 100_000
    logdir = os.path.abspath(logdir or os.path.join("runs", f"tune-{name}-{time.strftime('%Y%m%d-%H%M%S')}"))
    try:
        os.makedirs(logdir, exist_ok=True)
    except OSError as e:
        raise RLGraphSpecError(f"--logdir '{logdir}' cannot be created: {e.strerror or e}.") from None
    spec = dict(config=base, grid=grid, sets=list(sets), steps=steps, seconds=seconds, logdir=logdir,
                engine=engine, env_id=env_id, backend=backend, ray_address=ray_address, loggers=loggers)
    space = {f"g{i}": tune.grid_search(list(range(len(values)))) for i, values in enumerate(grid.values())}
    space["seed"] = tune.grid_search([seed + i for i in range(int(num_samples))])
    owns_ray = not ray.is_initialized()
    if owns_ray:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if ray_address:
            ray.init(address=ray_address, log_to_driver=verbose > 0, configure_logging=False)
        else:
            ray.init(include_dashboard=False, log_to_driver=verbose > 0, configure_logging=False)
    watch = _InterruptWatch()
    # Tune installs its own Ctrl-C handler and leaves it: the caller's goes back when the sweep ends.
    caller_handler = signal.getsignal(signal.SIGINT)
    try:
        trainable = tune.with_resources(tune.with_parameters(_run_trial, spec=spec), {"cpu": cpus_per_trial})
        tuner = tune.Tuner(
            trainable, param_space=space,
            tune_config=tune.TuneConfig(metric=REPORT_METRIC, mode="max", scheduler=_scheduler(scheduler),
                                        max_concurrent_trials=max_concurrent, num_samples=1),
            run_config=tune.RunConfig(name="ray_tune", storage_path=logdir, verbose=verbose, callbacks=[watch],
                                      failure_config=tune.FailureConfig(max_failures=0)))
        results = tuner.fit()
        rows = [_row(result, grid, watch.interrupted, logdir) for result in results]
    finally:
        if owns_ray:
            ray.shutdown()
        if caller_handler is not None and signal.getsignal(signal.SIGINT) is not caller_handler:
            try:
                signal.signal(signal.SIGINT, caller_handler)
            except ValueError:  # Not the main thread: this thread installed nothing either.
                pass
    return _write_results(rows, base, list(sets), grid, logdir, watch.interrupted)


def _scheduler(name):
    """ASHA on the reported mean return over ``progress`` (the share of its budget a trial has spent): rungs at
    1/8, 1/4 and 1/2 of the budget. A trial's final report (after its final evaluation) has progress 1, the
    chunks' reports less, so ASHA never stops a trial that spent its budget before that report."""
    if name != "asha":
        return None
    from ray.tune.schedulers import ASHAScheduler
    return ASHAScheduler(time_attr="progress", max_t=1.0, grace_period=0.125, reduction_factor=2)


def _row(result, grid, interrupted, logdir):
    """A trial's row of ``tune_results.json``."""
    trial = result.config or {}
    metrics = dict(result.metrics or {})
    params = {key: grid[key][trial[f"g{i}"]][1] for i, key in enumerate(grid) if f"g{i}" in trial}
    if metrics.get("finished"):
        status = "finished"
    elif result.error is not None:
        status = "error"
    else:
        status = "interrupted" if interrupted else "stopped"
    final = metrics.get("final_mean_return") if status == "finished" else metrics.get(REPORT_METRIC)
    row = dict(params=params, seed=trial.get("seed"), eval_mean_return=_number(metrics.get("eval_mean_return")),
               final_mean_return=_number(final), env_steps=metrics.get("env_steps"),
               logdir=metrics.get("logdir") or os.path.join(logdir, trial_name(params, trial.get("seed"))),
               status=status, reports=metrics.get("training_iteration", 0))
    if result.error is not None:
        row["error"] = (str(result.error).strip().splitlines() or [type(result.error).__name__])[-1][:300]
    return row


def _number(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def target_of(row):
    """The value a row is ranked by: its final greedy evaluation, else its training mean return (None: neither)."""
    for key in TARGET_METRICS:
        if row.get(key) is not None:
            return row[key]
    return None


def _write_results(rows, base, sets, grid, logdir, interrupted):
    rows = sorted(rows, key=lambda r: (target_of(r) is None, -(target_of(r) or 0.0)))
    has_eval = any(r["eval_mean_return"] is not None for r in rows)
    best = rows[0] if rows and target_of(rows[0]) is not None else None
    results_path = os.path.join(logdir, RESULTS_FILE)
    _write_json(results_path, rows)
    best_path = None
    if best is not None:
        texts = [f"{key}={next(t for t, v in grid[key] if v == best['params'][key])}" for key in best["params"]]
        best_path = os.path.join(logdir, BEST_CONFIG_FILE)
        _write_json(best_path, apply_overrides(base, list(sets) + texts))
    logger.info("Sweep of %d trials written to %s", len(rows), results_path)
    return dict(rows=rows, best=best, logdir=logdir, results_path=results_path, best_config_path=best_path,
                target=TARGET_METRICS[0] if has_eval else TARGET_METRICS[1], interrupted=interrupted)


def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1, default=repr)
    os.replace(tmp, path)


def format_table(rows, keys):
    """The rows as a text table, in their order: rank, grid values, seed, evaluation, training return, steps,
    status, logdir."""
    head = ["#"] + list(keys) + ["seed", "eval_mean_return", "final_mean_return", "env_steps", "status", "logdir"]
    body = []
    for i, row in enumerate(rows):
        values = [json.dumps(row["params"].get(k)) if not isinstance(row["params"].get(k), str)
                  else row["params"][k] for k in keys]
        body.append([str(i + 1)] + values + [str(row["seed"]), _fmt(row["eval_mean_return"]),
                                             _fmt(row["final_mean_return"]), str(row["env_steps"] or "-"),
                                             row["status"], os.path.relpath(row["logdir"]) if row["logdir"] else "-"])
    widths = [max(len(r[c]) for r in [head] + body) for c in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [head] + body)


def _fmt(value):
    return "-" if value is None else f"{value:.1f}"
