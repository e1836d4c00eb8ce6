"""Bad-input sweep: every lowered ATen op, fed random and malformed inputs, on tpu against CPU.

Usage:

  python tools/bad_input_sweep.py                          # the whole sweep: all lowered ops, 14 cases each (~25 min)
  python tools/bad_input_sweep.py --ops aten::add.Tensor,aten::mul_.Tensor --cases-per-op 20
  python tools/bad_input_sweep.py --shard 0/6 --cases-per-op 6 --check     # what the CI shard runs
  python tools/bad_input_sweep.py --repro 'aten::add_.Tensor:123456'         # one case, in this process, verbose
  python tools/bad_input_sweep.py --list                                     # the variants under test

Options: --workers N (2), --seed S (0), --timeout SECONDS (60 per case), --report PATH (the failure list),
--known PATH (tools/bad_input_known.txt), --check (exit 1 on a failure that is not known, or a known one that is gone).

For each lowered op (``torch_pjrt._C._lowered_ops()``) the sweep tests the op and its in-place (``foo_.X``) and out=
variants, found through torch's schemas. Each case is named by (variant, seed): the seed picks the case's kind and
every random choice, so ``--repro variant:seed`` replays it exactly. Arguments are generated from the schema with
small shapes (numel <= 64). The kinds:

  valid               well-formed inputs of one dtype (float32 mostly)
  random_dtypes       every tensor gets a random dtype, shapes drift
  noncontiguous       inputs (and the written tensor) are strided views
  dtype_cast          the written tensor (in-place self, out=) has a lower dtype than the result
  broadcast_mismatch  other tensors do not broadcast with self
  empty               zero-size tensors
  zero_dim            0-dim tensors
  bad_dim             dim arguments out of range, or repeated
  bad_index           index tensors and index ints out of range
  bad_param           probabilities > 1, negative std/lambda, bad strings
  negative_size       size-like ints and int lists negative
  overlap_out         the written tensor is expanded, or overlaps an input
  cpu_mix             one non-0-dim tensor stays on the CPU
  wrong_device        one tensor is on tpu:1, the others on tpu:0

Each case runs on CPU (``torch.ops.aten.X.Y`` on CPU tensors) and on tpu (the same values, views kept, moved with their
strides). When CPU raises E, tpu must raise an instance of E; when CPU returns, tpu must return the same values
(dtype-aware tolerance, NaN equal), dtypes and shapes (only dtypes and shapes for random ops). In the cpu_mix and
wrong_device kinds tpu may also raise a RuntimeError (a device mismatch). After tpu raises, a tiny op must still work.
Cases run in persistent worker processes; a worker that dies (signal) or runs past the timeout is recorded as SIGNAL
or HANG with its case and replaced.

Categories: ok_match, ok_both_raise, ok_device_error, MISMATCH_CLASS (CPU raised E1, tpu raised E2 or returned),
MISMATCH_VALUE, TPU_RAISED (CPU returned, tpu raised), BROKEN_AFTER_RAISE (a tiny op failed after tpu raised), SIGNAL,
HANG; CPU_SIGNAL/CPU_HANG when the CPU reference itself crashed, skip_cpu_assert when it failed an internal assert
(neither is a tpu failure).

SIGNAL, HANG, BROKEN_AFTER_RAISE and MISMATCH_CLASS are what --check gates on, less the entries of the known list:
lines ``CATEGORY VARIANT CAUSE  # reason``, where VARIANT is a glob of variant names or of the lowered ops they run,
and CAUSE a glob of "CpuError->TpuError" (tpu "returned" when it did not raise) for class mismatches, of the signal
name (SIGSEGV) for signals.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import fnmatch
import math
import multiprocessing
import multiprocessing.connection
import os
import random
import re
import signal
import sys
import tempfile
import time
import warnings
import zlib

import torch
from retry_import import import_torch_pjrt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KNOWN_LIST = os.path.join(ROOT, "tools", "bad_input_known.txt")
MAX_NUMEL = 64
CASES_PER_WORKER = 500  # then a fresh worker: compiled programs pile up

KINDS = [
    "valid",
    "random_dtypes",
    "noncontiguous",
    "dtype_cast",
    "broadcast_mismatch",
    "empty",
    "zero_dim",
    "bad_dim",
    "bad_index",
    "bad_param",
    "negative_size",
    "overlap_out",
    "cpu_mix",
    "wrong_device",
]
WRITING_KINDS = {"dtype_cast", "overlap_out"}  # only for variants that write into an argument
DEVICE_KINDS = {"cpu_mix", "wrong_device"}
GATING = ("SIGNAL", "HANG", "BROKEN_AFTER_RAISE", "MISMATCH_CLASS")
LIVE = ("SIGNAL", "HANG", "BROKEN_AFTER_RAISE")  # printed as soon as they happen
CATEGORIES = (  # the lower-case ones are not failures; the others by severity
    "ok_match",
    "ok_both_raise",
    "ok_device_error",
    "SIGNAL",
    "HANG",
    "BROKEN_AFTER_RAISE",
    "MISMATCH_CLASS",
    "TPU_RAISED",
    "MISMATCH_VALUE",
    "CPU_SIGNAL",
    "CPU_HANG",
    "skip_cpu_assert",
    "skip_generator_error",
)

# Ops whose values are random: only dtypes and shapes are compared.
RANDOM_OPS = re.compile(r"rand|bernoulli|dropout|normal|multinomial|uniform|exponential|cauchy|geometric|rrelu")
# Ops whose other results are unspecified (ties in sort order, signs of singular/eigen vectors): the results compared.
COMPARED_RESULTS = {
    "sort": [0],
    "topk": [0],
    "kthvalue": [0],
    "median": [0],
    "nanmedian": [0],
    "mode": [0],
    "_linalg_svd": [1],
    "_linalg_eigh": [0],
}
# (rtol, atol) per dtype; integers and bool compare exactly.
TOLERANCES = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float32: (1e-4, 1e-5),
    torch.complex64: (1e-4, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex128: (1e-7, 1e-7),
}

FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INT_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
COMPLEX_DTYPES = [torch.complex64, torch.complex128]
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + COMPLEX_DTYPES + [torch.bool]
# (written, other) dtypes of the dtype_cast kind: CPU refuses to cast the result into the written tensor.
CAST_PAIRS = [
    (torch.float32, torch.complex64),
    (torch.float64, torch.complex128),
    (torch.int64, torch.float32),
    (torch.int32, torch.float64),
    (torch.uint8, torch.float16),
    (torch.bool, torch.int64),
    (torch.bool, torch.float32),
]

DIM_INTS = {"dim", "dim0", "dim1", "axis", "start_dim", "end_dim"}
DIM_LISTS = {"dim", "dims"}
INDEX_TENSORS = {"index", "indices", "offsets", "offset2bag", "bag_size", "maximum_indices", "sorter", "lengths"}
MASK_TENSORS = {"mask", "condition"}
SORTED_TENSORS = {"boundaries", "sorted_sequence"}
CHANNEL_TENSORS = {"weight", "bias", "running_mean", "running_var", "save_mean", "save_invstd"}
SIZE_INTS = {"size", "steps", "num_samples", "bins", "minlength", "output_size", "repeats", "n", "N", "C", "HxW"}
SIZE_INTS |= {"group", "groups", "num_weights", "last_dim_size", "row", "col", "m", "k"}
SIZE_LISTS = {"size", "output_size", "kernel_size", "stride", "padding", "dilation", "output_padding", "repeats"}
SIZE_LISTS |= {"input_size", "input_sizes", "normalized_shape", "pad", "bias_sizes"}
SPATIAL_LISTS = {"output_size", "kernel_size", "stride", "padding", "dilation", "output_padding"}
PROBABILITIES = {"p", "train_p"}
POSITIVE_FLOATS = {"std", "sigma", "lambd", "eps", "max_norm", "delta", "beta"}
STRING_CHOICES = {
    "reduce": ["sum", "prod", "mean", "amax", "amin"],
    "rounding_mode": ["trunc", "floor"],
    "approximate": ["none", "tanh"],
    "side": ["left", "right"],
    "mode": ["reduced", "complete", "r"],
    "UPLO": ["L", "U"],
    "driver": ["gesvd", "gesvdj"],
    "padding_mode": ["zeros", "border", "reflection"],
}
# Ints that are enums: their valid range.
ENUM_INTS = {"reduction": 3, "interpolation_mode": 3, "padding_mode": 3, "normalization": 3, "mode": 3}
OP_ROLES = {  # tensors whose values must be probabilities
    "bernoulli": {"self", "p"},
    "multinomial": {"self"},
    "binary_cross_entropy": {"self", "target"},
    "binary_cross_entropy_backward": {"self", "target"},
}
INPLACE_ALIASES = {"aten::normal_functional": "aten::normal_", "aten::bernoulli.p": "aten::bernoulli_.float"}


class LegDevice:
    """Stands for the device of the leg a Device argument is passed to (cpu or tpu)."""

    def __repr__(self):
        return "<leg device>"


LEG_DEVICE = LegDevice()


# ---------------------------------------------------------------- variants


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str  # "aten::add_.Tensor"
    kind: str  # "functional", "inplace" or "out"
    lowered: str  # the lowered op it runs: "aten::add.Tensor"

    @property
    def schema(self):
        return op_packet(self.name)._schema

    @property
    def base(self) -> str:
        return self.name[len("aten::") :].split(".")[0].rstrip("_")


def op_packet(name: str):
    base, _, overload = name[len("aten::") :].partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def full_name(schema) -> str:
    return schema.name + ("." + schema.overload_name if schema.overload_name else "")


def is_out(schema) -> bool:
    return any(a.is_out for a in schema.arguments)


def inputs(schema) -> list[tuple[str, str]]:
    """The (name, declared type) of each argument that is not an out= one."""
    return [(a.name, t) for a, t in zip(schema.arguments, declared_types(schema)) if not a.is_out]


def find_variants(lowered: list[str]) -> list[Variant]:
    """The lowered ops and, found through torch's schemas, their in-place and out= variants."""
    schemas = torch._C._jit_get_all_schemas()
    by_name = {full_name(s): s for s in schemas}
    by_base = collections.defaultdict(list)
    for s in schemas:
        by_base[s.name].append(s)
    variants = []
    for name in sorted(lowered):
        schema = by_name.get(name)
        if schema is None:
            continue
        variants.append(Variant(name, "out" if is_out(schema) else "functional", name))
        if is_out(schema):
            continue
        inplace = by_name.get(INPLACE_ALIASES.get(name) or inplace_name(name))
        if inplace is not None and inputs(inplace) == inputs(schema):
            variants.append(Variant(full_name(inplace), "inplace", name))
        for other in by_base[schema.name]:
            if is_out(other) and inputs(other) == inputs(schema):
                variants.append(Variant(full_name(other), "out", name))
    return variants


