"""``rlgraph export`` never damages a run: an output inside its checkpoints or a stored model, over the files a run
keeps in its logdir, or that is a run's logdir is refused in one line, and the run stays whole (its checkpoint
still loads and passes its checksums); an existing output is replaced only with ``--overwrite``, and only once
the new one is complete."""
import json
import os
import shutil

import pytest

from rlgraph.cli import main as cli_main
from rlgraph.export import export_policy
from rlgraph.training.checkpoint_store import CheckpointStore
from rlgraph.utils.backend import backend_available
from rlgraph.utils.errors import RLGraphError

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

pytestmark = pytest.mark.skipif(not backend_available("pytorch"), reason="needs PyTorch")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A short PyTorch DQN run on CartPole (a checkpoint, config.json, summary.json)."""
    logdir = tmp_path_factory.mktemp("export-safety") / "run"
    sets = ["environment_spec.num_envs=4", "update_spec.steps_before_update=100", "update_spec.batch_size=16",
            "train_spec.eval_episodes=0", "train_spec.eval_every_steps=null", "train_spec.chunk_steps=128",
            "train_spec.stop_at_target=false"]
    assert cli_main(["train", os.path.join(CONFIGS, "dqn_cartpole.json"), "--backend", "pytorch", "--steps", "256",
                     "--logdir", str(logdir), "--quiet"] + [a for s in sets for a in ("--set", s)]) == 0
    return logdir


def _snapshot(logdir):
    """{relative path: bytes} of every file of the run (symbolic links as their targets)."""
    out = {}
    for root, dirs, files in os.walk(logdir):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            key = os.path.relpath(path, logdir)
            out[key] = os.readlink(path) if os.path.islink(path) else open(path, "rb").read()
    return out


def _refused(capsys, args, message):
    code = cli_main(["export"] + [str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in err, err
    return lines[0]


def test_exports_into_a_run_are_refused_and_the_run_stays_whole(run, capsys, tmp_path):
    before = _snapshot(run)
    checkpoint = os.path.realpath(run / "checkpoint")
    for output in (run / "checkpoint" / "model" / "state_dict.pt", run / "checkpoint" / "model" / "variables.npz",
                   os.path.join(checkpoint, "policy.pt"), run / "checkpoints" / "policy.pt"):
        _refused(capsys, [run, "--format", "torchscript", "--output", output, "--overwrite"],
                 f"is inside the checkpoint '{checkpoint}' of the run '{run}'" if "model" in str(output)
                 else "would write into the run")
    for name in ("config.json", "summary.json", "checkpoint", "learning_curve.png", ".lock"):
        line = _refused(capsys, [run, "--format", "torchscript", "--output", run / name, "--overwrite"],
                        f"would write into the run '{run}'")
        assert "export beside them under a new name, or outside the run" in line
    _refused(capsys, [run, "--format", "torchscript", "--output", run, "--overwrite"], "is a run's logdir")
    # A symbolic link elsewhere that points into the checkpoint is followed.
    os.symlink(os.path.join(checkpoint, "model", "variables.npz"), tmp_path / "link.pt")
    _refused(capsys, [run, "--format", "torchscript", "--output", tmp_path / "link.pt", "--overwrite"],
             f"is inside the checkpoint '{checkpoint}'")
    # A stored model outside any run is kept whole too.
    shutil.copytree(os.path.join(checkpoint, "model"), tmp_path / "stored")
    _refused(capsys, [run, "--format", "torchscript", "--output", tmp_path / "stored" / "p.pt"],
             f"is inside the stored model '{tmp_path / 'stored'}'")
    assert _snapshot(run) == before
    path, state = CheckpointStore(str(run)).latest()  # Its checksums pass.
    assert os.path.realpath(path) == checkpoint and state["state"]["env_steps"] == 256
    with pytest.raises(RLGraphError, match="would write into the run"):  # The Python API refuses alike.
        export_policy(str(run), "torchscript", str(run / "config.json"), overwrite=True)
    # Beside the run's files, under a new name: written.
    assert cli_main(["export", str(run), "--format", "torchscript", "--output", str(run / "policy.pt")]) == 0
    os.remove(run / "policy.pt")
    assert _snapshot(run) == before


def test_an_existing_output_is_replaced_only_with_overwrite(run, capsys, tmp_path):
    import torch
    output = tmp_path / "policy.pt"
    output.write_bytes(b"an earlier file")
    _refused(capsys, [run, "--format", "torchscript", "--output", output], "already exists; add --overwrite")
    assert output.read_bytes() == b"an earlier file"
    with pytest.raises(RLGraphError, match="already exists"):
        export_policy(str(run), "torchscript", str(output))
    assert cli_main(["export", str(run), "--format", "torchscript", "--output", str(output), "--overwrite"]) == 0
    capsys.readouterr()
    assert torch.jit.load(str(output)) is not None  # The new policy, complete ...
    assert os.listdir(tmp_path) == ["policy.pt"]  # ... and no temporary file beside it.
    out = export_policy(str(run), "torchscript", str(tmp_path / "fresh.pt"))  # A new name needs no flag.
    assert out["output"] == str(tmp_path / "fresh.pt") and os.path.isfile(out["output"])


@pytest.mark.skipif(not backend_available("tf"), reason="needs TensorFlow")
def test_a_directory_is_replaced_only_where_it_holds_an_export_of_its_format(run, capsys, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    _refused(capsys, [run, "--format", "saved_model", "--output", folder], "already exists; add --overwrite")
    _refused(capsys, [run, "--format", "saved_model", "--output", folder, "--overwrite"],
             "holds no saved_model export (no saved_model.pb); it is not replaced, even with --overwrite")
    assert (folder / "keep.txt").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()  # An empty directory takes one without the flag.
    assert cli_main(["export", str(run), "--format", "saved_model", "--output", str(empty)]) == 0
    assert (empty / "saved_model.pb").is_file()
    assert cli_main(["export", str(run), "--format", "saved_model", "--output", str(empty), "--overwrite"]) == 0
    assert (empty / "saved_model.pb").is_file()
    assert sorted(os.listdir(tmp_path)) == ["empty", "notes"]  # Nothing left aside.
    assert json.loads((run / "summary.json").read_text())["env_steps"] == 256
