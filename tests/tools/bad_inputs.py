#!/usr/bin/env python3
"""Generated bad-input suite: runs the real `tessel` binary on >= 1,000 bad or edge-case
inputs over every surface a user touches and checks README's error promise on each.

  bad_inputs.py TESSEL [--surface S ...] [--case NAME] [--jobs N] [--timeout-s T] [--list]
                [--seed N] [--duration-s S]

Surfaces: einsum subscripts and join/agg options, .npy files, graph / decomposition /
machine / task-graph JSON, CLI numbers and options, workload strings, output paths.
Every case runs in a fresh empty folder holding only its input files. Its outcome is one of

  clean error    exit 1 (error in the input), 2 (in the command line) or 3 (out of memory or
                 threads: a request too large for the machine), stderr starting with
                 "tessel: error:", no file left behind (the folder holds exactly the
                 inputs, the -o target does not exist, no *.tmp-tessel) and every file that
                 was there unchanged
  success        exit 0, allowed only for cases generated as edge cases, not as certainly
                 bad; an einsum that succeeds must match numpy.einsum, a --json report must
                 not hold negative or NaN byte / flop / time totals, a symlinked output
                 must still be a symlink (written through, not replaced)
  failures:      crash (signal, sanitizer report), hang (over --timeout-s), internal error
                 ("tessel: internal error" or exit 4), unclean error (other exit code or no
                 prefix), file left, file changed (an error rewrote or removed a file that was
                 there), wrong success (exit 0 on a certainly bad input), wrong
                 answer (a success that breaks one of the checks above)

Generation is deterministic (seed 15 unless --seed says otherwise). --duration-s S keeps
going for S seconds: after the first round it generates again with seeds N+1, N+2, ... and
runs only the cases whose arguments and files no earlier round ran (the random mutations of
JSON, .npy, subscripts and CLI numbers change with the seed), so a long run tries many more
inputs: `bad_inputs.py build/bin/tessel --duration-s 600` is the ten-minute run. Cases named in KNOWN_OPEN are not run and
are listed in the summary. Exits 0 when every case ran gives a clean error or a good
success, 1 otherwise; failing cases keep their folder (printed) to replay.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

SEED = 15
# README "Exit codes": 1 an error in the input, 2 in the command line, 3 out of memory or
# threads (a request too large for the machine); 4 is an internal error (a bug).
USER_ERROR_CODES = {1, 2, 3}
INTERNAL_ERROR_CODE = 4
PREFIX = "tessel: error:"

# Cases not run, by name, with the reason (a bug still open). Printed in every summary.
KNOWN_OPEN = {}

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


class Case:
    def __init__(self, name, args, files=None, expect="error", outputs=(), check=None, links=None, dirs=()):
        self.name = name
        # argv after the binary; paths relative to the case folder (no NUL: argv cannot hold one)
        self.args = [a.replace("\x00", "\x01") for a in args]
        self.files = files or {}    # name -> bytes, written into the case folder first
        self.expect = expect        # "error": certainly bad; "any": an edge case that may succeed
        self.outputs = outputs      # output paths the command would write
        self.check = check          # on success: f(folder, stdout) -> None or a failure message
        self.links = links or {}    # name -> symlink target, made in the case folder
        self.dirs = dirs            # folders made in the case folder before the files


# ---- building blocks ---------------------------------------------------------------------

def npy_bytes(descr="<f4", shape=(2, 3), data=None, fortran="False", version=(1, 0), header=None,
              magic=b"\x93NUMPY", header_len=None, pad=True):
    if header is None:
        if isinstance(shape, str):
            shape_text = shape
        elif len(shape) == 1:
            shape_text = "(%s,)" % (shape[0],)
        else:
            shape_text = "(" + ", ".join(str(s) for s in shape) + ")"
        header = "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (
            descr if descr.startswith(("'", "[", "{")) or not isinstance(descr, str) or descr.isdigit() else repr(descr),
            fortran, shape_text)
    hb = header.encode("latin-1") if isinstance(header, str) else header
    len_size = 2 if version[0] == 1 else 4
    if pad:
        total = len(magic) + 2 + len_size + len(hb) + 1
        hb = hb + b" " * ((64 - total % 64) % 64) + b"\n"
    n = len(hb) if header_len is None else header_len
    out = magic + bytes(version) + (struct.pack("<H", n & 0xFFFF) if len_size == 2 else struct.pack("<I", n & 0xFFFFFFFF)) + hb
    if data is None:
        count = 1
        if not isinstance(shape, str):
            for s in shape:
                count *= s if isinstance(s, int) and 0 <= s < 1 << 20 else 1
        data = struct.pack("<%df" % count, *[float(i % 7) for i in range(count)])
    return out + data


def npy_of(arr):
    arr = np.ascontiguousarray(arr)
    descr = {np.float32: "<f4", np.float64: "<f8"}[arr.dtype.type]
    return npy_bytes(descr, tuple(arr.shape), arr.astype(arr.dtype.newbyteorder("<")).tobytes())


BASE_GRAPH = {"dtype": "f32", "nodes": [
    {"name": "x", "kind": "input", "shape": [4, 8]},
    {"name": "w", "kind": "input", "shape": [8, 4]},
    {"name": "y", "kind": "einsum", "inputs": ["x", "w"], "einsum": "ij,jk->ik", "join": "mul(x0,x1)", "agg": "sum"},
    {"name": "m", "kind": "fill", "shape": [4, 4], "fill": "lower_triangular", "value": 0, "value_off": "-inf"},
    {"name": "s", "kind": "select", "inputs": ["y"], "shape": [2, 4],
     "pieces": [{"input": 0, "src_offset": [0, 0], "dst_offset": [0, 0], "size": [2, 4]}]},
    {"name": "z", "kind": "einsum", "inputs": ["y", "m"], "einsum": "ij,ij->ij", "join": "add(x0,x1)"},
    {"name": "r", "kind": "einsum", "inputs": ["z"], "einsum": "ij->i", "join": "x0", "agg": "max"},
    {"name": "out", "kind": "output", "inputs": ["r"]},
    {"name": "out2", "kind": "output", "inputs": ["s"]},
]}

# Node names of `chain:size=8` (X·Y·Z): inputs X, Y, Z; products XY, XYZ.
BASE_DECOMPOSITION = {"devices": 2, "nodes": [
    {"name": "XY", "parts": [2, 1, 1], "devices": [0, 1]},
    {"name": "XYZ", "parts": [1, 2, 1]},
    {"name": "X", "bounds": [[0, 4, 8], [0, 8]], "devices": [0, 1]},
]}

BASE_MACHINE = {
    "name": "two-gpus",
    "device_types": [{"name": "gpu", "peak_flops_per_s": {"f32": 1e12}, "memory_bytes_per_s": 1e11,
                      "memory_capacity_bytes": 10000000000, "launch_latency_s": 1e-6, "sm_count": 100}],
    "links": [{"name": "a_to_b", "kind": "nvlink", "bytes_per_s": 1e10, "latency_s": 1e-6},
              {"name": "b_to_a", "kind": "nvlink", "bytes_per_s": 1e10, "latency_s": 1e-6}],
    "devices": [{"type": 0, "host": 0}, {"type": 0, "host": 0}],
    "routes": [{"src": 0, "dst": 1, "links": [0]}, {"src": 1, "dst": 0, "links": [1]}],
}

BASE_TASK_GRAPH = {
    "devices": 2,
    "buffers": [{"device": 0, "shape": [1024]}, {"device": 0, "shape": [1024]},
                {"device": 1, "shape": [1024]}, {"device": 1, "shape": [1024], "init": "sum"}],
    "tasks": [{"kind": "input", "device": 0, "writes": 0},
              {"kind": "compute", "device": 0, "reads": [0], "writes": 1, "flops": 2048},
              {"kind": "move", "device": 0, "dst_device": 1, "reads": [1], "writes": 2},
              {"kind": "touch", "device": 1, "reads": [2], "writes": 3, "op": "accumulate", "agg": "sum",
               "flops": 1024},
              {"kind": "output", "device": 1, "reads": [3]}],
}

BAD_VALUES = [None, True, False, -1, 0, 1, 2 ** 31, 2 ** 63 - 1, -2 ** 63, 2 ** 64, 1.5, -0.5, "1e400", "x", "",
              "inf", "-inf", "nan", [], [[]], {}, [-1], [2 ** 40, 2 ** 40], "\u00e9\u0000"]


def jdump(obj):
    # json.dumps with a literal 1e400 where the string "1e400" stands (JSON's largest
    # literal overflows a double: a case of its own).
    return json.dumps(obj).replace('"1e400"', "1e400").encode()


def paths_in(obj, prefix=()):
    """Every (path) to a value in a JSON object, depth first."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append(prefix + (k,))
            out += paths_in(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append(prefix + (i,))
            out += paths_in(v, prefix + (i,))
    return out


def set_path(obj, path, value, delete=False):
    obj = json.loads(json.dumps(obj))
    cur = obj
    for k in path[:-1]:
        cur = cur[k]
    if delete:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return obj


def json_mutations(base, rng, prefix, count):
    """Structural mutations of a valid JSON document: every field removed, and `count`
    random fields replaced by a bad value; plus syntactic damage."""
    out = []
    paths = paths_in(base)
    for i, p in enumerate(paths):
        if isinstance(p[-1], str):
            out.append((f"{prefix}/drop-{'.'.join(map(str, p))}", jdump(set_path(base, p, None, delete=True))))
    for i in range(count):
        p = rng.choice(paths)
        v = rng.choice(BAD_VALUES)
        out.append((f"{prefix}/set-{i:03d}-{'.'.join(map(str, p))}", jdump(set_path(base, p, v))))
    text = json.dumps(base).encode()
    for i in range(12):
        cut = rng.randrange(1, len(text))
        out.append((f"{prefix}/truncated-{i:02d}", text[:cut]))
    for i in range(12):
        b = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.choice(b'{}[],:"0-9eE.\x00\xff ')
        out.append((f"{prefix}/bytes-{i:02d}", bytes(b)))
    out += [
        (f"{prefix}/empty", b""),
        (f"{prefix}/null", b"null"),
        (f"{prefix}/array", b"[]"),
        (f"{prefix}/object", b"{}"),
        (f"{prefix}/number", b"42"),
        (f"{prefix}/string", b'"x"'),
        (f"{prefix}/bom", b"\xef\xbb\xbf" + text),
        (f"{prefix}/nan-literal", text.replace(b"1", b"NaN", 1)),
        (f"{prefix}/comment", b"// c\n" + text),
        (f"{prefix}/trailing-garbage", text + b"}"),
        (f"{prefix}/not-utf8", b'{"\xff\xfe": 1}'),
        (f"{prefix}/deep-array-100000", b"[" * 100000 + b"]" * 100000),
        (f"{prefix}/deep-array-unclosed-100000", b"[" * 100000),
        (f"{prefix}/deep-object-50000", b'{"a":' * 50000 + b"1" + b"}" * 50000),
        (f"{prefix}/huge-number", b'{"devices": ' + b"9" * 5000 + b"}"),
        (f"{prefix}/duplicate-keys", text[:-1] + b', "nodes": []}' if text.endswith(b"}") else text),
    ]
    return out


def negative_totals(stdout):
    """A --json report's byte / flop / time / cost totals must be finite and >= 0."""
    try:
        j = json.loads(stdout)
    except ValueError:
        return "--json output is not JSON"
    bad = []

    def walk(v, key):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            if re.search(r"bytes|flops|makespan|cost|tasks|elements|_s$", key or "") and not re.search(r"error|diff|tau", key):
                if isinstance(v, float) and math.isnan(v) or v < 0:
                    bad.append(f"{key}={v}")
    walk(j, None)
    return ("negative or NaN totals: " + ", ".join(bad[:5])) if bad else None


def einsum_check(subscripts, operands):
    def check(folder, stdout):
        try:
            want = np.einsum(subscripts, *operands)
        except Exception:  # numpy refuses: nothing to compare with
            return None
        try:
            got = np.load(os.path.join(folder, "out.npy"))
        except Exception as e:
            return f"exit 0 but out.npy unreadable: {e}"
        if got.shape != np.shape(want):
            return f"shape {got.shape}, numpy {np.shape(want)}"
        if not np.allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True):
            return f"values differ from numpy.einsum (max |diff| {np.nanmax(np.abs(got - want))})"
        return None
    return check