def inplace_name(name: str) -> str:
    base, dot, overload = name.partition(".")
    return base + "_" + dot + overload


def declared_types(schema) -> list[str]:
    """Each argument's type as written in the schema ("SymInt[2]", "ScalarType?", "Tensor?[]"), aliases dropped."""
    text = str(schema)
    inner = text[text.index("(") + 1 : text.rindex(") ->")]
    parts, depth, current = [], 0, ""
    for ch in inner:
        depth += ch in "[(" and 1 or (-1 if ch in "])" else 0)
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    parts.append(current.strip())
    return [re.sub(r"\([a-z]!?\)", "", p.split()[0]) for p in parts if p and p != "*"]


# ---------------------------------------------------------------- cases


@dataclasses.dataclass
class Case:
    variant: Variant
    seed: int
    kind: str
    args: list
    kwargs: dict
    placement: dict  # id(tensor) -> tpu-leg device, for the tensors not on "tpu"

    def repro(self) -> str:
        return f"python tools/bad_input_sweep.py --repro '{self.variant.name}:{self.seed}'"

    def describe(self) -> str:
        """One line: each tensor's dtype and shape, its strides and offset if a view, its tpu device if not tpu:0,
        and ~sN where tensors share storage N."""
        storages = collections.Counter(storage_key(t) for t in tensor_leaves([self.args, self.kwargs]))
        shared = {key: i for i, key in enumerate(k for k, n in storages.items() if n > 1)}
        tags = dict(placement=self.placement, shared=shared)
        args = [describe(v, tags) for v in self.args]
        args += [f"{k}={describe(v, tags)}" for k, v in self.kwargs.items()]
        return f"{self.variant.name}({', '.join(args)})"


def storage_key(t: torch.Tensor):
    return t.untyped_storage().data_ptr() or id(t)


def describe(value, tags) -> str:
    if isinstance(value, torch.Tensor):
        text = f"{str(value.dtype)[6:]}{list(value.shape)}"
        if not value.is_contiguous() or value.storage_offset():
            text += f"@stride{tuple(value.stride())}+{value.storage_offset()}"
        if id(value) in tags["placement"]:
            text += f"@{tags['placement'][id(value)]}"
        if storage_key(value) in tags["shared"]:
            text += f"~s{tags['shared'][storage_key(value)]}"
        return text
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(describe(v, tags) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value)


