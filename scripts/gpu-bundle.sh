#!/usr/bin/env bash
# Builds, on this machine, what scripts/gpu-validate.sh runs on a lent GPU machine, into
# gpu-bundle/ (ignored by git; about 20 MB): the device machine has CUDA's toolkit, CMake
# and ninja but none of tessel's other build dependencies (Boost, Eigen, nlohmann-json,
# CLI11, GoogleTest, Google Benchmark, protobuf) and cannot download them, so it cannot
# build tessel itself. Carry the folder with the call and gpu-validate.sh uses it:
#   scripts/gpu-bundle.sh       (here: a full build of five targets, ~15 minutes on two
#                                 cores without ccache hits; start it early)
#   device run:   carry ["gpu-bundle"], timeout_s 600, one call (a task's device time is
#                 15 minutes in all, the machine's start included), issue 19's stages first:
#                 command: STAGES="calibrate compare check bench test" bash scripts/gpu-validate.sh "$OUT"
# gpu-bundle/bin: tessel, libtessel_cuda.so, tessel_cuda_tests, tessel_gpu_tests,
#   tessel_bench, stripped; built with -DTESSEL_NATIVE=OFF (the device's CPU is not this
#   one) and -DTESSEL_MPI=OFF (no MPI there).
# gpu-bundle/lib: the shared libraries they need that are neither the C/C++ runtime nor
#   CUDA's (cuBLAS, NVRTC and NCCL come from the device machine's CUDA 13 installation;
#   gpu-validate.sh finds them).
# gpu-bundle/BUNDLE.txt: the commit, date and the newest glibc / libstdc++ symbol
#   versions the binaries need.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-gpu-bundle}
bundle=${GPU_BUNDLE:-gpu-bundle}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DTESSEL_CUDA=ON -DTESSEL_MPI=OFF \
    -DTESSEL_NATIVE=OFF ${CMAKE_ARGS:-}
fi
targets=(tessel tessel_cuda tessel_cuda_tests tessel_gpu_tests tessel_bench)
cmake --build "$build" --parallel "${JOBS:-2}" --target "${targets[@]}"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for f in tessel libtessel_cuda.so tessel_cuda_tests tessel_gpu_tests tessel_bench; do
  strip -o "$bundle/bin/$f" "$build/bin/$f"
done
# Libraries that every Linux has (glibc, the C++ runtime, zlib) or that must come from the
# device machine (its driver; CUDA's libraries, matched to it) are not bundled.
system='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libz|libcuda|libcudart|libcublas|libcublasLt|libnvrtc|libnvrtc-builtins|libnccl|libnvJitLink)\.'
for f in "$bundle"/bin/*; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $system ]] && continue
  cp -L "$path" "$bundle/lib/$name"
done
{
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "built_on: $(. /etc/os-release && echo "$PRETTY_NAME"), $(nvcc --version | tail -n 2 | head -n 1)"
  echo "needs_glibc: $(objdump -T "$bundle"/bin/* "$bundle"/lib/* | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)"
  echo "needs_libstdcxx: $(objdump -T "$bundle"/bin/* "$bundle"/lib/* | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -n 1)"
  echo "bundled_libs: $(cd "$bundle/lib" && echo *)"
} >"$bundle/BUNDLE.txt"
cat "$bundle/BUNDLE.txt"
du -sh "$bundle"