# ---- surfaces ----------------------------------------------------------------------------

def einsum_cases(rng):
    cases = []
    r = np.random.default_rng(SEED)
    vec3 = r.standard_normal(3).astype(np.float32)
    m23 = r.standard_normal((2, 3)).astype(np.float32)
    m34 = r.standard_normal((3, 4)).astype(np.float32)
    m33 = r.standard_normal((3, 3)).astype(np.float32)
    one = np.array(1.5, dtype=np.float32)
    files = {"a.npy": npy_of(m23), "b.npy": npy_of(m34), "v.npy": npy_of(vec3), "s.npy": npy_of(m33),
             "one.npy": npy_of(one)}
    arrays = {"a.npy": m23, "b.npy": m34, "v.npy": vec3, "s.npy": m33, "one.npy": one}

    def add(name, subs, ops, expect="error", extra=()):
        args = ["einsum", subs] + list(ops) + ["-o", "out.npy"] + list(extra)
        chk = einsum_check(subs, [arrays[o] for o in ops]) if not extra else None
        cases.append(Case(f"einsum/{name}", args, dict(files), expect, outputs=("out.npy",), check=chk))

    bad = [
        ("empty", "", ["a.npy"]), ("arrow-only", "->", ["a.npy"]), ("too-few-operands", "ij,jk->ik", ["a.npy"]),
        ("too-many-operands", "ij->ij", ["a.npy", "b.npy"]), ("unknown-output-letter", "ij->k", ["a.npy"]),
        ("repeated-output", "ij->ii", ["a.npy"]), ("two-arrows", "ij->i->j", ["a.npy"]),
        ("empty-operand", "ij,,jk->ik", ["a.npy", "b.npy"]), ("trailing-comma", "ij,jk->ik,", ["a.npy", "b.npy"]),
        ("rank-mismatch", "ijk->i", ["a.npy"]), ("rank-short", "i->i", ["a.npy"]),
        ("size-mismatch", "ij,ij->ij", ["a.npy", "b.npy"]), ("diagonal-nonsquare", "ii->i", ["a.npy"]),
        ("digit", "i1->i", ["a.npy"]), ("non-ascii", "i\u00e9->i", ["a.npy"]),
        ("unicode-arrow", "ij\u2192ji", ["a.npy"]), ("half-arrow", "ij-ji", ["a.npy"]), ("gt-only", "ij>ji", ["a.npy"]),
        ("ellipsis", "...->...", ["a.npy"]), ("ellipsis-mixed", "i...->i", ["a.npy"]), ("dash", "-", ["a.npy"]),
        ("comma-only", ",", ["a.npy"]), ("output-comma", "ij->i,j", ["a.npy"]), ("tab", "ij\t->ij", ["a.npy"]),
        ("newline", "ij\n->ij", ["a.npy"]), ("long-rank-mismatch", "abcdefghijklmnopqrstuvwxyz->a", ["a.npy"]),
        ("contract-mismatch", "ij,ik->jk", ["a.npy", "b.npy"]), ("broadcast-mismatch", "ij,j->ij", ["b.npy", "a.npy"]),
    ]
    for name, subs, ops in bad:
        add(name, subs, ops)
    edge = [
        ("matmul", "ij,jk->ik", ["a.npy", "b.npy"]), ("transpose", "ij->ji", ["a.npy"]), ("sum-all", "ij->", ["a.npy"]),
        ("implicit", "ij,jk", ["a.npy", "b.npy"]), ("trace", "ii->", ["s.npy"]), ("diag", "ii->i", ["s.npy"]),
        ("uppercase", "IJ->JI", ["a.npy"]), ("space", "i j->ij", ["a.npy"]), ("outer", "i,j->ij", ["v.npy", "v.npy"]),
        ("same-operand-thrice", "i,i,i->i", ["v.npy"] * 3), ("eight-operands", ",".join(["i"] * 8) + "->i", ["v.npy"] * 8),
        ("nine-operands", ",".join(["i"] * 9) + "->i", ["v.npy"] * 9),
        ("twelve-operands", ",".join(["i"] * 12) + "->i", ["v.npy"] * 12),
        ("nine-operands-sum", ",".join(["i"] * 9) + "->", ["v.npy"] * 9),
        # Scalars among many operands (fuzz_einsum found the eight-slot kernel this way).
        ("scalars-among-nine", "i,ij,,,,,,,j->", ["v.npy", "s.npy"] + ["one.npy"] * 6 + ["v.npy"]),
        ("ten-scalars", ",,,,,,,,,->", ["one.npy"] * 10),
        ("scalar-times-matrix", ",ij->ji", ["one.npy", "a.npy"]),
    ]
    for name, subs, ops in edge:
        add(name, subs, ops, "any")
        add(name + "-block-d2", subs, ops, "any", extra=["--backend", "block", "-d", "2"])
    # --join / --agg / --parts / --backend options of einsum.
    for i, join in enumerate(["mul(x0", "mul(x0,x1,x2)", "foo(x0,x1)", "x2", "x-1", "mul(x0,x1))", "", "(", ")",
                              "exp()", "add(x0,)", "1e400", "select(x0,x1)", "x99999999999", "mul(x0,x1) junk",
                              "neg(" * 15000 + "x0" + ")" * 15000, "neg(" * 30000]):
        # "" is the default join; a deep but well-formed expression is valid.
        add(f"join-{i:02d}", "ij,jk->ik", ["a.npy", "b.npy"], "any" if i in (6, 15) else "error", extra=["--join", join])
    for i, agg in enumerate(["avg", "", "SUM", "none", "sum ", "max,min"]):
        add(f"agg-{i:02d}", "ij,jk->ik", ["a.npy", "b.npy"], "error" if agg not in ("none", "") else "any",
            extra=["--agg", agg])
    for i, parts in enumerate(["i=0", "i=-1", "q=2", "i=2,i=3", "i", "=2", "i=x", "i=99999999999", "i=2147483647",
                               "ij=2", ",", "i=2,,k=2"]):
        # A repeated letter (the last wins) and empty items between commas are tolerated.
        add(f"parts-{i:02d}", "ij,jk->ik", ["a.npy", "b.npy"], "error" if i not in (3, 10, 11) else "any",
            extra=["--parts", parts, "-d", "2"])
    for i, backend in enumerate(["gpu", "", "CPU", "cuda", "mpi"]):
        # mpi: a job of one rank in a build with the MPI backend, an error in one without.
        add(f"backend-{i:02d}", "ij->ji", ["a.npy"], "any" if backend == "mpi" else "error",
            extra=["--backend", backend])
    # Random damage to valid subscripts.
    valid = [("ij,jk->ik", ["a.npy", "b.npy"]), ("ij->ji", ["a.npy"]), ("ii->i", ["s.npy"]), ("i,i->", ["v.npy", "v.npy"])]
    alphabet = "ijkIJ,->. .1\u00e9x"
    for i in range(80):
        subs, ops = rng.choice(valid)
        s = list(subs)
        for _ in range(rng.randint(1, 3)):
            op = rng.randrange(3)
            pos = rng.randrange(len(s) + 1)
            if op == 0:
                s.insert(pos, rng.choice(alphabet))
            elif op == 1 and s:
                del s[min(pos, len(s) - 1)]
            elif s:
                s[min(pos, len(s) - 1)] = rng.choice(alphabet)
        add(f"mutated-{i:03d}", "".join(s), ops, "any")
    return cases


