#!/bin/bash
# A/B of a CPU kernel between git revision BASE and this working tree, in one process
# (bench/kernel_ab.cpp): both versions' kernels over the same data, their passes alternated, the
# median of the per-round ratios printed per row count. Torch-free: needs g++ with OpenMP.
# Usage: bench/kernel_ab.sh BASE [KERNEL=linear] [SHAPE=1b] [ROUNDS=10] [ROWS=1 4 16]
#   linear: every linear layer of SHAPE in bf16, streamed by refdec's tiles (cpu/stream_linear.hpp);
#           KERNEL_AB_TILES=NAME (avx2, avx512, avx512-bf16, avx512-fp16; default the widest this
#           CPU runs), KERNEL_AB_PREFETCH=NAME (ahead, l2, none; default ahead).
#   attention: one layer's attention as the packed model runs it (cpu/bf16_attention.hpp where
#           the revision has it and the CPU runs AVX512_BF16, else cpu/avx2_attention.hpp) over
#           KERNEL_AB_CONTEXT (512) cached entries and the step's ROWS tokens; with
#           KERNEL_AB_EVICT_MIB=N, every layer's over a cache of its own, each after an untimed
#           read of N MiB (cold, as in a step).
# Threads: OMP_NUM_THREADS. BASE's headers must have the functions kernel_ab_side.cpp calls.
set -euo pipefail
base=${1:?usage: bench/kernel_ab.sh BASE [KERNEL] [SHAPE] [ROUNDS] [ROWS...]}
kernel=${2:-linear} shape=${3:-1b} rounds=${4:-10}
shift $(($# < 4 ? $# : 4))
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(1 4 16)
. "$(dirname "$0")/ab_checkout.sh"
ab_checkout kernel_ab.sh "$base"
flags=(-O3 -std=c++20 -fopenmp -I"$root/bench")
g++ "${flags[@]}" -c -Drefdec=refdec_base -DKERNEL_AB_SIDE=base -I"$work/include" "$root/bench/kernel_ab_side.cpp" -o "$work/base.o" &
g++ "${flags[@]}" -c -DKERNEL_AB_SIDE=head -I"$root/include" "$root/bench/kernel_ab_side.cpp" -o "$work/head.o"
wait $!
g++ "${flags[@]}" "$root/bench/kernel_ab.cpp" "$work/base.o" "$work/head.o" -o "$work/kernel_ab"
ab_sides "$base"
ab_repeat "${KERNEL_AB_RUNS:-1}" "$work/kernel_ab" "$kernel" "$shape" "$rounds" "${KERNEL_AB_TILES:-widest}" "${KERNEL_AB_PREFETCH:-ahead}" "${KERNEL_AB_CONTEXT:-512}" "${rows[@]}"
