"""Tests of rlgraph.spaces (no deep-learning backend needed)."""
import copy
import pathlib

import gymnasium.spaces as gs
import numpy as np
import pytest

from rlgraph.spaces import BoolBox, BoxSpace, ContainerSpace, Dict, FloatBox, IntBox, Space, TextBox, Tuple
from rlgraph.spaces import space_utils
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError

SEEDS = (0, 1, 7, 123)


def primitive_spaces():
    """One of each primitive kind (without ranks)."""
    return {
        "float_bounded": FloatBox(-2.0, 3.0, shape=(3,)),
        "float_unbounded": FloatBox(shape=(2, 2)),
        "float_low_only": FloatBox(low=1.5, shape=(4,)),
        "float_high_only": FloatBox(high=-1.0),
        "float_mixed_arrays": FloatBox(low=[0.0, -np.inf, 1.0, -np.inf], high=[1.0, 0.0, np.inf, np.inf]),
        "float64": FloatBox(0.0, 1.0, dtype="float64"),
        "int_categorical": IntBox(3),
        "int_bounded_arrays": IntBox(low=[-1, 0, 5], high=[2, 10, 6]),
        "int_multi_discrete": IntBox(np.array([[2, 3], [4, 5]])),
        "int_unbounded": IntBox(shape=(2,)),
        "int_uint8": IntBox(256, shape=(2, 2), dtype="uint8"),
        "bool": BoolBox(shape=(3,)),
        "bool_scalar": BoolBox(),
        "text": TextBox(shape=(2,)),
        "text_scalar": TextBox(),
    }


RANKS = [
    dict(),
    dict(add_batch_rank=True),
    dict(add_time_rank=True),
    dict(add_batch_rank=True, add_time_rank=True, time_major=False),
    dict(add_batch_rank=True, add_time_rank=True, time_major=True),
]


def sizes_for(space):
    """A `size` argument matching the space's leading ranks."""
    n = space.num_leading_ranks
    return {0: [None], 1: [4, 1, 0], 2: [(3, 2), (1, 5)]}[n]


def nested_space(**ranks):
    return Dict(
        a=Tuple(FloatBox(0.0, 1.0, shape=(2,)), IntBox(3)),
        b=BoolBox(shape=(2,)),
        c={"x": TextBox(), "y": (IntBox(low=[0, 1], high=[2, 4]), FloatBox(shape=(3,)))},
        **ranks,
    )


# ---------------------------------------------------------------------------------------------- sampling


@pytest.mark.parametrize("name", sorted(primitive_spaces()))
@pytest.mark.parametrize("ranks", RANKS)
def test_sample_stays_in_primitive_space(name, ranks):
    space = primitive_spaces()[name]
    space = space.with_batch_rank(ranks.get("add_batch_rank", False)).with_time_rank(
        ranks.get("add_time_rank", False), ranks.get("time_major", False)
    )
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        for size in sizes_for(space):
            x = space.sample(size=size, rng=rng)
            assert space.describe_mismatch(x) is None, (space, size, x)
            assert space.contains(x)
            lead = () if size is None else ((size,) if isinstance(size, int) else tuple(size))
            assert np.shape(x) == lead + space.shape
            if isinstance(space, TextBox):
                assert x.dtype.kind == "U"
            else:
                assert x.dtype == space.dtype
            z = space.zeros(size)
            assert space.contains(z), (space, z)
            assert np.shape(z) == lead + space.shape


def test_sample_without_size_gives_single_item_of_exact_dtype():
    for space in primitive_spaces().values():
        x = space.sample(rng=np.random.default_rng(0))
        assert np.shape(x) == space.shape
        if space.shape == ():
            assert isinstance(x, np.generic)
        if not isinstance(space, TextBox):
            assert x.dtype == space.dtype
        # Unranked spaces contain single items, batch-ranked ones do not.
        assert space.contains(x)
        assert not space.with_batch_rank().contains(x)