def npy_cases(rng):
    cases = []
    good = npy_bytes("<f4", (2, 3))

    def add(name, data, subs="ij->ji", expect="error"):
        cases.append(Case(f"npy/{name}", ["einsum", subs, "bad.npy", "-o", "out.npy"], {"bad.npy": data}, expect,
                          outputs=("out.npy",)))

    for i in range(0, len(good), 3):
        add(f"truncated-{i:03d}", good[:i])
    add("missing-file", None)
    cases[-1].files = {}
    add("directory", None)
    cases[-1].files = {}
    cases[-1].args[2] = "."
    add("magic", b"\x93NUMPZ" + good[6:])
    add("no-magic", b"hello world")
    for v in [(0, 0), (4, 0), (255, 255), (3, 0)]:
        add(f"version-{v[0]}.{v[1]}", npy_bytes(version=v), expect="any" if v == (3, 0) else "error")
    for n in [0, 1, 0xFFFF]:
        add(f"header-len-{n}", npy_bytes(header_len=n))
    add("header-len-v2-huge", npy_bytes(version=(2, 0), header_len=0xFFFFFFF0))
    for d in ["<i4", "<f2", ">f4", ">f8", "|u1", "<c8", "f4", "<f4 ", "<U3", "|b1", "<f16", "<i8", "O", "V8",
              "[('a', '<f4')]", "42", "{'x': 1}", "'<f4", "None"]:
        add(f"descr-{re.sub(r'[^a-zA-Z0-9]', '_', d)}", npy_bytes(descr=d))
    for f in ["True", "'yes'", "1", "None", "Fals"]:
        add(f"fortran-{re.sub(r'[^a-zA-Z0-9]', '_', f)}", npy_bytes(fortran=f))
    shapes = {
        "negative": "(-1, 3)", "huge-2^32x2^32": "(4294967296, 4294967296)", "2^62": "(4611686018427387904,)",
        "2^63": "(9223372036854775808,)", "2^31": "(2147483648,)", "2^30-no-data": "(1073741824,)",
        "float": "(2.0, 3)", "string": "('a', 3)", "nested": "((2,), 3)", "unclosed": "(2, 3",
        "list": "[2, 3]", "rank-64": "(" + "1, " * 64 + ")", "rank-1000": "(" + "1, " * 1000 + ")",
        "3x2-swapped": "(3, 2)", "2x4-too-few-data": "(2, 4)", "2x2-extra-data": "(2, 2)", "zero": "(0, 3)",
        "hex": "(0x2, 3)", "underscore": "(2_0, 3)", "big-digits": "(" + "9" * 400 + ",)", "empty-tuple": "()",
        "overflow-product": "(3037000500, 3037000500)", "plus": "(+2, 3)",
    }
    for name, sh in shapes.items():
        rank = sh.count(",") if sh.endswith(",)") else sh.count(",") + 1
        letters = "abcdefghij"[:max(1, min(rank, 2))]
        subs = "ij->ji" if name in ("3x2-swapped", "2x4-too-few-data", "2x2-extra-data", "negative", "zero", "float",
                                    "string", "hex", "underscore", "plus", "overflow-product", "huge-2^32x2^32") else \
            (letters + "->" + letters)
        expect = "any" if name in ("3x2-swapped", "zero", "empty-tuple", "2x2-extra-data", "plus") else "error"
        add(f"shape-{name}", npy_bytes(shape=sh, data=struct.pack("<6f", *range(6))), subs, expect)
    for name, header in {
        "not-a-dict": "[1, 2]", "missing-shape": "{'descr': '<f4', 'fortran_order': False}",
        "missing-descr": "{'fortran_order': False, 'shape': (2, 3)}",
        "missing-fortran": "{'descr': '<f4', 'shape': (2, 3)}", "extra-key": "{'descr': '<f4', 'fortran_order': False, "
        "'shape': (2, 3), 'x': 1}", "duplicate-key": "{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, "
        "'shape': (2, 3)}", "empty": "", "garbage": "\x00\x01\x02", "python-code": "__import__('os').system('x')",
        "double-quotes": '{"descr": "<f4", "fortran_order": False, "shape": (2, 3)}', "latin1": "{'descr': '\xe9'}",
        "unclosed-dict": "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),",
        "nested-dict": "{'descr': {'descr': '<f4'}, 'fortran_order': False, 'shape': (2, 3)}",
        "deep-parens": "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 5000 + ")" * 5000 + "}",
    }.items():
        # The header reader looks up the three keys it needs: extra, repeated or nested keys
        # and a missing closing brace are tolerated, as long as what it needs is there.
        lenient = name in ("extra-key", "duplicate-key", "unclosed-dict", "nested-dict")
        add(f"header-{name}", npy_bytes(header=header), expect="any" if lenient else "error")
    add("no-newline", npy_bytes(pad=False), expect="any")
    add("extra-data", good + b"\x00" * 4, expect="any")
    add("float64-short", npy_bytes("<f8", (2, 3), data=b"\x00" * 40))
    for i in range(60):
        b = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b) - 24)] = rng.randrange(256)
        add(f"flipped-{i:03d}", bytes(b), expect="any")
    # A valid file next to a bad one.
    cases.append(Case("npy/second-operand-bad", ["einsum", "ij,jk->ik", "a.npy", "bad.npy", "-o", "out.npy"],
                      {"a.npy": good, "bad.npy": good[:50]}, "error", outputs=("out.npy",)))
    return cases


def graph_cases(rng):
    cases = []
    commands = [["lower", "-d", "2"], ["plan", "-d", "2", "-s", "eindecomp"], ["simulate", "-d", "2", "-m", "cpu:2"],
                ["run", "-d", "2", "--backend", "block"]]
    muts = json_mutations(BASE_GRAPH, rng, "graph-json", 150)
    extra = []
    g = json.loads(json.dumps(BASE_GRAPH))
    extra.append(("graph-json/huge-shape-2^40", jdump(set_path(g, ("nodes", 0, "shape"), [2 ** 40, 2 ** 40]))))
    extra.append(("graph-json/huge-shape-2^62", jdump(set_path(g, ("nodes", 0, "shape"), [2 ** 62]))))
    extra.append(("graph-json/negative-shape", jdump(set_path(g, ("nodes", 0, "shape"), [-4, 8]))))
    extra.append(("graph-json/rank-100", jdump(set_path(g, ("nodes", 0, "shape"), [1] * 100))))
    extra.append(("graph-json/deep-join-200000", jdump(set_path(g, ("nodes", 2, "join"),
                                                                "neg(" * 200000 + "x0" + ")" * 200000))))
    extra.append(("graph-json/unknown-kind", jdump(set_path(g, ("nodes", 2, "kind"), "conv"))))
    extra.append(("graph-json/self-input", jdump(set_path(g, ("nodes", 2, "inputs"), ["y", "w"]))))
    extra.append(("graph-json/missing-input", jdump(set_path(g, ("nodes", 2, "inputs"), ["x", "nosuch"]))))
    extra.append(("graph-json/duplicate-name", jdump(set_path(g, ("nodes", 1, "name"), "x"))))
    extra.append(("graph-json/bad-dtype", jdump(set_path(g, ("dtype",), "f8"))))
    extra.append(("graph-json/int-dtype", jdump(set_path(g, ("dtype",), 32))))
    extra.append(("graph-json/bad-agg", jdump(set_path(g, ("nodes", 2, "agg"), 3))))
    extra.append(("graph-json/bad-fill", jdump(set_path(g, ("nodes", 3, "fill"), 7))))
    extra.append(("graph-json/fill-value-1e400", jdump(set_path(g, ("nodes", 3, "value"), "1e400"))))
    extra.append(("graph-json/select-out-of-range", jdump(set_path(g, ("nodes", 4, "pieces", 0, "src_offset"), [3, 0]))))
    extra.append(("graph-json/select-input-9", jdump(set_path(g, ("nodes", 4, "pieces", 0, "input"), 9))))
    extra.append(("graph-json/no-outputs", jdump({"nodes": [n for n in g["nodes"] if n["kind"] != "output"]})))
    no_einsum = {"dtype": "f32", "nodes": [{"name": "x", "kind": "input", "shape": [4, 8]},
                                           {"name": "out", "kind": "output", "inputs": ["x"]}]}
    cases_no_einsum = []
    for s in ["eindecomp", "exhaustive", "data-parallel", "megatron", "sqrt-split", "block-per-device", "split-largest"]:
        cases_no_einsum.append(Case(f"graph-json/no-einsum-plan-{s}", ["plan", "-g", "g.json", "-d", "2", "-s", s],
                                    {"g.json": jdump(no_einsum)}, "any"))
    cases_no_einsum.append(Case("graph-json/no-einsum-compare", ["compare", "-g", "g.json", "-d", "2", "-m", "m.json",
                                                                 "--repeat", "1", "--warmup", "0", "-s", "eindecomp",
                                                                 "--compute-model", "analytic"],
                                {"g.json": jdump(no_einsum), "m.json": jdump(BASE_MACHINE)}, "any"))
    cases += cases_no_einsum
    for i, (name, data) in enumerate(muts + extra):
        cmd = commands[i % len(commands)]
        cases.append(Case(name, [cmd[0], "-g", "g.json"] + cmd[1:] + ["--json"], {"g.json": data}, "any",
                          check=lambda folder, out: negative_totals(out)))
    cases.append(Case("graph-json/missing-file", ["lower", "-g", "nosuch.json"], {}, "error"))
    cases.append(Case("graph-json/directory", ["lower", "-g", "."], {}, "error"))
    return cases


