#!/usr/bin/env bash
# C and C++ programs built with plain cc / c++ and pkg-config against the refdec that the
# consumer_project test installed into <binary dir>/prefix: the C API's shared library (found by
# the loader through the .pc file's rpath), its static library, the C++ headers, and
# docs/engine.md's C program compiled exactly as written, run on stories260K (exit 77, skipped,
# without the model).
#   pkg_config.sh SOURCE_DIR BINARY_DIR DATA_DIR
set -euo pipefail
src=$1 bin=$2 data=$3
out=$bin/pkg_config
rm -rf "$out" && mkdir -p "$out"
PKG_CONFIG_PATH=$(echo "$bin"/prefix/lib*/pkgconfig)
export PKG_CONFIG_PATH
unset LD_LIBRARY_PATH

echo "-- the shared C library"
cc -std=c99 -Wall -Werror "$src/tests/consumer/project/main.c" $(pkg-config --cflags --libs refdec_c) -o "$out/shared"
"$out/shared"
readelf -d "$out/shared" | grep -q 'NEEDED.*librefdec_c\.so\.2' || { echo "not linked to librefdec_c.so.2"; exit 1; }

echo "-- the static C library"
cc -std=c99 -Wall -Werror "$src/tests/consumer/project/main.c" $(pkg-config --cflags --libs refdec_c_static) -o "$out/static"
if readelf -d "$out/static" | grep -q librefdec_c; then echo "the static build needs librefdec_c.so"; exit 1; fi
"$out/static"

echo "-- the C++ headers"
c++ -std=c++20 -Wall -Werror "$src/tests/consumer/project/main.cpp" $(pkg-config --cflags --libs refdec) -o "$out/cxx"
"$out/cxx"

echo "-- docs/engine.md's C program, as written"
# The fenced block after the marker comment.
awk '/<!-- engine_loop.c -->/ {on = 1; next} on && /^```c$/ {copy = 1; next} copy && /^```$/ {exit} copy {print}' \
  "$src/docs/engine.md" > "$out/engine_loop.c"
[ -s "$out/engine_loop.c" ] || { echo "no engine_loop.c block in docs/engine.md"; exit 1; }
(cd "$src" && cc -std=c99 -O2 -Wall -Wextra -Werror -Iexamples/c "$out/engine_loop.c" $(pkg-config --cflags --libs refdec_c) -lm \
  -o "$out/engine_loop")
REFDEC_DATA_DIR=$data "$out/engine_loop"  # its status is the script's: 77 without the model
