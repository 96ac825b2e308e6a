"""``rlgraph.execution`` (the engines' package before it was named ``rlgraph.engines``) still imports, as the same
module objects, so that old scripts and pickled engine settings keep working."""
import pickle
import subprocess
import sys

import pytest


def test_old_module_paths_are_the_new_modules():
    with pytest.warns(DeprecationWarning, match="rlgraph.engines"):
        import importlib
        import rlgraph.execution  # noqa: F401
        importlib.reload(rlgraph.execution)
    import rlgraph.engines.runner
    import rlgraph.engines.execution_spec
    from rlgraph.execution import runner as old_runner
    from rlgraph.execution.execution_spec import ExecutionSpec as OldSpec
    assert old_runner is rlgraph.engines.runner
    assert OldSpec is rlgraph.engines.execution_spec.ExecutionSpec
    # A nested module through the old name is the one module too (not a second copy loaded from the same file).
    from rlgraph.execution.central_inference import wire as old_wire
    from rlgraph.engines.central_inference import wire
    assert old_wire is wire
    assert pickle.loads(pickle.dumps(OldSpec)) is OldSpec
    with pytest.raises(ModuleNotFoundError):
        import rlgraph.execution.no_such_module  # noqa: F401


def test_new_name_does_not_import_the_old_one():
    code = ("import sys, rlgraph.engines.runner, rlgraph.cli; "
            "print(any(m == 'rlgraph.execution' or m.startswith('rlgraph.execution.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
