"""Fitted estimators as data: a JSON-able description plus named numpy arrays, rebuilt without running code.

Why: the model registry is written by training jobs and read by the loop every cycle. A pickle runs
whatever its writer put in it while it loads (a ``__reduce__`` payload registered as the champion would
run inside the loop). This state can only *describe* values: literals, containers, numpy
arrays, timestamps, and instances of the classes on the allow-list in ``models.state_types``. Reading it
never imports a module or calls anything the data names: a type name in the data only selects an entry
of that fixed table, and the entry's own code rebuilds the object (most by setting plain attributes on an
instance made without ``__init__``, as unpickling would, but with data only).

``to_state(estimator) -> (meta, arrays)``: ``meta`` is JSON-safe (strict JSON: non-finite floats are
tagged), ``arrays`` holds every numeric array by name (what ``safetensors`` stores). ``from_state`` is
the exact inverse: predictions of the rebuilt estimator equal the original's. An object of a type the
table does not know raises ``StateError`` when the state is made, i.e. at registration, naming where it
sits ("estimator.members_['lstm'].net_"); there is no fallback to pickle.

Decoding is not enough on its own: compiled tree walkers trust their node arrays, so the classes whose
arrays they read carry a check (``models.state_checks``) run on the rebuilt object; a refusal names the
value by its path in the estimator ("estimator.model_._predictors[0][0].nodes[4].left").

No I/O here (``models/`` stays pure); writing the files and checking their digest is the registry's job.
"""

from __future__ import annotations

import datetime
import inspect
import math
import zoneinfo
from typing import Any, Literal, cast

import numpy as np
import pandas as pd

from models.state_base import StateCheckError, StateError

__all__ = ["STATE_FORMAT", "StateError", "from_state", "to_state", "type_name"]

STATE_FORMAT = "gpu-capacity-predictor/state/1"

# numeric kinds an array may have in the arrays file (bool, signed, unsigned, float); datetimes travel as int64
_NUMERIC = "biuf"
_TIMES = "Mm"
_UNITS = ("s", "ms", "us", "ns")  # pandas' datetime resolutions
Unit = Literal["s", "ms", "us", "ns"]


