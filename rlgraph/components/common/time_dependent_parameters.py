"""Parameters that change over the course of training (schedules for epsilon, learning rates, ...)."""
from rlgraph.components.component import Component
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.validation import Number, Optional, Schedule, check_args, half_written_schedule, spec_error


class TimeDependentParameter(Component):
    """A value that depends on the fraction of training done, ``time_percentage`` in [0, 1].

    Anywhere a number is accepted, a schedule can be given instead: a number (constant), a list
    ``["linear", 1.0, 0.05]`` / ``["polynomial", from, to, power]`` / ``["exponential", from, to, decay_rate]``,
    or a dict ``{"type": "linear", "from_": 1.0, "to_": 0.05}``. Use ``TimeDependentParameter.from_spec``.

    API:
        get(time_percentage): The value at ``time_percentage`` (clipped into [0, 1]); scalar or batch.
    """

    default_scope = "time-dependent-parameter"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(from_=Number(), to_=Optional(Number()))

    def __init__(self, from_=1.0, to_=None, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        args = check_args(type(self).__name__, TimeDependentParameter.ARG_RULES, dict(from_=from_, to_=to_))
        self.from_ = args["from_"]
        self.to_ = self.from_ if args["to_"] is None else args["to_"]

    @classmethod
    def from_spec(cls, spec=None, _path=None, **kwargs):
        if half_written_schedule(spec):  # (["linear", 1.0] would stay at 1.0: refused, naming the form it needs.)
            Schedule().check(spec, None, _path or "schedule")
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            return Constant(value=float(spec), **kwargs)
        if isinstance(spec, (list, tuple)):
            path = _path or "schedule"
            if not spec or not isinstance(spec[0], str):
                raise spec_error(None, path, f"a list schedule starts with its type, e.g. [\"linear\", 1.0, 0.05]; "
                                 f"got {spec!r}.")
            type_ = spec[0]
            klass = cls.lookup_class(type_, f"{path}[0]")
            names = klass.positional_keys
            if len(spec) - 1 > len(names):
                raise spec_error(None, path, f"'{type_}' takes at most {len(names)} values ({', '.join(names)}), got "
                                 f"{len(spec) - 1}.")
            spec = dict(zip(names, spec[1:]), type=type_)
        return super().from_spec(spec, _path=_path, **kwargs)

    positional_keys = ("from_", "to_")

    @rlgraph_api
    def get(self, time_percentage):
        return self._graph_fn_get(time_percentage)

    @graph_fn
    def _graph_fn_get(self, time_percentage):
        ops = self.ops
        return self.value_at(ops.clip(ops.asarray(time_percentage, "float32"), 0.0, 1.0))

    def value_at(self, t):
        """The value at ``t`` (a backend tensor in [0, 1]); arithmetic only, so it serves both backends."""
        raise NotImplementedError


class Constant(TimeDependentParameter):
    """Always ``value``."""

    positional_keys = ("value",)
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(value=Number())

    def __init__(self, value=1.0, scope=None, **kwargs):
        value = check_args("Constant", Constant.ARG_RULES, dict(value=value))["value"]
        super().__init__(from_=value, to_=value, scope=scope, **kwargs)

    def value_at(self, t):
        return t * 0.0 + self.from_


class Linear(TimeDependentParameter):
    """``from_ + (to_ - from_) * t``."""

    def value_at(self, t):
        return self.from_ + (self.to_ - self.from_) * t


class Polynomial(TimeDependentParameter):
    """``(from_ - to_) * (1 - t) ** power + to_``."""

    positional_keys = ("from_", "to_", "power")
    #: What the constructor's arguments must be (``rlgraph.utils.validation``), besides ``from_`` and ``to_``.
    ARG_RULES = dict(power=Number())

    def __init__(self, from_=1.0, to_=0.0, power=2.0, scope=None, **kwargs):
        super().__init__(from_=from_, to_=to_, scope=scope, **kwargs)
        self.power = check_args("Polynomial", Polynomial.ARG_RULES, dict(power=power))["power"]

    def value_at(self, t):
        return (self.from_ - self.to_) * (1.0 - t) ** self.power + self.to_


class Exponential(TimeDependentParameter):
    """``to_ + (from_ - to_) * decay_rate ** (t * num_decays)``."""

    positional_keys = ("from_", "to_", "decay_rate", "num_decays")
    #: What the constructor's arguments must be (``rlgraph.utils.validation``), besides ``from_`` and ``to_``.
    ARG_RULES = dict(decay_rate=Number(gt=0.0, lt=1.0), num_decays=Number())

    def __init__(self, from_=1.0, to_=0.0, decay_rate=0.1, num_decays=1.0, scope=None, **kwargs):
        super().__init__(from_=from_, to_=to_, scope=scope, **kwargs)
        args = check_args("Exponential", Exponential.ARG_RULES, dict(decay_rate=decay_rate, num_decays=num_decays))
        self.decay_rate, self.num_decays = args["decay_rate"], args["num_decays"]

    def value_at(self, t):
        return self.to_ + (self.from_ - self.to_) * self.decay_rate ** (t * self.num_decays)