def test_sample_distributions():
    rng = np.random.default_rng(0)
    x = FloatBox(-2.0, 3.0).sample(2000, rng=rng)
    assert x.min() >= -2.0 and x.max() <= 3.0 and 0.0 < x.mean() < 1.0
    x = FloatBox(low=1.5).sample(2000, rng=rng)
    assert x.min() >= 1.5 and abs(x.mean() - 2.5) < 0.2  # 1.5 + Exp(1)
    x = FloatBox(high=-1.0).sample(2000, rng=rng)
    assert x.max() <= -1.0 and abs(x.mean() + 2.0) < 0.2
    x = FloatBox().sample(2000, rng=rng)
    assert abs(x.mean()) < 0.15 and 0.8 < x.std() < 1.2
    x = IntBox(3).sample(600, rng=rng)
    assert set(np.unique(x).tolist()) == {0, 1, 2}
    x = IntBox(2, 5).sample(600, rng=rng)
    assert set(np.unique(x).tolist()) == {2, 3, 4}
    x = BoolBox().sample(200, rng=rng)
    assert x.dtype == np.bool_ and 0 < x.sum() < 200
    assert TextBox().sample(rng=rng) != TextBox().sample(rng=rng) or True


def test_sample_is_reproducible_with_seeded_rng():
    space = nested_space(add_batch_rank=True)
    a = space.flatten_value(space.sample(5, rng=np.random.default_rng(42)))
    b = space.flatten_value(space.sample(5, rng=np.random.default_rng(42)))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_sample_size_layout_time_major_and_batch_major():
    bm = FloatBox(shape=(4,), add_batch_rank=True, add_time_rank=True)
    tm = FloatBox(shape=(4,), add_batch_rank=True, add_time_rank=True, time_major=True)
    assert bm.sample((2, 3)).shape == (2, 3, 4)
    assert tm.sample((3, 2)).shape == (3, 2, 4)
    assert bm.zeros(5).shape == (5, 4)
    assert FloatBox().sample(()).shape == ()


def test_sample_rejects_bad_size():
    with pytest.raises(RLGraphSpaceError, match="size"):
        FloatBox().sample(-1)
    with pytest.raises(RLGraphSpaceError, match="size"):
        FloatBox().sample("3")
    with pytest.raises(RLGraphSpaceError, match="size"):
        FloatBox().zeros((2, 1.5))


@pytest.mark.parametrize("ranks", RANKS)
def test_nested_sample_and_zeros_in_space(ranks):
    space = nested_space(**ranks)
    for seed in SEEDS:
        for size in sizes_for(space):
            x = space.sample(size, rng=np.random.default_rng(seed))
            assert isinstance(x, dict) and isinstance(x["a"], tuple) and isinstance(x["c"]["y"], tuple)
            assert space.describe_mismatch(x) is None
            assert space.contains(space.zeros(size))
            flat_x = space.flatten_value(x)
            for key, sub in space.flatten().items():
                if isinstance(sub, TextBox):
                    assert flat_x[key].dtype.kind == "U"
                else:
                    assert flat_x[key].dtype == sub.dtype


def test_zeros_values():
    assert FloatBox(shape=(2,)).zeros().tolist() == [0.0, 0.0]
    assert FloatBox(1.0, 2.0).zeros() == 1.0  # clipped into the bounds
    z = IntBox(low=[2, -5, 0], high=[4, -1, 3]).zeros()
    assert z.tolist() == [2, -2, 0] and z.dtype == np.int32
    assert TextBox(shape=(2,)).zeros().tolist() == ["", ""]
    assert BoolBox().zeros(3).tolist() == [False] * 3


# ---------------------------------------------------------------------------------------------- construction


def test_floatbox_construction():
    s = FloatBox()
    assert s.shape == () and s.dtype == np.float32 and s.low == -np.inf and s.high == np.inf and s.rank == 0
    s = FloatBox(low=[0.0, 1.0], high=2.0)
    assert s.shape == (2,) and s.low.tolist() == [0.0, 1.0] and s.high == 2.0 and s.flat_dim == 2
    s = FloatBox(0.0, 1.0, shape=(2, 3))
    assert s.shape == (2, 3) and s.low == 0.0 and s.flat_dim == 6 and s.rank == 2
    assert FloatBox(shape=4).shape == (4,)
    assert FloatBox(dtype="float64").dtype == np.float64
    with pytest.raises(RLGraphSpaceError, match="dtype"):
        FloatBox(dtype="int32")
    with pytest.raises(RLGraphSpaceError, match="low > high"):
        FloatBox(2.0, 1.0)
    with pytest.raises(RLGraphSpaceError, match="broadcast"):
        FloatBox(low=np.zeros(3), shape=(2,))
    with pytest.raises(RLGraphSpaceError, match="shape"):
        FloatBox(shape=(-1,))
    with pytest.raises(RLGraphSpaceError, match="NaN"):
        FloatBox(low=np.nan)
    with pytest.raises(RLGraphSpaceError, match="add_batch_rank"):
        FloatBox(add_batch_rank="yes")


