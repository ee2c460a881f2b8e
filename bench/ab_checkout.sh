# Sourced by bench/step_ab.sh and bench/kernel_ab.sh: ab_checkout NAME BASE checks that this is a
# git checkout holding revision BASE (exit 77 where it is not a checkout, 1 where BASE is unknown,
# NAME the script's, for the message), then sets root (the checkout) and work (a temporary folder,
# removed on exit, holding BASE's include/).
ab_checkout() {
  local name=$1 base=$2
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if ! git -C "$root" rev-parse --git-dir > /dev/null 2>&1; then
    echo "$name: $root is not a git checkout: nothing to take BASE from" >&2
    exit 77
  fi
  if ! git -C "$root" rev-parse --verify --quiet "$base^{commit}" > /dev/null; then
    echo "$name: no revision '$base' in $root" >&2
    exit 1
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  git -C "$root" archive "$base" include | tar -x -C "$work"
}

# The line both scripts print before their table: which revisions are compared.
ab_sides() {
  echo "base $(git -C "$root" rev-parse --short "$1"), head: the working tree at $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- include || echo ' with changes')"
}

# ab_repeat RUNS COMMAND...: runs COMMAND (an A/B program printing a table whose rows are
# "| SIZE | ... | RATIO |") RUNS times, each a fresh process, then the median of each size's ratio
# over the runs. One run's ratio carries a bias of a few percent of its own, stable over its
# pairs and different in the next process, probably where each side's data was placed in memory
# that is not all equally fast (the same code on both sides read 1.03-1.06 in one run of
# bench/step_ab.sh on a 2-core Zen 5 VM): fresh runs average it out.
ab_repeat() {
  local runs=$1 out
  shift
  out=$(mktemp)
  for ((r = 1; r <= runs; r++)); do
    [ "$runs" -gt 1 ] && echo "run $r of $runs"
    "$@" | tee -a "$out"
  done
  if [ "$runs" -gt 1 ]; then
    echo
    echo "median of the $runs runs' ratios:"
    echo "| size | head / base, each run | median |"
    echo "|---|---|---|"
    awk -F'|' '/^\| *[0-9]+ *\|/ { n = $2 + 0; if (!(n in c)) order[++k] = n; v[n, ++c[n]] = $(NF - 1) + 0; all[n] = all[n] " " $(NF - 1) + 0 }
      END { for (i = 1; i <= k; i++) { n = order[i]; m = c[n]
              for (a = 2; a <= m; a++) for (b = a; b > 1 && v[n, b - 1] > v[n, b]; b--) { t = v[n, b]; v[n, b] = v[n, b - 1]; v[n, b - 1] = t }
              printf "| %d |%s | %.3f |\n", n, all[n], m % 2 ? v[n, (m + 1) / 2] : (v[n, m / 2] + v[n, m / 2 + 1]) / 2 } }' "$out"
  fi
  rm -f "$out"
}
