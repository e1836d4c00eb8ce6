"""Compares every OpInfo of PyTorch's op database on tpu against CPU.

For each OpInfo in ``torch.testing._internal.common_methods_invocations.op_db`` and each of
its sample inputs, the op runs on CPU and on tpu the way ``test_ops.py::test_compare_cpu``
does, and the results are compared with ``torch.testing.assert_close``. Where the OpInfo
supports autograd, the input gradients of the outputs weighted by fixed random cotangents
are compared too. float32 runs every sample (an op without float32 runs int64, int32 or
bool instead); bfloat16 runs the first few samples where the op supports it on CPU.

Each OpInfo gets a status:

  native    every sample matched CPU and no op fell back to the CPU
  fallback  every sample matched, but some op ran through the CPU fallback
  fail      a sample raised or did not match (the first error)
  skip      nothing to compare (no supported dtype, no samples, only unsupported dtypes)

Usage:

  python tools/op_coverage.py                   # full sweep, prints the summary
  python tools/op_coverage.py --update          # full sweep, rewrites docs/op_coverage.md and
                                                # tests/python/op_coverage_native.txt
  python tools/op_coverage.py --ops add,nn.functional.relu   # a few ops, one line each
  python tools/op_coverage.py --shard 0/8 --out r.jsonl      # one shard in this process

The sweep runs ``--jobs`` worker processes over ``--shards`` shards; each worker appends one
JSON line per OpInfo to its shard's file. A worker that crashes (segfault, abort) loses only
the OpInfo it was running: that one is recorded as ``fail: crashed`` and a new worker goes on
with the rest of the shard.
"""

from __future__ import annotations

import argparse
import collections
import functools
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import torch
from retry_import import import_torch_pjrt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "op_coverage.md")
NATIVE_LIST = os.path.join(ROOT, "tests", "python", "op_coverage_native.txt")
BF16_SAMPLES = 3  # bfloat16 runs only the first few samples of each op
MAX_DETAIL = 200
BACKWARD_TOLERANCE_SCALE = 10  # gradients sum more terms, in another order than on CPU
CPU_TENSOR_ARGS = {"tensor_split"}  # ops whose tensor arguments (not the input) must stay on the CPU
# Their bfloat16 samples have ties, whose order (in indices, and gradients through them) CPU leaves unspecified.
TIES_IN_BF16 = {"sort", "argsort", "msort", "topk"}

# (rtol, atol): a little looser than torch's float32 default (1.3e-6, 1e-5), since XLA
# fuses and reorders float arithmetic; the OpInfo's own tolerance overrides win when looser.
TOLERANCES = {
    "float32": (1e-5, 1e-5),
    "complex64": (1e-5, 1e-5),
    "bfloat16": (1.6e-2, 1e-2),
}


def key(op) -> str:
    """How an OpInfo is named in the list and the doc: ``name`` or ``name variant``."""
    return f"{op.name} {op.variant_test_name}".strip()


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as db

    return db


# ---------------------------------------------------------------------------------------------
# Moving samples and results between devices


def to_tpu(x, keep=False):
    """Moves tensors nested in lists/tuples/dicts to tpu, keeping strides and requires_grad.

    A "cpu" device argument becomes "tpu" (factory ops, ``Tensor.to``); ``keep`` leaves tensors
    on the CPU (arguments an op requires on the CPU, like ``tensor_split``'s indices).
    """
    if isinstance(x, torch.Tensor):
        if keep:
            return x
        if x.numel() == 0 or (x.is_contiguous() and x.untyped_storage().nbytes() == x.nbytes):
            y = x.detach().to("tpu")
        else:  # the same view of a moved copy of the whole storage (as_strided may reach all of it)
            storage = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage())
            y = storage.to("tpu").as_strided(x.shape, x.stride(), x.storage_offset())
        return y.requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(e, keep) for e in x)
    if isinstance(x, dict):
        return {k: to_tpu(v, keep) for k, v in x.items()}
    if isinstance(x, (str, torch.device)) and str(x) == "cpu":
        return "tpu"
    return x