def test_intbox_construction():
    s = IntBox(4)
    assert (s.low, s.high, s.num_categories, s.dtype, s.shape) == (0, 4, 4, np.int32, ())
    s = IntBox(low=2, high=5)
    assert (s.low, s.high, s.num_categories) == (2, 5, 3)
    s = IntBox(high=3)
    assert (s.low, s.high) == (0, 3)
    s = IntBox([2, 3, 4])
    assert s.shape == (3,) and s.num_categories is None and s.high.tolist() == [2, 3, 4]
    s = IntBox(3, shape=(2, 2))
    assert s.shape == (2, 2) and s.num_categories == 3
    s = IntBox()
    assert s.is_unbounded and s.num_categories is None and s.low == np.iinfo(np.int32).min
    assert s.contains(np.iinfo(np.int32).max) and s.contains(np.iinfo(np.int32).min)
    s = IntBox(256, dtype="uint8")
    assert s.num_categories == 256 and s.contains(np.uint8(255))
    with pytest.raises(RLGraphSpaceError, match="low < high"):
        IntBox(3, 3)
    with pytest.raises(RLGraphSpaceError, match="dtype"):
        IntBox(3, dtype="float32")
    with pytest.raises(RLGraphSpaceError, match="integer"):
        IntBox(2.5)
    with pytest.raises(RLGraphSpaceError, match="range"):
        IntBox(300, dtype="uint8")


def test_bool_and_text_box_construction():
    assert BoolBox(shape=(2,)).dtype == np.bool_ and BoolBox().low is None
    assert TextBox().dtype == np.dtype(np.str_) and TextBox(shape=3).shape == (3,)
    with pytest.raises(RLGraphSpaceError, match="dtype"):
        BoolBox(dtype="int32")


def test_abstract_classes_cannot_be_built():
    with pytest.raises(TypeError):
        Space()
    with pytest.raises(TypeError):
        BoxSpace()
    with pytest.raises(TypeError):
        ContainerSpace()


def test_dict_construction_and_mapping_interface():
    d = Dict({"b": FloatBox(), "a": IntBox(2)}, c=BoolBox(), d={"e": TextBox()}, f=(FloatBox(), IntBox(3)))
    assert list(d.keys()) == ["a", "b", "c", "d", "f"]
    assert list(d) == ["a", "b", "c", "d", "f"]
    assert len(d) == 5 and "a" in d and "z" not in d
    assert isinstance(d["d"], Dict) and isinstance(d["f"], Tuple)
    assert d["d/e"] == TextBox() and d["f/1"] == IntBox(3)
    assert [k for k, _ in d.items()] == list(d.keys()) and len(list(d.values())) == 5
    with pytest.raises(KeyError):
        d["z"]
    assert d.get("z") is None
    assert d.flat_dim == 1 + 1 + 1 + 1 + 2
    assert d.shape == {"a": (), "b": (), "c": (), "d": {"e": ()}, "f": ((), ())}
    assert d.rank == {"a": 0, "b": 0, "c": 0, "d": {"e": 0}, "f": (0, 0)}
    assert d.dtype["b"] == np.float32 and d.dtype["f"][1] == np.int32
    with pytest.raises(RLGraphSpaceError, match="'/'"):
        Dict({"a/b": FloatBox()})
    with pytest.raises(RLGraphSpaceError, match="strings"):
        Dict({1: FloatBox()})
    with pytest.raises(RLGraphSpaceError, match="not a space|expected a space"):
        Dict(a=3)
    with pytest.raises(RLGraphSpaceError, match="both"):
        Dict({"a": FloatBox()}, a=IntBox(2))


def test_tuple_construction_and_sequence_interface():
    t1 = Tuple(FloatBox(), IntBox(2))
    t2 = Tuple([FloatBox(), IntBox(2)])
    t3 = Tuple(spaces=(FloatBox(), IntBox(2)))
    assert t1 == t2 == t3
    assert len(t1) == 2 and t1[1] == IntBox(2) and t1[-1] == IntBox(2)
    assert list(t1) == [FloatBox(), IntBox(2)]
    assert t1.shape == ((), ()) and t1.flat_dim == 2
    with pytest.raises(IndexError):
        t1[5]
    nested = Tuple(FloatBox(), (IntBox(2), {"a": BoolBox()}))
    assert isinstance(nested[1], Tuple) and isinstance(nested[1][1], Dict)


