#!/usr/bin/env bash
# The MPI backend's tests (ctest label mpi), each a few mpirun jobs on small graphs:
#   mpi_test.sh TESSEL workloads NP POLICY  every built-in workload, checked against the reference
#   mpi_test.sh TESSEL faults               an exception inside a task, a killed rank: the job ends
#                                           (bounded time) naming the rank (and the task); a
#                                           segment left in /dev/shm by a rank 0 killed during
#                                           setup is removed by the next job
#   mpi_test.sh TESSEL bad                  more ranks than devices, ranks given different inputs,
#                                           --memory-cap on several ranks (run and compare):
#                                           one clear error, non-zero exit, no partial file
#   mpi_test.sh TESSEL trace                one trace from rank 0 with every device's spans
#   mpi_test.sh TESSEL sweep                a sweep over 2 ranks: the rows of one process, resumable
#   mpi_test.sh TESSEL compare              calibrate and compare --backend mpi
# Exit 77 (ctest SKIP_RETURN_CODE) where mpirun is missing. OpenMPI refuses to run as root
# without --allow-run-as-root; --oversubscribe lets 4 ranks share 2 cores.
set -u
tessel=$1
mode=$2
mpirun=${MPIRUN:-$(command -v mpirun || true)}
[ -n "$mpirun" ] || { echo "mpi_test: no mpirun found: skipped"; exit 77; }
flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
# Debian's python3 first (python3 on the PATH may be another installation without numpy).
py=""
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" >/dev/null 2>&1; then py=$p; break; fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }
# mpi NP ARGS...: runs tessel on NP ranks within 120 s; stdout+stderr in $tmp/out, status in $rc.
mpi() {
  local np=$1
  shift
  timeout 120 "$mpirun" "${flags[@]}" -np "$np" "$tessel" "$@" >"$tmp/out" 2>&1
  rc=$?
}

case $mode in
  workloads)
    np=$3
    policy=$4
    for w in chain:size=64 chain:size=48,dtype=f64 chain-sum:size=40 chain-sum:size=40,skewed=1 \
             ffn:tokens=32,dim=16,hidden=32 llama-block:model=tiny \
             gemm-alltoall:experts=4,tokens=32,dim=16,out=16 gemv-allreduce:rows=32,cols=32 \
             embedding-alltoall:batch=16,tables=4,vocab=8,dim=16; do
      mpi "$np" run -w "$w" -d 4 --backend mpi --policy "$policy" --repeat 2 --json
      if [ $rc -ne 0 ]; then
        bad "$w on $np ranks, $policy: exit $rc"; cat "$tmp/out"
      elif ! grep -q '"correct": true' "$tmp/out" || [ "$(grep -c '"backend": "mpi"' "$tmp/out")" -ne 1 ]; then
        bad "$w on $np ranks, $policy: no single passing report from rank 0"; cat "$tmp/out"
      else
        echo "ok: $w on $np ranks, $policy"
      fi
    done
    # einsum from .npy files: rank 0 writes the result.
    if [ -n "$py" ]; then
      "$py" -c "
import numpy as np
r = np.random.default_rng(1)
np.save('$tmp/a.npy', r.standard_normal((24, 16)).astype(np.float32))
np.save('$tmp/b.npy', r.standard_normal((16, 20)).astype(np.float32))"
      mpi "$np" einsum ij,jk-\>ik "$tmp/a.npy" "$tmp/b.npy" -o "$tmp/c.npy" -d 4 --backend mpi
      if [ $rc -ne 0 ]; then
        bad "einsum on $np ranks: exit $rc"; cat "$tmp/out"
      elif ! "$py" -c "
