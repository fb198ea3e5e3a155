#!/usr/bin/env bash
# The CPU benchmark committed under docs/results/cpu-<date>/ and the compare report built from it.
# Run from the repository root. Takes about 30-60 minutes on a 2-core machine shared with other jobs.
# --price-per-hour 0.10 is an assumed on-demand price of a 2-vCPU EPYC cloud VM, not a quote.
# --torch-threads 1: on this shared 2-core machine PyTorch with 2 OpenMP threads slowed down up to 20x
# when other processes held the cores (measured: 6.3 s vs 0.28 s per yolov8n image); ONNX Runtime keeps its default.
set -euo pipefail
DATE=${DATE:-$(date -u +%Y-%m-%d)}
OUT=docs/results/cpu-$DATE
export YOLO_OFFLINE=1
campusguard bench \
  --models yolov8n.yaml,yolov8s.yaml --backends onnxruntime,torch --precisions fp32,int8 --batch 1,8 --imgsz 640 \
  --device cpu --scenarios single-stream,offline,multi-stream --streams 4 \
  --warmup 2 --iters 10 --min-seconds 8 --repeat 2 --price-per-hour 0.10 --torch-threads 1 \
  --machine cpu-amd-epyc-2vcpu \
  --notes "2 vCPU AMD EPYC VM shared with other jobs (a training run, other benchmarks) during the run; see contention per combination" \
  --out "$OUT"
campusguard compare docs/results --baseline cpu-amd-epyc-2vcpu --out docs/results/report
