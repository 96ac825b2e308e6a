"""benchmarks/atari_learning.py: the curves it writes read back as the same runs (``--curves``)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import atari_learning  # noqa: E402


def test_written_curves_read_back_as_the_same_runs(tmp_path):
    rng = np.random.default_rng(0)
    curves = [dict(name=name, steps=np.cumsum(rng.integers(500, 3000, n)).astype(float),
                   seconds=np.cumsum(rng.uniform(0.5, 3.0, n)), returns=rng.uniform(-21, 21, n), summary={})
              for name, n in (("appo_s1", 40), ("impala_s1", 7), ("ppo_single_file", 1))]
    atari_learning.write_outputs(curves, str(tmp_path), "test")
    assert os.path.getsize(tmp_path / "learning.png") > 0
    back = atari_learning.stored_curves(str(tmp_path / "curves.csv"))
    assert [c["name"] for c in back] == ["appo_s1", "impala_s1", "ppo_single_file"]
    for before, after in zip(curves, back):
        np.testing.assert_array_equal(after["steps"], before["steps"])
        np.testing.assert_allclose(after["seconds"], before["seconds"], atol=0.005)
        np.testing.assert_allclose(after["returns"], before["returns"], atol=0.0005)
    # Drawn again beside nothing new: the same CSV.
    again = tmp_path / "again"
    again.mkdir()
    atari_learning.write_outputs(back, str(again), "again")
    assert (again / "curves.csv").read_text() == (tmp_path / "curves.csv").read_text()