def decomposition_cases(rng):
    cases = []
    muts = json_mutations(BASE_DECOMPOSITION, rng, "decomposition-json", 120)
    extra = [
        ("decomposition-json/parts-zero", set_path(BASE_DECOMPOSITION, ("nodes", 0, "parts"), [0, 1, 1])),
        ("decomposition-json/parts-huge", set_path(BASE_DECOMPOSITION, ("nodes", 0, "parts"), [2 ** 31 - 1, 1, 1])),
        ("decomposition-json/parts-too-many", set_path(BASE_DECOMPOSITION, ("nodes", 0, "parts"), [9, 1, 1])),
        ("decomposition-json/parts-rank", set_path(BASE_DECOMPOSITION, ("nodes", 0, "parts"), [2, 1])),
        ("decomposition-json/device-out-of-range", set_path(BASE_DECOMPOSITION, ("nodes", 0, "devices"), [0, 7])),
        ("decomposition-json/device-negative", set_path(BASE_DECOMPOSITION, ("nodes", 0, "devices"), [0, -1])),
        ("decomposition-json/devices-short", set_path(BASE_DECOMPOSITION, ("nodes", 0, "devices"), [0])),
        ("decomposition-json/devices-zero", set_path(BASE_DECOMPOSITION, ("devices",), 0)),
        ("decomposition-json/devices-2^31", set_path(BASE_DECOMPOSITION, ("devices",), 2 ** 31)),
        ("decomposition-json/devices-2147483647", set_path(BASE_DECOMPOSITION, ("devices",), 2 ** 31 - 1)),
        ("decomposition-json/unknown-node", set_path(BASE_DECOMPOSITION, ("nodes", 0, "name"), "nosuch")),
        ("decomposition-json/bounds-unsorted", set_path(BASE_DECOMPOSITION, ("nodes", 2, "bounds"), [[0, 6, 4, 8], [0, 8]])),
        ("decomposition-json/bounds-past-end", set_path(BASE_DECOMPOSITION, ("nodes", 2, "bounds"), [[0, 4, 9], [0, 8]])),
        ("decomposition-json/bounds-empty", set_path(BASE_DECOMPOSITION, ("nodes", 2, "bounds"), [[], [0, 8]])),
        ("decomposition-json/output-parts-bad", set_path(BASE_DECOMPOSITION, ("nodes", 0, "output_parts"), [0, -1])),
    ]
    commands = [["lower", "-w", "chain:size=8", "-d", "2"], ["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2"],
                ["run", "-w", "chain:size=8", "-d", "2", "--backend", "block"],
                ["plan", "-w", "chain:size=8", "-d", "2", "-s", "manual"]]
    for i, (name, data) in enumerate(muts + [(n, jdump(d)) for n, d in extra]):
        cmd = commands[i % len(commands)]
        cases.append(Case(name, cmd + ["--decomposition", "d.json", "--json"], {"d.json": data}, "any",
                          check=lambda folder, out: negative_totals(out)))
    cases.append(Case("decomposition-json/missing-file", ["lower", "-w", "chain:size=8", "--decomposition", "no.json"],
                      {}, "error"))
    cases.append(Case("decomposition-json/with-strategy", ["lower", "-w", "chain:size=8", "-d", "2", "-s", "eindecomp",
                                                           "--decomposition", "d.json"],
                      {"d.json": jdump(BASE_DECOMPOSITION)}, "any"))
    return cases


def machine_cases(rng):
    cases = []
    muts = json_mutations(BASE_MACHINE, rng, "machine-json", 120)
    extra = [
        ("machine-json/link-1e-9", set_path(BASE_MACHINE, ("links", 0, "bytes_per_s"), 1e-9)),
        ("machine-json/link-zero", set_path(BASE_MACHINE, ("links", 0, "bytes_per_s"), 0)),
        ("machine-json/flops-1e-9", set_path(BASE_MACHINE, ("device_types", 0, "peak_flops_per_s", "f32"), 1e-9)),
        ("machine-json/flops-zero", set_path(BASE_MACHINE, ("device_types", 0, "peak_flops_per_s", "f32"), 0)),
        ("machine-json/latency-1e30", set_path(BASE_MACHINE, ("links", 0, "latency_s"), 1e30)),
        ("machine-json/latency-negative", set_path(BASE_MACHINE, ("links", 0, "latency_s"), -1)),
        ("machine-json/route-bad-link", set_path(BASE_MACHINE, ("routes", 0, "links"), [5])),
        ("machine-json/route-bad-device", set_path(BASE_MACHINE, ("routes", 0, "dst"), 9)),
        ("machine-json/no-routes", set_path(BASE_MACHINE, ("routes",), [])),
        ("machine-json/device-type-9", set_path(BASE_MACHINE, ("devices", 0, "type"), 9)),
        ("machine-json/no-devices", set_path(BASE_MACHINE, ("devices",), [])),
        ("machine-json/capacity-tiny", set_path(BASE_MACHINE, ("device_types", 0, "memory_capacity_bytes"), 1)),
        ("machine-json/capacity-1e400", set_path(BASE_MACHINE, ("device_types", 0, "memory_capacity_bytes"), "1e400")),
    ]
    for i, (name, data) in enumerate(muts + [(n, jdump(d)) for n, d in extra]):
        if i % 3 == 2:
            args = ["plan", "-w", "chain:size=8", "-d", "2", "-s", "eindecomp", "--placement", "greedy", "-m", "m.json"]
        else:
            args = ["simulate", "-w", "chain:size=64", "-d", "2", "-m", "m.json"] + (["--network", "flow"] if i % 3 else [])
        cases.append(Case(name, args + ["--json"], {"m.json": data}, "any", check=lambda folder, out: negative_totals(out)))
    return cases


def task_graph_cases(rng):
    cases = []
    muts = json_mutations(BASE_TASK_GRAPH, rng, "task-graph-json", 130)
    extra = [
        ("task-graph-json/dep-cycle", set_path(BASE_TASK_GRAPH, ("tasks", 1, "deps"), [2])),
        ("task-graph-json/dep-self", set_path(BASE_TASK_GRAPH, ("tasks", 1, "deps"), [1])),
        ("task-graph-json/dep-out-of-range", set_path(BASE_TASK_GRAPH, ("tasks", 1, "deps"), [99])),
        ("task-graph-json/dep-negative", set_path(BASE_TASK_GRAPH, ("tasks", 1, "deps"), [-1])),
        ("task-graph-json/buffer-out-of-range", set_path(BASE_TASK_GRAPH, ("tasks", 1, "reads"), [42])),
        ("task-graph-json/device-out-of-range", set_path(BASE_TASK_GRAPH, ("tasks", 1, "device"), 5)),
        ("task-graph-json/move-same-device", set_path(BASE_TASK_GRAPH, ("tasks", 2, "dst_device"), 0)),
        ("task-graph-json/shape-2^40", set_path(BASE_TASK_GRAPH, ("buffers", 0, "shape"), [2 ** 40, 2 ** 40])),
        ("task-graph-json/flops-1e300", set_path(BASE_TASK_GRAPH, ("tasks", 1, "flops"), 1e300)),
        ("task-graph-json/bytes-2^62", set_path(BASE_TASK_GRAPH, ("tasks", 2, "bytes"), 2 ** 62)),
        ("task-graph-json/devices-3-machine-2", set_path(BASE_TASK_GRAPH, ("devices",), 3)),
        ("task-graph-json/src-window-out", set_path(BASE_TASK_GRAPH, ("tasks", 3, "src"), {"offset": [1000], "size": [100]})),
        ("task-graph-json/unknown-kind", set_path(BASE_TASK_GRAPH, ("tasks", 1, "kind"), "sleep")),
        ("task-graph-json/single-task-no-edges", {"devices": 1, "buffers": [{"device": 0, "shape": [4]}],
                                                  "tasks": [{"kind": "input", "device": 0, "writes": 0}]}),
        ("task-graph-json/no-tasks", {"devices": 1, "buffers": [], "tasks": []}),
    ]
    for i, (name, data) in enumerate(muts + [(n, jdump(d)) for n, d in extra]):
        args = ["simulate", "--task-graph", "t.json", "-m", "cpu:2"] + (["--network", "flow"] if i % 2 else [])
        cases.append(Case(name, args + ["--json"], {"t.json": data}, "any", check=lambda folder, out: negative_totals(out)))
    return cases


