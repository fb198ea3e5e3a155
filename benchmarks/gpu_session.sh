#!/usr/bin/env bash
# One prepared session on a lent NVIDIA GPU (the device tool), in priority order:
#   1. train the default-model recipe (scripts/train_default_model.sh: synth seed 0, 3000 images,
#      YOLOv8n, imgsz 320, batch 16, 25 epochs) on cuda:0 and export it to ONNX;
#   2. the GPU tests (torch backend on the GPU vs CPU, device errors, parity);
#   3. a bench matrix (yolov8n/s/m, torch fp32/fp16, batch 1/8/32; ONNX Runtime recorded as
#      unavailable: onnxruntime-gpu cannot be carried there).
# Everything goes to $OUT (at most 8 files). Needs .whl/ (Python 3.12 wheels of ultralytics,
# ultralytics-thop, onnxslim, faster-coco-eval, pydantic) and .gpu/best.pt carried with the tree.
set -u
export PYTHONUNBUFFERED=1 YOLO_OFFLINE=1 YOLO_AUTOINSTALL=false CAMPUSGUARD_CACHE=/tmp/cgcache
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT/bench"
START=$SECONDS; BUDGET=${BUDGET:-560}
left() { echo $(( BUDGET - (SECONDS - START) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site CAMPUSGUARD_FALL_PT=$PWD/.gpu/best.pt
cg() { python3 -m campusguard.cli.main "$@"; }
S="$OUT/session.log"
{
  echo "== $(date -u +%FT%TZ) nvidia-smi"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  nproc; python3 -c "import torch, onnxruntime; print('torch', torch.__version__, 'ort', onnxruntime.__version__, onnxruntime.get_available_providers())"
  echo "== synth (seed 0, 3000 images)"; time cg synth --out /tmp/syn --images 3000 --videos 0 --seed 0 --val-fraction 0.05 | tail -2
  echo "== train default recipe on cuda:0"
  timeout 300 python3 -c "
import time
from campusguard.train.trainer import train
t = time.time()
r = train('yolov8n', '/tmp/syn/data.yaml', epochs=25, imgsz=320, batch=16, accumulate=1, device='0', workers=8,
          out='/tmp/run', cache='ram', seed=0, overrides={'plots': False})
print('train+export seconds', round(time.time() - t, 1)); print(r)
" 2>&1 | grep -vE 'it/s|s/it' | tail -40
  cp /tmp/run/weights/best.onnx "$OUT/default-gpu-e25.onnx" && cat /tmp/run/results.csv
  echo "== doctor --device cuda:7 (an ordinal that does not exist)"; cg doctor --no-torch --device cuda:7 >/dev/null; echo "exit code $?"
  echo "== predict on cuda:0 with ONNX Runtime (no onnxruntime-gpu here)"; cg predict yolov8n.yaml /tmp/syn/images/val/$(ls /tmp/syn/images/val | head -1) --device cuda:0 --out /tmp/p; echo "exit code $?"
  echo "== GPU tests ($(left) s left)"
  timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/backends/test_backends_gpu.py tests/models/test_models_parity_ultralytics.py 2>&1 | tail -15
} > "$S" 2>&1
cg doctor --json > "$OUT/doctor.json" 2>>"$S"
echo "== bench ($(left) s left)" >> "$S"
timeout $(( $(left) - 5 )) python3 -m campusguard.cli.main bench --models yolov8n.yaml,yolov8s.yaml,yolov8m.yaml --backends torch,onnxruntime \
  --precisions fp32,fp16 --batch 1,8,32 --device cuda:0 --warmup 5 --iters 20 --min-seconds 1 \
  --price-per-hour 4.0 --machine nvidia-h200 --out "$OUT/bench" >> "$S" 2>&1
echo "bench exit $? after $((SECONDS - START)) s" >> "$S"
