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
