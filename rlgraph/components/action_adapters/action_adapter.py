"""The linear head that turns network outputs into the distribution parameters of one action space."""
import numpy as np

from rlgraph.components.layers.dense_layer import DenseLayer
from rlgraph.spaces import ContainerSpace, FloatBox, IntBox, Space
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError


def check_primitive_action_space(space, where):
    """Raises ``RLGraphSpaceError`` unless ``space`` is a categorical IntBox or a FloatBox.

    Args:
        space: The action space.
        where: Who asks, for the message (e.g. "ActionAdapter 'policy/action-adapter'").
    """
    if isinstance(space, ContainerSpace):
        raise RLGraphSpaceError(f"{where}: expected one primitive action space (IntBox or FloatBox), got the "
                                f"container {space!r}; use one adapter per flat key (Policy does).")
    if isinstance(space, IntBox):
        if space.num_categories is None:
            raise RLGraphSpaceError(f"{where}: an IntBox action space needs one uniform number of categories "
                                    f"(e.g. IntBox(4) or IntBox(4, shape=(2,))), got {space!r}.")
        if int(np.min(space.low)) != 0:
            raise RLGraphSpaceError(f"{where}: categorical actions must start at 0 (IntBox(n)), got {space!r}.")
        return
    if not isinstance(space, FloatBox):
        raise RLGraphSpaceError(f"{where}: expected an IntBox (categorical) or FloatBox (Gaussian) action space, "
                                f"got {space!r}.")


class ActionAdapter(DenseLayer):
    """A linear layer from network outputs to the parameters of one primitive action space's distribution.

    - ``IntBox(n)`` with item shape ``s``: logits ``[..., *s, n]`` (for ``Categorical``).
    - ``FloatBox`` with item shape ``s``: a tuple ``(mean, log_std)``, each ``[..., *s]`` (for ``Normal``).

    Args:
        action_space: The primitive action space (a Space or spec); None: the action space handed to the build.
        kernel_initializer: Initializer of the kernel (see ``rlgraph.utils.initializers``).
        bias_initializer: Initializer of the bias.

    API:
        call(inputs): The distribution parameters for network outputs ``inputs`` (a FloatBox ``[..., d]``).
    """

    __aliases__ = ("action-head",)

    default_scope = "action-adapter"

    def __init__(self, action_space=None, kernel_initializer="glorot_uniform", bias_initializer="zeros", scope=None,
                 device=None, trainable=None):
        if action_space is not None and not isinstance(action_space, Space):
            action_space = Space.from_spec(action_space, _path="ActionAdapter.action_space")
        if action_space is not None:
            check_primitive_action_space(action_space, "ActionAdapter, constructor argument 'action_space'")
        self.action_space = action_space
        super().__init__(units=self._units_for(action_space) if action_space is not None else 1, activation=None,
                         kernel_initializer=kernel_initializer, bias_initializer=bias_initializer, scope=scope,
                         device=device, trainable=trainable)
        self.item_shape = None
        self.num_categories = None

    @staticmethod
    def _units_for(space):
        size = int(np.prod(space.shape, dtype=np.int64))
        return size * space.num_categories if isinstance(space, IntBox) else 2 * size

    def _resolve_action_space(self, action_space):
        space = self.action_space if self.action_space is not None else action_space
        if space is None:
            raise RLGraphSpaceError(f"ActionAdapter '{self.global_scope}': no action space; pass action_space to "
                                    f"the constructor or to the build (executor / ComponentTest).")
        check_primitive_action_space(space, f"ActionAdapter '{self.global_scope}'")
        return space

    def check_input_spaces(self, input_spaces, action_space=None):
        super().check_input_spaces(input_spaces, action_space)
        self._resolve_action_space(action_space)

    def create_variables(self, input_spaces, action_space=None):
        space = self._resolve_action_space(action_space)
        self.units = self._units_for(space)
        self.item_shape = tuple(int(d) for d in space.shape)
        self.num_categories = space.num_categories if isinstance(space, IntBox) else None
        super().create_variables(input_spaces, action_space)

    @rlgraph_api
    def call(self, inputs):
        return self._graph_fn_to_parameters(self._graph_fn_call(inputs))

    @graph_fn(returns=1)
    def _graph_fn_to_parameters(self, flat):
        if self.num_categories is not None and not self.item_shape:
            return flat
        ops = self.ops
        lead = ops.shape(flat)[:-1]
        if self.num_categories is not None:
            return ops.reshape(flat, lead + self.item_shape + (self.num_categories,))
        k = self.units // 2
        return ops.reshape(flat[..., :k], lead + self.item_shape), ops.reshape(flat[..., k:], lead + self.item_shape)
