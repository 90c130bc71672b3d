#!/usr/bin/env bash
# Sets up, builds, and runs graphpipe's main job on a bundled model, on CPU:
#   export the multi-modal transformer (MMT) → inspect → partition the paper-size MMT into a graph
#   of stages (GPP) → compare with the sequential planners → schedule + check + simulate (SVG and
#   Chrome-trace timelines) → train the small MLP end to end and export the trained ONNX →
#   train the small MMT as a graph of stages on 2 worker threads, measured against predicted.
# Outputs land in out/demo (or $GP_DEMO_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --target graphpipe
GP=${GP_BUILD_DIR:-build}/cli/graphpipe
OUT=${GP_DEMO_DIR:-out/demo}
mkdir -p "$OUT"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "the model zoo"
$GP models list

step "export the small MMT (4 transformer branches over 4 modalities, concat, head) and inspect it"
$GP models export mmt --size small --out "$OUT/mmt_small.onnx"
$GP inspect "$OUT/mmt_small.onnx"

step "partition the paper-size MMT (411M parameters; shapes only) over 8 devices of 4 GiB"
$GP models export mmt --size paper --shape-only --out "$OUT/mmt_paper.onnx"
$GP partition "$OUT/mmt_paper.onnx" --devices 8 --memory 4GiB --batch 256 -o "$OUT/plan.json" --dot "$OUT/plan.dot"

step "GPP against the sequential planners on the same cost model"
$GP compare "$OUT/mmt_paper.onnx" --devices 8 --memory 4GiB --batch 256 --time-limit 30

step "schedule (fastest policy that fits memory), check it, simulate it"
$GP schedule "$OUT/plan.json" --policy auto -o "$OUT/schedule.txt" --svg "$OUT/timeline.svg" --trace "$OUT/trace.json"
$GP schedule --check "$OUT/schedule.txt" --plan "$OUT/plan.json"
$GP simulate "$OUT/plan.json" --schedule "$OUT/schedule.txt"

step "train the small MLP on CPU (synthetic teacher task), export the trained model"
$GP train --config examples/train_mlp.yaml --export-onnx "$OUT/mlp.trained.onnx"
$GP inspect "$OUT/mlp.trained.onnx" | head -5

step "train the small MMT partitioned by GPP on 2 worker threads: measured against predicted"
$GP train --config examples/train_mmt_pipeline.yaml --devices 2 --trace "$OUT/mmt_measured.json" \
  --export-onnx "$OUT/mmt.trained.onnx"

printf '\nDone. Files in %s: plan.json, plan.dot, schedule.txt, timeline.svg (open in a browser),\ntrace.json (predicted) and mmt_measured.json (measured; open both in ui.perfetto.dev),\nmlp.trained.onnx, mmt.trained.onnx\n' "$OUT"
