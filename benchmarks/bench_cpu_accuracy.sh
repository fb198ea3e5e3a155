#!/usr/bin/env bash
# Accuracy and INT8 mAP loss of a real trained model on this CPU: the bundled default model
# (YOLOv8n trained on synthetic campus data, imgsz 320) in FP32 and INT8 on ONNX Runtime, scored
# on the seed-1000 evaluation split of the model card (500 val images). INT8 is calibrated on the
# *train* split of that set (disjoint from val). Run from the repository root.
set -euo pipefail
DATE=${DATE:-$(date -u +%Y-%m-%d)}
DATA_DIR=${DATA_DIR:-/tmp/campusguard-synth-seed1000}
export YOLO_OFFLINE=1
if [ ! -f "$DATA_DIR/data.yaml" ]; then
  campusguard synth --out "$DATA_DIR" --images 1000 --videos 0 --seed 1000 --val-fraction 0.5
fi
campusguard bench \
  --models src/campusguard/models/assets/campusguard-default.onnx --backends onnxruntime,torch \
  --precisions fp32,int8 --batch 1 --imgsz 320 --device cpu \
  --data "$DATA_DIR/data.yaml" --calib "$DATA_DIR/images/train" --calib-count 64 \
  --warmup 2 --iters 10 --min-seconds 5 --repeat 2 --price-per-hour 0.10 \
  --machine cpu-amd-epyc-2vcpu \
  --notes "accuracy run: bundled default model on the seed-1000 synthetic val split; CPU shared with other jobs" \
  --out "docs/results/cpu-$DATE/accuracy"
