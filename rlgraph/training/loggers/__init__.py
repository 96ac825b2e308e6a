"""Experiment tracking: where a run's scalars and config go (``--logger tensorboard|mlflow|wandb``).

``check_loggers`` checks the names (and that each tracker's package is installed) before anything is built;
``open_loggers`` opens them for a run as one ``LoggerGroup``. MLflow and W&B are imported only when chosen.
"""
import difflib
import importlib.util

from rlgraph.training.loggers.base import LoggerGroup, MetricLogger, flatten_config, metric_name
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError

#: The trackers ``--logger`` names, with the package each needs and the extra that installs it.
LOGGERS = {"tensorboard": ("tensorboardX", None), "mlflow": ("mlflow", "mlflow"), "wandb": ("wandb", "wandb")}
DEFAULT_LOGGERS = ("tensorboard",)

__all__ = ["LOGGERS", "DEFAULT_LOGGERS", "LoggerGroup", "MetricLogger", "check_loggers", "flatten_config",
           "metric_name", "open_loggers"]


def check_loggers(loggers=None):
    """The loggers of a run, checked: names in ``LOGGERS`` (or ``MetricLogger`` objects), once each. TensorBoard
    is always among them: a run's logdir always holds its events (``rlgraph plot`` and resume read them).

    Args:
        loggers: Names and/or ``MetricLogger`` objects added to ``DEFAULT_LOGGERS``.

    Returns:
        A tuple of names and objects, duplicates removed.

    Raises:
        RLGraphSpecError: An unknown name ("did you mean").
        RLGraphError: A tracker whose package is not installed (one line naming the extra that installs it).
    """
    out = []
    for item in DEFAULT_LOGGERS + tuple(loggers or ()):
        if isinstance(item, MetricLogger):
            out.append(item)
            continue
        name = str(item).strip().lower()
        if name not in LOGGERS:
            close = difflib.get_close_matches(name, list(LOGGERS), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise RLGraphSpecError(f"--logger {item}: unknown logger.{hint} Loggers: {', '.join(LOGGERS)}.")
        package, extra = LOGGERS[name]
        if importlib.util.find_spec(package) is None:
            raise RLGraphError(_missing(name, package, extra))
        if name not in out:
            out.append(name)
    return tuple(out)


def _missing(name, package, extra):
    install = f"pip install 'rlgraph[{extra}]'" if extra else f"pip install {package}"
    return f"--logger {name} needs the {package} package, which is not installed: {install}"


def open_loggers(loggers, logdir, params=None, resume=False):
    """Opens a run's loggers and logs its parameters.

    Args:
        loggers: As ``check_loggers`` takes them.
        logdir: The run's logdir.
        params: The run's config (nested; logged flattened, with dotted keys), or None.
        resume: The run continues an earlier session (MLflow and W&B continue the same tracker run).

    Returns:
        A ``LoggerGroup``.
    """
    flat = flatten_config(params or {})
    opened = []
    try:
        for item in check_loggers(loggers):
            opened.append(item if isinstance(item, MetricLogger) else _open(item, logdir, flat, resume))
        group = LoggerGroup(opened)
        if flat:
            group.log_params(flat)
        return group
    except BaseException:
        LoggerGroup(opened).close("failed")
        raise


def _open(name, logdir, flat, resume):
    try:
        if name == "tensorboard":
            from rlgraph.training.loggers.tensorboard_logger import TensorBoardLogger
            return TensorBoardLogger(logdir)
        if name == "mlflow":
            from rlgraph.training.loggers.mlflow_logger import MlflowLogger
            return MlflowLogger(logdir, resume=resume)
        from rlgraph.training.loggers.wandb_logger import WandbLogger
        return WandbLogger(logdir, resume=resume, params=flat)
    except ImportError as e:
        package, extra = LOGGERS[name]
        install = f"pip install 'rlgraph[{extra}]'" if extra else f"pip install {package}"
        raise RLGraphError(f"--logger {name}: the {package} package cannot be imported ({e}); reinstall it: "
                           f"{install}") from None
