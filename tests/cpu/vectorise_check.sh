#!/usr/bin/env bash
# The loops refdec leaves to the compiler's vectoriser stay vectorised in a consumer built at -O2
# (CMake's RelWithDebInfo), not only in refdec's own -O3 build: vectorise_probe.cpp compiled at
# -O2 with the project's compiler, the vector instructions of RMSNorm's AVX-512 and AVX2 copies and
# of the streaming kernel's epilogue counted in its disassembly. Without REFDEC_VECTORISE (cpu_isa.hpp)
# GCC 12 gives 1 / 11 / 74 of them, with it 55 / 80 / 134. Exit 77 (skipped) off x86-64, with
# Clang (which vectorises these loops at -O2 and has no such attribute) or without objdump.
#   vectorise_check.sh CXX SOURCE_DIR WORK_DIR
set -euo pipefail
cxx=$1 src=$2 work=$3
case "$(uname -m)" in x86_64 | i?86) ;; *) echo "skipped: not an x86 machine ($(uname -m))"; exit 77 ;; esac
if "$cxx" --version | grep -qi clang; then echo "skipped: $cxx is Clang (the check is of GCC's -O2 cost model)"; exit 77; fi
command -v objdump > /dev/null || { echo "skipped: no objdump"; exit 77; }
mkdir -p "$work"
"$cxx" -O2 -std=c++20 -I"$src/include" -c "$src/tests/cpu/vectorise_probe.cpp" -o "$work/vectorise_probe.o"
objdump -d -C --no-show-raw-insn "$work/vectorise_probe.o" > "$work/vectorise_probe.s"
# Lines of the function whose label matches $1 that name a register of kind $2 (zmm, ymm).
count() { awk -v label="$1" '$0 ~ label && />:$/ { f = 1; next } /^$/ { f = 0 } f' "$work/vectorise_probe.s" | grep -c "$2" || true; }
status=0
check() {  # name, label, register, at least
  local n
  n=$(count "$2" "$3")
  echo "$1: $n $3 instructions at -O2 (at least $4 expected)"
  [ "$n" -ge "$4" ] || status=1
}
check "RMSNorm, AVX-512 copy" 'rms_norm_avx512<' zmm 16
check "RMSNorm, AVX2 copy" 'rms_norm_avx2<' ymm 40
check "the streaming kernel's epilogue" 'StreamLinear::finish<' ymm 100
exit $status