def kind_of(variant: Variant, seed: int) -> str:
    kind = KINDS[seed % len(KINDS)]
    if kind in WRITING_KINDS and variant.kind == "functional":
        return "random_dtypes"
    return kind


def case_seeds(variant_name: str, base_seed: int, count: int) -> list[int]:
    """Seeds whose kinds start at "valid", then go round the other kinds from an offset of the variant's own."""
    start = zlib.crc32(f"{variant_name}:{base_seed}".encode())
    others = len(KINDS) - 1
    seeds = []
    for i in range(count):
        rounds, j = divmod(i, len(KINDS))
        kind_index = 0 if j == 0 else 1 + (start + j - 1) % others
        seeds.append((start + rounds * 7919) * len(KINDS) + kind_index)
    return seeds


class CaseMaker:
    """Generates one case's arguments from the schema, for one kind, from one seed."""

    def __init__(self, variant: Variant, seed: int):
        self.variant = variant
        self.seed = seed
        self.kind = kind_of(variant, seed)
        self.rng = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.shape = self.base_shape()
        self.dtype = self.main_dtype()
        self.list_length = self.rng.choice([1, 1, 2])
        self.placement = {}

    # --- shapes and dtypes

    def base_shape(self) -> list[int]:
        if self.kind == "zero_dim":
            return []
        ndim = self.rng.choice([1, 2, 2, 3, 3, 4]) if self.kind != "random_dtypes" else self.rng.randint(0, 4)
        if self.rng.random() < 0.3:  # square: matrices and equal-sized dims make linalg and pooling ops valid
            side = self.rng.randint(2, 4)
            shape = [side] * ndim
        else:
            shape = [self.rng.randint(1, 4) for _ in range(ndim)]
        while math.prod(shape) > MAX_NUMEL:
            shape[shape.index(max(shape))] -= 1
        if self.kind == "empty" and shape:
            shape[self.rng.randrange(len(shape))] = 0
        return shape

    def main_dtype(self) -> torch.dtype:
        if self.kind == "random_dtypes":
            return self.rng.choice(ALL_DTYPES)
        return self.rng.choice([torch.float32] * 6 + [torch.float64, torch.int64, torch.bool, torch.complex64])

    def other_shape(self) -> list[int]:
        """The shape of a tensor argument other than self."""
        shape = list(self.shape)
        roll = self.rng.random()
        if self.kind == "broadcast_mismatch" and shape:
            i = self.rng.randrange(len(shape))
            shape[i] = shape[i] + 1 if shape[i] > 1 else 2
            if shape[i] == self.shape[i] + 1 and self.shape[i] == 1:
                shape[i] = 3
            return shape
        if self.kind == "random_dtypes" and roll < 0.3:
            return [self.rng.randint(0, 3) for _ in range(self.rng.randint(0, 3))]
        if roll < 0.2 and shape:  # broadcastable: drop leading dims or set some to 1
            shape = shape[self.rng.randrange(len(shape)) :]
            return [1 if self.rng.random() < 0.3 else s for s in shape]
        return shape

    def tensor_dtype(self) -> torch.dtype:
        if self.kind == "random_dtypes" and self.rng.random() < 0.6:
            return self.rng.choice(ALL_DTYPES)
        return self.dtype

    # --- values

    def values(self, shape, dtype, role="value") -> torch.Tensor:
        shape = tuple(shape)
        if role == "index":
            bound = self.index_bound()
            low, high = (bound, bound + 3) if self.kind == "bad_index" and self.rng.random() < 0.7 else (0, bound)
            if self.kind == "bad_index" and self.rng.random() < 0.3:
                low, high = -bound - 3, -bound
            values = torch.randint(low, high, shape, generator=self.gen)
        elif role == "mask":
            values = torch.randint(0, 2, shape, generator=self.gen).bool()
        elif role == "prob":
            values = torch.rand(shape, generator=self.gen, dtype=torch.float64)
        elif dtype.is_complex:
            values = torch.randn(shape, generator=self.gen, dtype=torch.complex128)
        elif dtype.is_floating_point:
            values = torch.randn(shape, generator=self.gen, dtype=torch.float64) * 2
        elif dtype == torch.bool:
            values = torch.randint(0, 2, shape, generator=self.gen)
        else:
            low = 0 if dtype == torch.uint8 else -4
            values = torch.randint(low, 9, shape, generator=self.gen)
        values = values.to(dtype)
        if role == "sorted" and values.dim() > 0 and not dtype.is_complex and dtype != torch.bool:
            values = values.sort(dim=-1).values
        return values

    def index_bound(self) -> int:
        return max(1, min(self.shape)) if self.shape else 1

    def tensor(self, name: str, is_self: bool) -> torch.Tensor:
        role, dtype = self.role_and_dtype(name)
        if is_self:
            shape = self.shape
        elif role == "index" and self.rng.random() < 0.5:
            shape = [self.rng.randint(1, 4)]
        elif name in CHANNEL_TENSORS and len(self.shape) >= 2 and self.rng.random() < 0.5:
            shape = [self.shape[1]]
        else:
            shape = self.other_shape()
        t = self.values(shape, dtype, role)
        if self.kind == "noncontiguous" and t.dim() > 0 and t.numel() > 1:
            t = self.strided_copy(t)
        return t

    def role_and_dtype(self, name: str):
        random_dtype = self.kind == "random_dtypes" and self.rng.random() < 0.4
        if name in OP_ROLES.get(self.variant.base, ()):
            return "prob", torch.float32 if not random_dtype else self.rng.choice(ALL_DTYPES)
        if name in INDEX_TENSORS or (name == "target" and re.search("nll|margin", self.variant.base)):
            return "index", torch.int64 if not random_dtype else self.rng.choice(ALL_DTYPES)
        if "pivots" in name:
            return "index", torch.int32
        if name in MASK_TENSORS:
            return "mask", torch.bool if not random_dtype else self.rng.choice(ALL_DTYPES)
        if name in SORTED_TENSORS:
            return "sorted", self.tensor_dtype()
        return "value", self.tensor_dtype()

    def strided_copy(self, t: torch.Tensor) -> torch.Tensor:
        """``t``'s values in a non-contiguous view: transposed, every other element, or at an offset."""
        how = self.rng.choice(["transpose", "step", "offset"] if t.dim() >= 2 else ["step", "offset"])
        if how == "transpose":
            view = torch.empty(list(reversed(t.shape)), dtype=t.dtype).permute(*reversed(range(t.dim())))
        elif how == "step":
            big = list(t.shape)
            big[-1] *= 2
            view = torch.empty(big, dtype=t.dtype)[..., ::2]
        else:
            view = torch.empty(t.numel() + 3, dtype=t.dtype)[3:].view(t.shape)
        return view.copy_(t)

    # --- scalars and lists

    def scalar(self):
        if self.kind in ("random_dtypes", "dtype_cast"):
            return self.rng.choice([self.rng.randint(-3, 5), round(self.rng.uniform(-2, 2), 3), True, complex(1, -2)])
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return round(self.rng.uniform(-2, 2), 3)
        return self.rng.randint(-3, 5) if self.dtype != torch.bool else self.rng.choice([0, 1])

    def dim_int(self) -> int:
        ndim = max(len(self.shape), 1)
        if self.kind == "bad_dim":
            return self.rng.choice([ndim, ndim + 1, -ndim - 1])
        return self.rng.randrange(-ndim, ndim)

    def int_value(self, name: str, arg) -> int:
        if name in DIM_INTS:
            return self.dim_int()
        if self.kind == "negative_size" and name in SIZE_INTS:
            return -self.rng.randint(1, 3)
        if name in ENUM_INTS:
            return self.rng.randrange(ENUM_INTS[name] + (2 if self.kind == "bad_param" else 0))
        if name in ("index", "padding_idx"):
            bound = self.index_bound()
            return self.rng.randint(bound, bound + 2) if self.kind == "bad_index" else self.rng.randrange(-1, bound)
        if name in ("groups", "group"):
            return 1
        if name == "ignore_index":
            return -100
        if isinstance(arg.default_value, int) and self.rng.random() < 0.5:
            return arg.default_value
        return self.rng.randint(0, 3) if name not in SIZE_INTS else self.rng.randint(1, 4)

    def float_value(self, name: str, arg) -> float:
        if name in PROBABILITIES:
            return self.rng.choice([1.5, -0.5]) if self.kind == "bad_param" else round(self.rng.random(), 3)
        if name in POSITIVE_FLOATS:
            return -1.0 if self.kind == "bad_param" else round(self.rng.uniform(1e-3, 2), 3)
        if name in ("from", "to"):
            return -1.0 if name == "from" else 1.0
        if isinstance(arg.default_value, (int, float)) and not isinstance(arg.default_value, bool):
            if self.rng.random() < 0.6:
                return float(arg.default_value)
        return round(self.rng.uniform(-2, 2), 3)

    def int_list(self, name: str, length) -> list[int]:
        ndim = len(self.shape)
        if name in DIM_LISTS:
            return self.dim_list()
        if name in ("input_size", "input_sizes"):
            return list(self.shape)
        if name == "normalized_shape":
            return list(self.shape[self.rng.randint(0, ndim) :])
        if length is None:
            length = max(1, ndim - 2) if name in SPATIAL_LISTS else self.rng.randint(1, max(ndim, 1))
        if name == "pad":
            length = 2 * self.rng.randint(1, max(ndim, 1))
        low, high = {"padding": (0, 1), "output_padding": (0, 0), "pad": (-1, 2), "shifts": (-2, 2)}.get(name, (1, 3))
        if name == "repeats":
            length = ndim + self.rng.randint(0, 1)
        values = [self.rng.randint(low, high) for _ in range(length)]
        if self.kind == "negative_size" and name in SIZE_LISTS and values:
            values[self.rng.randrange(len(values))] = -self.rng.randint(1, 3)
        return values

    def dim_list(self) -> list[int]:
        ndim = max(len(self.shape), 1)
        dims = self.rng.sample(range(ndim), self.rng.randint(1, ndim))
        if self.kind == "bad_dim":
            dims.append(self.rng.choice([ndim, -ndim - 1, dims[0]]))  # out of range, or repeated
        return dims

    def string(self, name: str, arg) -> str:
        if self.kind == "bad_param" and self.rng.random() < 0.5:
            return "bogus"
        if name in STRING_CHOICES:
            return self.rng.choice(STRING_CHOICES[name])
        return arg.default_value if isinstance(arg.default_value, str) else "none"

    # --- arguments

    def value(self, arg, declared: str, is_self: bool):
        """One argument's value from its declared type; None for an optional argument left out."""
        optional = declared.endswith("?")
        element = declared.rstrip("?")
        list_match = re.fullmatch(r"(.+?)\[(\d*)\]", element)
        if optional and self.rng.random() < 0.4 and element not in ("Device", "ScalarType"):
            return None
        if list_match:
            return self.list_value(arg, list_match.group(1), int(list_match.group(2) or 0) or None)
        return self.single_value(arg, element, is_self)

    def list_value(self, arg, element: str, length):
        name = arg.name
        if element in ("int", "SymInt"):
            return self.int_list(name, length)
        if element.startswith("Tensor"):
            return self.tensor_list(name, optional=element == "Tensor?")
        if element == "bool":
            return [self.rng.random() < 0.7 for _ in range(length or 3)]
        if element == "float":
            return [round(self.rng.uniform(0.5, 2.5), 2) for _ in range(length or max(1, len(self.shape) - 2))]
        raise NotImplementedError(f"list of {element}")

    def tensor_list(self, name: str, optional: bool):
        if optional:  # index.Tensor's indices
            count = self.rng.randint(1, max(len(self.shape), 1))
            return [None if self.rng.random() < 0.3 else self.values([2], torch.int64, "index") for _ in range(count)]
        if name == "state_steps":
            return [torch.tensor(float(self.rng.randint(1, 5))) for _ in range(self.list_length)]
        return [self.tensor(name, is_self=i == 0) for i in range(self.list_length)]

    def single_value(self, arg, element: str, is_self: bool):
        name = arg.name
        if element == "Tensor":
            return self.tensor(name, is_self)
        if element in ("int", "SymInt"):
            return self.int_value(name, arg)
        if element == "float":
            return self.float_value(name, arg)
        if element == "Scalar":
            return self.scalar()
        if element == "bool":
            return self.rng.random() < 0.5
        if element == "str":
            return self.string(name, arg)
        if element == "ScalarType":
            if self.rng.random() < 0.6 and arg.default_value is None:
                return None
            return self.rng.choice(ALL_DTYPES if self.kind == "random_dtypes" else [torch.float32, torch.int64])
        if element == "Device":
            return LEG_DEVICE
        if element in ("Generator", "Layout", "MemoryFormat"):
            return None
        raise NotImplementedError(f"argument type {element}")

    def make(self) -> Case:
        schema = self.variant.schema
        args, kwargs = [], {}
        first_tensor = True
        for arg, declared in zip(schema.arguments, declared_types(schema)):
            if arg.is_out:
                value = None  # filled in below, once the inputs are known
            elif arg.default_value is not None and self.rng.random() < 0.3 and self.kind != "bad_param":
                continue  # the schema's default
            else:
                is_self = first_tensor and declared.startswith("Tensor")
                value = self.value(arg, declared, is_self)
                first_tensor &= not declared.startswith("Tensor")
            if arg.kwarg_only:
                kwargs[arg.name] = value
            else:
                if len(args) < schema.arguments.index(arg):  # an earlier positional default was left out
                    kwargs[arg.name] = value
                    continue
                args.append(value)
        self.fill_outs(schema, args, kwargs)
        self.apply_kind(schema, args, kwargs)
        return Case(self.variant, self.seed, self.kind, args, kwargs, self.placement)

    def fill_outs(self, schema, args, kwargs):
        """out= tensors: empty (CPU resizes them) with the functional result's dtype, where the inputs give one."""
        outs = [a for a in schema.arguments if a.is_out]
        if not outs:
            return
        results = self.functional_results(args, kwargs)
        for i, arg in enumerate(outs):
            like = results[i] if i < len(results) else None
            if isinstance(like, (list, tuple)):
                kwargs[arg.name] = [torch.empty(0, dtype=t.dtype) for t in like]
            elif str(arg.type).startswith("List"):
                kwargs[arg.name] = [torch.empty(0, dtype=self.dtype) for _ in range(self.list_length)]
            else:
                dtype = like.dtype if isinstance(like, torch.Tensor) else self.dtype
                if self.kind == "random_dtypes":
                    dtype = self.rng.choice(ALL_DTYPES)
                shape = list(like.shape) if isinstance(like, torch.Tensor) and self.rng.random() < 0.5 else [0]
                kwargs[arg.name] = torch.empty(shape, dtype=dtype)

    def functional_results(self, args, kwargs) -> list:
        functional = op_packet(self.variant.lowered)
        if is_out(functional._schema):
            return []
        inputs = {k: v for k, v in kwargs.items() if k not in self.out_names()}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = functional(*clone_tree(args), **clone_tree(inputs))
        except Exception:
            return []
        return list(result) if isinstance(result, tuple) else [result]

    def out_names(self) -> set[str]:
        return {a.name for a in self.variant.schema.arguments if a.is_out}

    # --- the kinds that rework the generated arguments

    def apply_kind(self, schema, args, kwargs):
        written = written_names(schema)
        if self.kind == "dtype_cast" and written:
            self.cast_written(schema, args, kwargs, written)
        elif self.kind == "overlap_out" and written:
            self.overlap_written(schema, args, kwargs, written)
        elif self.kind == "cpu_mix":
            candidates = [t for t in tensor_leaves([args, kwargs]) if t.dim() > 0]
            if len(tensor_leaves([args, kwargs])) >= 2 and candidates:
                self.placement[id(self.rng.choice(candidates))] = "cpu"
        elif self.kind == "wrong_device":
            tensors = tensor_leaves([args, kwargs])
            if tensors:
                self.placement[id(self.rng.choice(tensors))] = "tpu:1"

    def cast_written(self, schema, args, kwargs, written):
        """The written tensor gets a low dtype, the other tensors and scalars a high one (float, complex)."""
        low, high = self.rng.choice(CAST_PAIRS)
        scalars = {a.name for a in schema.arguments if a.type.kind() == "NumberType"}
        for name, value in list(named_arguments(schema, args, kwargs)):
            if isinstance(value, torch.Tensor):
                target = low if name in written else high
                set_argument(schema, args, kwargs, name, self.values(value.shape, target))
            elif name in scalars and isinstance(value, (int, float)) and not isinstance(value, bool):
                set_argument(schema, args, kwargs, name, complex(value, 1) if high.is_complex else value + 0.5)

    def overlap_written(self, schema, args, kwargs, written):
        """The written tensor is an expanded one, the input itself, or a shifted view of an input's storage."""
        name = self.rng.choice(written)
        value = dict(named_arguments(schema, args, kwargs))[name]
        if not isinstance(value, torch.Tensor):
            return
        inputs = [(n, v) for n, v in named_arguments(schema, args, kwargs) if n not in written]
        inputs = [(n, v) for n, v in inputs if isinstance(v, torch.Tensor) and v.dim() > 0]
        how = self.rng.choice(["expanded", "same", "shifted"] if inputs else ["expanded"])
        shape = list(self.shape) or [2]
        if how == "expanded":
            set_argument(schema, args, kwargs, name, self.values([1] + shape[1:], self.dtype).expand([2] + shape[1:]))
        elif how == "same":
            set_argument(schema, args, kwargs, name, inputs[0][1])
        else:
            source_name, source = inputs[0]
            flat = self.values([source.numel() + 1], source.dtype)
            set_argument(schema, args, kwargs, source_name, flat[:-1].view(source.shape))
            set_argument(schema, args, kwargs, name, flat[1:].view(source.shape))


