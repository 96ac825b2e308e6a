"""``--logger tensorboard|mlflow|wandb``: a short CartPole run logs the same metrics at the same steps to every
tracker, read back with each tracker's own reader and compared with the run's TensorBoard scalars."""
import glob
import json
import os
import struct
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

from rlgraph.cli import main as cli_main
from rlgraph.engines.runner import train
from rlgraph.training.loggers import check_loggers, flatten_config
from rlgraph.training.run_records import read_scalars
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from small_configs import small_dqn_config

mlflow = pytest.importorskip("mlflow", reason="the mlflow extra (pip install 'rlgraph[mlflow]') is not installed")


def test_flatten_config_gives_dotted_keys_like_set_paths():
    flat = flatten_config({"type": "dqn", "optimizer_spec": {"type": "adam", "learning_rate": 1e-3},
                           "network_spec": [{"type": "dense", "units": 64}], "empty": {}, "none": None})
    assert flat == {"type": "dqn", "optimizer_spec.type": "adam", "optimizer_spec.learning_rate": 1e-3,
                    "network_spec.0.type": "dense", "network_spec.0.units": 64, "empty": {}, "none": None}


def test_unknown_logger_and_missing_package_are_one_line_before_training(tmp_path, capsys, monkeypatch):
    with pytest.raises(RLGraphSpecError, match="--logger mlfow: unknown logger. Did you mean 'mlflow'?"):
        check_loggers(["mlfow"])
    assert check_loggers(None) == ("tensorboard",)
    assert check_loggers(["MLflow", "tensorboard", "mlflow"]) == ("tensorboard", "mlflow")
    assert check_loggers(["wandb"]) == ("tensorboard", "wandb")  # TensorBoard always
    import importlib.util
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else find_spec(name, *a))
    with pytest.raises(RLGraphError, match=r"--logger wandb needs the wandb package, which is not installed: "
                                           r"pip install 'rlgraph\[wandb\]'"):
        check_loggers(["wandb"])
    logdir = tmp_path / "run"
    cfg = small_dqn_config(tmp_path)
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "100", "--logdir", str(logdir),
                     "--logger", "tensorboard", "--logger", "wandb"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'rlgraph[wandb]'" in err and len(err.strip().splitlines()) == 1
    assert not glob.glob(str(logdir / "events.out.tfevents.*")) and not (logdir / "summary.json").exists()


def _tensorboard(logdir):
    """``{tag: [(step, value), ...]}`` of a run's TensorBoard events."""
    out = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        for _, step, tag, value in read_scalars(path):
            if tag is not None:
                out[tag].append((step, value))
    return out


def _wandb_records(path):
    """The records of a W&B offline run file (``run-ID.wandb``): W&B's header, then LevelDB-log framed
    ``wandb_internal_pb2.Record`` protobufs in 32 KiB blocks (wandb 0.31 keeps its reader in its Go core)."""
    from wandb.proto import wandb_internal_pb2

    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B"
    pos, block, parts = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (length == 0 and kind == 0):
            pos += left  # Block padding.
            continue
        payload, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (2, 3):  # FIRST, MIDDLE
            parts = (b"" if kind == 2 else parts) + payload
            continue
        record = wandb_internal_pb2.Record()
        record.ParseFromString(parts + payload if kind == 4 else payload)
        parts = b""
        yield record


def _wandb_run(run_dir):
    """``(config, {tag: {step: value}})`` of a W&B offline run."""
    (path,) = glob.glob(os.path.join(run_dir, "run-*.wandb"))
    config, history = {}, defaultdict(dict)
    for record in _wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
        elif kind == "config":
            config.update({item.key: json.loads(item.value_json) for item in record.config.update})
        elif kind == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            for key, value in items.items():
                if not key.startswith("_"):
                    history[key][int(items["_step"])] = value
    return config, history