def to_cpu(x):
    """Copies tpu results to the CPU, failing on a tensor result that is not on tpu."""
    if isinstance(x, torch.Tensor):
        if x.device.type != "tpu":
            raise AssertionError(f"result on {x.device}, expected tpu")
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        items = [to_cpu(e) for e in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    return x


def tensors(x):
    return [t for t in torch.utils._pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def map_tensors(fn, x):
    return torch.utils._pytree.tree_map(lambda t: fn(t) if isinstance(t, torch.Tensor) else t, x)


# ---------------------------------------------------------------------------------------------
# Checking one OpInfo


def tolerance(op, dtype):
    """The default tolerance, loosened by any toleranceOverride the OpInfo declares for ``dtype``."""
    from torch.testing._internal.common_device_type import toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    rtol, atol = TOLERANCES.get(str(dtype).split(".")[-1], (0, 0))
    for d in op.decorators:
        for dec in d.decorators if isinstance(d, DecorateInfo) else [d]:
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                rtol, atol = max(rtol, dec.d[dtype].rtol), max(atol, dec.d[dtype].atol)
    return rtol, atol


def compare_cpu_skip_reason(op):
    """Why the OpInfo skips ``test_compare_cpu`` (random or uninitialised values), or None."""
    from torch.testing._internal.opinfo.core import DecorateInfo

    for d in op.decorators:
        if not (isinstance(d, DecorateInfo) and d.test_name == "test_compare_cpu" and d.active_if):
            continue
        if d.device_type not in (None, "cpu", "privateuse1", "tpu"):
            continue
        for dec in d.decorators:
            if getattr(dec, "__name__", "") == "decorator":  # what unittest.skip(reason) returns
                cells = [c.cell_contents for c in dec.__closure__ or ()]
                return next((c for c in cells if isinstance(c, str)), "skipped")
    return None


def assert_matches(actual, expected, rtol, atol, values=True):
    actual = to_cpu(actual)
    if values:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
        return
    a, e = tensors(actual), tensors(expected)
    assert len(a) == len(e), f"{len(a)} tensor results, expected {len(e)}"
    for x, y in zip(a, e):
        assert (x.dtype, x.shape) == (y.dtype, y.shape), f"{x.dtype}{list(x.shape)} != {y.dtype}{list(y.shape)}"


def input_grads(args, results, cotangents):
    """Gradients of sum(result * cotangent) with respect to the inputs that require grad."""
    outs = [t for t in tensors(results) if t.requires_grad]
    ins = [t for t in tensors(args) if t.requires_grad]
    cotangents = [c.to(o.device) for c, o in zip(cotangents, outs)]
    return torch.autograd.grad(outs, ins, cotangents, allow_unused=True)


def check_sample(op, sample, dtype, where):
    """Runs one sample (and its backward) on CPU and tpu; raises where they differ.

    ``where["phase"]`` names the step that raised: "cpu" (nothing to compare), "forward" or
    "backward"; ``where["values_differ"]`` says why only shapes and dtypes matched.
    """
    rtol, atol = tolerance(op, dtype)
    post = sample.output_process_fn_grad

    def run(args):
        return post(op(args[0], *args[1], **args[2]))

    where["phase"] = "forward"
    args = (sample.input, sample.args, sample.kwargs)
    dev = (to_tpu(args[0]), to_tpu(args[1], keep=op.name in CPU_TENSOR_ARGS), to_tpu(args[2]))

    where["phase"] = "cpu"
    torch.manual_seed(0)
    rng = torch.get_rng_state()
    expected = run(args)
    drew_random = not torch.equal(rng, torch.get_rng_state())

    cotangents, expected_grads = None, None
    if op.supports_autograd and any(t.requires_grad for t in tensors(expected)):
        gen = torch.Generator().manual_seed(0)
        cotangents = [torch.randn(t.shape, dtype=t.dtype, generator=gen) for t in tensors(expected) if t.requires_grad]
        try:
            expected_grads = input_grads(args, expected, cotangents)
        except Exception:  # no CPU backward to compare with (e.g. not implemented for bfloat16)
            cotangents = None

    @functools.cache
    def float32_reference():
        """bfloat16 only: the CPU results for the same values in float32, rounded to bfloat16."""
        up = map_tensors(
            lambda t: t.detach().float().requires_grad_(t.requires_grad) if t.dtype == torch.bfloat16 else t, args
        )
        results = run(up)
        grads = input_grads(up, results, [c.float() for c in cotangents]) if cotangents else None
        down = lambda x: map_tensors(lambda t: t.detach().to(dtype) if t.dtype == torch.float32 else t, x)
        return down(results), down(grads)

    # Random ops draw other numbers on tpu (PyTorch seeds them with wrapper_set_seed, or they change
    # the CPU generator's state), and test_compare_cpu skips some ops (uninitialised memory,
    # undefined overflow). Where their values differ, their shapes and dtypes must still match.
    seeded = drew_random or "wrapper_set_seed" in getattr(getattr(op.op, "__code__", None), "co_names", ())
    lenient = compare_cpu_skip_reason(op) or ("draws random numbers" if seeded else None)

    def compare(actual, expected, index, scale):
        try:
            assert_matches(actual, expected, rtol * scale, atol * scale)
        except AssertionError:
            if lenient:
                assert_matches(actual, expected, rtol, atol, values=False)
                where["values_differ"] = lenient
                return
            # CPU's bfloat16 kernels round more often than XLA; being as close to float32 is fine too.
            if dtype != torch.bfloat16:
                raise
            try:
                assert_matches(actual, float32_reference()[index], rtol * scale, atol * scale)
            except Exception:
                pass
            else:
                return
            raise

    where["phase"] = "forward"
    with torch.device("tpu"):  # factory samples without a device argument create on tpu too
        actual = run(dev)
    compare(actual, expected, 0, 1)
    if cotangents:
        where["phase"] = "backward"
        compare(input_grads(dev, actual, cotangents), expected_grads, 1, BACKWARD_TOLERANCE_SCALE)


@functools.cache
def tpu_supports(dtype) -> bool:
    """Whether the tpu device holds tensors of ``dtype`` (complex64 does; complex32 does not)."""
    try:
        torch.empty(1, dtype=dtype, device="tpu")
    except Exception:
        return False
    return True


def dtypes_to_run(op, max_samples=None, dtype=None):
    """[(dtype, how many samples or None for all)]: float32 (else int64, int32, bool, or complex64 for ops
    that only take complex inputs, where the device supports it), then a few bfloat16; with ``dtype``
    (e.g. torch.complex64) only that dtype, where CPU supports it."""
    supported = op.supported_dtypes("cpu")
    if dtype is not None:
        return [(dtype, max_samples)] if dtype in supported else []
    main = next((d for d in (torch.float32, torch.int64, torch.int32, torch.bool) if d in supported), None)
    if main is None and torch.complex64 in supported and tpu_supports(torch.complex64):
        main = torch.complex64
    if main is None:
        return []
    runs = [(main, max_samples)]
    if torch.bfloat16 in supported and op.name not in TIES_IN_BF16:
        runs.append((torch.bfloat16, min(BF16_SAMPLES, max_samples or BF16_SAMPLES)))
    return runs


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    item = re.search(r" ?The failure occurred for item (\S+)$", text)  # assert_close on a sequence
    if item:
        text = f"result {item.group(1).rstrip('.')}: {text[: item.start()]}"
    text = f"{type(e).__name__}: {text}" if text else type(e).__name__
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 3] + "..."


def unsupported(e: BaseException):
    """What the tpu device lacks for this error (complex dtypes, sparse layouts), or None."""
    dtype = re.search(r"dtype (\w+) is not supported on the tpu device", str(e))
    if dtype:
        return dtype.group(1)
    if re.search(r"Sparse\w*tpu|Sparse CSR tensors", str(e)):
        return "sparse layouts"
    return None


def check_op(op, max_samples=None, dtype=None) -> tuple[str, str]:
    """Runs the samples of ``op`` (at most ``max_samples`` per dtype; only ``dtype`` if given);
    returns (status, detail)."""
    torch_pjrt = import_torch_pjrt()

    runs = dtypes_to_run(op, max_samples, dtype)
    if not runs:
        if dtype is not None:
            return "skip", f"no {str(dtype)[6:]} support on CPU"
        return "skip", "no float32, int, bool or (device-supported) complex64 support on CPU"
    ran, cpu_error, lacks, differ = 0, "", "", ""
    torch_pjrt.reset_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype, limit in runs:
            torch.manual_seed(0)
            requires_grad = op.supports_autograd and (dtype.is_floating_point or dtype.is_complex)
            try:
                samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=requires_grad), limit))
            except Exception as e:
                return "skip", f"sample_inputs raised {one_line(e)}"
            for i, sample in enumerate(samples):
                where = {}
                try:
                    check_sample(op, sample, dtype, where)
                    ran += 1
                except Exception as e:
                    if where["phase"] == "cpu":
                        cpu_error = cpu_error or one_line(e)
                    elif unsupported(e):
                        lacks = lacks or unsupported(e)
                    else:
                        return "fail", f"{str(dtype)[6:]} sample {i} {where['phase']}: {one_line(e)}"
                differ = differ or where.get("values_differ") or ""
        try:
            torch_pjrt.synchronize()
        except Exception as e:
            return "fail", f"synchronize: {one_line(e)}"
    if ran == 0:
        if lacks:
            return "skip", f"needs {lacks}"
        return "skip", f"CPU raises {cpu_error}" if cpu_error else "no samples"
    notes = [f"{ran} samples"]
    if lacks:
        notes.append(f"others need {lacks}")
    if cpu_error:
        notes.append("others raise on CPU too")
    if differ:
        notes.append(f"some values differ, their shapes and dtypes match ({differ})")
    fallbacks = torch_pjrt.metrics()["fallback_ops"]
    if fallbacks:
        return "fallback", "CPU fallback: " + ", ".join(sorted(fallbacks))
    return "native", "; ".join(notes)


