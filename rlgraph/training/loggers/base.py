"""The interface every experiment tracker implements, and the group that fans a run's scalars out to several."""
import logging
import re

logger = logging.getLogger(__name__)

#: What tensorboardX replaces by "_" in scalar tags (``tensorboardX.summary._clean_tag``); every tracker gets the
#: same cleaned names, so a metric is called the same everywhere.
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")

#: How a run ended, as ``MetricLogger.close`` is told.
STATUSES = ("finished", "interrupted", "failed", "killed")


def metric_name(tag):
    """The name a scalar is logged under: ``tag`` with the characters TensorBoard refuses replaced by "_"."""
    return _INVALID_TAG_CHARACTERS.sub("_", tag).lstrip("/")


def flatten_config(config, prefix=""):
    """A nested config as one level of dotted keys (``optimizer_spec.learning_rate``, ``network_spec.0.units``).

    Args:
        config: A JSON-like dict (lists are indexed like ``--set`` paths).
        prefix: Prepended to every key (used by the recursion).

    Returns:
        A dict of dotted keys to scalar values (an empty object or list stays as ``{}`` or ``[]``).
    """
    out = {}
    items = config.items() if isinstance(config, dict) else enumerate(config)
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, (dict, list, tuple)) and len(value):
            out.update(flatten_config(value, name + "."))
        else:
            out[name] = value
    return out


class MetricLogger:
    """Where a run's scalars go: TensorBoard, MLflow, Weights & Biases (one subclass each).

    The trainer logs the run's parameters once, then calls ``add_scalar`` for each scalar of a training chunk
    and ``flush`` at the end of each chunk; ``close`` ends the run. A tracker may buffer between flushes.
    """

    #: The name ``--logger`` gives it.
    name = None

    def log_params(self, params):
        """Logs the run's flattened config (``flatten_config``) once, at the start."""

    def add_scalar(self, tag, value, step):
        """Logs ``value`` (a float) under ``tag`` at environment step ``step``."""
        raise NotImplementedError

    def flush(self):
        """Called at the end of every training chunk."""

    def close(self, status="finished"):
        """Flushes and ends the run; ``status`` is one of ``STATUSES``."""

    def describe(self):
        """Where the run is recorded (a JSON-able dict for ``summary.json``), or None."""
        return None


class LoggerGroup(MetricLogger):
    """Fans every call out to several loggers, with the tags cleaned once (``metric_name``).

    Args:
        loggers: The ``MetricLogger`` objects.
    """

    def __init__(self, loggers):
        self.loggers = list(loggers)

    def log_params(self, params):
        for item in self.loggers:
            item.log_params(params)

    def add_scalar(self, tag, value, step):
        tag = metric_name(tag)
        for item in self.loggers:
            item.add_scalar(tag, value, step)

    def flush(self):
        for item in self.loggers:
            item.flush()

    def close(self, status="finished"):
        """Closes every logger, even where one of them fails (the first failure is raised after)."""
        error = None
        for item in self.loggers:
            try:
                item.close(status)
            except Exception as e:  # noqa: BLE001 - the others must close all the same.
                logger.warning("Closing the %s logger failed: %s", item.name, e)
                error = error or e
        if error is not None:
            raise error

    def describe(self):
        """``{name: where}`` of the loggers that say where they record."""
        return {item.name: item.describe() for item in self.loggers if item.describe() is not None}