@pytest.mark.timeout(300)
def test_mlflow_and_wandb_record_what_tensorboard_records(tmp_path, monkeypatch):
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "WANDB_API_KEY", "WANDB_MODE", "WANDB_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    wandb = pytest.importorskip("wandb")
    cfg = small_dqn_config(tmp_path, train_spec={"eval_episodes": 2, "chunk_steps": 400, "eval_every_steps": 800})
    logdir = str(tmp_path / "run")
    summary = train(cfg, backend="pytorch", steps=2400, logdir=logdir, progress=False,
                    overrides=["optimizer_spec.learning_rate=5e-4"], loggers=["tensorboard", "mlflow", "wandb"])
    tensorboard = _tensorboard(logdir)
    assert {"episode/return", "episode/mean_return_100", "evaluation/mean_return", "update/loss",
            "perf/env_steps_per_second"} <= set(tensorboard)
    effective = json.loads(open(os.path.join(logdir, "config.json")).read())

    # MLflow: a file store in the logdir (MLFLOW_TRACKING_URI unset), read with MLflow's own client.
    tracked = summary["trackers"]["mlflow"]
    assert tracked["tracking_uri"] == "file:" + os.path.join(os.path.abspath(logdir), "mlruns")
    client = mlflow.tracking.MlflowClient(tracking_uri=tracked["tracking_uri"])
    run = client.get_run(tracked["run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert client.get_experiment(run.info.experiment_id).name == "rlgraph"
    params = run.data.params
    assert params["optimizer_spec.learning_rate"] == "0.0005" and params["type"] == "dqn"
    assert params["network_spec.0.units"] == str(effective["network_spec"][0]["units"])
    assert set(params) == set(flatten_config(effective))
    assert set(run.data.metrics) == set(tensorboard)
    for tag, points in tensorboard.items():
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, tag))
        assert [s for s, _ in history] == sorted(s for s, _ in points), tag
        np.testing.assert_allclose([v for _, v in history], [v for _, v in sorted(points)], rtol=1e-6, err_msg=tag)

    # W&B: offline (no WANDB_API_KEY), its run in the logdir; one value per metric and step (the mean).
    tracked = summary["trackers"]["wandb"]
    assert tracked["mode"] == "offline"
    assert tracked["run_dir"].startswith(os.path.join(os.path.abspath(logdir), "wandb"))
    config, history = _wandb_run(tracked["run_dir"])
    assert config["optimizer_spec.learning_rate"] == 5e-4 and config["environment_spec.num_envs"] == 4
    assert set(history) == set(tensorboard)
    for tag, points in tensorboard.items():
        by_step = defaultdict(list)
        for step, value in points:
            by_step[step].append(value)
        assert sorted(history[tag]) == sorted(by_step), tag
        np.testing.assert_allclose([history[tag][s] for s in sorted(by_step)],
                                   [np.mean(by_step[s]) for s in sorted(by_step)], rtol=1e-5, err_msg=tag)
    assert wandb.run is None  # The W&B run was finished.


@pytest.mark.timeout(300)
def test_resume_continues_the_same_mlflow_run_and_the_cli_says_where(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    store = tmp_path / "store"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:" + str(store))
    cfg = small_dqn_config(tmp_path)
    logdir = str(tmp_path / "run")
    args = ["train", cfg, "--backend", "pytorch", "--logdir", logdir, "--logger", "mlflow"]
    assert cli_main(args + ["--steps", "800"]) == 0
    out = capsys.readouterr().out
    stored = json.load(open(os.path.join(logdir, "mlflow_run.json")))
    assert f"MLflow run {stored['run_id']} at file:{store}" in out
    assert glob.glob(os.path.join(logdir, "events.out.tfevents.*"))  # TensorBoard is always written.
    assert cli_main(args + ["--steps", "1600", "--resume"]) == 0
    capsys.readouterr()
    client = mlflow.tracking.MlflowClient(tracking_uri="file:" + str(store))
    (run,) = client.search_runs([stored["experiment_id"]])
    assert run.info.run_id == stored["run_id"] and run.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "perf/env_steps_per_second")]
    assert steps == [400, 800, 1200, 1600]


#: Opens, writes and closes TensorBoard loggers while a thread sends SIGINT every millisecond or so; the handler
#: raises ``KeyboardInterrupt`` only inside the logger calls (as Ctrl-C does during a run's chunk). Prints the
#: numbers of loggers closed and of interrupts caught.
_INTERRUPTED_LOGGERS = r"""
import os, random, signal, sys, threading, time
from rlgraph.training.loggers.tensorboard_logger import TensorBoardLogger
logdir, seconds = sys.argv[1], float(sys.argv[2])
armed = False
def handler(signum, frame):
    if armed:
        raise KeyboardInterrupt
signal.signal(signal.SIGINT, handler)
stop = False
def shooter():
    rng = random.Random(0)
    while not stop:
        time.sleep(rng.uniform(0, 0.001))
        os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=shooter, daemon=True).start()
closed = interrupts = 0
start = time.time()
while time.time() - start < seconds:
    tb = None
    armed = True
    try:
        tb = TensorBoardLogger(logdir)
        for step in range(5):
            tb.add_scalar("x", float(step), step)
            tb.flush()
    except KeyboardInterrupt:
        interrupts += 1
    armed = False
    if tb is not None:
        tb.close()
        closed += 1
stop = True
print(closed, interrupts)
"""


def test_ctrl_c_inside_tensorboard_writes_never_hangs_the_close(tmp_path):
    """A Ctrl-C that lands inside tensorboardX's queue put used to leave its writer thread stuck, and the run then
    hung in the close after the interrupt (``test_ctrl_c_at_any_moment_on_the_local_engine`` caught it once)."""
    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED_LOGGERS, str(tmp_path), "4"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    closed, interrupts = map(int, proc.stdout.split())
    assert closed >= 20 and interrupts >= 20, (closed, interrupts)
