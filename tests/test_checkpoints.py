"""Checkpoints that never lose a model: checksums, atomic switch, fall-back, kills mid-write, failing runs."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from rlgraph.cli import main as cli_main
from rlgraph.training.checkpoint_store import CheckpointStore
from rlgraph.training.trainer import Trainer
from rlgraph.utils.checksums import verify_manifest, write_manifest
from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphDivergenceError, RLGraphError
from small_configs import CONFIGS, small_dqn_config


def write_files(contents):
    def write(directory):
        os.makedirs(directory)
        for name, data in contents.items():
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)
    return write


# --- checksums -------------------------------------------------------------------------------------------------
def test_manifest_names_a_flipped_truncated_missing_or_added_file(tmp_path):
    d = tmp_path / "m"
    write_files({"a.bin": bytes(range(200)), "b.json": b"{}"})(str(d))
    write_manifest(str(d))
    verify_manifest(str(d))
    data = bytearray((d / "a.bin").read_bytes())
    data[17] ^= 0xFF
    (d / "a.bin").write_bytes(bytes(data))
    with pytest.raises(RLGraphCheckpointError, match=r"a\.bin' is damaged: its checksum does not match"):
        verify_manifest(str(d))
    (d / "a.bin").write_bytes(bytes(range(100)))
    with pytest.raises(RLGraphCheckpointError, match=r"a\.bin' is damaged: 100 bytes where 200 were written"):
        verify_manifest(str(d))
    (d / "a.bin").unlink()
    with pytest.raises(RLGraphCheckpointError, match=r"a\.bin' is missing"):
        verify_manifest(str(d))
    write_files({"c": b"1"})(str(tmp_path / "n"))
    with pytest.raises(RLGraphCheckpointError, match="has no checksums.json"):
        verify_manifest(str(tmp_path / "n"))
    write_manifest(str(tmp_path / "n"))
    (tmp_path / "n" / "extra").write_bytes(b"x")
    with pytest.raises(RLGraphCheckpointError, match="was not part of the checkpoint"):
        verify_manifest(str(tmp_path / "n"))


@pytest.mark.parametrize("backend_name", ["pytorch", "tf"])
def test_a_damaged_model_is_refused_naming_the_file(backend_name, tmp_path):
    from rlgraph.agents import Agent
    from rlgraph.spaces import FloatBox, IntBox
    agent = Agent.from_spec(os.path.join(CONFIGS, "dqn_cartpole.json"), state_space=FloatBox(shape=(4,)),
                            action_space=IntBox(2), backend=backend_name)
    path = str(tmp_path / "model")
    agent.store_model(path)
    agent.load_model(path)  # intact: loads
    # The largest file holds the weights on both backends.
    files = [os.path.join(r, n) for r, _, ns in os.walk(path) for n in ns if n != "checksums.json"]
    target = max(files, key=os.path.getsize)
    data = bytearray(open(target, "rb").read())
    rng = np.random.default_rng(0)
    for i in rng.choice(len(data), size=64, replace=False):
        data[i] ^= 0x5A
    with open(target, "wb") as f:
        f.write(bytes(data))
    before = agent.get_weights()
    with pytest.raises(RLGraphCheckpointError, match=f"'{target}' is damaged"):
        agent.load_model(path)
    for key, value in agent.get_weights().items():
        np.testing.assert_array_equal(value, before[key])
    with open(target, "wb") as f:
        f.write(bytes(data[: len(data) // 2]))
    with pytest.raises(RLGraphCheckpointError, match="is damaged: .* bytes where .* were written"):
        agent.load_model(path)


def test_non_finite_weights_are_never_stored(tmp_path):
    from rlgraph.agents import Agent
    from rlgraph.spaces import FloatBox, IntBox
    agent = Agent.from_spec(os.path.join(CONFIGS, "dqn_cartpole.json"), state_space=FloatBox(shape=(4,)),
                            action_space=IntBox(2), backend="pytorch")
    weights = agent.get_weights()
    key = next(iter(weights))
    weights[key] = np.full_like(weights[key], np.nan)
    agent.set_weights(weights)
    with pytest.raises(RLGraphDivergenceError, match="hold NaN or inf"):
        agent.store_model(str(tmp_path / "m"))
    assert not os.path.exists(tmp_path / "m")


# --- the store -----------------------------------------------------------------------------------------------------
def test_store_keeps_the_newest_and_switches_the_link(tmp_path):
    store = CheckpointStore(str(tmp_path), keep=3)
    assert not store.exists() and store.latest() is None
    for i in range(5):
        store.save(write_files({"w": bytes([i]) * 10}), {"i": i})
    path, state = store.latest()
    assert state == {"i": 4} and os.path.islink(tmp_path / "checkpoint")
    assert os.path.realpath(tmp_path / "checkpoint") == path
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["ckpt-00000003", "ckpt-00000004", "ckpt-00000005"]
    assert (tmp_path / "checkpoint" / "model" / "w").read_bytes() == bytes([4]) * 10


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog):
    store = CheckpointStore(str(tmp_path), keep=3)
    for i in range(3):
        store.save(write_files({"w": bytes([i]) * 10}), {"i": i})
    (tmp_path / "checkpoint" / "model" / "w").write_bytes(b"\x00" * 10)
    path, state = store.latest()
    assert state == {"i": 1} and path.endswith("ckpt-00000002")
    assert "Skipping a damaged checkpoint" in caplog.text and "ckpt-00000003" in caplog.text
    # A new save never overwrites the damaged one in place: it gets a new number.
    store.save(write_files({"w": b"new"}), {"i": 3})
    assert store.latest()[1] == {"i": 3}
    for name in os.listdir(tmp_path / "checkpoints"):
        (tmp_path / "checkpoints" / name / "trainer_state.json").write_text("garbage")
    with pytest.raises(RLGraphCheckpointError, match="every checkpoint in .* is damaged"):
        store.latest()


def test_a_failure_at_any_step_of_a_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    store = CheckpointStore(str(tmp_path), keep=3)
    store.save(write_files({"w": b"good"}), {"i": 0})

    def failing_model(directory):
        write_files({"w": b"half"})(directory)
        raise OSError("disk full")

    with pytest.raises(OSError):
        store.save(failing_model, {"i": 1})
    assert store.latest()[1] == {"i": 0}
    # A crash after the new directory is complete but before the link is switched.
    monkeypatch.setattr(CheckpointStore, "_point_to", lambda self, path: (_ for _ in ()).throw(OSError("crash")))
    with pytest.raises(OSError):
        store.save(write_files({"w": b"new"}), {"i": 2})
    monkeypatch.undo()
    path, state = store.latest()
    assert state in ({"i": 0}, {"i": 2})  # either is complete and verified
    assert [n for n in os.listdir(tmp_path / "checkpoints") if n.startswith(".tmp")] == []


def test_a_plain_checkpoint_directory_of_an_earlier_layout_is_adopted(tmp_path):
    legacy = tmp_path / "checkpoint"
    write_files({"w": b"old"})(str(legacy / "model"))
    (legacy / "trainer_state.json").write_text(json.dumps({"i": "legacy"}))
    write_manifest(str(legacy))
    store = CheckpointStore(str(tmp_path))
    assert store.latest()[1] == {"i": "legacy"}
    store.save(write_files({"w": b"new"}), {"i": 1})
    assert os.path.islink(legacy) and store.latest()[1] == {"i": 1}
    assert os.path.isdir(tmp_path / "checkpoints" / "ckpt-00000000")


KILL_SCRIPT = r"""
import os, sys, time
from rlgraph.training.checkpoint_store import CheckpointStore
store = CheckpointStore(sys.argv[1], keep=2)
i = 0
def model(d):
    os.makedirs(d)
    for k in range(8):
        with open(os.path.join(d, f"w{k}"), "wb") as f:
            f.write(os.urandom(200_000))
