"""Per-item decisions whether to explore, with probability epsilon."""
from rlgraph.components.common.time_dependent_parameters import TimeDependentParameter
from rlgraph.components.component import Component
from rlgraph.spaces import BoxSpace, FloatBox, Space
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Schedule, check


def _check_scalar_float(space, where):
    if space is float or space is int:
        return
    if not isinstance(space, FloatBox) or space.rank != 0:
        raise RLGraphSpaceError(f"{where}: expected a float (Python float or a scalar FloatBox, optionally one per "
                                f"item), got {space!r}.")


class EpsilonExploration(Component):
    """Draws, for each item of a batch, whether to explore: ``uniform(0, 1) < epsilon``.

    Epsilon follows a schedule over the fraction of training done (``time_percentage`` in [0, 1]), e.g.
    ``["linear", 1.0, 0.05]`` anneals from 1.0 to 0.05 (Mnih et al. 2015), or is a constant such as an
    Ape-X actor's fixed epsilon (Horgan et al. 2018; see ``apex_epsilon``).

    Args:
        epsilon_spec: Anything ``TimeDependentParameter.from_spec`` accepts: a number, a list such as
            ``["linear", 1.0, 0.05]`` or a dict spec.

    API:
        get_epsilon(time_percentage=None): Epsilon at ``time_percentage`` (None: at 0.0, for constants).
        do_explore(sample, time_percentage=None): A bool per item of ``sample`` (its batch, or batch and
            time, dimensions; the first leaf of a container): True with probability epsilon.
        explore_mask(sample, epsilon): The same with a given epsilon, a scalar or one per item.
    """

    default_scope = "epsilon-exploration"

    def __init__(self, epsilon_spec=("linear", 1.0, 0.1), scope=None, **kwargs):
        if isinstance(epsilon_spec, tuple):
            epsilon_spec = list(epsilon_spec)
        check("EpsilonExploration", "epsilon_spec", epsilon_spec, Schedule(min=0.0, max=1.0))
        self.epsilon = TimeDependentParameter.from_spec(epsilon_spec, _path="epsilon_spec", scope="epsilon")
        super().__init__(self.epsilon, scope=scope, **kwargs)
        self._sample_space = None

    def check_input_spaces(self, input_spaces, action_space=None):
        sample = input_spaces.get("sample")
        if sample is not None:
            leaves = sample.flatten() if isinstance(sample, Space) else {}
            if not leaves or not all(isinstance(s, BoxSpace) and s.has_batch_rank for s in leaves.values()):
                raise RLGraphSpaceError(f"API methods 'do_explore'/'explore_mask', argument 'sample': expected a "
                                        f"batched space (values with a batch rank), got {sample!r}.")
        if "time_percentage" in input_spaces:
            _check_scalar_float(input_spaces["time_percentage"], "API method 'do_explore', argument 'time_percentage'")
        if "epsilon" in input_spaces:
            _check_scalar_float(input_spaces["epsilon"], "API method 'explore_mask', argument 'epsilon'")

    def create_variables(self, input_spaces, action_space=None):
        sample = input_spaces.get("sample")
        self._sample_space = sample.strip_ranks() if isinstance(sample, Space) else None

    def _first_leaf(self, sample):
        """The first primitive value of ``sample`` and its item rank (plain Python, backend-free)."""
        if not isinstance(sample, (dict, tuple)):  # A primitive sample space: the value is its only leaf.
            flat_spaces = self._sample_space.flatten()
            if len(flat_spaces) == 1 and "" in flat_spaces:
                return sample, len(flat_spaces[""].shape)
        flat = self._sample_space.flatten_value(sample)
        key = next(iter(flat))
        return flat[key], len(self._sample_space.flatten()[key].shape)

    @rlgraph_api
    def get_epsilon(self, time_percentage=None):
        return self.epsilon.get(0.0 if time_percentage is None else time_percentage)

    @rlgraph_api
    def do_explore(self, sample, time_percentage=None):
        return self._graph_fn_explore_mask(sample, self.get_epsilon(time_percentage))

    @rlgraph_api
    def explore_mask(self, sample, epsilon):
        return self._graph_fn_explore_mask(sample, epsilon)

    @graph_fn
    def _graph_fn_explore_mask(self, sample, epsilon):
        ops = self.ops
        leaf, item_rank = self._first_leaf(sample)
        lead = ops.ndim(leaf) - item_rank
        uniform = ops.random_uniform(ops.shape(leaf)[:lead], like=leaf)
        eps = ops.asarray(epsilon, "float32", like=leaf)  # A schedule's epsilon (the common case) as it is.
        for _ in range(lead - ops.ndim(eps)):  # One epsilon per item [B] against a [B, T] mask: broadcast over T.
            eps = ops.expand_dims(eps, -1)
        return uniform < eps