# ---------------------------------------------------------------------------------------------
# Sweeping shards in worker processes


def run_shard(index: int, count: int, out: str) -> None:
    """Checks the OpInfos of one shard, appending a JSON line per OpInfo to ``out``.

    Before each OpInfo a ``running`` line is written, so that the parent can tell which one
    a crash interrupted. OpInfos already finished in ``out`` are not run again.
    """
    done = {r["key"] for r in read_jsonl(out) if "status" in r}
    with open(out, "a") as f:
        for i, op in enumerate(op_db()):
            if i % count != index or key(op) in done:
                continue
            f.write(json.dumps({"key": key(op), "running": True}) + "\n")
            f.flush()
            start = time.time()
            status, detail = check_op(op)
            record = {"key": key(op), "status": status, "detail": detail, "seconds": round(time.time() - start, 2)}
            f.write(json.dumps(record) + "\n")
            f.flush()


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def crash_message(log: str) -> str:
    """The last line of a crashed worker's output that looks like the cause."""
    try:
        with open(log, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    for line in reversed(lines[-50:]):
        if any(w in line for w in ("Check failed", "Fatal", "Error", "error", "terminate", "Aborted", "Segmentation")):
            return line[:150]
    return lines[-1][:150] if lines else ""


def sweep(shards: int, jobs: int, workdir: str) -> dict:
    """Runs every shard in worker processes, restarting a shard's worker after a crash."""
    pending = collections.deque(range(shards))
    running = {}  # shard -> (process, log path)

    def launch(shard):
        log = os.path.join(workdir, f"shard{shard}.log")
        out = os.path.join(workdir, f"shard{shard}.jsonl")
        cmd = [
            sys.executable,
            "-X",
            "faulthandler",
            os.path.abspath(__file__),
            "--shard",
            f"{shard}/{shards}",
            "--out",
            out,
        ]
        with open(log, "a") as logf:
            running[shard] = (subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT), log)

    while pending or running:
        while pending and len(running) < jobs:
            launch(pending.popleft())
        time.sleep(1)
        for shard, (proc, log) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[shard]
            if proc.returncode == 0:
                print(f"shard {shard}/{shards} done", flush=True)
                continue
            out = os.path.join(workdir, f"shard{shard}.jsonl")
            records = read_jsonl(out)
            last = records[-1] if records else None
            code = proc.returncode
            why = signal.Signals(-code).name if code < 0 and -code in signal.Signals._value2member_map_ else code
            if last is None or "status" in last:  # failed outside any op: do not loop forever
                print(f"shard {shard} exited with {why} outside an op; see {log}", flush=True)
                continue
            detail = f"crashed ({why}) {crash_message(log)}".strip()
            print(f"shard {shard}: {last['key']} {detail}", flush=True)
            with open(out, "a") as f:
                f.write(json.dumps({"key": last["key"], "status": "fail", "detail": detail}) + "\n")
            launch(shard)  # go on with the rest of the shard

    results = {}
    for shard in range(shards):
        for r in read_jsonl(os.path.join(workdir, f"shard{shard}.jsonl")):
            if "status" in r:
                results[r["key"]] = r
    return results