def test_containers_pass_ranks_down_and_copy_children():
    child = FloatBox(shape=(2,), add_time_rank=True)
    d = Dict(a=child, b=Tuple(IntBox(2), add_batch_rank=False), add_batch_rank=True)
    assert child.has_time_rank and not child.has_batch_rank  # original untouched
    for sub in d.flatten().values():
        assert sub.has_batch_rank and not sub.has_time_rank
    assert d["b"].has_batch_rank
    t = Tuple(child, add_batch_rank=True, add_time_rank=True, time_major=True)
    assert t[0].has_batch_rank and t[0].has_time_rank and t[0].time_major


# ---------------------------------------------------------------------------------------------- shapes, ranks


def test_get_shape_rank_ordering():
    bm = FloatBox(shape=(4,), add_batch_rank=True, add_time_rank=True)
    tm = FloatBox(shape=(4,), add_batch_rank=True, add_time_rank=True, time_major=True)
    assert bm.shape == tm.shape == (4,)
    assert bm.get_shape() == (4,)
    assert bm.get_shape(with_batch_rank=True) == (None, 4)
    assert bm.get_shape(with_time_rank=True) == (None, 4)
    assert bm.get_shape(with_batch_rank=32, with_time_rank=10) == (32, 10, 4)
    assert tm.get_shape(with_batch_rank=32, with_time_rank=10) == (10, 32, 4)
    assert tm.get_shape(with_batch_rank=True, with_time_rank=True) == (None, None, 4)
    # Ranks the space lacks are never added.
    assert FloatBox(shape=(4,)).get_shape(with_batch_rank=True, with_time_rank=5) == (4,)
    assert FloatBox(add_time_rank=True).get_shape(with_batch_rank=8, with_time_rank=3) == (3,)
    assert bm.batch_axis == 0 and bm.time_axis == 1 and tm.batch_axis == 1 and tm.time_axis == 0
    d = Dict(a=FloatBox(shape=(2,)), b=IntBox(3), add_batch_rank=True)
    assert d.get_shape(with_batch_rank=True) == {"a": (None, 2), "b": (None,)}


def test_with_batch_rank_with_time_rank_strip_ranks_return_copies():
    s = FloatBox(shape=(2,))
    b = s.with_batch_rank()
    assert b.has_batch_rank and not s.has_batch_rank and b is not s
    assert not b.with_batch_rank(False).has_batch_rank
    t = b.with_time_rank(time_major=True)
    assert t.has_time_rank and t.time_major and t.has_batch_rank and not b.has_time_rank
    assert t.with_time_rank(False).time_major  # kept when time_major=None
    stripped = t.strip_ranks()
    assert stripped == s and t.has_batch_rank and t.has_time_rank
    d = nested_space(add_batch_rank=True, add_time_rank=True)
    ds = d.strip_ranks()
    assert all(not (x.has_batch_rank or x.has_time_rank) for x in ds.flatten().values())
    assert all(x.has_batch_rank and x.has_time_rank for x in d.flatten().values())
    assert ds.with_batch_rank().with_time_rank() == d


# ---------------------------------------------------------------------------------------------- contains


def test_contains_ranks_and_shapes():
    s = FloatBox(shape=(4,), add_batch_rank=True)
    assert s.contains(np.zeros((3, 4))) and s.contains(np.zeros((0, 4)))
    assert not s.contains(np.zeros(4))
    msg = s.describe_mismatch(np.zeros((3, 5)))
    assert msg == "expected shape (None, 4) (batch rank), got (3, 5)"
    tm = IntBox(3, add_batch_rank=True, add_time_rank=True, time_major=True)
    assert tm.contains(np.zeros((5, 2), np.int32))
    assert "time-major" in tm.describe_mismatch(np.zeros((5,), np.int32))
    assert FloatBox().contains(1.0) and FloatBox().contains(3) and FloatBox(shape=(2,)).contains([1, 2.5])
    assert not FloatBox().contains([1.0])
    assert "cannot convert" in FloatBox(shape=(2,)).describe_mismatch([[1.0], [1.0, 2.0]])