import numpy as np
a, b, c = (np.load('$tmp/' + f + '.npy') for f in 'abc')
assert np.allclose(c, a @ b, atol=1e-4), 'wrong result'"; then
        bad "einsum on $np ranks: result differs from numpy"
      else
        echo "ok: einsum on $np ranks"
      fi
    else
      echo "einsum on $np ranks: skipped (no Python with numpy)"
    fi
    ;;
  faults)
    for policy in async bsp; do
      TESSEL_MPI_FAULT=1:any mpi 2 run -w chain:size=64 -d 2 --backend mpi --policy $policy
      if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
        bad "a task that throws on rank 1 ($policy): exit $rc"
      elif ! grep -Eq 'tessel: error: rank 1 of 2: device 1: cpu executor: task [0-9]+ \(.*\) failed: injected fault' "$tmp/out"; then
        bad "a task that throws on rank 1 ($policy): no message naming the rank and the task"; cat "$tmp/out"
      else
        echo "ok: a task that throws on rank 1 ($policy) ends the job (exit $rc)"
      fi
      TESSEL_MPI_FAULT=1:kill mpi 2 run -w chain:size=64 -d 2 --backend mpi --policy $policy
      if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
        bad "a killed rank 1 ($policy): exit $rc"
      elif ! grep -Eq 'rank 1 .*(signal 9|Killed)' "$tmp/out"; then
        bad "a killed rank 1 ($policy): no message naming the rank"; cat "$tmp/out"
      else
        echo "ok: a killed rank 1 ($policy) ends the job (exit $rc)"
      fi
    done
    # Rank 0 killed after making the doorbells' shared-memory segment, before unlinking it:
    # the segment it leaves in /dev/shm is removed by the next job's rank 0.
    if [ -d /dev/shm ]; then
      segments() { ls /dev/shm | grep '^tessel-bells-' | sort; }
      before=$(segments)
      TESSEL_MPI_FAULT=0:setup mpi 2 run -w chain:size=64 -d 2 --backend mpi
      left=$(comm -13 <(echo "$before") <(segments))
      if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
        bad "rank 0 killed in setup: exit $rc"; cat "$tmp/out"
      elif [ -z "$left" ]; then
        bad "rank 0 killed in setup left no segment behind (the fault was not injected?)"; cat "$tmp/out"
      else
        mpi 2 run -w chain:size=64 -d 2 --backend mpi
        still=$(comm -12 <(echo "$left") <(segments))
        if [ $rc -ne 0 ]; then
          bad "the job after rank 0 was killed in setup: exit $rc"; cat "$tmp/out"
        elif [ -n "$still" ]; then
          bad "the stale segment $still was not removed by the next job"
        else
          echo "ok: the segment left by rank 0 killed in setup ($left) was removed by the next job"
        fi
      fi
    fi
    ;;
  bad)
    mpi 4 run -w chain:size=64 -d 2 --backend mpi --trace "$tmp/t.json"
    if [ $rc -ne 1 ] || [ "$(grep -c 'tessel: error: --backend mpi: the job has 4 ranks but the task graph only 2 devices' "$tmp/out")" -ne 1 ]; then
      bad "4 ranks for 2 devices: exit $rc (want 1, one message)"; cat "$tmp/out"
    elif [ -e "$tmp/t.json" ]; then
      bad "4 ranks for 2 devices: left a trace file"
    else
      echo "ok: 4 ranks for 2 devices refused"
    fi
    # A memory-capped graph cannot run split over processes: refused before planning, by
    # rank 0 alone, without MPI_Abort, leaving no output (cap_refused WHAT OUTPUT after a job).
    cap_refused() {
      if [ $rc -ne 1 ] || [ "$(grep -c 'tessel: error: --memory-cap with --backend mpi' "$tmp/out")" -ne 1 ] ||
        grep -q 'MPI_ABORT' "$tmp/out"; then
        bad "$1 --memory-cap on 2 ranks: exit $rc (want 1, one message, no MPI_ABORT)"; cat "$tmp/out"
      elif [ -e "$2" ]; then
        bad "$1 --memory-cap on 2 ranks: left $2"
      else
        echo "ok: $1 --memory-cap on 2 ranks refused"
      fi
    }
    mpi 2 run -w chain:size=64 -d 2 --backend mpi --memory-cap 50% --trace "$tmp/t.json"
    cap_refused run "$tmp/t.json"
    # compare alike, before any calibration, planning or run (a preset machine, so that the
    # case does not depend on calibrate). Without the refusal this graph, strategy, policy
    # and cap plan, and the executor of every rank refuses the split graph, ending the job
    # with MPI_Abort.
    mpi 2 compare -w llama-block:model=tiny -d 2 -s data-parallel --policy async --backend mpi -m cpu:2 --memory-cap 50% \
      --repeat 1 --trace-dir "$tmp/traces" --json
    cap_refused compare "$tmp/traces"
    timeout 120 "$mpirun" "${flags[@]}" -np 1 "$tessel" run -w chain:size=64 -d 2 --backend mpi --seed 1 : \
      -np 1 "$tessel" run -w chain:size=64 -d 2 --backend mpi --seed 2 >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -ne 1 ] || [ "$(grep -c 'tessel: error: --backend mpi: rank 1 was given a different graph' "$tmp/out")" -ne 1 ]; then
      bad "ranks with different seeds: exit $rc (want 1, one message)"; cat "$tmp/out"
    else
      echo "ok: ranks with different inputs refused"
    fi
    timeout 120 "$mpirun" "${flags[@]}" -np 1 "$tessel" run -w chain:size=64 -d 2 --backend mpi : \
      -np 1 "$tessel" run -w chain:size=64 -d 2 --backend mpi --parts 1 >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -ne 1 ] || ! grep -q 'rank 1 was given a different graph, decomposition' "$tmp/out"; then
      bad "ranks with different decompositions: exit $rc (want 1)"; cat "$tmp/out"
    else
      echo "ok: ranks with different decompositions refused"
    fi
    ;;
  trace)
    mpi 2 run -w chain:size=64 -d 4 --backend mpi --trace "$tmp/t.json"
    if [ $rc -ne 0 ]; then
      bad "--trace on 2 ranks: exit $rc"; cat "$tmp/out"
    elif ! "${py:-python3}" - "$tmp/t.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
