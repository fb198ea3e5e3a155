#!/usr/bin/env bash
# Reproduce CampusGuard's bundled default model (src/campusguard/models/assets/campusguard-default.onnx).
#
#   bash scripts/train_default_model.sh [WORKDIR] [EPOCHS] [DEVICE]
#
# DEVICE defaults to cpu (the reference recipe: about an hour on a quiet 2-core CPU);
# WORKERS (default 2) sets data loader workers; CAMPUSGUARD overrides the CLI command.
#
# 1. renders the training set (seed 0) and an independent validation set (seed 1000),
# 2. trains YOLOv8n from random weights with Ultralytics' trainer through `campusguard train`
#    (CPU, imgsz 320, batch 16, images cached in RAM), exporting best.pt to ONNX
#    (dynamic shape, opset 17, simplified, Ultralytics metadata),
# 3. scores the export on the seed-1000 split with `campusguard val` and Ultralytics' own val,
# 4. copies the ONNX into the package assets.
# Nothing is downloaded. Measured time and metrics are in src/campusguard/models/assets/MODEL_CARD.md.
set -euo pipefail

WORK="${1:-/tmp/campusguard-default}"
EPOCHS="${2:-25}"
DEVICE="${3:-cpu}"
WORKERS="${WORKERS:-2}"
CG="${CAMPUSGUARD:-campusguard}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
export YOLO_OFFLINE=1 YOLO_AUTOINSTALL=false

mkdir -p "$WORK"
date -u +"start %Y-%m-%dT%H:%M:%SZ"
$CG synth --out "$WORK/synth-train" --images 3000 --videos 0 --seed 0 --val-fraction 0.05
$CG synth --out "$WORK/synth-val" --images 1000 --videos 0 --seed 1000 --val-fraction 0.5

SECONDS=0
$CG train --model yolov8n --data "$WORK/synth-train/data.yaml" --epochs "$EPOCHS" --imgsz 320 \
    --batch 16 --accumulate 1 --device "$DEVICE" --workers "$WORKERS" --cache ram --seed 0 --out "$WORK/run"
echo "train+export wall time: ${SECONDS} s"

$CG val --model "$WORK/run/weights/best.onnx" --data "$WORK/synth-val/data.yaml" --imgsz 320 --device cpu
python "$REPO/scripts/val_parity.py" --model "$WORK/run/weights/best.onnx" --data "$WORK/synth-val/data.yaml" --imgsz 320

mkdir -p "$REPO/src/campusguard/models/assets"
cp "$WORK/run/weights/best.onnx" "$REPO/src/campusguard/models/assets/campusguard-default.onnx"
ls -l "$REPO/src/campusguard/models/assets/campusguard-default.onnx"
date -u +"done %Y-%m-%dT%H:%M:%SZ"
