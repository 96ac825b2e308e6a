"""Base class of probability distributions over actions."""
import numpy as np

from rlgraph.components.component import Component
from rlgraph.spaces import BoolBox, ContainerSpace, FloatBox, IntBox, Space
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import spec_error


class Distribution(Component):
    """A parameterized distribution; the parameters come in as tensors (e.g. from an ``ActionAdapter``).

    Values are factorized over the action's own dimensions: ``log_prob``, ``entropy`` and ``kl_divergence``
    return one value per action component (the shape of one sample); sum over the last ``action_space.rank``
    axes for the joint value (``Policy`` does).

    Args:
        action_space: The primitive space of the values (its dtype is the dtype of samples); None: the
            action space handed to the build if it is primitive, else the distribution's default dtype.

    API:
        sample_stochastic(parameters): A random sample.
        sample_deterministic(parameters): The most likely value (mode).
        draw(parameters, deterministic=False): ``sample_deterministic`` where ``deterministic`` (a Python bool or a
            bool tensor, scalar or one per item), else ``sample_stochastic``.
        draw_with_log_prob(parameters, deterministic=False): ``(values, log_prob(values))`` of ``draw``.
        log_prob(parameters, values): Log-probability (density) of ``values``.
        entropy(parameters): Entropy.
        kl_divergence(parameters, other_parameters): KL(self || other).
    """

    #: The primitive space type this distribution models (IntBox, FloatBox).
    space_type = Space

    def __init__(self, action_space=None, scope=None, **kwargs):
        if type(self) is Distribution:
            raise spec_error("Distribution", "type", "Distribution is abstract; give a concrete type, e.g. "
                             "'categorical' or 'normal'.")
        super().__init__(scope=scope, **kwargs)
        if action_space is not None and not isinstance(action_space, Space):
            action_space = Space.from_spec(action_space, _path=f"{type(self).__name__}.action_space")
        if action_space is not None:
            self.check_action_space(action_space, "constructor argument 'action_space'")
        self.action_space = action_space
        self.dtype = None

    @classmethod
    def for_space(cls, space, **kwargs):
        """The default distribution of a primitive action space: Categorical (IntBox) or Normal (FloatBox)."""
        from rlgraph.components.distributions.categorical import Categorical
        from rlgraph.components.distributions.normal import Normal
        if isinstance(space, IntBox):
            return Categorical(action_space=space, **kwargs)
        if isinstance(space, FloatBox):
            return Normal(action_space=space, **kwargs)
        raise RLGraphSpaceError(f"No default distribution for action space {space!r}: supported are IntBox "
                                f"(categorical) and FloatBox (normal).")

    def check_action_space(self, space, where):
        """Raises ``RLGraphSpaceError`` unless ``space`` is a primitive space this distribution models."""
        if isinstance(space, ContainerSpace) or not isinstance(space, self.space_type):
            raise RLGraphSpaceError(f"{type(self).__name__} ({where}): expected a primitive "
                                    f"{self.space_type.__name__} action space, got {space!r}.")

    # --- build ----------------------------------------------------------------------------------------------
    def check_input_spaces(self, input_spaces, action_space=None):
        if "parameters" in input_spaces:
            self._check_parameters(input_spaces["parameters"], "parameters")
        if "other_parameters" in input_spaces:
            self._check_parameters(input_spaces["other_parameters"], "other_parameters")
            if "parameters" in input_spaces and (input_spaces["parameters"].strip_ranks()
                                                 != input_spaces["other_parameters"].strip_ranks()):
                raise RLGraphSpaceError(self._where("kl_divergence", "other_parameters") + f": expected the "
                                        f"same space as 'parameters' ({input_spaces['parameters']!r}), got "
                                        f"{input_spaces['other_parameters']!r}.")
        if "values" in input_spaces:
            self._check_values(input_spaces["values"], input_spaces.get("parameters"))
        det = input_spaces.get("deterministic")
        if det is not None and det is not bool and not (isinstance(det, BoolBox) and det.rank == 0):
            raise RLGraphSpaceError(self._where("draw", "deterministic") + f": expected a bool (Python bool or "
                                    f"scalar BoolBox, optionally batched), got {det!r}.")

    def create_variables(self, input_spaces, action_space=None):
        space = self.action_space
        if space is None and isinstance(action_space, self.space_type) and not isinstance(action_space,
                                                                                          ContainerSpace):
            space = action_space
        self.dtype = np.dtype(space.dtype) if space is not None else np.dtype(self.default_dtype)

    #: The dtype of samples when no action space is known.
    default_dtype = "float32"

    def _where(self, api, arg):
        return f"{type(self).__name__}, API method '{api}', argument '{arg}'"

    def _check_parameters(self, space, arg):
        """Raises ``RLGraphSpaceError`` if ``space`` cannot hold this distribution's parameters."""
        raise NotImplementedError

    def _check_values(self, space, parameters_space):
        """Raises ``RLGraphSpaceError`` if ``space`` cannot hold values of this distribution."""
        raise NotImplementedError

    # --- API ------------------------------------------------------------------------------------------------
    @rlgraph_api
    def sample_stochastic(self, parameters):
        return self._graph_fn_sample_stochastic(parameters)

    @rlgraph_api
    def sample_deterministic(self, parameters):
        return self._graph_fn_sample_deterministic(parameters)

    @rlgraph_api
    def draw(self, parameters, deterministic=False):
        if isinstance(deterministic, (bool, np.bool_)):  # A Python constant: choose while wiring.
            return self.sample_deterministic(parameters) if deterministic else self.sample_stochastic(parameters)
        return self._graph_fn_select(deterministic, self._graph_fn_sample_deterministic(parameters),
                                     self._graph_fn_sample_stochastic(parameters))

    @rlgraph_api
    def draw_with_log_prob(self, parameters, deterministic=False):
        values = self.draw(parameters, deterministic)
        return values, self._graph_fn_log_prob(parameters, values)

    @rlgraph_api
    def log_prob(self, parameters, values):
        return self._graph_fn_log_prob(parameters, values)

    @rlgraph_api
    def entropy(self, parameters):
        return self._graph_fn_entropy(parameters)

    @rlgraph_api
    def kl_divergence(self, parameters, other_parameters):
        return self._graph_fn_kl_divergence(parameters, other_parameters)

    # --- graph functions (the sampling and density ones are the subclasses') ------------------------------
    @graph_fn
    def _graph_fn_select(self, deterministic, if_deterministic, if_stochastic):
        ops = self.ops
        flag = ops.asarray(deterministic, "bool", like=if_deterministic)
        for _ in range(ops.ndim(if_deterministic) - ops.ndim(flag)):  # One flag per item: over its own axes too.
            flag = ops.expand_dims(flag, -1)
        return ops.where(flag, if_deterministic, if_stochastic)