def written_names(schema) -> list[str]:
    """The arguments the op writes into: in-place self, out= tensors."""
    return [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]


def named_arguments(schema, args, kwargs):
    for i, value in enumerate(args):
        yield schema.arguments[i].name, value
    yield from kwargs.items()


def set_argument(schema, args, kwargs, name, value):
    if name in kwargs:
        kwargs[name] = value
    else:
        args[[a.name for a in schema.arguments].index(name)] = value


def tensor_leaves(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensor_leaves(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensor_leaves(v)]
    return []


def clone_tree(value):
    return place(value, lambda t: "cpu", {})


def make_case(variant: Variant, seed: int) -> Case:
    return CaseMaker(variant, seed).make()


# ---------------------------------------------------------------- running one case


def place(value, device_of, memo):
    """``value`` with every tensor copied to ``device_of(tensor)``, keeping strides, offsets and shared storages."""
    if isinstance(value, torch.Tensor):
        return move_tensor(value, device_of(value), memo)
    if isinstance(value, (list, tuple)):
        return type(value)(place(v, device_of, memo) for v in value)
    if isinstance(value, dict):
        return {k: place(v, device_of, memo) for k, v in value.items()}
    if value is LEG_DEVICE:
        return torch.device(device_of(None))
    return value


def move_tensor(t: torch.Tensor, device: str, memo: dict) -> torch.Tensor:
    storage = t.untyped_storage()
    if storage.nbytes() == 0:
        return torch.empty(t.shape, dtype=t.dtype, device=device)
    key = (storage.data_ptr(), device)
    if key not in memo:
        flat = torch.empty(0, dtype=t.dtype).set_(storage)
        memo[key] = flat.to(device, copy=True)
        whole = t.is_contiguous() and t.storage_offset() == 0 and t.numel() * t.itemsize == storage.nbytes()
        if whole:  # the common case: a plain tensor of its own
            memo[key] = memo[key].view(t.shape)
            memo[key, "plain"] = True
            return memo[key]
    flat = memo[key]
    if memo.get((key, "plain")) and flat.shape == t.shape and flat.stride() == t.stride() and not t.storage_offset():
        return flat
    with torch.no_grad():
        return flat.as_strided(t.shape, t.stride(), t.storage_offset())


@dataclasses.dataclass
class Outcome:
    error: BaseException | None = None
    results: list = dataclasses.field(default_factory=list)  # flattened, on the CPU
    devices: list = dataclasses.field(default_factory=list)  # the result tensors' devices
    args: list = dataclasses.field(default_factory=list)  # the argument tensors after the call, on the CPU

    def text(self) -> str:
        if self.error is None:
            return "returned"
        return f"{type(self.error).__name__}: {first_line(str(self.error))}"


def first_line(message: str, limit: int = 160) -> str:
    lines = [line for line in message.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[:limit] + "..."


def run_leg(case: Case, device: str) -> Outcome:
    """Runs the case with its tensors on ``device`` (cpu, or tpu with the case's placement)."""
    if device == "cpu":
        device_of = lambda t: "cpu"
    else:
        device_of = lambda t: "tpu" if t is None else case.placement.get(id(t), "tpu")
    op = op_packet(case.variant.name)
    try:
        args, kwargs = place((case.args, case.kwargs), device_of, {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = op(*args, **kwargs)
        if device != "cpu":
            torch.tpu.synchronize()
        flat = flatten(result)
        return Outcome(
            results=[to_cpu(v) for v in flat],
            devices=[v.device for v in flat if isinstance(v, torch.Tensor)],
            args=[to_cpu(t) for t in compared_arguments(case, args, kwargs)],
        )
    except Exception as e:  # noqa: BLE001 - every exception is an outcome to judge
        return Outcome(error=e)


def compared_arguments(case: Case, args, kwargs) -> list[torch.Tensor]:
    """The argument tensors to compare after the call: all but the out= ones (those are the results)."""
    outs = {a.name for a in case.variant.schema.arguments if a.is_out}
    return tensor_leaves([args, {k: v for k, v in kwargs.items() if k not in outs}])


def flatten(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in flatten(v)]
    return [value]


def to_cpu(value):
    return value.cpu() if isinstance(value, torch.Tensor) else value


def tiny_op_works() -> str | None:
    """After tpu raised, the next op must still work: None if it does, else what went wrong."""
    try:
        value = (torch.ones(2, device="tpu") + 1).cpu()
        return None if value.tolist() == [2.0, 2.0] else f"tiny op gave {value.tolist()}"
    except Exception as e:  # noqa: BLE001
        return f"tiny op raised {type(e).__name__}: {first_line(str(e))}"


def judge(case: Case, cpu: Outcome, tpu: Outcome) -> tuple[str, str]:
    """(category, detail) of one case from its two outcomes."""
    device_case = case.kind in DEVICE_KINDS
    if cpu.error is not None and "INTERNAL ASSERT FAILED" in str(cpu.error):
        return "skip_cpu_assert", f"cpu {cpu.text()} | tpu {tpu.text()}"
    if cpu.error is not None:
        accepted = (type(cpu.error), RuntimeError) if device_case else (type(cpu.error),)
        if tpu.error is not None and isinstance(tpu.error, accepted):
            return "ok_both_raise", ""
        return "MISMATCH_CLASS", f"cpu {cpu.text()} | tpu {tpu.text()}"
    if tpu.error is not None:
        if device_case and isinstance(tpu.error, RuntimeError):
            return "ok_device_error", ""
        return "TPU_RAISED", f"tpu {tpu.text()}"
    if not device_case:
        wrong = [d for d in tpu.devices if d.type != "tpu"]
        if wrong:
            return "MISMATCH_VALUE", f"result on {wrong[0]}, expected tpu"
    problem = compare_all(case, cpu, tpu)
    return ("MISMATCH_VALUE", problem) if problem else ("ok_match", "")


def compare_all(case: Case, cpu: Outcome, tpu: Outcome) -> str | None:
    if len(cpu.results) != len(tpu.results):
        return f"{len(tpu.results)} results, CPU has {len(cpu.results)}"
    values = RANDOM_OPS.search(case.variant.base) is None
    indices = COMPARED_RESULTS.get(case.variant.base, range(len(cpu.results)))
    for i, (expected, actual) in enumerate(zip(cpu.results, tpu.results)):
        problem = compare(expected, actual, values=values and i in indices)
        if problem:
            return f"result {i}: {problem}"
    for i, (expected, actual) in enumerate(zip(cpu.args, tpu.args)):
        problem = compare(expected, actual, values=values and case.variant.base not in COMPARED_RESULTS)
        if problem:
            return f"argument tensor {i} after the call: {problem}"
    return None


def compare(expected, actual, values: bool) -> str | None:
    if not isinstance(expected, torch.Tensor):
        same = expected == actual or (expected != expected and actual != actual)
        return None if same else f"{actual!r} != {expected!r}"
    if not isinstance(actual, torch.Tensor):
        return f"got {type(actual).__name__}, expected a tensor"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)} != {list(expected.shape)}"
    if not values:
        return None
    rtol, atol = TOLERANCES.get(expected.dtype, (0, 0))
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as e:
        lines = str(e).strip().splitlines()
        return " ".join(line.strip() for line in lines[:3])
    return None


def run_case(variant: Variant, seed: int, tpu_only=False, on_tpu_phase=lambda: None) -> dict:
    try:
        case = make_case(variant, seed)
    except Exception as e:  # noqa: BLE001 - a generator bug: skip the case, say why
        return dict(category="skip_generator_error", detail=f"{type(e).__name__}: {e}", case=None, restart=False)
    if tpu_only:  # confirms that a crash is the tpu leg's, not heap damage done by the CPU leg
        on_tpu_phase()
        run_leg(case, "tpu")
        return dict(category="survived", detail="", case=case.describe(), restart=False)
    cpu = run_leg(case, "cpu")
    on_tpu_phase()
    tpu = run_leg(case, "tpu")
    category, detail = judge(case, cpu, tpu)
    broken = tiny_op_works() if tpu.error is not None else None
    if broken:
        category, detail = "BROKEN_AFTER_RAISE", f"after tpu {tpu.text()}: {broken}"
    return dict(category=category, detail=detail, case=case.describe(), restart=bool(broken))


# ---------------------------------------------------------------- workers


def worker_main(conn, log_path: str):
    """A worker process: runs the cases the parent sends, one at a time, and answers each with its result."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    import_torch_pjrt()
    variants = {v.name: v for v in find_variants(torch_pjrt_lowered())}
    conn.send(("ready",))
    while True:
        request = conn.recv()
        if request is None:
            return
        name, seed, tpu_only = request
        result = run_case(variants[name], seed, tpu_only, on_tpu_phase=lambda: conn.send(("phase", "tpu")))
        conn.send(("result", result))
        if result["restart"]:
            return


def torch_pjrt_lowered() -> list[str]:
    return list(import_torch_pjrt()._C._lowered_ops())


class Worker:
    """One persistent child process, and the case it is running."""

    def __init__(self, index: int, log_dir: str):
        self.log_path = os.path.join(log_dir, f"worker{index}.log")
        self.process = None
        self.task = None
        self.cases_run = 0

    def start(self):
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=worker_main, args=(child, self.log_path), daemon=True)
        self.process.start()
        child.close()
        try:
            if self.conn.poll(600) and self.conn.recv() == ("ready",):
                return
        except EOFError:
            pass
        self.log_offset = 0
        raise RuntimeError(f"a worker did not start: {self.log_tail()}")

    def send(self, task):
        if task[2] and self.cases_run:  # a confirmation runs in a fresh process
            self.stop()
            self.start()
            self.cases_run = 0
        self.task = task
        self.cases_run += 1
        self.phase = "cpu"
        self.started = time.monotonic()
        self.log_offset = os.path.getsize(self.log_path)
        self.conn.send(task)

    def log_tail(self) -> str:
        with open(self.log_path, errors="replace") as f:
            f.seek(self.log_offset)
            lines = [line.strip() for line in f.read().splitlines() if line.strip()]
        return " / ".join(lines[-3:])[-300:]

    def kill(self):
        if self.process.is_alive():
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.join()

    def stop(self):
        try:
            self.conn.send(None)
            self.process.join(30)
        except (BrokenPipeError, OSError):
            pass
        if self.process.is_alive():
            self.kill()


def lost_case(worker: Worker, hang: bool) -> dict:
    """The result of the case a worker was running when it died or ran out of time."""
    prefix = "" if worker.phase == "tpu" else "CPU_"
    if hang:
        category, detail = prefix + "HANG", f"no answer after {time.monotonic() - worker.started:.0f} s"
    else:
        code = worker.process.exitcode
        name = signal.Signals(-code).name if code is not None and code < 0 else f"exit code {code}"
        category, detail = prefix + "SIGNAL", f"{name} ({code})"
    tail = worker.log_tail()
    if tail:
        detail += f"; log: {tail}"
    return dict(category=category, detail=detail, case=None, restart=True)


def run_sweep(tasks: list, workers: int, timeout: float, on_result) -> None:
    """Runs (variant name, seed) tasks over worker processes; calls ``on_result(task, result)`` for each.

    A SIGNAL or HANG in the tpu leg is confirmed by running the tpu leg alone in a fresh worker: if that survives,
    the CPU leg damaged the process (CPU_SIGNAL, CPU_HANG)."""
    pending = collections.deque((name, seed, False) for name, seed in tasks)
    unconfirmed = {}

    def settle(task, result):
        name, seed, tpu_only = task
        if tpu_only:
            original = unconfirmed.pop((name, seed))
            if result["category"] not in ("SIGNAL", "HANG"):
                note = "; the tpu leg alone did not crash: damage done by the CPU leg?"
                original = dict(original, category="CPU_" + original["category"], detail=original["detail"] + note)
            on_result((name, seed), original)
        elif result["category"] in ("SIGNAL", "HANG"):
            unconfirmed[name, seed] = result
            pending.appendleft((name, seed, True))
        else:
            on_result((name, seed), result)

    with tempfile.TemporaryDirectory(prefix="bad_input_sweep") as log_dir:
        pool = [Worker(i, log_dir) for i in range(min(workers, len(tasks)) or 1)]
        for worker in pool:
            worker.start()
        while pending or any(w.task for w in pool):
            for worker in pool:
                if worker.task is None and pending:
                    worker.send(pending.popleft())
            busy = {w.conn: w for w in pool if w.task}
            for conn in multiprocessing.connection.wait(list(busy), timeout=1.0):
                collect(busy[conn], settle)
            for worker in pool:
                if worker.task and time.monotonic() - worker.started > timeout:
                    worker.kill()
                    finish(worker, lost_case(worker, hang=True), settle)
        for worker in pool:
            worker.stop()


def collect(worker: Worker, on_result):
    try:
        message = worker.conn.recv()
    except (EOFError, OSError):
        worker.process.join(10)
        finish(worker, lost_case(worker, hang=False), on_result)
        return
    if message[0] == "phase":
        worker.phase = message[1]
    else:
        finish(worker, message[1], on_result)


def finish(worker: Worker, result: dict, on_result):
    task, worker.task = worker.task, None
    if result["restart"] or worker.cases_run >= CASES_PER_WORKER:
        worker.stop()
        worker.start()
        worker.cases_run = 0
    on_result(task, result)


# ---------------------------------------------------------------- the sweep and its report


def select_variants(variants: list[Variant], ops: str | None, shard: str | None) -> list[Variant]:
    if ops:
        wanted = set(ops.split(","))
        variants = [v for v in variants if v.name in wanted or v.lowered in wanted]
    if shard:
        index, count = (int(x) for x in shard.split("/"))
        lowered = sorted({v.lowered for v in variants})
        mine = set(lowered[index::count])
        variants = [v for v in variants if v.lowered in mine]
    return variants


def load_known(path: str) -> dict[tuple[str, str, str], str]:
    """(category, variant glob, cause glob) -> reason, from lines ``CATEGORY VARIANT CAUSE  # reason``."""
    known = {}
    if not os.path.exists(path):
        return known
    with open(path) as f:
        for line in f:
            entry, _, reason = line.partition("#")
            fields = entry.split()
            if len(fields) == 3:
                known[tuple(fields)] = reason.strip()
    return known


def cause(category: str, detail: str) -> str:
    """What the known list matches besides the variant: "IndexError->RuntimeError", "SIGSEGV", "HANG"."""
    if category == "MISMATCH_CLASS":
        cpu, _, tpu = detail.partition(" | tpu ")
        return f"{cpu[4:].split(':')[0]}->{tpu.split(':')[0]}"
    if category.endswith("SIGNAL"):
        return detail.split()[0]
    return category


def matches(variant: Variant, pattern: str) -> bool:
    """Whether a known-list pattern names the variant or the lowered op it runs."""
    return fnmatch.fnmatchcase(variant.name, pattern) or fnmatch.fnmatchcase(variant.lowered, pattern)


class Report:
    def __init__(self, variants: list[Variant], known: dict):
        self.variants = {v.name: v for v in variants}
        self.known = known
        self.counts = collections.Counter()
        self.by_kind = collections.defaultdict(collections.Counter)
        self.failures = []  # (category, variant, kind, seed, detail, case)
        self.started = time.monotonic()

    def add(self, task, result):
        name, seed = task
        kind = kind_of(self.variants[name], seed)
        category = result["category"]
        self.counts[category] += 1
        self.by_kind[kind][category] += 1
        if not category.startswith("ok_"):
            failure = (category, name, kind, seed, result["detail"], result["case"])
            self.failures.append(failure)
            if category in LIVE:
                print(self.line(failure), flush=True)
        done = sum(self.counts.values())
        if done % 200 == 0:
            elapsed = time.monotonic() - self.started
            print(f"... {done} cases, {elapsed:.0f} s, {dict(self.counts)}", file=sys.stderr, flush=True)

    def known_entry(self, failure):
        category, name, _, _, detail, _ = failure
        failure_cause = cause(category, detail)
        for entry in self.known:
            if entry[0] == category and matches(self.variants[name], entry[1]):
                if fnmatch.fnmatchcase(failure_cause, entry[2]):
                    return entry
        return None

    def is_known(self, failure) -> bool:
        return self.known_entry(failure) is not None

    def line(self, failure) -> str:
        category, name, kind, seed, detail, case = failure
        known = " (known)" if self.is_known(failure) else ""
        text = f"{category}{known} {name} {kind} seed={seed} | {detail}"
        text += f" | {case}" if case else ""
        return text + f"\n    repro: python tools/bad_input_sweep.py --repro '{name}:{seed}'"

    def new_gating(self) -> list:
        return [f for f in self.failures if f[0] in GATING and not self.is_known(f)]

    def stale_known(self, variants: list[Variant]) -> list:
        """Known entries about variants that ran, which matched no failure."""
        used = {self.known_entry(f) for f in self.failures}
        ran = lambda entry: any(matches(v, entry[1]) for v in variants)
        return [entry for entry in self.known if entry not in used and ran(entry)]

    def sorted_failures(self) -> list:
        return sorted(self.failures, key=lambda x: (CATEGORIES.index(x[0]), x[1], x[3]))

    def write(self, path: str):
        with open(path, "w") as f:
            for failure in self.sorted_failures():
                f.write(self.line(failure) + "\n")

    def print_summary(self, variants: list[Variant]):
        print(f"\n{'kind':20}" + "".join(f"{c[:14]:>15}" for c in CATEGORIES))
        for kind in KINDS:
            row = self.by_kind.get(kind, {})
            print(f"{kind:20}" + "".join(f"{row.get(c, 0):>15}" for c in CATEGORIES))
        print(f"{'total':20}" + "".join(f"{self.counts.get(c, 0):>15}" for c in CATEGORIES))
        print("\nclass mismatches by cause (cpu class -> tpu class):")
        causes = collections.Counter(cause(f[0], f[4]) for f in self.failures if f[0] == "MISMATCH_CLASS")
        for text, count in causes.most_common():
            print(f"{count:6}  {text}")
        print("\nfailures that --check gates on (every failure is in the --report file):")
        for failure in self.sorted_failures():
            if failure[0] in GATING:
                print(self.line(failure))
        elapsed = time.monotonic() - self.started
        print(
            f"\nbad_input_sweep ops={len({v.lowered for v in variants})} variants={len(variants)}"
            f" cases={sum(self.counts.values())} signals={self.counts['SIGNAL']} hangs={self.counts['HANG']}"
            f" class_mismatches={self.counts['MISMATCH_CLASS']} value_mismatches={self.counts['MISMATCH_VALUE']}"
            f" tpu_only_raises={self.counts['TPU_RAISED']} broken_after_raise={self.counts['BROKEN_AFTER_RAISE']}"
            f" cpu_crashes={self.counts['CPU_SIGNAL'] + self.counts['CPU_HANG']}"
            f" new_gating={len(self.new_gating())} seconds={elapsed:.0f}"
        )


def repro(spec: str):
    name, _, seed = spec.rpartition(":")
    import_torch_pjrt()
    variant = {v.name: v for v in find_variants(torch_pjrt_lowered())}[name]
    case = make_case(variant, int(seed))
    print(f"kind: {case.kind}\ncase: {case.describe()}")
    for key, value in list(enumerate(case.args)) + list(case.kwargs.items()):
        if isinstance(value, torch.Tensor) and value.numel() <= 16:
            print(f"  {key}: {value.tolist()}")
    cpu = run_leg(case, "cpu")
    print(f"cpu: {cpu.text()}")
    print("tpu: ...", flush=True)
    tpu = run_leg(case, "tpu")
    print(f"tpu: {tpu.text()}")
    category, detail = judge(case, cpu, tpu)
    print(f"verdict: {category} {detail}")
    if tpu.error is not None:
        print(f"next op: {tiny_op_works() or 'works'}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated lowered ops or variants (aten::add.Tensor,aten::mul_.Tensor)")
    parser.add_argument("--shard", help="i/n: the i-th of n deterministic shards of the lowered ops")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases-per-op", type=int, default=len(KINDS), help="cases per variant (one of each kind)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60, help="seconds per case")
    parser.add_argument("--report", default="bad_input_report.txt", help="where the full failure list goes")
    parser.add_argument("--known", default=KNOWN_LIST)
    parser.add_argument("--check", action="store_true", help="exit 1 on new gating failures or stale known entries")
    parser.add_argument("--repro", metavar="VARIANT:SEED", help="run one case in this process and explain it")
    parser.add_argument("--list", action="store_true", help="print the variants and exit")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.repro:
        repro(args.repro)
        return 0
    variants = select_variants(find_variants(torch_pjrt_lowered()), args.ops, args.shard)
    if args.list:
        print("\n".join(f"{v.name} ({v.kind})" for v in variants))
        return 0
    tasks = [(v.name, seed) for v in variants for seed in case_seeds(v.name, args.seed, args.cases_per_op)]
    report = Report(variants, load_known(args.known))
    print(f"bad_input_sweep: {len(variants)} variants, {len(tasks)} cases, {args.workers} workers", flush=True)
    run_sweep(tasks, args.workers, args.timeout, report.add)
    report.write(args.report)
    report.print_summary(variants)
    print(f"full failure list: {args.report}")
    if not args.check:
        return 0
    stale = report.stale_known(variants)
    for failure in report.new_gating():
        print(f"new: {report.line(failure)}")
    for entry in stale:
        print(f"stale: {' '.join(entry)} no longer fails; remove it from {args.known}")
    return 1 if report.new_gating() or stale else 0


if __name__ == "__main__":
    sys.exit(main())