# ---------------------------------------------------------------------------------------------
# Reports


def summarize(results: dict) -> str:
    counts = collections.Counter(r["status"] for r in results.values())
    total = len(results)
    parts = ", ".join(f"{counts[s]} {s}" for s in ("native", "fallback", "fail", "skip"))
    return f"{total} OpInfos: {parts}; {100 * counts['native'] / max(total, 1):.1f}% native"


def top_fallbacks(results: dict) -> list:
    """[(ATen op, how many OpInfos fell back on it)], most first: what to lower next."""
    counts = collections.Counter()
    for r in results.values():
        if r["status"] == "fallback":
            counts.update(r["detail"].removeprefix("CPU fallback: ").split(", "))
    return counts.most_common()


def write_doc(results: dict, seconds: float) -> None:
    def cell(text):
        return text.replace("|", "\\|")

    lines = [
        "# OpInfo coverage",
        "",
        "Generated by `python tools/op_coverage.py --update`; do not edit by hand. Each OpInfo of PyTorch's",
        "`common_methods_invocations.op_db` runs every float32 sample (int64/int32/bool for ops without",
        f"float32) and the first {BF16_SAMPLES} bfloat16 samples on tpu and on CPU, as `test_ops.py::test_compare_cpu`",
        "does, and compares the results (and, where the op supports autograd, the input gradients for fixed random",
        "cotangents) with `assert_close`: float32 rtol = atol = 1e-5, bfloat16 rtol 1.6e-2, atol 1e-2 (or the OpInfo's",
        "own looser override), ten times that for gradients. A bfloat16 result may instead match CPU's float32 result",
        "for the same values; ops that draw random numbers, and those `test_compare_cpu` skips, need only matching",
        "shapes and dtypes where their values differ.",
        "",
        "- `native`: every sample matched and no op fell back to the CPU; listed in",
        "  `tests/python/op_coverage_native.txt`, which `tests/python/test_op_coverage.py` guards against regressions",
        "  (it re-checks the first few samples of each).",
        "- `fallback`: every sample matched, but some op ran through the CPU fallback (named in the detail).",
        "- `fail`: the first error; `crashed` means the process died in that op.",
        "- `skip`: nothing could be compared (no supported dtype, no samples, only unsupported dtypes or layouts).",
        "",
        "Full sweep (rewrites this file and the native list; without `--update` it only prints the summary):",
        "",
        "```bash",
        "python tools/op_coverage.py --update    # --jobs N worker processes; --ops a,b checks a few ops here",
        "```",
        "",
        f"torch {torch.__version__}; this sweep took {seconds / 60:.0f} minutes with {os.cpu_count()} CPU cores.",
        "",
        f"**{summarize(results)}**",
        "",
        "Most common CPU fallbacks (ATen op: OpInfos that need it): "
        + ", ".join(f"`{op}` {n}" for op, n in top_fallbacks(results)[:30])
        + ".",
        "",
        "| op | variant | status | detail |",
        "|---|---|---|---|",
    ]
    for k, r in results.items():
        name, _, variant = k.partition(" ")
        lines.append(f"| `{name}` | {variant} | {r['status']} | {cell(r['detail'])} |")
    with open(DOC, "w") as f:
        f.write("\n".join(lines) + "\n")