def test_contains_dtypes():
    assert FloatBox().contains(np.float64(1.5))  # same_kind downcast
    assert FloatBox(shape=(2,)).contains(np.array([1, 2], dtype=np.int64))  # ints in float boxes
    msg = IntBox(3).describe_mismatch(1.5)
    assert "expected dtype int32, got float64" in msg and "1.5" in msg
    assert IntBox(3).contains(np.int64(2)) and IntBox(3).contains(2)
    assert IntBox(256, shape=(2,), dtype="uint8").contains([255, 0])
    assert not BoolBox().contains(1) and BoolBox().contains(True) and BoolBox(shape=(2,)).contains([True, False])
    assert not BoolBox(shape=(2,)).contains(np.array([0, 1]))
    assert TextBox().contains("hello") and TextBox(shape=(2,)).contains(["a", "bc"])
    assert TextBox(shape=(2,)).contains(np.array(["a", "b"], dtype=object))
    assert not TextBox().contains(3)
    assert "str values" in TextBox(shape=(2,)).describe_mismatch(np.array(["a", 3], dtype=object))
    assert not FloatBox().contains("x")


def test_contains_bounds():
    s = IntBox(3)
    assert s.describe_mismatch(7) == "value 7 outside [0, 3)"
    assert not s.contains(3) and not s.contains(-1) and s.contains(0)
    s = IntBox(low=[0, 5], high=[2, 6], add_batch_rank=True)
    assert s.contains([[1, 5], [0, 5]])
    msg = s.describe_mismatch([[1, 5], [0, 6]])
    assert "value 6 outside [5, 6)" in msg and "(1, 1)" in msg
    f = FloatBox(0.0, 1.0, shape=(2,))
    assert f.contains([0.0, 1.0]) and not f.contains([0.5, 1.01]) and not f.contains([np.nan, 0.5])
    assert "outside [0.0, 1.0]" in f.describe_mismatch([0.5, 1.5])
    assert not FloatBox().contains(np.nan) and FloatBox().contains(np.inf)
    assert not FloatBox(low=0.0).contains(-0.1)


def test_contains_containers():
    d = Dict(a=Dict(b=FloatBox(shape=(4,))), c=IntBox(3), add_batch_rank=True)
    good = {"a": {"b": np.zeros((2, 4))}, "c": [1, 2]}
    assert d.contains(good)
    assert d.describe_mismatch({"a": {"b": np.zeros((3, 5))}, "c": [1, 2, 0]}) == (
        "key 'a/b': expected shape (None, 4) (batch rank), got (3, 5)"
    )
    assert d.describe_mismatch({"a": {"b": np.zeros((3, 4))}}) == "missing key 'c'"
    assert d.describe_mismatch({"a": {"b": np.zeros((3, 4)), "z": 1}, "c": [1]}) == "unexpected key 'a/z'"
    assert d.describe_mismatch({"a": {"b": np.zeros((3, 4))}, "c": [1, 5]}).startswith("key 'c': value 5 outside")
    assert "expected a dict" in d.describe_mismatch(np.zeros(3))
    assert "key 'a': expected a dict" in d.describe_mismatch({"a": 1, "c": [1]})
    t = Tuple(FloatBox(), IntBox(2))
    assert t.contains((0.5, 1)) and t.contains([0.5, 1])
    assert "length 2" in t.describe_mismatch((0.5,))
    assert t.describe_mismatch((0.5, 2)) == "key '1': value 2 outside [0, 2)"
    assert "expected a tuple" in t.describe_mismatch({"0": 1})


# ---------------------------------------------------------------------------------------------- flattening


def test_flatten_keys_and_order():
    s = Dict(a=Tuple(FloatBox(), IntBox(2)), b=BoolBox())
    flat = s.flatten()
    assert list(flat) == ["a/0", "a/1", "b"]
    assert flat["a/1"] == IntBox(2)
    assert list(FloatBox().flatten()) == [""]
    assert FloatBox().flatten()[""] == FloatBox()
    nested = nested_space(add_batch_rank=True, add_time_rank=True)
    assert list(nested.flatten()) == ["a/0", "a/1", "b", "c/x", "c/y/0", "c/y/1"]
    assert all(v.has_batch_rank and v.has_time_rank for v in nested.flatten().values())
    assert Tuple(Tuple(FloatBox(), FloatBox()), FloatBox()).flatten().keys() == {"0/0", "0/1", "1"}


