#!/usr/bin/env bash
# The training frameworks' virtual environments, made once and kept between runs on the
# same machine (mindspore is about 3 GB, torch about 5 GB with its CUDA libraries):
#   bash python/envs.sh NAME...      make or reuse each (NAME: a file python/envs/NAME.txt)
#   bash python/envs.sh --path NAME  print the environment's folder if it is ready, else fail
# The folders live in $IMGFEED_ENVS (default ~/.cache/imgfeed-envs), one per NAME, with a
# stamp of the requirements they were made from: a changed requirements file remakes them.
# A NAME with python/envs/NAME.npm instead (one package@version a line, # comments) is an npm
# folder (npm install --prefix), for the object-store emulators that npm ships (azurite).
# python/test.sh installs the package into every ready one and runs its framework's tests.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="${IMGFEED_ENVS:-$HOME/.cache/imgfeed-envs}"

reqs_of() { if [[ -f "$here/envs/$1.npm" ]]; then echo "$here/envs/$1.npm"; else echo "$here/envs/$1.txt"; fi; }
stamp_of() { sha256sum "$(reqs_of "$1")" | cut -d' ' -f1; }
ready() { [[ -f "$root/$1/.imgfeed-stamp" && "$(cat "$root/$1/.imgfeed-stamp")" == "$(stamp_of "$1")" ]]; }

if [[ "${1:-}" == "--path" ]]; then
  [[ -f "$(reqs_of "$2")" ]] || { echo "no python/envs/$2.txt" >&2; exit 2; }
  ready "$2" || exit 1
  echo "$root/$2"
  exit 0
fi
mkdir -p "$root"
for name in "$@"; do
  reqs="$(reqs_of "$name")"
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
  echo "envs.sh: making $root/$name from ${reqs#"$here/"} (minutes: a large download)"
  rm -rf "${root:?}/$name"
  if [[ "$reqs" == *.npm ]]; then
    mkdir -p "$root/$name"
    # shellcheck disable=SC2046
    npm install --prefix "$root/$name" --no-audit --no-fund --loglevel=error \
      $(grep -v '^#' "$reqs")
  else
    python3 -m venv "$root/$name"
    "$root/$name/bin/pip" install --quiet --upgrade pip
    "$root/$name/bin/pip" install --quiet -r "$reqs"
  fi
  stamp_of "$name" > "$root/$name/.imgfeed-stamp"
  exec {lock}>&-
done