while True:
    i += 1
    store.save(model, {"i": i})
    print(i, flush=True)
"""


@pytest.mark.timeout(120)
def test_kills_at_random_moments_of_writing_always_leave_a_loadable_checkpoint(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(KILL_SCRIPT)
    rng = np.random.default_rng(3)
    last_seen = 0
    for trial in range(8):
        proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "run")], stdout=subprocess.PIPE,
                                text=True)
        try:
            first = proc.stdout.readline()  # at least one complete checkpoint written by this process
            assert first.strip(), "the writer died"
            time.sleep(float(rng.uniform(0.0, 0.3)))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        path, state = CheckpointStore(str(tmp_path / "run"), keep=2).latest()
        verify_manifest(path)
        assert state["i"] >= 1
        last_seen = state["i"]
    assert last_seen >= 1


# --- the trainer and the command line ---------------------------------------------------------------------------
class FakeWorker:
    """A worker whose loss goes NaN at a given chunk; its model is one array."""

    class Agent:
        def __init__(self):
            self.w = np.ones(3)

        def get_weights(self):
            return {"w": self.w}

    def __init__(self, nan_at_chunk):
        self.agent = self.Agent()
        self.chunks = 0
        self.nan_at_chunk = nan_at_chunk

    def run(self, n):
        self.chunks += 1
        loss = float("nan") if self.chunks >= self.nan_at_chunk else 1.0
        return dict(env_steps=n, episodes=[], results=[dict(loss=loss)])

    def store(self, path):
        os.makedirs(path)
        np.save(os.path.join(path, "w.npy"), self.agent.w)

    def load(self, path):
        self.agent.w = np.load(os.path.join(path, "w.npy"))


def test_a_diverging_run_stops_with_the_cause_and_keeps_the_good_checkpoint(tmp_path):
    logdir = str(tmp_path / "run")
    Trainer(FakeWorker(nan_at_chunk=99), logdir, max_steps=30, chunk_steps=10).train()
    good = os.path.realpath(os.path.join(logdir, "checkpoint"))
    trainer = Trainer(FakeWorker(nan_at_chunk=2), logdir, max_steps=100, chunk_steps=10, resume=True,
                      checkpoint_every_seconds=0.0)
    with pytest.raises(RLGraphDivergenceError, match=r"update 5 \(env step 50\): loss is nan.*learning rate"):
        trainer.train()
    # Chunk 1 of the second run was fine and was checkpointed (checkpoint_every_seconds=0); nothing after.
    path, state = CheckpointStore(logdir).latest()
    assert state["state"]["env_steps"] == 40 and path != good


def test_a_real_divergence_on_the_command_line_writes_no_checkpoint(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path, optimizer_spec={"type": "adam", "learning_rate": 1e308})
    logdir = str(tmp_path / "run")
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "4000", "--logdir", logdir]) == 2
    err = capsys.readouterr().err
    assert "training diverged" in err and "learning_rate" in err and "Traceback" not in err
    assert not CheckpointStore(logdir).exists()


def test_a_logdir_with_a_checkpoint_is_refused_without_resume_or_overwrite(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path)
    logdir = str(tmp_path / "run")
    args = ["train", cfg, "--backend", "pytorch", "--steps", "400", "--logdir", logdir]
    assert cli_main(args) == 0
    first = os.path.realpath(os.path.join(logdir, "checkpoint"))
    capsys.readouterr()
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert "already holds a checkpoint" in err and "--resume" in err and "--overwrite" in err
    assert os.path.realpath(os.path.join(logdir, "checkpoint")) == first
    assert cli_main(args + ["--overwrite"]) == 0
    assert os.path.realpath(os.path.join(logdir, "checkpoint")) != first


def test_resume_refuses_another_environment_and_says_when_nothing_is_left(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path)
    logdir = str(tmp_path / "run")
    base = ["train", cfg, "--backend", "pytorch", "--logdir", logdir]
    assert cli_main(base + ["--steps", "400"]) == 0
    capsys.readouterr()
    assert cli_main(base + ["--steps", "800", "--resume", "--env", "CartPole-v0"]) == 2
    assert "written with another environment_spec (or --env)" in capsys.readouterr().err
    assert cli_main(base + ["--steps", "400", "--resume"]) == 0
    with open(os.path.join(logdir, "summary.json")) as f:
        summary = json.load(f)
    assert "budget is already spent" in summary["nothing_trained"] and summary["env_steps"] == 400


def test_evaluate_of_a_logdir_falls_back_past_a_damaged_checkpoint(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path, train_spec={"eval_episodes": 2, "chunk_steps": 400,
                                                  "checkpoint_every_seconds": 0.001})
    logdir = str(tmp_path / "run")
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "800", "--logdir", logdir]) == 0
    model = os.path.join(logdir, "checkpoint", "model")
    files = [os.path.join(r, n) for r, _, ns in os.walk(model) for n in ns if n != "checksums.json"]
    target = max(files, key=os.path.getsize)
    with open(target, "r+b") as f:
        f.seek(100)
        f.write(b"\xff" * 64)
    capsys.readouterr()
    assert cli_main(["evaluate", cfg, "--checkpoint", logdir, "--backend", "pytorch", "--episodes", "2"]) == 0
    # The model directory itself, damaged: one line naming the file.
    assert cli_main(["evaluate", cfg, "--checkpoint", model, "--backend", "pytorch", "--episodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "is damaged" in err and target in err and "Traceback" not in err


def test_the_trainer_refuses_a_logdir_with_a_checkpoint_in_library_use(tmp_path):
    Trainer(FakeWorker(99), str(tmp_path), max_steps=10, chunk_steps=10).train()
    with pytest.raises(RLGraphError, match="already holds a checkpoint"):
        Trainer(FakeWorker(99), str(tmp_path), max_steps=10, chunk_steps=10)


def test_a_checkpoint_without_the_replay_resumes_with_an_empty_memory(tmp_path):
    from rlgraph.utils.run_state import load_run_state
    cfg = small_dqn_config(tmp_path, train_spec={"eval_episodes": 2, "chunk_steps": 400, "checkpoint_replay": False})
    logdir = str(tmp_path / "run")
    base = ["train", cfg, "--backend", "pytorch", "--logdir", logdir]
    assert cli_main(base + ["--steps", "800"]) == 0
    with open(os.path.join(logdir, "summary.json")) as f:
        first = json.load(f)
    state = load_run_state(os.path.join(logdir, "checkpoint", "model"))
    assert state["agent"]["replay"] is False and first["updates"] > 0
    assert not [scope for scope in state["agent"]["components"] if "replay" in scope or "memory" in scope]
    assert state["agent"]["learner"]["stored"] > 0  # counted at store time, forgotten on restore
    assert cli_main(base + ["--steps", "1600", "--resume"]) == 0
    with open(os.path.join(logdir, "summary.json")) as f:
        second = json.load(f)
    # 800 more steps: as in the first run, 200 fill the memory (steps_before_update) before updates start
    # (with the replay stored, updates would go on at once: 100 of them).
    assert abs((second["updates"] - first["updates"]) - first["updates"]) <= 1, (first["updates"], second["updates"])