def cli_cases(rng):
    cases = []
    numbers = ["0", "-1", "-2147483648", "2147483648", "99999999999999999999", "1e3", "0x10", "abc", "", " 2", "2 ",
               "+2", "1.5", "nan", "inf", "2147483647", "1000000", "-0", "\u0662"]
    for i, v in enumerate(numbers):
        for cmd in (["lower", "-w", "chain:size=8"], ["plan", "-w", "chain:size=8", "-s", "data-parallel"],
                    ["simulate", "-w", "chain:size=8", "-m", "h100-sxm-8"], ["run", "-w", "chain:size=8", "--backend", "block"]):
            # CLI11 reads 1e3 and 0x10 as integers; large counts may be refused or run.
            big = v in ("2147483647", "1000000", "1e3", "0x10")
            cases.append(Case(f"cli/{cmd[0]}-d-{i:02d}", cmd + ["-d", v, "--json"], {}, "any" if big or v in (" 2", "2 ", "+2") else "error",
                              check=lambda folder, out: negative_totals(out)))
    cases.append(Case("cli/plan-search-without-machine", ["plan", "-w", "chain:size=8", "-d", "2", "-s", "search",
                                                           "-o", "d.json"], {}, "error", outputs=("d.json",)))
    cases.append(Case("cli/simulate-search-machine-too-small", ["simulate", "-w", "chain:size=8", "-d", "16", "-s",
                                                                "search", "-m", "h100-sxm-8"], {}, "error"))
    for i, v in enumerate(numbers):
        if v not in ("1000000", "2147483647"):  # valid requests for a long run, not bad input
            cases.append(Case(f"cli/run-repeat-{i:02d}", ["run", "-w", "chain:size=8", "-d", "1", "--repeat", v], {},
                              "any" if v in (" 2", "2 ", "+2", "1e3", "0x10") else "error"))
        cases.append(Case(f"cli/plan-k-{i:02d}", ["plan", "-w", "chain:size=8", "-d", "2", "-k", v], {},
                          "any" if v in (" 2", "2 ", "+2", "1e3", "0x10") else "error"))
        cases.append(Case(f"cli/run-seed-{i:02d}", ["run", "-w", "chain:size=8", "-d", "1", "--seed", v], {}, "any"))
        if v not in ("1000000", "2147483647", "1e3", "0x10", " 2", "2 ", "+2"):  # a search of that many seconds is valid
            cases.append(Case(f"cli/plan-search-budget-{i:02d}", ["plan", "-w", "chain:size=8", "-d", "2", "-s", "search",
                                                                  "-m", "h100-sxm-8", "--budget-s", v, "-o", "d.json"], {},
                              "any" if v == "1.5" else "error", outputs=("d.json",)))
        cases.append(Case(f"cli/compare-warmup-{i:02d}", ["compare", "-w", "chain:size=8", "-d", "1", "--warmup", v,
                                                          "--repeat", "0"], {}, "error"))
        cases.append(Case(f"cli/calibrate-rounds-{i:02d}", ["calibrate", "-d", "1", "--rounds", v, "--seconds", "-1",
                                                            "-o", "m.json"], {}, "error", outputs=("m.json",)))
        cases.append(Case(f"cli/simulate-comm-channels-{i:02d}", ["simulate", "-w", "chain:size=8", "-d", "2", "-m",
                                                                  "cpu:2", "--comm-channels", v, "--json"], {}, "any",
                          check=lambda folder, out: negative_totals(out)))
    for i, v in enumerate(["0", "-1", "1e-9", "nan", "inf", "1e400", "abc", ""]):
        cases.append(Case(f"cli/compare-calibration-seconds-{i:02d}", ["compare", "-w", "chain:size=8", "-d", "1",
                                                                       "--calibration-seconds", v, "--repeat", "0"], {}, "error"))
        cases.append(Case(f"cli/calibrate-seconds-{i:02d}", ["calibrate", "-d", "1", "--seconds", v, "--rounds", "0",
                                                             "-o", "m.json"], {}, "error", outputs=("m.json",)))
    byte_strings = ["0", "-1", "0.5", "1.5", "1e400", "nan", "inf", "-inf", "1e19", "9e18", "1ZiB", "1 GiB", "GiB",
                    "", "1GiBB", "1gib", "0x10", "1e-3KiB", "99999999999999999999999TiB", "8589934592TiB", "1,000",
                    "\u0661", "1e9", "1GiB", "3", "7B"]
    for i, v in enumerate(byte_strings):
        for coll in ("allreduce", "alltoall"):
            cases.append(Case(f"cli/bytes-{coll}-{i:02d}", ["simulate", "--collective", coll, "--bytes", v, "-d", "8",
                                                            "-m", "h100-sxm-8", "--json"], {},
                              "any" if v in ("1e9", "1GiB", "3", "7B", "9e18") else "error",
                              check=lambda folder, out: negative_totals(out)))
    for i, c in enumerate(["broadcast", "", "ALLREDUCE", "all reduce"]):
        cases.append(Case(f"cli/collective-{i:02d}", ["simulate", "--collective", c, "--bytes", "1MiB", "-d", "8", "-m",
                                                      "h100-sxm-8"], {}, "error"))
    cases.append(Case("cli/collective-no-bytes", ["simulate", "--collective", "allreduce", "-d", "8", "-m", "h100-sxm-8"],
                      {}, "error"))
    cases.append(Case("cli/collective-d-1", ["simulate", "--collective", "allreduce", "--bytes", "1MiB", "-d", "1", "-m",
                                             "h100-sxm-8"], {}, "any"))
    # The fused kernels' per-task times do not survive the memory planner's new tasks.
    cases.append(Case("cli/memory-cap-with-fuse-collectives", ["simulate", "-w", "gemm-alltoall", "-d", "8", "-m",
                                                               "h100-sxm-8", "--fuse-collectives", "--memory-cap", "50%",
                                                               "--trace", "t.json"], {}, "error", outputs=("t.json",)))
    # --offload-order fixed orders evicts and loads: without --memory-cap there are none.
    cases.append(Case("cli/offload-order-fixed-without-memory-cap-simulate",
                      ["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2", "--offload-order", "fixed",
                       "--trace", "t.json"], {}, "error", outputs=("t.json",)))
    cases.append(Case("cli/offload-order-fixed-without-memory-cap-run",
                      ["run", "-w", "chain:size=8", "-d", "2", "--backend", "block", "--offload-order", "fixed",
                       "--trace", "t.json"], {}, "error", outputs=("t.json",)))
    cases.append(Case("cli/offload-order-fixed-without-memory-cap-compare",
                      ["compare", "-w", "chain:size=8", "-d", "1", "--repeat", "1", "--policy", "async",
                       "--offload-order", "fixed", "--trace-dir", "traces"], {}, "error", outputs=("traces",)))
    # --copy-lane: worker or thread; thread on the cpu backend only (block runs evicts and
    # loads on its one thread, cuda on copy streams of its own). None leaves a file behind.
    cases.append(Case("cli/copy-lane-bad-value-run",
                      ["run", "-w", "chain:size=8", "-d", "1", "--memory-cap", "50%", "--copy-lane", "copy",
                       "--trace", "t.json"], {}, "error", outputs=("t.json",)))
    cases.append(Case("cli/copy-lane-thread-block-run",
                      ["run", "-w", "chain:size=8", "-d", "1", "--backend", "block", "--memory-cap", "50%",
                       "--copy-lane", "thread", "--trace", "t.json"], {}, "error", outputs=("t.json",)))
    cases.append(Case("cli/copy-lane-thread-cuda-compare",
                      ["compare", "-w", "chain:size=8", "-d", "1", "--repeat", "1", "--policy", "async", "--backend",
                       "cuda", "--memory-cap", "50%", "--copy-lane", "thread", "--trace-dir", "traces"], {}, "error",
                      outputs=("traces",)))
    # --memory-cap values: malformed, out of range (too large, not a "whole number" error) or
    # neither a fraction nor a byte count; all refused on the command line, no file left.
    for i, v in enumerate(["0", "-1", "150%", "0%", "1e99", "1e999", "1e-999", "1.5", "2.5B", "0.5B", "nan", "inf",
                           "99999999999999999999999TiB", "12XB", "", "abc"]):
        cases.append(Case(f"cli/memory-cap-value-{i:02d}", ["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2",
                                                             "--memory-cap", v, "--trace", "t.json"], {}, "error",
                          outputs=("t.json",)))
    # The CUDA backend's options with another backend change nothing: refused by run and einsum.
    for i, opt in enumerate([["--comm-priority", "high"], ["--comm-priority", "normal"], ["--gpus", "1"],
                             ["--moves", "nccl"], ["--tf32"], ["--launch", "stream"], ["--unmarked"]]):
        for backend in ("cpu", "block"):
            cases.append(Case(f"cli/run-cuda-option-{i:02d}-{backend}", ["run", "-w", "chain:size=8", "-d", "1",
                                                                         "--backend", backend, "--trace", "t.json"] + opt,
                              {}, "error", outputs=("t.json",)))
    # compare: a cap with an explicit bsp policy stays an error (without --policy: async alone).
    cases.append(Case("cli/memory-cap-compare-policy-bsp",
                      ["compare", "-w", "chain:size=8", "-d", "1", "--repeat", "1", "--memory-cap", "50%", "--policy",
                       "bsp", "--trace-dir", "traces"], {}, "error", outputs=("traces",)))
    cases.append(Case("cli/collective-d-9-on-8", ["simulate", "--collective", "allreduce", "--bytes", "1MiB", "-d", "9",
                                                  "-m", "h100-sxm-8"], {}, "error"))
    presets = ["cpu:0", "cpu:-1", "cpu:99999999", "cpu:2147483648", "cpu:abc", "cpu:", "cpu:1.5", "h100", "H100-SXM-8",
               "cluster:0xh100-sxm-8", "cluster:99999999xh100-sxm-8", "cluster:2xcpu", "cluster:2x", "cluster:x",
               "cluster:2xh100-sxm-8,oversubscription=0", "cluster:2xh100-sxm-8,oversubscription=-1",
               "cluster:2xh100-sxm-8,oversubscription=nan", "cluster:2xh100-sxm-8,oversubscription=1e400",
               "cluster:2xh100-sxm-8,foo=1", "cluster:2xcluster:2xh100-sxm-8", "", "nosuch.json", "."]
    for i, p in enumerate(presets):
        cases.append(Case(f"cli/machine-{i:02d}", ["simulate", "-w", "chain:size=8", "-d", "2", "-m", p, "--json"], {},
                          "error" if p not in ("cpu:99999999", "cluster:99999999xh100-sxm-8", "cluster:2xcpu") else "any",
                          check=lambda folder, out: negative_totals(out)))
    # Switch-graph presets (core/topology.h): bad counts, options and node presets.
    topology_presets = ["fat-tree:0xh100-sxm-8", "fat-tree:2xh100-sxm-8,leaf=0", "fat-tree:8xh100-sxm-8,leaf=3,pod=4",
                        "fat-tree:2xcpu", "fat-tree:2xh100-sxm-8,oversubscription=0.5", "fat-tree:2xh100-sxm-8,leaf",
                        "fat-tree:2xfat-tree:2xh100-sxm-8", "fat-tree:99999999xh100-sxm-8", "rail:2x", "rail:x",
                        "rail:2xh100-sxm-8,spines=-1", "rail:2xh100-sxm-8,foo=1", "rail:2xh100-sxm-8,group=1,group=2",
                        "torus:2xh100-sxm-8", "torus:2x2x2x2xh100-sxm-8", "torus:2x2xh100-sxm-8,link_bytes_per_s=nan",
                        "torus:2000000000x2000000000x2000000000xh100-sxm-8", "torus:2x2xh100-sxm-8,link_bytes_per_s=0",
                        "fat-tree:2xh100-sxm-8", "rail:2xh100-sxm-8,group=1", "torus:2x1xh100-pcie-4"]
    for i, p in enumerate(topology_presets):
        ok = p in ("fat-tree:2xh100-sxm-8", "rail:2xh100-sxm-8,group=1", "torus:2x1xh100-pcie-4")
        cases.append(Case(f"cli/topology-machine-{i:02d}", ["simulate", "-w", "chain:size=8", "-d", "2", "-m", p, "--json"],
                          {}, "any" if ok else "error", check=lambda folder, out: negative_totals(out)))
    choices = {
        "strategy": (["plan", "-w", "chain:size=8", "-d", "2", "-s"], ["nosuch", "", "EINDECOMP", "eindecomp,", "manual"]),
        "placement": (["plan", "-w", "chain:size=8", "-d", "2", "--placement"], ["nosuch", "", "greedy,locality"]),
        "policy": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2", "--policy"], ["nosuch", "", "async,bsp"]),
        "network": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2", "--network"], ["nosuch", "", "FLOW"]),
        "priority": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2", "--priority"], ["nosuch", ""]),
        "ready-order": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2", "--ready-order"], ["nosuch", "", "FIFO"]),
        "comm-priority": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "h100-sxm-8", "--comm-priority"],
                          ["urgent", "", "HIGH"]),
        "comm-sms": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "h100-sxm-8", "--comm-sms"],
                     ["132", "-1", "x", "1e9", "9999999"]),
        "comm-mechanism": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "h100-sxm-8", "--comm-mechanism"],
                           ["dma", ""]),
        "dtype": (["plan", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2", "--dtype"], ["f8", "", "int8", "F32"]),
        "offload-order": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2", "--memory-cap", "50%",
                           "--offload-order"], ["nosuch", "", "FIXED", "free,fixed"]),
        "copy-lane": (["compare", "-w", "chain:size=8", "-d", "1", "--repeat", "1", "--memory-cap", "50%",
                       "--copy-lane"], ["nosuch", "", "THREAD", "worker,thread"]),
        "run-backend": (["run", "-w", "chain:size=8", "-d", "2", "--backend"], ["gpu", "", "nosuch"]),
        "run-policy": (["run", "-w", "chain:size=8", "-d", "2", "--backend", "block", "--policy"], ["nosuch", ""]),
        "compare-policy": (["compare", "-w", "chain:size=8", "-d", "1", "--repeat", "1", "--policy"], ["nosuch", "", ","]),
        "compare-strategy": (["compare", "-w", "chain:size=8", "-d", "1", "--repeat", "1", "-s"], ["nosuch", "", ",,"]),
        "compare-model": (["compare", "-w", "chain:size=8", "-d", "1", "--compute-model"], ["nosuch", ""]),
        "calibrate-backend": (["calibrate", "-d", "1", "-o", "m.json", "--backend"], ["gpu", ""]),
        "parts": (["lower", "-w", "chain:size=8", "-d", "2", "--parts"],
                  ["0", "-1", "XY=0x1x1", "XY=2x2", "nosuch=2x1x1", "XY=2x1x1x", "XY=axbxc", "XY=2147483647x1x1",
                   "XY=99999999999x1x1", "=", "XY=", "99999999999", "2147483647"]),
    }
    for key, (prefix, values) in choices.items():
        for i, v in enumerate(values):
            outs = ("m.json",) if "calibrate" in key else ()
            # --parts N splits as far as the sizes' factors allow: a large prime is no error.
            expect = "any" if key == "parts" and v == "2147483647" else "error"
            cases.append(Case(f"cli/{key}-{i:02d}", prefix + [v], {}, expect, outputs=outs))
    usage = [
        ("no-subcommand", []), ("unknown-subcommand", ["frobnicate"]), ("unknown-option", ["lower", "--frob"]),
        ("missing-value", ["lower", "-d"]), ("extra-positional", ["lower", "extra"]),
        ("simulate-no-machine", ["simulate", "-w", "chain:size=8"]), ("einsum-no-output", ["einsum", "ij->ji", "a.npy"]),
        ("einsum-nothing", ["einsum"]), ("calibrate-no-output", ["calibrate", "-d", "1"]),
        ("both-w-and-g", ["lower", "-w", "chain", "-g", "g.json"]),
        ("both-parts-and-strategy", ["lower", "-w", "chain:size=8", "-d", "2", "--parts", "2", "-s", "eindecomp"]),
        ("both-task-graph-and-w", ["simulate", "--task-graph", "t.json", "-w", "chain", "-m", "cpu"]),
        ("double-dash", ["lower", "--", "-d"]), ("dash-value", ["lower", "-w", "-"]), ("equals-empty", ["lower", "--devices="]),
        ("help-typo", ["--hepl"]), ("json-value", ["lower", "--json=3"]), ("repeated-d", ["lower", "-d", "2", "-d", "x"]),
        ("binary-arg", ["lower", "-w", "chain\x01"]), ("long-arg", ["lower", "-w", "x" * 100000]),
        ("workloads-extra", ["workloads", "extra"]), ("version-extra", ["--version", "x"]),
    ]
    for name, args in usage:
        cases.append(Case(f"cli/usage-{name}", args, {}, "error" if name not in ("version-extra", "json-value") else "any"))
    return cases


