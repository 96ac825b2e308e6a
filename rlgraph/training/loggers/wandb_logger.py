"""Weights & Biases: the run's config and scalars through ``wandb`` (``pip install 'rlgraph[wandb]'``).

Without ``WANDB_API_KEY`` (and without ``WANDB_MODE``) the run is recorded offline, in ``LOGDIR/wandb/offline-run-*``
(upload it later with ``wandb sync``); with a key it goes to the server. The project is ``WANDB_PROJECT`` (default
"rlgraph"); the run is named after the logdir and its id kept in ``LOGDIR/wandb_run.json``, so that ``--resume``
continues the same W&B run.

W&B's history holds one value per metric and step: where a chunk ends several episodes, ``episode/return`` and
``episode/length`` at that step are their mean (TensorBoard and MLflow keep each episode's value).
"""
import json
import logging
import os

import numpy as np

from rlgraph.training.loggers.base import MetricLogger

logger = logging.getLogger(__name__)

#: The run's W&B id, beside its checkpoints.
RUN_FILE = "wandb_run.json"


class WandbLogger(MetricLogger):
    """Logs to a W&B run: the flattened config as its config, every scalar in its history at the env step.

    Args:
        logdir: The run's logdir (W&B's files go under ``LOGDIR/wandb``).
        resume: Continue the W&B run recorded in ``LOGDIR/wandb_run.json``.
        params: The flattened config, given to ``wandb.init``.
    """

    name = "wandb"

    def __init__(self, logdir, resume=False, params=None):
        import wandb

        self.mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        self.path = os.path.join(logdir, RUN_FILE)
        previous = self._previous() if resume else None
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or "rlgraph",
                              name=os.path.basename(os.path.normpath(logdir)), dir=os.path.abspath(logdir),
                              mode=self.mode, config=dict(params or {}), id=previous,
                              resume="allow" if previous else None, reinit="create_new",
                              settings=wandb.Settings(console="off", silent=True, disable_git=True, save_code=False))
        self.run_dir = os.path.dirname(self.run.dir)
        self.pending = {}  # step -> {tag: [values]}
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dict(run_id=self.run.id, mode=self.mode, run_dir=self.run_dir), f)
        os.replace(tmp, self.path)
        logger.info("W&B run %s (%s) in %s", self.run.id, self.mode, self.run_dir)

    def _previous(self):
        try:
            with open(self.path) as f:
                return json.load(f).get("run_id")
        except (OSError, ValueError):
            return None

    def log_params(self, params):
        """The params went to ``wandb.init`` already (``params``); later ones are added to the run's config."""
        missing = {k: v for k, v in params.items() if k not in self.run.config}
        if missing:
            self.run.config.update(missing)

    def add_scalar(self, tag, value, step):
        self.pending.setdefault(int(step), {}).setdefault(tag, []).append(float(value))

    def flush(self):
        pending, self.pending = self.pending, {}
        for step in sorted(pending):
            self.run.log({tag: float(np.mean(values)) for tag, values in pending[step].items()}, step=step)

    def close(self, status="finished"):
        try:
            self.flush()
        finally:
            self.run.finish(exit_code=0 if status in ("finished", "interrupted") else 1)

    def describe(self):
        return dict(mode=self.mode, run_id=self.run.id, run_dir=self.run_dir)
