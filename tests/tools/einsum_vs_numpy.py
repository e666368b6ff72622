"""`tessel einsum` against numpy.einsum: matmul, batched matmul, transposes, traces,
diagonals, outer products, n-ary contractions and full reductions, over several device
counts, partitions and both CPU backends. Usage: einsum_vs_numpy.py PATH/TO/tessel"""
import os
import subprocess
import sys
import tempfile

import numpy as np

TESSEL = sys.argv[1]
rng = np.random.default_rng(7)

# (subscripts, operand shapes, extra --parts per device count or None)
CASES = [
    ("ij,jk->ik", [(12, 9), (9, 10)], "i=2,k=2"),
    ("ij,jk", [(7, 5), (5, 6)], "j=3"),  # implicit output, split aggregated index
    ("bij,bjk->bik", [(3, 6, 5), (3, 5, 4)], "b=3"),
    ("ij->ji", [(5, 8)], "i=2,j=2"),
    ("abc->cab", [(2, 3, 4)], None),
    ("ii->", [(6, 6)], "i=3"),  # trace
    ("ii->i", [(7, 7)], "i=2"),  # diagonal
    ("aab,bc->ac", [(4, 4, 3), (3, 5)], "a=2,b=3"),
    ("i,j->ij", [(6,), (4,)], "i=3"),  # outer product
    ("ij,jk,kl->il", [(5, 4), (4, 6), (6, 3)], "j=2,k=2"),  # n-ary
    ("ab,ab->", [(5, 7), (5, 7)], "a=5"),  # full reduction to a scalar
    ("ijk->", [(3, 4, 5)], "i=3,k=5"),
    ("ij,j->i", [(8, 6), (6,)], "j=2"),
    ("Ab,bC->AC", [(3, 4), (4, 2)], None),  # upper-case letters
    ("ba,ca", [(3, 5), (4, 5)], None),  # implicit output order: alphabetical
]

failures = 0
with tempfile.TemporaryDirectory() as tmp:
    for n, (subs, shapes, parts) in enumerate(CASES):
        dtype = np.float64 if n % 2 else np.float32
        ops = [rng.uniform(-1, 1, size=s).astype(dtype) for s in shapes]
        files = []
        for i, a in enumerate(ops):
            f = os.path.join(tmp, f"c{n}_op{i}.npy")
            np.save(f, a)
            files.append(f)
        want = np.einsum(subs, *ops)
        for devices, backend in ((1, "cpu"), (2, "cpu"), (3, "block"), (4, "cpu"), (4, "block")):
            for p in ([None, parts] if parts else [None]):
                out = os.path.join(tmp, f"c{n}_d{devices}.npy")
                cmd = [TESSEL, "einsum", subs, *files, "-o", out, "--devices", str(devices), "--backend", backend]
                if p:
                    cmd += ["--parts", p]
                r = subprocess.run(cmd, capture_output=True, text=True)
                label = f"{subs} devices={devices} backend={backend} parts={p or 'default'}"
                if r.returncode != 0:
                    print(f"FAIL {label}: exit {r.returncode}: {r.stderr.strip()}")
                    failures += 1
                    continue
                got = np.load(out)
                tol = 1e-10 if dtype == np.float64 else 1e-4
                if got.shape != np.shape(want) or not np.allclose(got, want, rtol=tol, atol=tol):
                    print(f"FAIL {label}: shape {got.shape} vs {np.shape(want)}, "
                          f"max diff {np.max(np.abs(got - want)) if got.shape == np.shape(want) else 'n/a'}")
                    failures += 1
                else:
                    print(f"ok   {label}")
print(f"{failures} failed")
sys.exit(1 if failures else 0)
