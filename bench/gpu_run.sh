#!/usr/bin/env bash
# One call on the GPU machine (docs/gpu.md says how to prepare it here): configures against the
# machine's libtorch with the carried .gpu-deps, then runs the stages named (default: all):
#   static the static-shape step: its tests on the GPU (captured graphs against eager steps), then
#          refdec-speed-bench --static on Llama-2-7B's shape (plain decoding eager and captured against
#          the roofline, step cost, forced and live rows at batch 1, the forced batch sweep 1-64)
#   plain  the static step's tests, then refdec-speed-bench --static --static-kernels --only-plain: plain
#          decoding at batch 1, eager, captured with torch operations and with the fused kernels, and
#          the matrix products' own time (not in the default)
#   cuda   the CUDA kernel tests (nvcc)
#   bench  refdec-speed-bench on Llama-2-7B's shape at batch 1: roofline, step cost, forced and live rows
#   sweep  its batch sweeps (forced trajectories and live drafting at batch 1-64; not in the default)
#   hf     the Hugging Face baselines, eager and static cache compiled (not in the default)
#   torch  the torch tests against the machine's libtorch 2.x
#   python the Python module and its tests, likewise (a crash is backtraced with cuda-gdb)
#   bash bench/gpu_run.sh [cuda] [bench] [sweep] [hf] [torch] [python]  (carry .gpu-deps live traj .gpu-data)
# On an H200 the default stages took 480 s and `sweep` 165 s more: two calls, the second while the
# machine is warm, fit the 15 minutes a session is lent.
# Every log lands in $OUT (at most 8 files: what the device tool brings back). The whole run ends within REFDEC_GPU_DEADLINE_S seconds (default 560, inside
# the device tool's 600 s per call): each stage's time limit is its own or what is left, whichever is
# shorter, so that one slow stage cannot take the others' results with it.
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
log() { echo "== $(date +%T) $*"; }
deadline=$((SECONDS + ${REFDEC_GPU_DEADLINE_S:-560}))
limit() { local left=$((deadline - SECONDS - ${2:-0})); ((left < $1)) && echo $((left > 5 ? left : 5)) || echo "$1"; }

log environment
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nvcc --version | tail -2
  cmake --version | head -1; python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  nproc; } 2>&1 | tee "$OUT/env.txt"

log configure
prefix="$PWD/.gpu-deps;$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
timeout "$(limit 120)" cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$prefix" -DREFDEC_BUILD_EXAMPLES=OFF -DREFDEC_PYTHON="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" >"$OUT/build.log" 2>&1 \
  || { tail -60 "$OUT/build.log"; exit 1; }
grep 'refdec:' "$OUT/build.log"