def to_state(obj: Any, root: str = "estimator") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(meta, arrays)`` describing ``obj``; raises ``StateError`` naming the first value it cannot store."""
    encoder = Encoder()
    tree = encoder.value(obj, root)
    return {"format": STATE_FORMAT, "root": tree}, encoder.arrays


def from_state(meta: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The object ``to_state`` described; raises ``StateError`` on anything unexpected (never runs data)."""
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise StateError(f"not a {STATE_FORMAT} state (format {found!r})")
    decoder = Decoder(arrays)
    try:
        obj = decoder.value(meta.get("root"))
    except StateError:
        raise
    except Exception as exc:
        # untrusted input: a state whose values do not fit the class they describe (wrong shapes, missing
        # fields, out-of-range numbers) is refused whatever the rebuilding code raised
        raise StateError(f"malformed state: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    unused = sorted(set(arrays) - decoder.used)
    if unused:
        raise StateError(f"malformed state: arrays {', '.join(unused[:5])} are not referenced")
    return obj


def type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class Encoder:
    """Walks a value depth-first; numeric arrays go to ``arrays`` under sequential names."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self._open: set[int] = set()  # objects being encoded: one seen again inside itself is a cycle

    def value(self, v: Any, path: str) -> Any:
        kind = type(v)
        if v is None or kind in (bool, int, str):
            return v
        if kind is float:
            return v if math.isfinite(v) else {"$": "float", "v": repr(v)}
        if kind is list:
            return [self.value(x, f"{path}[{i}]") for i, x in enumerate(v)]
        if kind is tuple:
            return {"$": "tuple", "items": [self.value(x, f"{path}[{i}]") for i, x in enumerate(v)]}
        if kind is dict:
            items = [[self.value(k, f"{path} key"), self.value(x, f"{path}[{k!r}]")] for k, x in v.items()]
            return {"$": "dict", "items": items}
        if kind is np.ndarray:
            return self.array(v, path)
        if isinstance(v, np.generic):
            return self.scalar(v, path)
        if kind is pd.Timestamp:
            return {"$": "timestamp", "ns": int(v.value), "unit": v.unit, "tz": _tz_name(v.tz, path)}
        if kind is pd.Timedelta:
            return {"$": "timedelta", "ns": int(v.value), "unit": v.unit}
        return self.obj(v, path)

    def attrs(self, obj: Any, path: str) -> dict[str, Any]:
        """``vars(obj)`` as an encoded dict: the default state of an allow-listed plain class."""
        return {"attrs": {k: self.value(x, f"{path}.{k}") for k, x in vars(obj).items()}}

    def obj(self, v: Any, path: str) -> dict[str, Any]:
        from models.state_types import TYPES

        name = type_name(type(v))
        entry = TYPES.get(name)
        if entry is None or entry.cls() is not type(v):
            raise StateError(
                f"cannot store {path}: {name} is not a known state type; add it to models.state_types "
                f"(known: {', '.join(sorted(n.rsplit('.', 1)[-1] for n in TYPES))})"
            )
        if id(v) in self._open:
            raise StateError(f"cannot store {path}: it refers back to itself (a reference cycle)")
        self._open.add(id(v))
        try:
            state = entry.encode(v, self, path) if entry.encode is not None else self.attrs(v, path)
        finally:
            self._open.discard(id(v))
        return {"$": "object", "type": name, "state": state}

    def _put(self, a: np.ndarray) -> str:
        ref = f"a{len(self.arrays)}"
        if not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
        # (not np.ascontiguousarray: it turns a 0-d array into a 1-d one)
        self.arrays[ref] = a if a.flags.c_contiguous else np.array(a, order="C")
        return ref

    def array(self, a: np.ndarray, path: str) -> dict[str, Any]:
        dt = a.dtype
        shape = list(a.shape)
        if dt.names is not None:  # a record array (scikit-learn's tree nodes): its bytes plus the field layout
            fields = []
            for name in dt.names:
                sub, offset = dt.fields[name][:2]  # type: ignore[index]
                if sub.kind not in _NUMERIC or sub.shape:
                    raise StateError(f"cannot store {path}: record field {name!r} has dtype {sub}")
                fields.append([name, sub.str, int(offset)])
            raw = np.array(a, order="C").reshape(-1).view(np.uint8).reshape(*a.shape, dt.itemsize)
            return {
                "$": "records",
                "fields": fields,
                "itemsize": int(dt.itemsize),
                "shape": shape,
                "ref": self._put(raw),
            }
        if dt.kind in _NUMERIC:
            return {"$": "array", "dtype": dt.str, "shape": shape, "ref": self._put(a)}
        if dt.kind in _TIMES:
            return {"$": "array", "dtype": dt.str, "shape": shape, "ref": self._put(a.view(np.int64))}
        if dt.kind == "U":
            return {"$": "array", "dtype": dt.str, "shape": shape, "items": [str(x) for x in a.ravel().tolist()]}
        if dt.kind == "O":
            items = [self.value(x, f"{path}[{i}]") for i, x in enumerate(a.ravel().tolist())]
            return {"$": "array", "dtype": "|O", "shape": shape, "items": items}
        raise StateError(f"cannot store {path}: arrays of dtype {dt} are not supported")

    def scalar(self, v: np.generic, path: str) -> dict[str, Any]:
        dt = v.dtype
        if dt.kind in _NUMERIC:
            return {"$": "scalar", "dtype": dt.str, "v": self.value(v.item(), path)}
        if dt.kind == "U":
            return {"$": "scalar", "dtype": dt.str, "v": str(v)}
        raise StateError(f"cannot store {path}: numpy scalars of dtype {dt} are not supported")


def _tz_name(tz: Any, path: str) -> str | None:
    if tz is None:
        return None
    if tz is datetime.UTC or str(tz) == "UTC":
        return "UTC"
    if isinstance(tz, zoneinfo.ZoneInfo):
        return tz.key
    raise StateError(f"cannot store {path}: time zone {tz!r} (only UTC and IANA zoneinfo zones)")


def _tz(name: Any) -> Any:
    if name is None or name == "UTC":
        return name
    try:
        # zoneinfo refuses absolute paths and ".." (pandas would hand a "dateutil/..." name to a file reader)
        return zoneinfo.ZoneInfo(name)
    except (TypeError, ValueError, zoneinfo.ZoneInfoNotFoundError) as exc:
        raise StateError(f"malformed state: time zone {name!r}") from exc


def _dtype(text: Any, kinds: str) -> np.dtype[Any]:
    if not isinstance(text, str):
        raise StateError(f"malformed state: dtype {text!r}")
    try:
        dt = np.dtype(text)
    except TypeError as exc:
        raise StateError(f"malformed state: dtype {text!r}") from exc
    if dt.kind not in kinds or dt.names is not None or dt.shape:
        raise StateError(f"malformed state: dtype {text!r} is not allowed here")
    return dt


def _int_field(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise StateError(f"malformed state: offset {value!r}")
    return value


def _shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(n) is int and n >= 0 for n in value):
        raise StateError(f"malformed state: shape {value!r}")
    return tuple(value)


class Decoder:
    """The inverse walk; ``used`` records which arrays the description referenced."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays
        self.used: set[str] = set()
        # where the walk is, as the encoder names it ("estimator.model_._predictors[0][0]"): a refusal
        # names the value it refused
        self._path: list[str] = ["estimator"]

    def _at(self, step: str, node: Any) -> Any:
        self._path.append(step)
        try:
            return self.value(node)
        finally:
            self._path.pop()

    def value(self, node: Any) -> Any:
        kind = type(node)
        if node is None or kind in (bool, int, str, float):
            return node
        if kind is list:
            return [self._at(f"[{i}]", x) for i, x in enumerate(node)]
        if kind is not dict:
            raise StateError(f"malformed state: unexpected {kind.__name__}")
        tag = node.get("$")
        if tag == "float":
            if node.get("v") not in ("nan", "inf", "-inf"):
                raise StateError(f"malformed state: float {node.get('v')!r}")
            return float(node["v"])
        if tag == "tuple":
            return tuple(self._at(f"[{i}]", x) for i, x in enumerate(self._list(node, "items")))
        if tag == "dict":
            out: dict[Any, Any] = {}
            for pair in self._list(node, "items"):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise StateError("malformed state: dict item is not a pair")
                key = self._at(" key", pair[0])
                out[key] = self._at(f"[{key!r}]", pair[1])
            return out
        if tag == "array":
            return self.array(node)
        if tag == "records":
            return self.records(node)
        if tag == "scalar":
            dt = _dtype(node.get("dtype"), _NUMERIC + "U")
            return dt.type(self.value(node.get("v")))
        if tag == "timestamp":
            ns, unit, tz = node.get("ns"), node.get("unit"), node.get("tz")
            if type(ns) is not int or unit not in _UNITS:
                raise StateError("malformed state: timestamp")
            return pd.Timestamp(ns, unit="ns", tz=_tz(tz)).as_unit(cast(Unit, unit))
        if tag == "timedelta":
            ns, unit = node.get("ns"), node.get("unit")
            if type(ns) is not int or unit not in _UNITS:
                raise StateError("malformed state: timedelta")
            return pd.Timedelta(ns, unit="ns").as_unit(cast(Unit, unit))
        if tag == "object":
            return self.obj(node)
        raise StateError(f"malformed state: unknown tag {tag!r}")

    @staticmethod
    def _list(node: dict[str, Any], key: str) -> list[Any]:
        value = node.get(key)
        if not isinstance(value, list):
            raise StateError(f"malformed state: {node.get('$')} without a list of {key}")
        return value

    def take(self, ref: Any, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
        """A writable copy of a stored array, checked against the dtype and shape the description gives."""
        if not isinstance(ref, str) or ref not in self.arrays:
            raise StateError(f"malformed state: no array {ref!r}")
        raw = np.asarray(self.arrays[ref])
        if raw.dtype != dtype or raw.shape != shape:
            raise StateError(
                f"malformed state: array {ref} is {raw.dtype}{list(raw.shape)}, described as {dtype}{list(shape)}"
            )
        self.used.add(ref)
        return np.array(raw, copy=True)

    def array(self, node: dict[str, Any]) -> np.ndarray:
        shape = _shape(node.get("shape"))
        dt = _dtype(node.get("dtype"), _NUMERIC + _TIMES + "UO")
        if dt.kind in _NUMERIC:
            return self.take(node.get("ref"), dt.newbyteorder("="), shape)
        if dt.kind in _TIMES:
            return self.take(node.get("ref"), np.dtype(np.int64), shape).view(dt)
        items = self._list(node, "items")
        if len(items) != math.prod(shape):
            raise StateError("malformed state: array items do not fill its shape")
        if dt.kind == "U":
            if not all(type(x) is str for x in items):
                raise StateError("malformed state: a string array holds a non-string")
            return np.array(items, dtype=dt).reshape(shape)
        out = np.empty(len(items), dtype=object)
        for i, x in enumerate(items):
            out[i] = self._at(f"[{i}]", x)
        return out.reshape(shape)

    def records(self, node: dict[str, Any]) -> np.ndarray:
        shape = _shape(node.get("shape"))
        fields = self._list(node, "fields")
        itemsize = node.get("itemsize")
        if type(itemsize) is not int or not all(isinstance(f, list) and len(f) == 3 for f in fields):
            raise StateError("malformed state: record array layout")
        # numeric fields only: the bytes can never become Python objects
        dt = np.dtype(
            {
                "names": [str(f[0]) for f in fields],
                "formats": [_dtype(f[1], _NUMERIC) for f in fields],
                "offsets": [_int_field(f[2]) for f in fields],
                "itemsize": itemsize,
            }
        )
        raw = self.take(node.get("ref"), np.dtype(np.uint8), (*shape, itemsize))
        return raw.reshape(-1).view(dt).reshape(shape)

    def attrs(self, cls: type, state: Any) -> Any:
        """An instance of ``cls`` made without ``__init__`` whose attributes are the decoded ``attrs``."""
        attrs = state.get("attrs") if isinstance(state, dict) else None
        if not isinstance(attrs, dict):
            raise StateError(f"malformed state: {cls.__name__} without attributes")
        obj: Any = object.__new__(cls)
        for key, node in attrs.items():
            if not key.isidentifier() or key.startswith("__"):
                raise StateError(f"malformed state: attribute name {key!r}")
            # data may not stand in for a method or property of the class
            static = inspect.getattr_static(cls, key, None)
            if callable(static) or isinstance(static, (property, staticmethod, classmethod)):
                raise StateError(f"malformed state: attribute {key!r} would hide {cls.__name__}.{key}")
            obj.__dict__[key] = self._at(f".{key}", node)
        return obj

    def obj(self, node: dict[str, Any]) -> Any:
        from models.state_types import TYPES

        name = node.get("type")
        entry = TYPES.get(name) if isinstance(name, str) else None
        if entry is None:
            raise StateError(f"unknown state type {name!r}: only the types in models.state_types are loaded")
        state = node.get("state")
        obj = entry.decode(state, self) if entry.decode is not None else self.attrs(entry.cls(), state)
        if entry.check is not None:
            try:
                entry.check(obj)
            except StateCheckError as exc:
                raise StateError(f"malformed state: {''.join(self._path)}{exc.where}: {exc.reason}") from exc
        return obj
