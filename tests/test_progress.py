"""Progress where there is no terminal: status lines at a steady interval, ``--progress`` and ``--quiet``."""
import logging

import pytest

import rlgraph.training.trainer as trainer_module
from rlgraph.cli import main as cli_main
from rlgraph.training.trainer import Trainer
from rlgraph.utils.errors import RLGraphError
from small_configs import small_dqn_config


class _FakeWorker:
    """Ten steps per call, an episode of return 5 each call."""

    def run(self, num_env_steps):
        return dict(env_steps=num_env_steps, episodes=[(5.0, num_env_steps)], results=[{"loss": 0.5}])

    def store(self, path):
        pass

    def load(self, path):
        pass


def _status_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "rlgraph.progress"]


def test_without_a_terminal_a_run_logs_status_lines_with_its_evaluations(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="rlgraph.progress")
    trainer = Trainer(_FakeWorker(), str(tmp_path / "run"), max_steps=50, chunk_steps=10, status_every_seconds=0,
                      evaluator=lambda: [7.0, 9.0], eval_every_steps=20)
    assert trainer.progress_mode == "status" and not trainer.progress  # Under pytest stderr is no terminal.
    trainer.train()
    lines = _status_lines(caplog)
    assert len(lines) == 5
    assert "10/50 env steps" in lines[0] and "mean return (last 100) 5.0" in lines[0]
    assert "last evaluation -" in lines[0] and "last evaluation 8.0 at 40 steps" in lines[-1]
    assert "steps/s" in lines[0] and "1 episodes" in lines[0]


@pytest.mark.parametrize("progress, mode", [(True, "bar"), ("bar", "bar"), (False, "quiet"), ("quiet", "quiet"),
                                            ("status", "status")])
def test_progress_modes(tmp_path, caplog, progress, mode):
    caplog.set_level(logging.INFO, logger="rlgraph.progress")
    trainer = Trainer(_FakeWorker(), str(tmp_path / "run"), max_steps=30, chunk_steps=10, status_every_seconds=0,
                      progress=progress)
    assert trainer.progress_mode == mode and trainer.progress == (mode == "bar")
    trainer.train()
    assert len(_status_lines(caplog)) == (3 if mode == "status" else 0)


def test_an_unknown_progress_mode_is_refused(tmp_path):
    with pytest.raises(RLGraphError, match="progress must be one of"):
        Trainer(_FakeWorker(), str(tmp_path / "run"), max_steps=30, progress="loud")


def test_rlgraph_train_status_lines_and_quiet(tmp_path, caplog, capsys, monkeypatch):
    monkeypatch.setattr(trainer_module, "STATUS_EVERY_SECONDS", 0.0)
    cfg = small_dqn_config(tmp_path, train_spec={"eval_episodes": 1, "chunk_steps": 200, "eval_every_steps": 400})
    caplog.set_level(logging.INFO, logger="rlgraph.progress")
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "800", "--logdir", str(tmp_path / "a")]) == 0
    lines = _status_lines(caplog)
    assert len(lines) == 4 and "800/800 env steps" in lines[-1] and "last evaluation" in lines[-1]
    assert str(tmp_path / "a") in lines[0]
    caplog.clear()
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "400", "--logdir", str(tmp_path / "b"),
                     "--quiet"]) == 0
    assert _status_lines(caplog) == []
    capsys.readouterr()
    # --progress: the bar although stderr is not a terminal, and no status lines.
    assert cli_main(["train", cfg, "--backend", "pytorch", "--steps", "400", "--logdir", str(tmp_path / "c"),
                     "--progress"]) == 0
    assert _status_lines(caplog) == [] and "400/400" in capsys.readouterr().err
