#!/bin/bash
# A/B of the model's verification step between git revision BASE and this working tree, in one
# process (bench/step_ab.cpp): both versions' models made from the same seed, their steps
# alternated, the median of the per-pair ratios printed per step size. Needs g++, libtorch and
# oneDNN (libdnnl-dev); two models in memory (the 1b shape: 4.2 GB; 7b does not fit in 24 GiB).
# Usage: bench/step_ab.sh BASE [SHAPE=1b] [CONTEXT=512] [PAIRS=40] [TOKENS=1 2 4 8 16 32]
# STEP_AB_LINEAR=NAME: both models' linear kernel (refdec-speed-bench --linear's names; auto unset).
# STEP_AB_CHOICE=TEXT: both models' measured kernel choice given instead of measured at load
# (refdec-speed-bench --linear-choice's text), so that a ratio compares the code alone.
# STEP_AB_RUNS=N: N fresh processes, then the median of their ratios (ab_repeat in ab_checkout.sh).
set -euo pipefail
base=${1:?usage: bench/step_ab.sh BASE [SHAPE] [CONTEXT] [PAIRS] [TOKENS...]}
shape=${2:-1b} context=${3:-512} pairs=${4:-40}
shift $(($# < 4 ? $# : 4))
tokens=("$@")
[ ${#tokens[@]} -gt 0 ] || tokens=(1 2 4 8 16 32)
. "$(dirname "$0")/ab_checkout.sh"
ab_checkout step_ab.sh "$base"
onednn=0
[ -f /usr/include/dnnl.hpp ] && onednn=1
flags=(-O3 -std=c++20 -fopenmp -DREFDEC_HAVE_ONEDNN=$onednn -I"$root/bench")
g++ "${flags[@]}" -c -Drefdec=refdec_base -DSTEP_AB_SIDE=base -I"$work/include" "$root/bench/step_ab_model.cpp" -o "$work/base.o" &
g++ "${flags[@]}" -c -DSTEP_AB_SIDE=head -I"$root/include" "$root/bench/step_ab_model.cpp" -o "$work/head.o"
wait $!
libs=(-ltorch -ltorch_cpu -lc10)
[ $onednn = 1 ] && libs+=(-ldnnl)
g++ "${flags[@]}" "$root/bench/step_ab.cpp" "$work/base.o" "$work/head.o" "${libs[@]}" -o "$work/step_ab"
ab_sides "$base"
ab_repeat "${STEP_AB_RUNS:-1}" "$work/step_ab" "$shape" "$context" "$pairs" "${tokens[@]}"
