"""Start-up: what a run imports before its first environment step, and the start-up probe.

Each check runs in a fresh interpreter (``sys.modules`` of this test process holds whatever other tests
imported). No timing assertions: ``benchmarks/startup.py`` measures the times.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from rlgraph.utils.backend import backend_available

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
#: Modules that nothing before a run's first environment step needs (plots, distributed engines, schemas).
END_OR_ELSEWHERE = ("matplotlib", "ray", "grpc", "jsonschema")


def run_python(code, **env):
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def loaded(names):
    return f"[m for m in {tuple(names)!r} if m in sys.modules]"


def test_import_rlgraph_loads_no_backend_and_nothing_heavy():
    code = ("import sys, json, rlgraph, rlgraph.agents, rlgraph.environments, rlgraph.engines.runner, "
            "rlgraph.training, rlgraph.workers, rlgraph.trajectories; "
            f"print(json.dumps({loaded(('torch', 'tensorflow') + END_OR_ELSEWHERE)}))")
    assert run_python(code) == []


@pytest.mark.skipif(not backend_available("pytorch"), reason="needs PyTorch")
def test_pytorch_run_to_its_first_step_imports_neither_tensorflow_nor_end_of_run_modules():
    # An APPO agent built on PyTorch, one vector step of the local worker, and the trainer's TensorBoard writer.
    code = f"""
import sys, json, tempfile
from rlgraph.engines.runner import load_config, make_engine
from rlgraph.training.trainer import _summary_writer_class
config, _ = load_config("configs/appo_cartpole.json")
worker, agent, _ = make_engine(config, backend="pytorch")
worker.run(1)
writer = _summary_writer_class()(tempfile.mkdtemp())
writer.close()
print(json.dumps({loaded(('tensorflow',) + END_OR_ELSEWHERE)}))
"""
    assert run_python(code) == []


def test_tensorboard_writer_is_imported_without_torch():
    # tensorboardX imports torch when it can: a TensorFlow run must not pay for PyTorch's import.
    code = f"""
import sys, json, importlib.util
from rlgraph.training.trainer import _summary_writer_class
writer_class = _summary_writer_class()
out = {loaded(('torch',))}
if importlib.util.find_spec("torch") is not None:
    import torch  # Still importable afterwards.
    out.append(torch.__name__ == "torch")
print(json.dumps(out))
"""
    out = run_python(code)
    assert "torch" not in out and out in ([], [True])


def test_scalar_writer_writes_the_scalars_it_was_given(tmp_path):
    # Scalars are buffered and written as one event per step; they read back as given (tags cleaned as
    # tensorboardX cleans them).
    from rlgraph.training.trainer import _ScalarWriter, _summary_writer_class
    writer = _ScalarWriter(_summary_writer_class()(str(tmp_path)))
    given = [("episode/return", 1.5, 10), ("episode/return", 2.5, 10), ("episode/length", 7, 10),
             ("update/loss", 0.25, 20), ("bad tag!", 3.0, 20)]
    for tag, value, step in given[:3]:
        writer.add_scalar(tag, value, step)
    writer.flush()
    for tag, value, step in given[3:]:
        writer.add_scalar(tag, value, step)
    writer.close()
    got = []
    for name in sorted(os.listdir(tmp_path)):
        got += _read_scalars(os.path.join(tmp_path, name))
    expected = [(tag.replace(" ", "_").replace("!", "_"), float(value), step) for tag, value, step in given]
    assert got == expected


def _read_scalars(path):
    """(tag, value, step) of the scalar summaries in a TensorBoard event file (TFRecord framing)."""
    import struct

    from tensorboardX.proto.event_pb2 import Event
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        event = Event.FromString(data[pos + 12:pos + 12 + length])
        pos += 12 + length + 4
        out += [(v.tag, v.simple_value, event.step) for v in event.summary.value]
    return out


@pytest.mark.skipif(not backend_available("pytorch"), reason="needs PyTorch")
def test_startup_probe_marks_the_first_environment_step(tmp_path):
    probe = tmp_path / "first_step"
    before = time.time()
    proc = subprocess.run([sys.executable, "-m", "rlgraph.cli", "train", "configs/appo_cartpole.json", "--backend",
                           "pytorch", "--steps", "1", "--logdir", str(tmp_path / "run")], cwd=ROOT,
                          capture_output=True, text=True,
                          env=dict(os.environ, RLGRAPH_STARTUP_PROBE=str(probe), TF_CPP_MIN_LOG_LEVEL="3"))
    after = time.time()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert before < float(probe.read_text()) < after