@pytest.mark.parametrize("ranks", RANKS)
def test_flatten_value_unflatten_round_trip(ranks):
    space = nested_space(**ranks)
    size = sizes_for(space)[0]
    v = space.sample(size, rng=np.random.default_rng(3))
    flat = space.flatten_value(v)
    assert list(flat) == list(space.flatten())
    for key, sub in space.flatten().items():
        assert sub.contains(flat[key])
    back = space.unflatten(flat)
    assert back.keys() == v.keys() and isinstance(back["c"]["y"], tuple)
    for key, leaf in space.flatten_value(back).items():
        np.testing.assert_array_equal(leaf, flat[key])
    structure = space.unflatten(space.flatten())
    assert structure["a"][1] == space["a"][1] and Dict(structure, **ranks) == space


def test_flatten_value_and_unflatten_errors():
    space = Dict(a=Dict(b=FloatBox()), c=IntBox(2))
    with pytest.raises(RLGraphSpaceError, match="a/b"):
        space.flatten_value({"a": {}, "c": 1})
    with pytest.raises(RLGraphSpaceError, match="unexpected key 'd'"):
        space.flatten_value({"a": {"b": 1.0}, "c": 1, "d": 2})
    with pytest.raises(RLGraphSpaceError, match="missing key 'c'"):
        space.unflatten({"a/b": 1.0})
    with pytest.raises(RLGraphSpaceError, match="unexpected key 'x'"):
        space.unflatten({"a/b": 1.0, "c": 1, "x": 2})
    assert FloatBox().flatten_value(1.5) == {"": 1.5}
    assert FloatBox().unflatten({"": 1.5}) == 1.5


# ---------------------------------------------------------------------------------------------- map


def test_map():
    space = nested_space(add_batch_rank=True)
    seen = []

    def fn(key, s):
        seen.append(key)
        return FloatBox(shape=s.shape) if isinstance(s, IntBox) else s

    mapped = space.map(fn)
    assert seen == list(space.flatten())
    assert isinstance(mapped, Dict) and isinstance(mapped["a"], Tuple)
    assert mapped["a/1"] == FloatBox(add_batch_rank=True)  # ranks kept (container passes them down)
    assert mapped["c/y/0"] == FloatBox(shape=(2,), add_batch_rank=True)
    assert mapped["b"] == space["b"] and mapped.has_batch_rank
    assert space["a/1"] == IntBox(3, add_batch_rank=True)  # original untouched
    assert FloatBox().map(lambda k, s: IntBox(2)) == IntBox(2)


# ---------------------------------------------------------------------------------------------- eq, hash, repr


def test_equality_and_hash():
    assert FloatBox(shape=(2,)) == FloatBox(shape=[2])
    assert hash(FloatBox(shape=(2,))) == hash(FloatBox(shape=[2]))
    assert FloatBox() != FloatBox(add_batch_rank=True)
    assert FloatBox() != FloatBox(dtype="float64")
    assert FloatBox() != FloatBox(0.0, 1.0)
    assert FloatBox(0.0, 1.0) == FloatBox(low=-0.0, high=1.0)
    assert IntBox(3) != IntBox(4) and IntBox(3) == IntBox(0, 3) and IntBox(3) != FloatBox(0, 3)
    assert FloatBox(add_time_rank=True) != FloatBox(add_time_rank=True, time_major=True)
    assert FloatBox(time_major=True) == FloatBox()  # time_major only matters with a time rank
    assert nested_space(add_batch_rank=True) == nested_space(add_batch_rank=True)
    assert hash(nested_space(add_batch_rank=True)) == hash(nested_space(add_batch_rank=True))
    assert nested_space() != nested_space(add_batch_rank=True)
    assert Dict(a=FloatBox()) != Dict(b=FloatBox()) and Tuple(FloatBox()) != Dict(a=FloatBox())
    assert len({FloatBox(), FloatBox(), IntBox(2), Dict(a=FloatBox())}) == 3
    s = nested_space(add_time_rank=True)
    assert copy.deepcopy(s) == s


