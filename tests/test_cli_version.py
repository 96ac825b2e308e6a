"""``rlgraph --version`` and ``-v`` before or after the subcommand."""
import importlib.metadata
import logging
import subprocess
import sys

import pytest

from rlgraph.cli import main as cli_main


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rlgraph {importlib.metadata.version('rlgraph')}"


def test_version_from_the_command_line():
    out = subprocess.run([sys.executable, "-m", "rlgraph.cli", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"rlgraph {importlib.metadata.version('rlgraph')}"


@pytest.mark.parametrize("argv, level", [
    (["schema", "-o", "{out}"], logging.WARNING),
    (["-v", "schema", "-o", "{out}"], logging.DEBUG),
    (["schema", "-o", "{out}", "-v"], logging.DEBUG),
    (["schema", "--verbose", "-o", "{out}"], logging.DEBUG),
])
def test_verbose_before_or_after_the_subcommand(tmp_path, monkeypatch, capsys, argv, level):
    levels = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kwargs: levels.append(kwargs["level"]))
    out = tmp_path / "schema.json"
    assert cli_main([a.format(out=out) for a in argv]) == 0
    assert levels == [level] and out.is_file()


def test_verbose_after_train_is_accepted(capsys):
    # Parsed, then refused for a reason of its own (--resume without --logdir): -v is no parse error there.
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["train", "cfg.json", "--resume", "-v"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--resume needs --logdir" in err and "unrecognized" not in err
