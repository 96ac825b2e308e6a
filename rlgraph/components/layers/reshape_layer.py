"""Reshapes items (flatten, one-hot, new shape); folds the time rank into the batch rank and unfolds it."""
import numpy as np

from rlgraph.components.layers.layer import Layer
from rlgraph.spaces import BoxSpace, IntBox, TextBox
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphAPIError, RLGraphSpaceError
from rlgraph.utils.validation import AnyOf, Int, OneOf, Optional, Shape, check_args, spec_error


class ReshapeLayer(Layer):
    """Changes the shape of items, and optionally folds the time rank into the batch rank or unfolds it.

    API:
        call(inputs, orig_inputs=None): One-hot encodes IntBox items (if ``one_hot_categories``), then reshapes
            each item to ``new_shape`` or flattens it (a scalar item becomes shape ``(1,)``), keeping the
            leading ranks, except that

            - with ``fold_time_rank``, the two leading ranks of ``inputs`` (``[T, B, ...]`` time-major or
              ``[B, T, ...]``) become one batch rank (``[T*B, ...]`` / ``[B*T, ...]``), e.g. to run a
              component that expects one leading rank over whole sequences;
            - with ``unfold_time_rank``, the batch rank of ``inputs`` (``[N, ...]``) is split into the two
              leading ranks of ``orig_inputs``, the time-ranked value that was folded (its item shape does not
              matter, so layers may change the item shape between folding and unfolding).

            Dict/Tuple inputs are handled leaf by leaf (one-hot applies to IntBox leaves only); a Dict/Tuple
            ``orig_inputs`` must then have the same structure.

    Args:
        flatten: Flatten each item into one axis.
        one_hot_categories: One-hot encode IntBox items (as float32, the category axis appended to the item):
            True takes the number of categories from the space (``num_categories``), an int gives it. Values
            are shifted by the space's ``low`` first.
        new_shape: The shape each item is reshaped to (one dim may be -1); not together with ``flatten``.
        fold_time_rank: Fold the time rank into the batch rank.
        unfold_time_rank: Unfold the batch rank into the time and batch ranks of ``orig_inputs``.
    """

    __aliases__ = ("reshape",)

    default_scope = "reshape"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(one_hot_categories=Optional(AnyOf(OneOf(True), Int(min=1), what="true or a positive int")),
                     new_shape=Optional(Shape()))

    def __init__(self, flatten=False, one_hot_categories=None, new_shape=None, fold_time_rank=False,
                 unfold_time_rank=False, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        if flatten and new_shape is not None:
            raise spec_error("ReshapeLayer", "new_shape", "give either flatten=True or new_shape, not both.")
        if fold_time_rank and unfold_time_rank:
            raise spec_error("ReshapeLayer", "unfold_time_rank", "give either fold_time_rank=True or "
                             "unfold_time_rank=True, not both.")
        args = check_args("ReshapeLayer", ReshapeLayer.ARG_RULES,
                          dict(one_hot_categories=one_hot_categories, new_shape=new_shape))
        self.flatten = bool(flatten)
        self.one_hot_categories = args["one_hot_categories"]
        self.new_shape = args["new_shape"]
        self.fold_time_rank = bool(fold_time_rank)
        self.unfold_time_rank = bool(unfold_time_rank)
        # Flat key -> (one-hot depth or None, low, item rank after one-hot, new item shape or None).
        self._plans = None

    def _leaf_plan(self, key, space):
        where = f"ReshapeLayer, API method 'call', argument 'inputs'{f' (key {key!r})' if key else ''}"
        if not isinstance(space, BoxSpace) or isinstance(space, TextBox):
            raise RLGraphSpaceError(f"{where}: expected a numeric box, got {space!r}.")
        depth, low = None, 0
        if self.one_hot_categories is not None and isinstance(space, IntBox):
            known = space.num_categories
            depth = known if self.one_hot_categories is True else self.one_hot_categories
            if depth is None:
                raise RLGraphSpaceError(f"{where}: one_hot_categories=True needs an IntBox with uniform finite "
                                        f"bounds, got {space!r}; give the number of categories instead.")
            if known is not None and depth < known:
                raise RLGraphSpaceError(f"{where}: one_hot_categories={depth} is less than the {known} categories "
                                        f"of {space!r}.")
            low = int(space.low) if np.ndim(space.low) == 0 else 0
        item = tuple(space.shape) + ((depth,) if depth else ())
        size = int(np.prod(item, dtype=np.int64))
        out = None
        if self.flatten:
            out = (size,)
        elif self.new_shape is not None:
            known_size = int(np.prod([d for d in self.new_shape if d != -1], dtype=np.int64))
            if (size % known_size) if -1 in self.new_shape else (known_size != size):
                raise RLGraphSpaceError(f"{where}: items of shape {item} ({size} values) cannot be reshaped to "
                                        f"{self.new_shape}.")
            out = tuple(size // known_size if d == -1 else d for d in self.new_shape)
        return depth, low, len(item), out

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        for key, leaf in space.flatten().items():
            self._leaf_plan(key, leaf)
        where = "ReshapeLayer, API method 'call'"
        if self.fold_time_rank and not (space.has_batch_rank and space.has_time_rank):
            raise RLGraphSpaceError(f"{where}, argument 'inputs': fold_time_rank needs a space with batch and time "
                                    f"ranks, got {space!r}.")
        if self.unfold_time_rank:
            if not space.has_batch_rank or space.has_time_rank:
                raise RLGraphSpaceError(f"{where}, argument 'inputs': unfold_time_rank needs a space with a batch rank "
                                        f"and no time rank, got {space!r}.")
            orig = input_spaces.get("orig_inputs")
            if orig is not None and not (orig.has_batch_rank and orig.has_time_rank):
                raise RLGraphSpaceError(f"{where}, argument 'orig_inputs': expected a space with batch and time "
                                        f"ranks, got {orig!r}.")

    def create_variables(self, input_spaces, action_space=None):
        self._plans = {key: self._leaf_plan(key, space) for key, space in input_spaces["inputs"].flatten().items()}

    @rlgraph_api
    def call(self, inputs, orig_inputs=None):
        if self.unfold_time_rank and orig_inputs is None:
            raise RLGraphAPIError(f"'{self.global_scope}': call() with unfold_time_rank=True needs orig_inputs, the "
                                  f"time-ranked value that was folded.")
        if not self.unfold_time_rank and orig_inputs is not None:
            raise RLGraphAPIError(f"'{self.global_scope}': orig_inputs is only used with unfold_time_rank=True.")
        return self._graph_fn_call(inputs, orig_inputs)

    @graph_fn(split_ops=True, add_auto_key_as_first_param=True)
    def _graph_fn_call(self, key, inputs, orig_inputs):
        ops = self.ops
        depth, low, item_rank, out_shape = self._plans[key]
        if depth is not None:
            indices = inputs - low if low else inputs
            inputs = ops.one_hot(indices, depth, dtype="float32")
        if out_shape is None and not (self.fold_time_rank or self.unfold_time_rank):
            return inputs
        shape = ops.shape(inputs)
        lead_rank = len(shape) - item_rank
        if self.fold_time_rank:
            lead = (-1,)
        elif self.unfold_time_rank:
            lead = tuple(ops.shape(orig_inputs)[:2])
        else:
            lead = tuple(shape[:lead_rank])
        item = tuple(shape[lead_rank:]) if out_shape is None else tuple(out_shape)
        return ops.reshape(inputs, lead + item)