def workload_cases(rng):
    cases = []
    specs = ["", ":", "chain:", "chain:size", "chain:size=", "chain:size=0", "chain:size=-1", "chain:size=abc",
             "chain:size=1e3", "chain:size=2^62", "chain:size=9223372036854775807", "chain:size=9223372036854775808",
             "chain:size=4611686018427387904", "chain:size=2147483648", "chain:size=4294967296", "chain:size=3037000500",
             "chain:size=1e400", "chain:size=1.5", "chain:size= 8", "chain:size=0x10", "chain:foo=1", "nosuch",
             "chain:size=1,size=2", "chain:size=8,", "chain:,size=8", "chain:=8", "chain:size==8", "chain:m=0",
             "chain:m=8,k=8,n=8,p=-8", "chain-sum:skewed=2", "chain-sum:skewed=-1", "chain-sum:size=5,skewed=1",
             "chain-sum:size=1,skewed=1", "ffn:tokens=0", "ffn:dim=-5", "ffn:hidden=99999999999999",
             "llama-block:model=huge", "llama-block:heads=3,dim=128", "llama-block:heads=0", "llama-block:seq=0",
             "llama-block:model=tiny,batch=0", "llama-block:model=65b,batch=2147483647", "llama-block:dim=1",
             "chain:dtype=f8", "chain:dtype=", "chain:dtype=int8", "CHAIN", "chain :size=8", "chain:size=8:size=9",
             "chain\x00:size=8", "\u00e9", "chain:size=\u0668", "chain:" + "size=8," * 2000, "chain:m=0023183857431101367", "chain:size=6666666644",
             "chain:size=00000000000000000000008"]
    for i, spec in enumerate(specs):
        cases.append(Case(f"workload/lower-{i:02d}", ["lower", "-w", spec, "-d", "2", "--json"], {}, "any",
                          check=lambda folder, out: negative_totals(out)))
        cases.append(Case(f"workload/plan-{i:02d}", ["plan", "-w", spec, "-d", "2", "-s", "eindecomp", "--json"], {}, "any",
                          check=lambda folder, out: negative_totals(out)))
        cases.append(Case(f"workload/simulate-{i:02d}", ["simulate", "-w", spec, "-d", "2", "-m", "cpu:2", "--json"], {},
                          "any", check=lambda folder, out: negative_totals(out)))
    for i, size in enumerate(["1000000", "100000000", "1099511627776"]):
        cases.append(Case(f"workload/simulate-long-{i}", ["simulate", "-w", f"chain:size={size}", "-d", "1", "-m", "cpu",
                                                          "--json"], {}, "any",
                          check=lambda folder, out: negative_totals(out) or zero_makespan(out)))
    return cases


