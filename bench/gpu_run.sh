#!/usr/bin/env bash
# One call on the GPU machine (docs/gpu.md says how to prepare it here): configures against the
# machine's libtorch with the carried .gpu-deps, then runs the stages named (default: all):
#   cuda   the CUDA kernel tests (nvcc)
#   bench  refdec-speed-bench on Llama-2-7B's shape, then the Hugging Face baseline
#   torch  the torch tests against the machine's libtorch 2.x
#   python the Python module and its tests, likewise
#   bash bench/gpu_run.sh [cuda] [bench] [torch] [python]      (carry .gpu-deps live traj .gpu-data)
# Every log lands in $OUT. Each stage has its own time limit so that one slow stage cannot take the
# others' results with it.
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
log() { echo "== $(date +%T) $*"; }

log environment
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nvcc --version | tail -2
  cmake --version | head -1; python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  nproc; } 2>&1 | tee "$OUT/env.txt"

log configure
prefix="$PWD/.gpu-deps;$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
timeout 120 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$prefix" -DREFDEC_BUILD_EXAMPLES=OFF -DREFDEC_PYTHON="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" >"$OUT/configure.log" 2>&1 \
  || { tail -60 "$OUT/configure.log"; exit 1; }
grep 'refdec:' "$OUT/configure.log"

stages=" ${*:-cuda bench torch python} "
targets=()
[[ $stages == *" cuda "* ]] && targets+=(refdec_cuda_tests refdec_core_nvcc_test)
[[ $stages == *" bench "* ]] && targets+=(refdec-speed-bench)
[[ $stages == *" torch "* ]] && targets+=(refdec_torch_tests)
[[ $stages == *" python "* ]] && targets+=(refdec_python)
log "build ${targets[*]}"
# The carried libraries are linked by name (-ldivsufsort) and loaded from the carried folder.
export LIBRARY_PATH="$PWD/.gpu-deps/lib/x86_64-linux-gnu" LD_LIBRARY_PATH="$PWD/.gpu-deps/lib/x86_64-linux-gnu"
timeout 300 cmake --build build-gpu -j "$(nproc)" -- -k 0 "${targets[@]}" >"$OUT/build.log" 2>&1 \
  || grep -B2 -A12 'error' "$OUT/build.log" | head -120

if [[ $stages == *" cuda "* ]]; then
log cuda tests
timeout 60 ./build-gpu/tests/refdec_core_nvcc_test 2>&1 | tail -5
timeout 120 ./build-gpu/tests/refdec_cuda_tests 2>&1 | tee "$OUT/cuda_tests.log" | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) |Failure|error' | head -40

fi

if [[ $stages == *" bench "* ]]; then
log speed bench
ds=.gpu-data/mtbench.ds
timeout "${REFDEC_GPU_BENCH_S:-300}" ./build-gpu/bench/refdec-speed-bench --shape 7b --device cuda --dtype bf16 \
  --plain-tokens 64 --paired-steps 16 --cost-tokens 1 2 4 8 16 32 64 128 256 \
  --live live/specbench.jsonl live/llma-rag.jsonl --datastore "$ds" --max-traces 2 --max-tokens 64 \
  --trajectories traj/*.json --batches 1 4 16 64 --sweep-steps 32 --json "$OUT/gpu.json" 2>"$OUT/bench.err" \
  | tee "$OUT/bench.log"
tail -5 "$OUT/bench.err"

log hugging face baseline
PYTHONUNBUFFERED=1 timeout 150 python3 bench/hf_baseline.py --shape 7b --context 512 --tokens 128 --json "$OUT/hf.json" \
  2>&1 | tail -5

fi

if [[ $stages == *" torch "* ]]; then
log torch tests
timeout 150 ./build-gpu/tests/refdec_torch_tests --gtest_brief=1 >"$OUT/torch_tests.log" 2>&1
echo "torch tests rc=$?"; grep -E 'FAILED|PASSED|SKIPPED|tests ran' "$OUT/torch_tests.log" | head -30
fi

if [[ $stages == *" python "* ]]; then
log python tests
PYTHONPATH=build-gpu/python PYTHONDONTWRITEBYTECODE=1 timeout 150 python3 -m pytest -q -p no:cacheprovider \
  python/tests >"$OUT/python_tests.log" 2>&1
echo "python tests rc=$?"; tail -15 "$OUT/python_tests.log"
fi
log done