def write_native_list(results: dict) -> None:
    with open(NATIVE_LIST, "w") as f:
        f.write("# OpInfos (name [variant]) that match CPU natively; written by tools/op_coverage.py --update\n")
        f.writelines(k + "\n" for k, r in results.items() if r["status"] == "native")


def read_native_list() -> list:
    with open(NATIVE_LIST) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", action="store_true", help="rewrite the doc and the native list")
    parser.add_argument("--ops", help="comma-separated OpInfo names (all their variants) to check here")
    parser.add_argument("--shard", help="i/n: check one shard in this process (with --out)")
    parser.add_argument("--out", help="JSON-lines file for --shard")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--shards", type=int, default=0, help="shards (default: 4 per job)")
    parser.add_argument("--workdir", help="where shards write (default: a temporary folder)")
    parser.add_argument("--dtype", help="with --ops: run only this dtype's samples (e.g. complex64)")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype) if args.dtype else None

    if args.shard:
        index, count = map(int, args.shard.split("/"))
        run_shard(index, count, args.out)
        return
    if args.ops:
        names = set(args.ops.split(","))
        for op in op_db():
            if op.name in names or key(op) in names:
                start = time.time()
                status, detail = check_op(op, dtype=dtype)
                print(f"{key(op):45} {status:8} {time.time() - start:6.1f}s  {detail}", flush=True)
        return

    start = time.time()
    workdir = args.workdir or tempfile.mkdtemp(prefix="op_coverage_")
    os.makedirs(workdir, exist_ok=True)
    print(f"sweeping into {workdir}", flush=True)
    found = sweep(args.shards or 4 * args.jobs, args.jobs, workdir)
    seconds = time.time() - start
    missing = {"status": "fail", "detail": f"no result: its worker died outside any op (see {workdir})"}
    results = {key(op): found.get(key(op), missing) for op in op_db()}  # in op_db order
    print(summarize(results))
    print(f"took {seconds / 60:.1f} minutes")
    print("most common CPU fallbacks:", ", ".join(f"{op} {n}" for op, n in top_fallbacks(results)[:15]))
    failures = collections.Counter(
        r["detail"].split(": ", 1)[-1][:70] for r in results.values() if r["status"] == "fail"
    )
    for text, n in failures.most_common(15):
        print(f"  {n:4}  {text}")
    if args.update:
        write_doc(results, seconds)
        write_native_list(results)
        print(f"wrote {os.path.relpath(DOC, ROOT)} and {os.path.relpath(NATIVE_LIST, ROOT)}")


if __name__ == "__main__":
    main()