def zero_makespan(stdout):
    try:
        j = json.loads(stdout)
    except ValueError:
        return "--json output is not JSON"
    m = j.get("makespan_s")
    return f"makespan {m} s for a non-empty workload" if m is not None and m <= 0 else None


def output_cases(rng):
    cases = []
    good = npy_bytes("<f4", (2, 3))
    writers = {
        "plan": (["plan", "-w", "chain:size=8", "-d", "2", "-s", "eindecomp", "-o"], {}),
        "einsum": (["einsum", "ij->ji", "a.npy", "-o"], {"a.npy": good}),
        "simulate-trace": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2", "--trace"], {}),
        "simulate-write-machine": (["simulate", "-w", "chain:size=8", "-d", "2", "-m", "cpu:2", "--write-machine"], {}),
        "run-trace": (["run", "-w", "chain:size=8", "-d", "2", "--backend", "block", "--trace"], {}),
        "lower-write-decomposition": (["lower", "-w", "chain:size=8", "-d", "2", "--write-decomposition"], {}),
    }
    bad_paths = {"missing-dir": "nodir/out.x", "empty": "", "dot": ".", "root": "/", "trailing-slash": "out.x/",
                 "under-a-file": "file.txt/out.x", "too-long": "x" * 300, "proc": "/proc/version",
                 "dir-component-too-long": "y" * 300 + "/out.x"}
    for wname, (args, files) in writers.items():
        for pname, path in bad_paths.items():
            fs = dict(files)
            fs["file.txt"] = b"keep"
            # An empty path means the option was not given.
            cases.append(Case(f"output/{wname}-{pname}", args + [path], fs, "any" if pname == "empty" else "error",
                              outputs=() if pname in ("dot", "root", "proc") else (path,)))
        # The command fails after its options were read: nothing may be written.
        fail_args = list(args)
        if wname == "einsum":
            fail_args = ["einsum", "ij->ji", "bad.npy", "-o"]
            fs = {"bad.npy": good[:60]}
        else:
            fail_args = [a if a != "chain:size=8" else "nosuch" for a in args]
            fs = {}
        cases.append(Case(f"output/{wname}-failing-command", fail_args + ["out.x"], fs, "error", outputs=("out.x",)))
        # A command that fails late (bad machine for simulate's writers, bad join for the rest).
        if wname.startswith("simulate"):
            late = [a if a != "cpu:2" else "m.json" for a in args]
            cases.append(Case(f"output/{wname}-late-failure", late + ["out.x"], {"m.json": jdump(
                set_path(BASE_MACHINE, ("links", 0, "bytes_per_s"), -5))}, "error", outputs=("out.x",)))
            cases.append(Case(f"output/{wname}-bad-policy", args + ["out.x", "--policy", "nosuch"], {}, "error",
                              outputs=("out.x",)))
        # Written through a symlink: the link must stay a link.
        fs = dict(files)
        fs["target.x"] = b""
        cases.append(Case(f"output/{wname}-symlink", args + ["link.x"], fs, "any", links={"link.x": "target.x"},
                          check=symlink_kept("link.x")))
        cases.append(Case(f"output/{wname}-dangling-symlink", args + ["dangling.x"], dict(files), "any",
                          links={"dangling.x": "nowhere/target.x"}, check=symlink_kept("dangling.x")))
    cases.append(Case("output/compare-trace-dir-file", ["compare", "-w", "chain:size=8", "-d", "1", "--repeat", "1",
                                                        "--warmup", "0", "-s", "eindecomp", "--policy", "async",
                                                        "-m", "m.json", "--compute-model", "analytic",
                                                        "--trace-dir", "file.txt"],
                      {"file.txt": b"keep", "m.json": jdump(BASE_MACHINE)}, "error"))
    cases += multi_output_cases()
    return cases


def multi_output_cases():
    """Commands that write several files: one that fails after others could be written
    leaves every file as it was; two outputs, or an output and an input, of one path are
    refused; a folder that is a file, or cannot be made, is a clean error."""
    keep = b"keep"
    chain = ["-w", "chain:size=8", "-d", "2"]
    export = ["export"] + chain + ["-s", "eindecomp", "-m", "h100-sxm-8"]
    sim = ["simulate"] + chain + ["-m", "cpu:2"]
    graph = jdump(BASE_GRAPH)
    machine = jdump(BASE_MACHINE)
    compare = ["compare", "-w", "chain:size=8", "-d", "1", "--repeat", "1", "--warmup", "0", "-s", "eindecomp",
               "--policy", "async", "-m", "m.json", "--compute-model", "analytic"]
    c = [
        # A later output fails: the earlier ones, there before, stay as they were.
        Case("output/export-chakra-into-a-file-keeps-graph-out", export + ["--graph-out", "g.json", "--chakra", "f"],
             {"g.json": keep, "f": keep}),
        Case("output/export-chakra-file-is-a-folder-keeps-the-others",
             export + ["--chakra", "et", "--graph-out", "g.json"], {"g.json": keep, "et/tessel.0.et": keep},
             dirs=("et", "et/tessel.1.et")),
        Case("output/export-task-graph-in-a-missing-folder-keeps-graph-out",
             export + ["--graph-out", "g.json", "--task-graph", "nodir/t.json"], {"g.json": keep}),
        Case("output/export-chakra-in-a-missing-folder-under-a-file", export + ["--chakra", "f/et"], {"f": keep}),
        Case("output/simulate-write-machine-fails-keeps-trace",
             sim + ["--trace", "t.json", "--write-machine", "nodir/m.json"], {"t.json": keep}),
        Case("output/compare-trace-dir-with-a-folder-in-the-way", compare + ["--trace-dir", "tr"],
             {"m.json": machine, "tr/eindecomp-async-simulated.json": keep},
             dirs=("tr", "tr/eindecomp-async-measured.json")),
        Case("output/reproduce-csv-is-a-folder-keeps-the-traces", ["reproduce", "video-chain", "--quick", "--no-plot",
                                                                   "-o", "o"],
             {"o/video-chain-one-block-bsp.json": keep}, dirs=("o", "o/video-chain.csv")),
        Case("output/reproduce-into-a-file", ["reproduce", "video-chain", "--quick", "--no-plot", "-o", "f"],
             {"f": keep}),
        Case("output/reproduce-into-an-empty-name", ["reproduce", "video-chain", "--quick", "--no-plot", "-o", ""]),
        Case("output/reproduce-plots-dir-missing", ["reproduce", "video-chain", "--quick", "-o", "o",
                                                    "--plots-dir", "nosuch"]),
        Case("output/simulate-write-machine-to-a-full-device-keeps-trace",
             sim + ["--trace", "t.json", "--write-machine", "/dev/full"], {"t.json": keep}),
        Case("output/plan-o-is-a-link-loop", ["plan"] + chain + ["-s", "eindecomp", "-o", "loop.json"],
             links={"loop.json": "loop.json"}),
        Case("output/simulate-trace-is-a-link-into-a-missing-folder", sim + ["--trace", "t.json"],
             links={"t.json": "nodir/t.json"}),
        # Two outputs of one path: one would be lost.
        Case("output/export-graph-out-inside-the-chakra-folder",
             export + ["--graph-out", "et/tessel.0.et", "--chakra", "et"], dirs=("et",)),
        Case("output/export-graph-out-and-task-graph-one-path",
             export + ["--graph-out", "x.json", "--task-graph", "./x.json"], outputs=("x.json",)),
        Case("output/simulate-trace-and-write-machine-one-path", sim + ["--trace", "y.json", "--write-machine", "y.json"],
             outputs=("y.json",)),
        # An output at an input's path: the input would be replaced.
        Case("output/plan-o-is-the-input-graph", ["plan", "-g", "g.json", "-d", "2", "-s", "eindecomp", "-o", "g.json"],
             {"g.json": graph}),
        Case("output/lower-write-decomposition-is-the-input-graph",
             ["lower", "-g", "g.json", "-d", "2", "--write-decomposition", "g.json"], {"g.json": graph}),
        Case("output/simulate-trace-is-the-input-machine", sim[:-1] + ["m.json", "--trace", "m.json"],
             {"m.json": machine}),
        Case("output/export-graph-out-is-the-input-graph",
             ["export", "-g", "g.json", "--graph-out", "g.json"], {"g.json": graph}),
        Case("output/einsum-o-is-an-operand", ["einsum", "ij->ji", "a.npy", "-o", "a.npy"],
             {"a.npy": npy_bytes("<f4", (2, 3))}),
        # A folder where an input file belongs.
        Case("output/machine-is-a-folder", sim[:-1] + ["d.json"], dirs=("d.json",)),
        Case("output/graph-is-a-folder", ["lower", "-g", "d.json", "-d", "2"], dirs=("d.json",)),
        Case("output/npy-is-a-folder", ["einsum", "ij->ji", "d.npy", "-o", "c.npy"], dirs=("d.npy",),
             outputs=("c.npy",)),
    ]
    # Options the chosen source has no use for: refused, not ignored.
    tg = jdump(BASE_TASK_GRAPH)
    for name, extra in [("strategy", ["-s", "eindecomp"]), ("parts", ["--parts", "2"]),
                        ("decomposition", ["--decomposition", "nosuch.json"]), ("devices", ["-d", "7"])]:
        c.append(Case(f"cli/simulate-task-graph-with-{name}", ["simulate", "--task-graph", "tg.json", "-m", "cpu:2"] + extra,
                      {"tg.json": tg}))
    for name, extra in [("strategy", ["-s", "bogus"]), ("decomposition", ["--decomposition", "nosuch.json"])]:
        c.append(Case(f"cli/simulate-collective-with-{name}", ["simulate", "--collective", "allreduce", "--bytes", "1MiB",
                                                              "-d", "8", "-m", "h100-sxm-8"] + extra))
    for name, extra in [("dtype", ["--dtype", "bf16"]), ("bytes", ["--bytes", "1MiB"])]:
        c.append(Case(f"cli/simulate-graph-with-collective-{name}", sim + extra))
    c.append(Case("cli/reproduce-without-a-name", ["reproduce"]))
    return c


