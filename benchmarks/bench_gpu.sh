#!/usr/bin/env bash
# Short GPU benchmark for one NVIDIA (or AMD) GPU machine: PyTorch FP32 and FP16 of yolov8n/s/m at
# batch 1, 8 and 32, plus the multi-stream scenario; ONNX Runtime rows are recorded as skipped when
# the installed ONNX Runtime has no GPU provider (the CPU-only wheel). Designed to finish in < 4 minutes
# on an H200 with only torch, ultralytics, onnxruntime (CPU), numpy and opencv installed.
#
# Usage: benchmarks/bench_gpu.sh [OUT_DIR] [MACHINE]
#   OUT_DIR  default docs/results/nvidia-h200
#   MACHINE  default nvidia-h200 (the name `campusguard compare --baseline` uses; the same name as the
#            committed docs/results/nvidia-h200 run, so a new run replaces it per combination)
# Without an installed campusguard, run from the repository root with PYTHONPATH=src.
# --price-per-hour 4.0 is an assumed on-demand price of one H200 GPU, not a quote.
set -euo pipefail
OUT=${1:-docs/results/nvidia-h200}
MACHINE=${2:-nvidia-h200}
export YOLO_OFFLINE=1
PY=${PYTHON:-python3}
"$PY" -m campusguard.cli.main bench \
  --models yolov8n.yaml,yolov8s.yaml,yolov8m.yaml --backends torch,onnxruntime --precisions fp32,fp16 --batch 1,8,32 --imgsz 640 \
  --device cuda:0 --scenarios single-stream,offline,multi-stream --streams 4 \
  --warmup 3 --iters 20 --min-seconds 1.5 --repeat 2 --price-per-hour 4.0 \
  --machine "$MACHINE" --notes "one GPU of the machine; pre- and post-processing on its CPU; torch backend (onnxruntime-gpu not installed)" \
  --out "$OUT"