spans = [e for e in events if e.get("ph") == "X"]
pids = {e["pid"] for e in spans}
assert pids == {0, 1, 2, 3}, f"devices in the trace: {sorted(pids)}"
assert min(e["ts"] for e in spans) >= 0, "a span before the start"
print(f"trace: {len(spans)} spans on devices {sorted(pids)}")
PY
    then
      bad "--trace on 2 ranks: the trace lacks some device's spans"
    else
      echo "ok: one trace with every rank's devices"
    fi
    ;;
  sweep)
    # Capped points too (their plan's figures cross between ranks; bsp ones are error rows).
    echo '{"workloads":["chain:size=256","ffn"],"devices":[2,4,8],"strategies":["split-largest","data-parallel"],"machines":["h100-sxm-8"],"policies":["async","bsp"],"memory_caps":[null,"0.8"]}' >"$tmp/s.json"
    mpi 2 sweep "$tmp/s.json" -o "$tmp/mpi.csv"
    rc1=$rc
    "$tessel" sweep "$tmp/s.json" -o "$tmp/one.csv" >/dev/null 2>&1
    # Every deterministic column (all but the *_wall_s ones and the error) alike.
    strip() { cut -d, -f1-28 "$1" | sort; }  # the 16 keys, makespan_s .. prefetch
    if [ $rc1 -ne 0 ]; then
      bad "sweep on 2 ranks: exit $rc1"; cat "$tmp/out"
    elif [ "$(wc -l <"$tmp/mpi.csv")" -ne 49 ] || [ "$(strip "$tmp/mpi.csv")" != "$(strip "$tmp/one.csv")" ]; then
      bad "sweep on 2 ranks: rows differ from the sweep in one process"
    else
      echo "ok: sweep on 2 ranks writes the rows of one process"
    fi
    # Resume: drop the last 34 rows, run again on 2 ranks: every point exactly once.
    head -n 15 "$tmp/mpi.csv" >"$tmp/part.csv"
    mpi 2 sweep "$tmp/s.json" -o "$tmp/part.csv"
    if [ $rc -ne 0 ] || ! grep -q "14 were already in" "$tmp/out" || [ "$(strip "$tmp/part.csv")" != "$(strip "$tmp/one.csv")" ]; then
      bad "sweep on 2 ranks: resume"; cat "$tmp/out"
    else
      echo "ok: sweep on 2 ranks resumes"
    fi
    ;;
  compare)
    mpi 2 calibrate --backend mpi -d 2 --rounds 1 --seconds 0.01 -o "$tmp/m.json" --json
    if [ $rc -ne 0 ] || ! grep -q '"p2p_bytes_per_s"' "$tmp/out" || ! grep -q '"move_latency_s"' "$tmp/out" ||
       ! grep -q 'rank1.mpi.out' "$tmp/m.json"; then
      bad "calibrate --backend mpi: exit $rc"; cat "$tmp/out"
    else
      echo "ok: calibrate --backend mpi writes the links between ranks (measured moves through the backend)"
      mpi 2 compare -w chain:size=64 -d 2 -s data-parallel --backend mpi -m "$tmp/m.json" --repeat 2 --json
      if [ $rc -ne 0 ] || [ "$(grep -c '"backend": "mpi"' "$tmp/out")" -ne 1 ] || ! grep -q '"correct": true' "$tmp/out"; then
        bad "compare --backend mpi: exit $rc"; cat "$tmp/out"
      else
        echo "ok: compare --backend mpi"
      fi
    fi
    mpi 2 compare -w chain:size=64 -d 2 --backend mpi
    if [ $rc -ne 1 ] || ! grep -q 'compare --backend mpi needs -m MACHINE.json' "$tmp/out"; then
      bad "compare --backend mpi without -m: exit $rc"; cat "$tmp/out"
    else
      echo "ok: compare --backend mpi without -m refused"
    fi
    ;;
  *)
    echo "mpi_test: unknown mode $mode" >&2
    exit 2
    ;;
esac
[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
