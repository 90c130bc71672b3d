#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, in ./build-asan), makes their seed corpora from
# the model zoo, the examples and the test fixtures, and runs each target.
#
#   scripts/fuzz.sh                          every target, 60 s each
#   scripts/fuzz.sh npy plan_json --seconds 600
#   scripts/fuzz.sh --runs 1000000 onnx_import   stop after N executions instead
#   scripts/fuzz.sh --runs 50000 --seed 1        reproducible: the same inputs on every machine (CI)
#
# Corpora grow in build-asan/fuzz/<target>/corpus across runs; a crash is saved as
# build-asan/fuzz/<target>/crash-* : fix it, then copy the input into tests/fuzz/regressions/<target>/
# so the normal suite replays it. Prints, per target, executions, coverage (cov) and features (ft).
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=(onnx_import plan_json schedule_text cluster_yaml train_config pipedream_graph checkpoint npy)
seconds=60
runs=-1
seed=0
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seconds=*) seconds="${1#*=}"; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --runs=*) runs="${1#*=}"; shift ;;
    --seed) seed="$2"; shift 2 ;;
    --seed=*) seed="${1#*=}"; shift ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *)
      if [[ " ${ALL[*]} " != *" $1 "* ]]; then echo "fuzz.sh: unknown target '$1' (targets: ${ALL[*]})" >&2; exit 2; fi
      targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${ALL[@]}")

scripts/setup.sh
scripts/build.sh --sanitize=address,undefined --target graphpipe $(printf 'fuzz_%s ' "${targets[@]}")
B=build-asan
G=$B/cli/graphpipe
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# ---- seed corpora (regenerated each run; small, made from what the project ships) ----------------
seeds=$B/fuzz/seeds
rm -rf "$seeds"
mkdir -p "$seeds"
for t in "${ALL[@]}"; do mkdir -p "$seeds/$t"; cp tests/fuzz/regressions/$t/* "$seeds/$t/" 2>/dev/null || true; done
need() { [[ " ${targets[*]} " == *" $1 "* ]]; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if need onnx_import || need plan_json || need schedule_text || need checkpoint; then
  for m in mlp inception dlrm; do "$G" models export $m --size tiny --out "$work/$m.onnx" >/dev/null; done
  cp "$work/mlp.onnx" "$work/inception.onnx" "$seeds/onnx_import/"  # under -max_len
  /usr/bin/python3 tests/fuzz/make_onnx_seeds.py "$seeds/onnx_import"
fi
if need plan_json || need schedule_text; then
  for m in mlp inception dlrm; do
    for d in 1 2 4; do
      for p in gpp pipedream piper balanced; do
        "$G" partition "$work/$m.onnx" --devices $d --batch 32 --planner $p -o "$seeds/plan_json/$m-$d-$p.json" \
          >/dev/null 2>&1 || true
      done
    done
  done
  cp tests/fuzz/fixed_plan.json "$seeds/plan_json/"
  for p in gpipe 1f1b interleaved graph-1f1b zb; do
    "$G" schedule tests/fuzz/fixed_plan.json --policy $p -o "$seeds/schedule_text/$p.txt" >/dev/null 2>&1 || true
  done
fi
if need cluster_yaml; then cp examples/clusters/*.yaml "$seeds/cluster_yaml/" 2>/dev/null || true; fi
if need train_config; then cp examples/*.yaml "$seeds/train_config/"; fi
if need pipedream_graph; then
  for f in ../shared/data/pipedream-profiles/*/graph.txt tests/fuzz/seeds/pipedream_graph/*; do
    [[ -f "$f" ]] && head -c 8192 "$f" > "$seeds/pipedream_graph/$(basename "$(dirname "$f")")-$(basename "$f")"
  done
fi
if need checkpoint; then
  cat > "$work/ckpt.yaml" <<YAML
model: {zoo: mlp, size: tiny}
optimizer: adam
lr: 0.001
batch: 8
steps: 1
checkpoint: {path: $work/mlp.gpck, every: 1}
YAML
  "$G" train --config "$work/ckpt.yaml" >/dev/null 2>&1 && head -c -8 "$work/mlp.gpck" > "$seeds/checkpoint/mlp.gpck.nochecksum"
fi
if need npy; then
  /usr/bin/python3 - "$seeds/npy" <<'PY'
import sys, numpy as np
out = sys.argv[1]
np.save(f"{out}/f4.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
np.save(f"{out}/i8.npy", np.arange(5, dtype=np.int64))
np.save(f"{out}/f8.npy", np.ones((2, 2, 2)))
np.save(f"{out}/i4.npy", np.zeros((0, 3), dtype=np.int32))
np.save(f"{out}/scalar.npy", np.float32(1.5))
PY
fi

# ---- run -----------------------------------------------------------------------------------------
printf '%-16s %10s %8s %8s %8s  %s\n' target executions cov ft corpus result
status=0
for t in "${targets[@]}"; do
  dir=$B/fuzz/$t
  mkdir -p "$dir/corpus"
  dict=()
  [[ -f tests/fuzz/dicts/$t.dict ]] && dict=(-dict=tests/fuzz/dicts/$t.dict)
  log=$dir/last.log
  limit=(-max_total_time="$seconds")
  ((runs > 0)) && limit=(-runs="$runs")
  if "$B/tests/fuzz/fuzz_$t" "$dir/corpus" "$seeds/$t" ${dict[@]+"${dict[@]}"} "${limit[@]}" \
      -seed="$seed" -rss_limit_mb=3072 -malloc_limit_mb=1024 -timeout=20 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$dir/" >"$log" 2>&1; then
    result=ok
  else
    result="FAILED: see $log and $dir/crash-*"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.*corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  printf '%-16s %10s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result"
done
exit $status
