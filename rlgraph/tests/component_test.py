"""``ComponentTest``: unit-test one component (or any sub-graph) on a backend."""
import numpy as np

from rlgraph.executors.graph_executor import GraphExecutor
from rlgraph.utils.errors import RLGraphError


class ComponentTest:
    """Builds ``component`` as the root of a graph and runs its API methods.

    Args:
        component: The component to test (it becomes the root).
        input_spaces: Maps API argument names to spaces (or ``int``/``float``/``bool``).
        action_space: The action space handed to the components.
        backend: "tf", "pytorch" or "jax" (default ``$RLGRAPH_BACKEND`` or what is installed; JAX is
            never the default).
        seed: Seed for initial values and random ops.
        **executor_kwargs: Passed on to the executor (e.g. ``device``).
    """

    def __init__(self, component, input_spaces=None, action_space=None, backend=None, seed=10, **executor_kwargs):
        self.component = component
        self.executor = GraphExecutor.create(backend=backend, root_component=component, input_spaces=input_spaces,
                                             action_space=action_space, seed=seed, **executor_kwargs)
        self.backend = self.executor.backend.name
        self.meta_graph = self.executor.meta_graph

    def test(self, api_call, expected_outputs=None, decimals=7):
        """Runs one API method and optionally checks its outputs.

        Args:
            api_call: ``"method"``, or ``("method", [args...])`` / ``("method", single_arg)``.
            expected_outputs: If not None, the outputs must equal these (nested structures compared leaf by
                leaf, floats to ``decimals`` places).
            decimals: Precision of float comparisons.

        Returns:
            The outputs as numpy (nested structures stay nested).
        """
        if isinstance(api_call, str):
            name, args = api_call, []
        else:
            name, args = api_call[0], api_call[1] if len(api_call) > 1 else []
            if not isinstance(args, list):
                args = [args]
        outputs = self.executor.execute(name, *args)
        if expected_outputs is not None:
            assert_equal_nested(outputs, expected_outputs, decimals, path=name)
        return outputs

    def read_variable_values(self, *variables):
        """Numpy values of variables (objects, names or components); see ``GraphExecutor``."""
        return self.executor.read_variable_values(*variables)

    def variables(self, trainable_only=False):
        return self.executor.variables(trainable_only)

    def terminate(self):
        self.executor.terminate()


def assert_equal_nested(actual, expected, decimals=7, path="outputs"):
    """Asserts that two nested structures (dicts, tuples/lists, arrays, scalars) are equal."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            raise AssertionError(f"{path}: expected a dict with keys {sorted(expected)}, got {actual!r}")
        for k in expected:
            assert_equal_nested(actual[k], expected[k], decimals, f"{path}[{k!r}]")
    elif isinstance(expected, (tuple, list)) and not isinstance(actual, np.ndarray):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            raise AssertionError(f"{path}: expected a sequence of length {len(expected)}, got {actual!r}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_equal_nested(a, e, decimals, f"{path}[{i}]")
    elif expected is None:
        if actual is not None:
            raise AssertionError(f"{path}: expected None, got {actual!r}")
    else:
        e, a = np.asarray(expected), np.asarray(actual)
        if e.dtype.kind in "fc" or a.dtype.kind in "fc":
            np.testing.assert_array_almost_equal(a, e, decimal=decimals, err_msg=path)
        else:
            np.testing.assert_array_equal(a, e, err_msg=path)


def run_on_backends(make_component, input_spaces, calls, backends=("tf", "pytorch"), action_space=None, seed=10,
                    decimals=5):
    """Builds a fresh component on each backend, runs the same calls, and asserts the outputs agree.

    Args:
        make_component: A callable returning a new (unbuilt) component.
        input_spaces: As for ``ComponentTest``.
        calls: A list of ``("method", [args...])``.
        backends: The backends to compare.
        decimals: Precision of the comparison.

    Returns:
        A dict backend -> list of outputs (one per call).
    """
    from rlgraph.utils.backend import backend_available
    results = {}
    for backend in backends:
        if not backend_available(backend):
            raise RLGraphError(f"run_on_backends: backend '{backend}' is not installed.")
        test = ComponentTest(make_component(), input_spaces, action_space=action_space, backend=backend, seed=seed)
        results[backend] = [test.test(call) for call in calls]
        test.terminate()
    first, *others = backends
    for other in others:
        for i, call in enumerate(calls):
            assert_equal_nested(results[other][i], results[first][i], decimals,
                                path=f"{call[0]} ({other} vs {first})")
    return results
