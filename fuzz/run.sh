#!/usr/bin/env bash
# Seed every fuzz target's corpus from the repository's fixtures, then run each target for
# SECONDS (default 20) with cargo-fuzz. Works on the stable toolchain (RUSTC_BOOTSTRAP=1
# lets cargo-fuzz pass its -Z flags). Exits non-zero on the first crash; the crashing
# input is left in fuzz/artifacts/<target>/.
#   fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-20}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(decode decode_jpeg decode_png cifar_record cifar_pickle pipeline_file webdataset_index tfrecord mindrecord parquet)
fi
fx=../fixtures
seed() { # seed TARGET FILE...
  mkdir -p "corpus/$1"
  shift
  for f in "$@"; do
    [ -f "$f" ] && cp -f "$f" "corpus/$t/$(echo "${f#../}" | tr / _)"
  done
  return 0
}
for t in "${targets[@]}"; do
  case "$t" in
    decode) seed "$t" $fx/formats/*.* $fx/edge/*.jpg $fx/edge/*.png $fx/bad/*.jpg $fx/bad/*.png ;;
    decode_jpeg) seed "$t" $fx/formats/*.jpg $fx/edge/*.jpg $fx/bad/*.jpg ;;
    decode_png) seed "$t" $fx/formats/*.png $fx/edge/*.png $fx/bad/png_*.png $fx/bad/truncated.png ;;
    webdataset_index) seed "$t" $fx/webdataset/*.tar ;;
    cifar_record) seed "$t" $fx/cifar10/test_batch.bin $fx/cifar100/test.bin ;;
    cifar_pickle) seed "$t" $fx/cifar10_py/test_batch $fx/cifar100_py/test \
      $fx/cifar_py_variants/*/*/test* ;;
    pipeline_file) seed "$t" ../pipelines/*.toml ;;
    tfrecord) seed "$t" $fx/records/small.tfrecord ;;
    mindrecord) seed "$t" $fx/records/small.mindrecord0 $fx/records/multi_blob.mindrecord ;;
    parquet) seed "$t" $fx/records/small.parquet $fx/fuzzed/parquet_*.parquet ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
done
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O
mkdir -p logs
for t in "${targets[@]}"; do
  echo "fuzz: $t for ${secs}s ($(ls "corpus/$t" | wc -l) seed inputs)"
  # -rss_limit_mb: a decoder that allocates past the pixel limit is a crash too.
  if ! cargo fuzz run -O "$t" -- -max_total_time="$secs" -rss_limit_mb=1024 -timeout=10 \
      -print_final_stats=1 >"logs/$t.log" 2>&1; then
    tail -n 40 "logs/$t.log" >&2
    echo "fuzz: $t FAILED (input in fuzz/artifacts/$t/, log in fuzz/logs/$t.log)" >&2
    exit 1
  fi
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^#[0-9]+ +DONE" "logs/$t.log" | sed 's/^/  /' || true
done
echo "fuzz: every target ran ${secs}s without a crash"
