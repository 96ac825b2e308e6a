"""MLflow: the run's parameters and scalars through MLflow's own client (``pip install 'rlgraph[mlflow]'``).

The tracking server is ``MLFLOW_TRACKING_URI``; where it is unset, a local file store in the run's logdir
(``LOGDIR/mlruns``), which works offline (``mlflow ui --backend-store-uri LOGDIR/mlruns`` shows it). MLflow 3
refuses file stores unless ``MLFLOW_ALLOW_FILE_STORE`` is true; for a file store this logger sets it where it is
unset. The experiment is ``MLFLOW_EXPERIMENT_NAME`` (default "rlgraph"); the run is named after the logdir and
its id kept in ``LOGDIR/mlflow_run.json``, so that ``--resume`` continues the same MLflow run.
"""
import json
import logging
import os
import time

from rlgraph.training.loggers.base import MetricLogger
from rlgraph.utils.errors import RLGraphError

logger = logging.getLogger(__name__)

#: MLflow's limits per ``log_batch`` call and per parameter value.
_MAX_METRICS, _MAX_PARAMS, _MAX_PARAM_LENGTH = 1000, 100, 6000
#: The run's MLflow ids, beside its checkpoints.
RUN_FILE = "mlflow_run.json"


def default_tracking_uri(logdir):
    """The file store a run logs to where ``MLFLOW_TRACKING_URI`` is unset: ``LOGDIR/mlruns``."""
    return "file:" + os.path.join(os.path.abspath(logdir), "mlruns")


def _is_file_store(uri):
    return uri.startswith("file:") or "://" not in uri and not uri.startswith(("databricks", "sqlite:", "postgres",
                                                                                   "mysql", "mssql"))


class MlflowLogger(MetricLogger):
    """Logs to an MLflow run: the flattened config as params, every scalar as a metric at its env step.

    Metrics are buffered and sent at most every ``flush_seconds`` (and at the end), in batches.

    Args:
        logdir: The run's logdir.
        resume: Continue the MLflow run recorded in ``LOGDIR/mlflow_run.json`` (a new one where there is none).
        flush_seconds: The least time between two sends.
    """

    name = "mlflow"

    def __init__(self, logdir, resume=False, flush_seconds=2.0):
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        self.uri = os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(logdir)
        if _is_file_store(self.uri):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.flush_seconds = flush_seconds
        self.pending, self.last_flush, self.warned = [], time.monotonic(), False
        self.path = os.path.join(logdir, RUN_FILE)
        try:
            self.client = MlflowClient(tracking_uri=self.uri)
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "rlgraph"
            self.experiment_id = self._experiment(name)
            previous = self._previous() if resume else None
            if previous:
                self.run_id = previous
                self.client.update_run(self.run_id, status="RUNNING")
            else:
                self.run_id = self.client.create_run(
                    self.experiment_id, run_name=os.path.basename(os.path.normpath(logdir)),
                    tags={"rlgraph.logdir": os.path.abspath(logdir)}).info.run_id
        except MlflowException as e:
            raise RLGraphError(f"--logger mlflow: tracking URI '{self.uri}': {_first_line(e)}") from None
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dict(tracking_uri=self.uri, experiment_id=self.experiment_id, run_id=self.run_id), f)
        os.replace(tmp, self.path)
        logger.info("MLflow run %s (experiment %s) at %s", self.run_id, self.experiment_id, self.uri)

    def _experiment(self, name):
        from mlflow.exceptions import MlflowException
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name)
        except MlflowException:
            found = self.client.get_experiment_by_name(name)  # Created meanwhile by another run (a sweep's trial).
            if found is None:
                raise
            return found.experiment_id

    def _previous(self):
        try:
            with open(self.path) as f:
                stored = json.load(f)
        except (OSError, ValueError):
            return None
        return stored.get("run_id") if stored.get("tracking_uri") == self.uri else None

    def log_params(self, params):
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException
        items = [Param(str(k)[:250], _param_text(v)) for k, v in params.items()]
        try:
            for i in range(0, len(items), _MAX_PARAMS):
                self.client.log_batch(self.run_id, params=items[i:i + _MAX_PARAMS])
        except MlflowException as e:
            raise RLGraphError(f"--logger mlflow: the run's config could not be logged as params: "
                               f"{_first_line(e)}") from None

    def add_scalar(self, tag, value, step):
        from mlflow.entities import Metric
        self.pending.append(Metric(tag, float(value), int(time.time() * 1000), int(step)))

    def flush(self, force=False):
        if not self.pending or (not force and time.monotonic() - self.last_flush < self.flush_seconds):
            return
        pending, self.pending, self.last_flush = self.pending, [], time.monotonic()
        try:
            for i in range(0, len(pending), _MAX_METRICS):
                self.client.log_batch(self.run_id, metrics=pending[i:i + _MAX_METRICS])
        except Exception as e:  # noqa: BLE001 - a tracker that fails mid-run must not end the run.
            if not self.warned:
                logger.warning("MLflow: metrics could not be logged to %s (%s); the run goes on.", self.uri,
                               _first_line(e))
                self.warned = True

    def close(self, status="finished"):
        self.flush(force=True)
        self.client.set_terminated(self.run_id, status={"finished": "FINISHED", "failed": "FAILED"}.get(status,
                                                                                                        "KILLED"))

    def describe(self):
        return dict(tracking_uri=self.uri, experiment_id=self.experiment_id, run_id=self.run_id)


def _param_text(value):
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:_MAX_PARAM_LENGTH]


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
