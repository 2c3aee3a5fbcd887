#!/usr/bin/env bash
# The training frameworks' virtual environments, made once and kept between runs on the
# same machine (mindspore is about 3 GB, torch about 5 GB with its CUDA libraries):
#   bash python/envs.sh NAME...      make or reuse each (NAME: a file python/envs/NAME.txt)
#   bash python/envs.sh --path NAME  print the environment's folder if it is ready, else fail
# The folders live in $IMGFEED_ENVS (default ~/.cache/imgfeed-envs), one per NAME, with a
# stamp of the requirements they were made from: a changed requirements file remakes them.
# python/test.sh installs the package into every ready one and runs its framework's tests.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="${IMGFEED_ENVS:-$HOME/.cache/imgfeed-envs}"

stamp_of() { sha256sum "$here/envs/$1.txt" | cut -d' ' -f1; }
ready() { [[ -f "$root/$1/.imgfeed-stamp" && "$(cat "$root/$1/.imgfeed-stamp")" == "$(stamp_of "$1")" ]]; }

if [[ "${1:-}" == "--path" ]]; then
  [[ -f "$here/envs/$2.txt" ]] || { echo "no python/envs/$2.txt" >&2; exit 2; }
  ready "$2" || exit 1
  echo "$root/$2"
  exit 0
fi
mkdir -p "$root"
for name in "$@"; do
  reqs="$here/envs/$name.txt"
  [[ -f "$reqs" ]] || { echo "envs.sh: no $reqs" >&2; exit 2; }
  # One maker per environment at a time: a second caller (another checkout, a CI run beside a
  # session) waits for the first instead of removing the folder it is filling.
  exec {lock}>"$root/.$name.lock"
  flock "$lock"
  if ready "$name"; then
    exec {lock}>&-
    echo "envs.sh: $name ready in $root/$name (cached)"
    continue
  fi
  echo "envs.sh: making $root/$name from python/envs/$name.txt (minutes: a large download)"
  rm -rf "${root:?}/$name"
  python3 -m venv "$root/$name"
  "$root/$name/bin/pip" install --quiet --upgrade pip
  "$root/$name/bin/pip" install --quiet -r "$reqs"
  stamp_of "$name" > "$root/$name/.imgfeed-stamp"
  exec {lock}>&-
done
