"""What a run's logdir recorded of its learning: the TensorBoard scalars, read back without TensorBoard.

The trainer writes its scalars (``episode/mean_return_100``, ``evaluation/mean_return``, ...) once per chunk into
``events.out.tfevents.*`` files, one file per session (a ``--resume`` adds one); each event holds the env step and
the wall time it was written at. ``run_curve`` turns them into a learning curve over env steps and over the run's
training seconds (the time between sessions left out), for every run a trainer ever wrote.
"""
import glob
import json
import os
import struct

import numpy as np

from rlgraph.utils.errors import RLGraphError

#: The training curve: mean return of the last 100 episodes (the episodes' own returns where it is missing).
MEAN_RETURN_TAG, RETURN_TAG = "episode/mean_return_100", "episode/return"
#: The greedy evaluations.
EVAL_TAG = "evaluation/mean_return"


def read_scalars(path):
    """``[(wall_time, step, tag, value)]`` of the scalar summaries in one event file, in file order.

    A record cut short at the end (a run still writing) ends the list.
    """
    from rlgraph.training.loggers.tensorboard_logger import summary_writer_class
    summary_writer_class()  # tensorboardX imported without importing PyTorch.
    from tensorboardX.proto.event_pb2 import Event

    with open(path, "rb") as f:
        data = f.read()
    out, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        if pos + 12 + length + 4 > len(data):
            break
        event = Event.FromString(data[pos + 12:pos + 12 + length])
        pos += 12 + length + 4
        out += [(event.wall_time, event.step, v.tag, v.simple_value) for v in event.summary.value
                if v.WhichOneof("value") == "simple_value"]
        if not event.summary.value and not out:
            out.append((event.wall_time, event.step, None, None))  # The file's first event: the session's start.
    return out


def run_curve(logdir):
    """The learning curve a run's logdir recorded.

    Args:
        logdir: A run's logdir (``rlgraph train --logdir``).

    Returns:
        A dict: ``name`` (the directory's name), ``steps``, ``seconds`` and ``returns`` (numpy arrays: the mean
        return of the last 100 training episodes at each chunk that ended episodes), ``eval_steps``,
        ``eval_seconds``, ``eval_returns`` (greedy evaluations), ``summary`` (``summary.json``, ``{}`` if absent).

    Raises:
        RLGraphError: One line: ``logdir`` is not a directory, holds no run (no TensorBoard events), or its run
            recorded no episode yet.
    """
    if not os.path.isdir(logdir):
        raise RLGraphError(f"'{logdir}' is not a directory (a run's logdir, e.g. runs/appo_cartpole-...).")
    files = sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")), key=_file_order)
    if not files:
        raise RLGraphError(f"'{logdir}' is not an rlgraph run: it holds no TensorBoard events "
                           f"(events.out.tfevents.*), which `rlgraph train` writes into its logdir.")
    series, offset, last_step = {}, 0.0, -1
    for path in files:
        scalars = read_scalars(path)
        if not scalars:
            continue
        start = scalars[0][0]
        steps = [s for _, s, tag, _ in scalars if tag is not None]
        if steps and steps[0] < last_step:
            # A run started over in this logdir (--overwrite): the earlier sessions' points belong to another run.
            series, offset = {}, 0.0
        for wall, step, tag, value in scalars:
            if tag is not None:
                series.setdefault(tag, []).append((step, offset + wall - start, value))
        offset += scalars[-1][0] - start
        last_step = max(steps, default=last_step)
    points = series.get(MEAN_RETURN_TAG) or _running_mean(series.get(RETURN_TAG, []))
    if not points:
        raise RLGraphError(f"run '{logdir}' recorded no finished episode yet: it has no learning curve.")
    evals = series.get(EVAL_TAG, [])
    summary = {}
    if os.path.isfile(os.path.join(logdir, "summary.json")):
        try:
            with open(os.path.join(logdir, "summary.json")) as f:
                summary = json.load(f)
        except (OSError, ValueError):
            summary = {}
    steps, seconds, returns = (np.asarray(c, np.float64) for c in zip(*points))
    eval_steps, eval_seconds, eval_returns = (np.asarray(c, np.float64) for c in zip(*evals)) if evals else \
        (np.zeros(0),) * 3
    return dict(name=os.path.basename(os.path.normpath(logdir)), logdir=logdir, steps=steps, seconds=seconds,
                returns=returns, eval_steps=eval_steps, eval_seconds=eval_seconds, eval_returns=eval_returns,
                summary=summary)


def _file_order(path):
    """Event files in the order they were written: tensorboardX names them ``...tfevents.<unix time>.<host>``,
    and ``TensorBoardLogger`` adds the session's start in nanoseconds (``.<ns>``) to tell apart sessions that
    started within the same second."""
    parts = os.path.basename(path).split(".")
    session = int(parts[-1]) if len(parts) > 5 and parts[-1].isdigit() else 0
    try:
        return float(parts[3]), session, os.path.getmtime(path)
    except (IndexError, ValueError):
        return os.path.getmtime(path), session, os.path.getmtime(path)


def _running_mean(points, window=100):
    """``(step, seconds, mean of the last window returns)`` of each episode's ``(step, seconds, return)``."""
    out, recent = [], []
    for step, sec, value in points:
        recent = (recent + [value])[-window:]
        out.append((step, sec, float(np.mean(recent))))
    return out
