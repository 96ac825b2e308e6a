"""Bad run input on the command line: one clear line naming what is wrong, before anything is built."""
import pytest

from rlgraph.cli import main as cli_main
from small_configs import small_dqn_config


@pytest.mark.parametrize("extra, message", [
    (["--steps", "-5"], "steps: expected a positive int or null, got -5"),
    (["--seconds", "-1"], "seconds: expected a finite number > 0 or null, got -1.0"),
    (["--seed", "-1"], "seed: expected an int >= 0, got -1"),
])
def test_bad_budgets_and_seeds_are_one_line(tmp_path, capsys, extra, message):
    cfg = small_dqn_config(tmp_path)
    assert cli_main(["train", cfg, "--backend", "pytorch", "--logdir", str(tmp_path / "r")] + extra) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_logdir_that_is_a_file_or_cannot_be_made_is_one_line(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path)
    (tmp_path / "file").write_text("x")
    assert cli_main(["train", cfg, "--steps", "10", "--logdir", str(tmp_path / "file")]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert cli_main(["train", cfg, "--steps", "10", "--logdir", str(tmp_path / "file" / "sub")]) == 2
    err = capsys.readouterr().err
    assert "cannot be created" in err and "Traceback" not in err


@pytest.mark.parametrize("train_spec, message", [
    ({"chunk_steps": 0}, "train_spec.chunk_steps: expected a positive int, got 0"),
    ({"seconds": -3}, "train_spec.seconds: expected a finite number > 0 or null, got -3"),
    ({"eval_every_steps": -1}, "train_spec.eval_every_steps: expected a positive int or null, got -1"),
    ({"target_return": "high"}, "train_spec.target_return: expected a finite number or null, got 'high'"),
    ({"steps": "abc"}, "train_spec.steps: expected a positive int or null, got 'abc'"),
    ({"stop_at_target": "yes"}, "train_spec.stop_at_target: expected a bool (true or false), got 'yes'"),
    ({"chunk_step": 10}, "train_spec.chunk_step: unknown key 'chunk_step'. Did you mean 'chunk_steps'?"),
])
def test_bad_train_spec_values_name_the_key(tmp_path, capsys, train_spec, message):
    cfg = small_dqn_config(tmp_path, train_spec=train_spec)
    assert cli_main(["train", cfg, "--steps", "10", "--logdir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_environment_spec_null_is_one_line(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path, environment_spec=None)
    assert cli_main(["train", cfg, "--steps", "10", "--logdir", str(tmp_path / "r")]) == 2
    assert "environment_spec must be a JSON object" in capsys.readouterr().err


def test_a_binary_or_directory_config_is_one_line(tmp_path, capsys):
    path = tmp_path / "binary.json"
    path.write_bytes(bytes(range(256)))
    assert cli_main(["train", str(path), "--steps", "10", "--logdir", str(tmp_path / "r")]) == 2
    assert "is not a text (UTF-8 JSON) file" in capsys.readouterr().err
    assert cli_main(["train", str(tmp_path), "--steps", "10", "--logdir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and "Traceback" not in err
