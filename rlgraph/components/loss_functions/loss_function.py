"""The base class of loss functions."""
from rlgraph.components.component import Component
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphAPIError


class LossFunction(Component):
    """A component that turns network outputs and experience into a scalar loss to minimize.

    Every loss function has two API methods over the same named inputs (documented per subclass):

    - ``loss(...)``: the mean loss, ``mean_i(w_i * loss_per_item_i)`` with importance weights ``w`` (all 1
      unless the loss uses them), a scalar. Subclasses may return further outputs after it (e.g. the TD
      errors or sequence priorities a prioritized replay needs), documented per subclass.
    - ``loss_per_item(...)``: the unweighted loss of each batch item [B] (a transition, or a whole
      trajectory / sequence for sequence losses).

    Targets (bootstrapped returns, V-trace targets, advantages) are constants for the gradients.
    """

    default_scope = "loss-function"

    def __init__(self, *sub_components, scope=None, **kwargs):
        super().__init__(*sub_components, scope=scope, **kwargs)

    @graph_fn
    def _graph_fn_average(self, loss_per_item, importance_weights=None):
        """``mean_i(w_i * loss_per_item_i)`` (plain mean without weights)."""
        if importance_weights is not None:
            loss_per_item = self.ops.cast(importance_weights, loss_per_item.dtype) * loss_per_item
        return self.ops.mean(loss_per_item)

    def select_importance_weights(self, importance_weights, use_importance_weights):
        """Returns the weights to apply: ``importance_weights`` if the loss uses them, else None.

        Call this from an API body, so a missing argument is reported while the graph is assembled.

        Raises:
            RLGraphAPIError: The loss was configured to use importance weights, but none were passed.
        """
        if not use_importance_weights:
            return None
        if importance_weights is None:
            raise RLGraphAPIError(f"{type(self).__name__} '{self.global_scope}', API method 'loss': configured with "
                                  f"importance_weights=True, but argument 'importance_weights' [B] was not given.")
        return importance_weights