stages=" ${*:-cuda bench torch python} "
# The carried libraries are linked by name (-ldivsufsort) and loaded from the carried folder.
export LIBRARY_PATH="$PWD/.gpu-deps/lib/x86_64-linux-gnu" LD_LIBRARY_PATH="$PWD/.gpu-deps/lib/x86_64-linux-gnu"
# Each stage's targets are built right before it (the timed stages first), never while one runs.
build() {
  ((${#@} == 0)) && return
  log "build $*"
  timeout "$(limit 300)" cmake --build build-gpu -j "$(nproc)" -- -k 0 "$@" >>"$OUT/build.log" 2>&1 \
    || grep -B2 -A12 'error' "$OUT/build.log" | head -120
}
first=()
[[ $stages == *" cuda "* ]] && first+=(refdec_cuda_tests refdec_core_nvcc_test)
[[ $stages == *" bench "* || $stages == *" sweep "* || $stages == *" static "* ]] && first+=(refdec-speed-bench)
[[ $stages == *" plain "* ]] && first+=(refdec-speed-bench)
[[ $stages == *" static "* || $stages == *" plain "* ]] && first+=(refdec_torch_tests)
[[ $stages == *" python "* ]] && first+=(refdec_python)
build "${first[@]}"
if [[ ! -x build-gpu/bench/refdec-speed-bench && " ${first[*]} " == *" refdec-speed-bench "* ]]; then
  log "no speed benchmark built: again without the fused kernels (REFDEC_STATIC_KERNELS=OFF)"
  cmake -B build-gpu -DREFDEC_STATIC_KERNELS=OFF >>"$OUT/build.log" 2>&1
  build "${first[@]}"
fi

if [[ $stages == *" cuda "* ]]; then
log cuda tests
timeout "$(limit 60)" ./build-gpu/tests/refdec_core_nvcc_test 2>&1 | tail -5
timeout "$(limit 120)" ./build-gpu/tests/refdec_cuda_tests 2>&1 | tee "$OUT/cuda_tests.log" | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) |Failure|error' | head -40

fi

if [[ $stages == *" static "* ]]; then
log static step tests
timeout "$(limit 90)" ./build-gpu/tests/refdec_torch_tests --gtest_filter='StaticStep*' 2>&1 | tee "$OUT/static_tests.log" \
  | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) |Failure|rror' | head -30
log speed bench, static step
reserve=0; [[ $stages == *" hf "* || $stages == *" python "* ]] && reserve=${REFDEC_GPU_RESERVE_S:-150}
kernels=(--static-kernels); [[ -e build-gpu/librefdec_eval_static_kernels.a ]] || kernels=()
timeout "$(limit "${REFDEC_GPU_BENCH_S:-330}" $reserve)" ./build-gpu/bench/refdec-speed-bench --shape 7b --device cuda --dtype bf16 \
  --static "${kernels[@]}" --static-rows 256 --plain-tokens 64 --paired-steps 0 --outside-batches 1 16 --cost-tokens 1 2 4 8 16 32 64 128 256 \
  --live live/specbench.jsonl live/llma-rag.jsonl --datastore .gpu-data/mtbench.ds --max-traces 1 --max-tokens 64 \
  --trajectories traj/*.json --batches 1 4 16 64 --sweep-steps 16 --live-compare --json "$OUT/gpu.json" 2>&1 \
  | tee "$OUT/bench.log"
fi

if [[ $stages == *" plain "* ]]; then
log static step tests
timeout "$(limit 90)" ./build-gpu/tests/refdec_torch_tests --gtest_filter='StaticStep*' 2>&1 | tee "$OUT/static_tests.log" \
  | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) |Failure|rror' | head -30
log plain decoding: eager, static step with torch operations, with the fused kernels, and the matrix products alone
plain=(./build-gpu/bench/refdec-speed-bench --shape 7b --device cuda --dtype bf16 --static --static-rows 256
  --plain-tokens 128 --paired-steps 0 --only-plain --json "$OUT/plain.json")
timeout "$(limit 150)" "${plain[@]}" --static-kernels 2>&1 | tee "$OUT/plain.log" | grep -v '^\[' \
  || { log "again without the fused kernels"; timeout "$(limit 120)" "${plain[@]}" 2>&1 | tee -a "$OUT/plain.log" | grep -v '^\['; }
fi

if [[ $stages == *" bench "* ]]; then
log speed bench
ds=.gpu-data/mtbench.ds
reserve=0; [[ $stages == *" torch "* || $stages == *" python "* ]] && reserve=200
timeout "$(limit "${REFDEC_GPU_BENCH_S:-330}" $reserve)" ./build-gpu/bench/refdec-speed-bench --shape 7b --device cuda --dtype bf16 \
  --plain-tokens 64 --paired-steps 16 --cost-tokens 1 2 4 8 16 32 64 128 256 \
  --live live/specbench.jsonl live/llma-rag.jsonl --datastore "$ds" --max-traces 2 --max-tokens 64 \
  --trajectories traj/*.json --batches 1 --sweep-steps 4 --live-compare --json "$OUT/gpu.json" 2>&1 \
  | tee "$OUT/bench.log"
fi

if [[ $stages == *" sweep "* ]]; then
log batch sweeps
timeout "$(limit 300)" ./build-gpu/bench/refdec-speed-bench --shape 7b --device cuda --dtype bf16 \
  --plain-tokens 16 --paired-steps 0 --cost-tokens 1 16 64 256 1024 --live live/specbench.jsonl live/llma-rag.jsonl \
  --datastore .gpu-data/mtbench.ds --max-traces 1 --max-tokens 16 --trajectories traj/*.json --batches 1 4 16 64 \
  --sweep-steps 16 --live-batches 1 4 16 64 --live-batch-steps 8 --live-warmup 4 --json "$OUT/sweep.json" \
  2>&1 | tee "$OUT/sweep.log"
fi


later=()
[[ $stages == *" torch "* ]] && later+=(refdec_torch_tests)
[[ $stages == *" python "* ]] && later+=(refdec_python)
build "${later[@]}"

if [[ $stages == *" torch "* ]]; then
log torch tests
timeout "$(limit 150 45)" ./build-gpu/tests/refdec_torch_tests --gtest_brief=1 >"$OUT/torch_tests.log" 2>&1
echo "torch tests rc=$?"; grep -E 'FAILED|PASSED|SKIPPED|tests ran' "$OUT/torch_tests.log" | head -30
fi

if [[ $stages == *" python "* ]]; then
log python tests
export PYTHONPATH=build-gpu/python PYTHONDONTWRITEBYTECODE=1
timeout "$(limit 150 25)" python3 -X faulthandler -m pytest -q -p no:cacheprovider python/tests >"$OUT/python_tests.log" 2>&1
rc=$?; echo "python tests rc=$rc"; tail -15 "$OUT/python_tests.log"
if ((rc != 0)) && command -v cuda-gdb >/dev/null; then
  log "backtrace of an error raised into Python after torch's import (without it, none crashed)"
  timeout "$(limit 60)" cuda-gdb -batch -ex run -ex bt --args python3 -c \
    'import torch, refdec
try: refdec.Datastore.open("/nonexistent/ds.bin")
except OSError as e: print("raised:", e)' >"$OUT/python_gdb.log" 2>&1
  grep -E '^#|raised:|signal|libstdc|refdec' "$OUT/python_gdb.log" | head -60
  # Leads (docs/history/gpu.md, the Python module): which C++ library the module's iostream code comes from.
  { c++ --version | head -1; ldd build-gpu/python/refdec/_*.so | grep -E 'stdc|torch'
    nm -C build-gpu/python/refdec/_*.so | grep -cE ' [TW] std::'; nm -C build-gpu/python/refdec/_*.so | grep -E '_M_insert<long>|num_put' | head -5
  } 2>&1 | tee -a "$OUT/python_gdb.log"
fi
fi
if [[ $stages == *" hf "* ]]; then
log hugging face baseline
PYTHONUNBUFFERED=1 timeout "$(limit 100)" python3 bench/hf_baseline.py --shape 7b --context 512 --tokens 64 --repeats 2 --json "$OUT/hf.json" \
  2>&1 | tail -3
PYTHONUNBUFFERED=1 timeout "$(limit 200)" python3 bench/hf_baseline.py --shape 7b --context 512 --tokens 64 --repeats 2 --compile \
  --json "$OUT/hf_compiled.json" 2>&1 | tail -3

fi

log done