def symlink_kept(name):
    def check(folder, stdout):
        if not os.path.islink(os.path.join(folder, name)):
            return f"{name} was a symlink and is now a regular file (replaced, not written through)"
        return None
    return check


SURFACES = {
    "einsum": einsum_cases, "npy": npy_cases, "graph-json": graph_cases, "decomposition-json": decomposition_cases,
    "machine-json": machine_cases, "task-graph-json": task_graph_cases, "cli": cli_cases, "workload": workload_cases,
    "output": output_cases,
}


def generate(seed=SEED):
    cases = []
    for name, gen in SURFACES.items():
        cases += gen(random.Random(f"{seed}-{name}"))
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate case names: {sorted(dup)[:5]}"
    return cases


# ---- running -----------------------------------------------------------------------------

def sanitized(binary):
    """True when the binary carries AddressSanitizer (RLIMIT_AS would break its shadow):
    its runtime linked in (clang) or imported from libasan (gcc) names __asan_init."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def run_case(binary, case, timeout_s, keep_root, limit_memory):
    folder = tempfile.mkdtemp(prefix="case-", dir=keep_root)
    for name in case.dirs:
        os.makedirs(os.path.join(folder, name), exist_ok=True)
    for name, data in case.files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    for name, target in case.links.items():
        os.symlink(target, os.path.join(folder, name))
    before = all_paths(folder)
    env = dict(os.environ)
    # A sanitizer's own exit codes, so that a report is never mistaken for a user error; and
    # no single allocation over 4 GiB (RLIMIT_AS cannot be used beside ASan's shadow memory).
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":exitcode=86:detect_leaks=1:max_allocation_size_mb=4096:" \
                                                         "allocator_may_return_null=1"
    env["UBSAN_OPTIONS"] = env.get("UBSAN_OPTIONS", "") + ":halt_on_error=1:exitcode=87:print_stacktrace=1"

    def limits():
        os.setsid()
        if limit_memory:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    start = time.monotonic()
    p = subprocess.Popen([binary] + case.args, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, preexec_fn=limits)
    try:
        out, err = p.communicate(timeout=timeout_s)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = None
    seconds = time.monotonic() - start
    out = out.decode("utf-8", "replace")
    err = err.decode("utf-8", "replace")
    after = all_paths(folder)
    new = [f for f in after if f not in before]
    verdict, detail = classify(case, rc, out, err, new, folder)
    if verdict in ("clean error", "success"):
        shutil.rmtree(folder, ignore_errors=True)
        folder = None
    return case, verdict, detail, rc, err, seconds, folder


def all_paths(folder):
    """Every file and folder under `folder`, relative to it (links not followed)."""
    out = []
    for root, dirs, files in os.walk(folder):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(root, n), folder))
    return sorted(out)


def changed_inputs(case, folder):
    """The files the case put there that an error changed or removed (an error loses nothing)."""
    changed = []
    for name, data in case.files.items():
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                if f.read() != data:
                    changed.append(name + " (rewritten)")
        except OSError:
            changed.append(name + " (removed)")
    return changed


def classify(case, rc, out, err, new, folder):
    first = err.strip().splitlines()[0] if err.strip() else ""
    if rc is None:
        return "hang", "killed after the time limit"
    if rc < 0 or rc >= 128 or rc in (86, 87) or "AddressSanitizer" in err or "runtime error:" in err \
            or "LeakSanitizer" in err or "terminate called" in err:
        sig = f"signal {-rc}" if rc < 0 else f"exit {rc}"
        san = re.search(r"(ERROR: \w+Sanitizer[^\n]*|runtime error:[^\n]*|terminate called[^\n]*)", err)
        return "crash", sig + (f": {san.group(1)}" if san else "")
    if rc == INTERNAL_ERROR_CODE or "internal error" in err:
        return "internal error", first
    if rc == 0:
        if case.expect == "error":
            return "wrong success", "exit 0 on a bad input"
        if case.check:
            msg = case.check(folder, out)
            if msg:
                return "wrong answer", msg
        return "success", ""
    left = [f for f in new] + [o for o in case.outputs if o and os.path.lexists(os.path.join(folder, o))
                               and o not in new]
    left += [f for f in all_paths(folder) if f.endswith(".tmp-tessel")]
    if left:
        return "file left", f"left behind: {sorted(set(left))[:3]}"
    changed = changed_inputs(case, folder)
    if changed:
        return "file changed", f"an error changed files that were there: {changed[:3]}"
    if rc not in USER_ERROR_CODES or not err.startswith(PREFIX):
        return "unclean error", f"exit {rc}: {first[:160]}"
    return "clean error", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tessel")
    ap.add_argument("--surface", action="append", choices=sorted(SURFACES), help="only these surfaces")
    ap.add_argument("--case", action="append", help="only cases whose name contains this text")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout-s", type=float, default=float(os.environ.get("BAD_INPUTS_TIMEOUT_S", 20)))
    ap.add_argument("--list", action="store_true", help="print the case names and arguments, run nothing")
    ap.add_argument("--run-known-open", action="store_true", help="run the KNOWN_OPEN cases too")
    ap.add_argument("--seed", type=int, default=SEED, help="seed of the first round (default %(default)s)")
    ap.add_argument("--duration-s", type=float, default=0.0,
                    help="keep generating new rounds (seed+1, seed+2, ...) until this many seconds have passed")
    a = ap.parse_args()

    def select(cases):
        if a.surface:
            cases = [c for c in cases if c.name.split("/")[0] in a.surface]
        if a.case:
            cases = [c for c in cases if any(s in c.name for s in a.case)]
        return cases

    cases = select(generate(a.seed))
    skipped = [] if a.run_known_open else [c for c in cases if c.name in KNOWN_OPEN]
    cases = [c for c in cases if c.name not in {s.name for s in skipped}]
    if a.list:
        for c in cases:
            print(c.name, " ".join(repr(x) if len(x) < 60 else repr(x[:57] + "...") for x in c.args))
        return 0
    binary = os.path.abspath(a.tessel)
    limit_memory = not sanitized(binary)
    keep_root = tempfile.mkdtemp(prefix="tessel-bad-inputs-")
    start = time.monotonic()
    results = []
    seen = set()

    def signature(c):
        return (tuple(c.args), tuple(sorted(c.files.items())), tuple(sorted(c.links.items())))

    seed, rounds = a.seed, 0
    while True:
        fresh = []
        for c in cases:
            sig = signature(c)
            if sig not in seen:
                seen.add(sig)
                fresh.append(c)
        with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            for r in pool.map(lambda c: run_case(binary, c, a.timeout_s, keep_root, limit_memory), fresh):
                results.append(r)
        rounds += 1
        if time.monotonic() - start >= a.duration_s:
            break
        seed += 1
        cases = [c for c in select(generate(seed)) if c.name not in KNOWN_OPEN or a.run_known_open]
        print(f"  round {rounds}: {len(results)} cases so far, {time.monotonic() - start:.0f} s", flush=True)
    took = time.monotonic() - start

    kinds = ["clean error", "success", "crash", "hang", "internal error", "unclean error", "file left",
             "file changed", "wrong success", "wrong answer"]
    count = {k: 0 for k in kinds}
    by_surface = {}
    failures = []
    for case, verdict, detail, rc, err, seconds, folder in results:
        count[verdict] += 1
        s = case.name.split("/")[0]
        by_surface.setdefault(s, {"cases": 0, "failed": 0})
        by_surface[s]["cases"] += 1
        if verdict not in ("clean error", "success"):
            by_surface[s]["failed"] += 1
            failures.append((case, verdict, detail, folder, seconds))
    for case, verdict, detail, folder, seconds in failures:
        args = " ".join(repr(x) if len(x) < 80 else repr(x[:77] + "...") for x in case.args)
        print(f"FAIL {case.name}: {verdict}: {detail}\n     tessel {args}\n     folder {folder} ({seconds:.1f} s)")
    print(f"\nbad-input suite: {len(results)} cases tried in {took:.1f} s ({a.jobs} at a time, limit {a.timeout_s:g} s each; "
          f"{rounds} round{'s' if rounds != 1 else ''}, seeds {a.seed}..{seed})")
    print("  " + ", ".join(f"{k} {v}" for k, v in count.items() if k in ("clean error", "success") or True))
    print("  per surface: " + ", ".join(f"{s} {v['cases']}" + (f" ({v['failed']} failed)" if v["failed"] else "")
                                        for s, v in by_surface.items()))
    if skipped:
        print(f"  KNOWN_OPEN, not run ({len(skipped)}):")
        for c in skipped:
            print(f"    {c.name}: {KNOWN_OPEN[c.name]}")
    else:
        print("  KNOWN_OPEN: none")
    if not failures:
        shutil.rmtree(keep_root, ignore_errors=True)
    print(f"bad_inputs: {len(results) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