def test_repr():
    assert repr(FloatBox(shape=(4,), add_batch_rank=True)) == "FloatBox(shape=(4,), float32, batch)"
    assert repr(IntBox(3, add_batch_rank=True, add_time_rank=True, time_major=True)) == (
        "IntBox(3, shape=(), int32, batch, time-major)"
    )
    assert repr(IntBox(2, 5)) == "IntBox([2, 5), shape=(), int32)"
    assert repr(FloatBox(0.0, 1.0)) == "FloatBox([0.0, 1.0], shape=(), float32)"
    assert repr(IntBox()) == "IntBox(shape=(), int32)"
    assert repr(FloatBox(add_time_rank=True)) == "FloatBox(shape=(), float32, time)"
    d = Dict(a=FloatBox(), b=Tuple(IntBox(2), BoolBox()), add_batch_rank=True)
    assert repr(d) == (
        "Dict(a=FloatBox(shape=(), float32), b=Tuple(IntBox(2, shape=(), int32), BoolBox(shape=())), batch)"
    )
    assert len(repr(FloatBox(low=np.zeros(1000), high=1.0))) < 200


# ---------------------------------------------------------------------------------------------- specs


def test_from_spec():
    assert Space.from_spec({"type": "float-box", "shape": [4]}) == FloatBox(shape=(4,))
    assert Space.from_spec({"type": "FloatBox", "low": 0, "high": 1}) == FloatBox(0.0, 1.0)
    assert Space.from_spec({"type": "int_box", "low": 3}, add_batch_rank=True) == IntBox(3, add_batch_rank=True)
    assert Space.from_spec("bool-box") == BoolBox()
    d = Space.from_spec({"type": "dict", "obs": {"type": "float_box", "shape": [2]}, "add_batch_rank": True})
    assert d == Dict(obs=FloatBox(shape=(2,)), add_batch_rank=True)
    d2 = Space.from_spec({"type": "dict", "spaces": {"obs": {"type": "float_box", "shape": [2]}}})
    assert d2 == Dict(obs=FloatBox(shape=(2,)))
    assert Dict.from_spec({"obs": "float-box"}) == Dict(obs=FloatBox())
    t = Space.from_spec({"type": "tuple", "spaces": [{"type": "float"}, "int-box"]})
    assert t == Tuple(FloatBox(), IntBox())
    s = FloatBox()
    assert Space.from_spec(s) is s
    with pytest.raises(RLGraphSpecError, match="unknown"):
        Space.from_spec({"type": "no-such-space"})
    with pytest.raises(RLGraphSpecError, match="unknown key"):
        Space.from_spec({"type": "float-box", "shap": [4]})
    assert Space.from_spec(gs.Discrete(3)) == IntBox(3, dtype="int64")


# ---------------------------------------------------------------------------------------------- gymnasium


def test_from_gymnasium_box():
    s = Space.from_gymnasium(gs.Box(-1.0, 1.0, (3,), np.float32))
    assert s == FloatBox(-1.0, 1.0, shape=(3,)) and s.low == -1.0
    s = Space.from_gymnasium(gs.Box(np.array([0.0, -1.0], np.float32), np.array([1.0, 1.0], np.float32)))
    assert isinstance(s, FloatBox) and s.low.tolist() == [0.0, -1.0] and s.high == 1.0
    s = Space.from_gymnasium(gs.Box(-np.inf, np.inf, (2,), np.float64))
    assert s == FloatBox(shape=(2,), dtype="float64")
    s = Space.from_gymnasium(gs.Box(0, 255, (4, 4), np.uint8))
    assert isinstance(s, IntBox) and s.dtype == np.uint8 and s.high == 256 and s.num_categories == 256
    assert s.contains(np.full((4, 4), 255, np.uint8))
    g = gs.Box(-3, 4, (2,), np.int32)
    s = Space.from_gymnasium(g)
    assert (s.low, s.high, s.num_categories) == (-3, 5, 8)
    g.seed(0)
    assert all(s.contains(g.sample()) for _ in range(20))
    assert isinstance(Space.from_gymnasium(gs.Box(0, 1, (2,), np.bool_)), BoolBox)


