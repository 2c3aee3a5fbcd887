#!/usr/bin/env bash
# The Python package's tests: builds the `imgfeed` binary (the tests compare against it) and
# the package's wheel, checks the wheel is self-contained (python/check_wheel.py: its native
# module needs no library beyond glibc's, carries no debug info), installs it into a fresh
# virtual environment and runs pytest there — both with a PATH without cargo/rustc, as on a
# training node; then installs the same wheel into each training framework's environment that
# python/envs.sh has made (mindspore, torch, ray: cached, large) and runs that framework's
# tests in it. A framework whose environment is absent is skipped, with the command that makes it.
#   bash python/test.sh [PYTEST ARGS]        (VENV=DIR to pick the fresh environment's folder)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin imgfeed
export IMGFEED_BIN="$PWD/target/release/imgfeed"

# The wheel, by the standard PEP 517 path (maturin's settings are in python/pyproject.toml).
rm -rf target/wheels/python-test
python3 -m pip wheel --quiet --no-deps -w target/wheels/python-test ./python
wheel=$(ls target/wheels/python-test/imgfeed-*.whl)
echo "python/test.sh: built $wheel"
python3 python/check_wheel.py "$wheel"

# The fresh environment: made, filled and tested with no Rust on the PATH.
VENV="${VENV:-target/python-venv}"
VENV_ABS="$(pwd)/$VENV"
python=$(python3 -c 'import sys; print(sys.executable)')
norust="$VENV_ABS/bin:/usr/bin:/bin"
for tool in cargo rustc; do
  if found=$(env PATH="$norust" sh -c "command -v $tool"); then
    echo "python/test.sh: cannot test the install without Rust: $found is on $norust" >&2
    exit 1
  fi
done
rm -rf "$VENV_ABS"
"$python" -m venv "$VENV_ABS"
env PATH="$norust" "$VENV_ABS/bin/pip" install --quiet --upgrade pip
env PATH="$norust" "$VENV_ABS/bin/pip" install --quiet "$wheel" pytest pillow
# As on a machine without the system libjpeg: where this runs as root, a private mount
# namespace hides the system's libjpeg.so.62 while the installed wheel decodes JPEGs.
jpeg=$( (/sbin/ldconfig -p || true) | awk '/libjpeg\.so\.62 /{p = $NF} END {print p}')
if [[ "$(id -u)" == 0 && -n "$jpeg" ]] && unshare -m true 2>/dev/null; then
  unshare -m sh -c 'mount --bind /dev/null "$(realpath "$1")" && exec env PATH="$2" "$3" python/check_wheel.py --decode' \
    sh "$jpeg" "$norust" "$VENV_ABS/bin/python"
else
  echo "python/test.sh: the wheel decodes with the system libjpeg present (hiding it needs root and unshare -m)"
  env PATH="$norust" "$VENV_ABS/bin/python" python/check_wheel.py --decode
fi
cd python/tests
env PATH="$norust" "$VENV_ABS/bin/python" -m pytest -q "$@"

# The frameworks' own tests, each in its cached environment.
# Ray binds the machine's interface address: its two-node cluster runs in a network namespace
# holding only loopback (unshare -n, as root, with ip from iproute2), else its tests are skipped.
export IMGFEED_WHEEL="$(cd ../.. && pwd)/$wheel"   # the ray tests install it through runtime_env
for fw in mindspore torch ray; do
  if env=$(bash ../envs.sh --path "$fw"); then
    "$env/bin/pip" install --quiet --no-deps --force-reinstall "../../$wheel"
    if [[ "$fw" == ray ]]; then
      if [[ "$(id -u)" == 0 ]] && command -v ip >/dev/null && unshare -n true 2>/dev/null; then
        echo "python/test.sh: the ray tests, in $env, in a loopback-only network namespace"
        timeout 1200 unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$env/bin/python" -m pytest -q -m ray "$@"
      else
        echo "python/test.sh: SKIPPED the ray tests: they need a loopback-only network namespace (root, unshare -n, ip from iproute2)"
      fi
      continue
    fi
    echo "python/test.sh: the $fw tests, in $env"
    "$env/bin/python" -m pytest -q -m "$fw" "$@"
  else
    echo "python/test.sh: SKIPPED the $fw tests: its environment is not made (bash python/envs.sh $fw, a large download)"
  fi
done