def test_from_gymnasium_discrete_kinds():
    s = Space.from_gymnasium(gs.Discrete(4))
    assert isinstance(s, IntBox) and (s.low, s.high, s.num_categories) == (0, 4, 4)
    s = Space.from_gymnasium(gs.Discrete(3, start=-1))
    assert (s.low, s.high) == (-1, 2)
    g = gs.MultiDiscrete([2, 3, 4])
    s = Space.from_gymnasium(g)
    assert s.shape == (3,) and s.low == 0 and s.high.tolist() == [2, 3, 4]
    g.seed(0)
    assert all(s.contains(g.sample()) for _ in range(20))
    s = Space.from_gymnasium(gs.MultiDiscrete([2, 3], start=[1, -1]))
    assert s.low.tolist() == [1, -1] and s.high.tolist() == [3, 2]
    assert Space.from_gymnasium(gs.MultiBinary(5)) == BoolBox(shape=(5,))
    assert Space.from_gymnasium(gs.MultiBinary([2, 3])) == BoolBox(shape=(2, 3))
    g = gs.Text(5)
    s = Space.from_gymnasium(g)
    assert s == TextBox()
    g.seed(0)
    assert s.contains(g.sample())


def test_from_gymnasium_containers_and_ranks():
    g = gs.Dict({
        "pos": gs.Box(-1.0, 1.0, (2,), np.float32),
        "act": gs.Tuple((gs.Discrete(3), gs.MultiBinary(2))),
    })
    s = space_utils.space_from_gymnasium(g, add_batch_rank=True)
    assert isinstance(s, Dict) and isinstance(s["act"], Tuple)
    assert list(s.flatten()) == ["act/0", "act/1", "pos"]
    assert all(v.has_batch_rank for v in s.flatten().values())
    assert s.strip_ranks() == Space.from_gymnasium(g)
    g.seed(0)
    assert s.strip_ranks().contains(space_utils.space_from_gymnasium(g).zeros())
    sample = g.sample()
    # MultiBinary samples are int8 0/1, which BoolBox does not accept; the rest must match.
    assert s.strip_ranks()["pos"].contains(sample["pos"]) and s.strip_ranks()["act/0"].contains(sample["act"][0])


def test_from_gymnasium_unsupported():
    with pytest.raises(RLGraphSpaceError, match="Sequence"):
        Space.from_gymnasium(gs.Sequence(gs.Discrete(2)))


# ---------------------------------------------------------------------------------------------- space_utils


def test_get_space_from_value():
    s = space_utils.get_space_from_value(np.zeros((5, 3), np.float32), add_batch_rank=True)
    assert s == FloatBox(shape=(3,), add_batch_rank=True)
    assert space_utils.get_space_from_value(1.5) == FloatBox(dtype="float64")
    s = space_utils.get_space_from_value(3)
    assert isinstance(s, IntBox) and s.is_unbounded and s.dtype == np.int64
    assert space_utils.get_space_from_value(True) == BoolBox()
    assert space_utils.get_space_from_value("hi") == TextBox()
    v = {"a": np.zeros((4, 2, 3), np.float32), "b": (np.ones((4, 2), np.int32), np.zeros((4, 2), bool))}
    s = space_utils.get_space_from_value(v, add_batch_rank=True, add_time_rank=True, time_major=True)
    assert isinstance(s, Dict) and isinstance(s["b"], Tuple)
    assert s["a"] == FloatBox(shape=(3,), add_batch_rank=True, add_time_rank=True, time_major=True)
    assert s.contains(v)
    with pytest.raises(RLGraphSpaceError, match="fewer dims"):
        space_utils.get_space_from_value(1.0, add_batch_rank=True)
    with pytest.raises(RLGraphSpaceError, match="cannot infer"):
        space_utils.get_space_from_value(None)


def test_sanity_check_space():
    s = IntBox(3, add_batch_rank=True)
    space_utils.sanity_check_space(s, allowed_types=[IntBox], must_have_batch_rank=True, rank=0, num_categories=3)
    with pytest.raises(RLGraphSpaceError, match="allowed"):
        space_utils.sanity_check_space(s, allowed_types=FloatBox)
    with pytest.raises(RLGraphSpaceError, match="batch rank"):
        space_utils.sanity_check_space(s, must_have_batch_rank=False)
    with pytest.raises(RLGraphSpaceError, match="rank"):
        space_utils.sanity_check_space(s, rank=(1, None))


def test_spaces_package_imports_no_backend():
    import re

    spaces_dir = pathlib.Path(space_utils.__file__).parent
    pattern = re.compile(r"^\s*(import|from)\s+(tensorflow|torch|ray)\b", re.M)
    for path in spaces_dir.glob("*.py"):
        assert not pattern.search(path.read_text()), path
