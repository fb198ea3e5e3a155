#!/usr/bin/env bash
# Carry ONNX Runtime's CUDA build (the onnxruntime-gpu wheel, about 255 MB) to the device machine,
# whose calls carry at most 64 MiB each (the working tree included), in consecutive calls while the
# machine stays warm. Steps (docs/gpu.md lists the calls):
#
#   here:   scripts/ort_gpu_wheel.sh pack [VERSION] [PART_MIB]
#             downloads the wheel for the device image's Python (3.12, manylinux x86_64) into the
#             ignored folder .gpu/ortgpu/, keeps the onnxruntime package without the TensorRT
#             provider library, packs it as tar.xz and splits it into parts of PART_MIB (default
#             36) under .gpu/ortgpu/parts/, with a SHA256SUMS manifest. Nothing enters git.
#   there:  scripts/ort_gpu_wheel.sh receive      (one call per part, carrying .gpu/ortgpu/parts/part-NN
#             and .gpu/ortgpu/parts/SHA256SUMS) copies the carried part to /tmp/ortgpu-parts, which
#             outlives the call while the machine is warm, and lists what has arrived;
#   there:  scripts/ort_gpu_wheel.sh install      checks every part against the manifest, reassembles
#             and unpacks the package into /tmp/ortgpu-site (put it first on PYTHONPATH), puts the
#             image's CUDA 13 libraries on LD_LIBRARY_PATH (ort_env prints the exports) and prints
#             the providers that this ONNX Runtime offers, or the exact error.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/.gpu/ortgpu
PARTS=$HERE/parts
RECEIVED=${ORT_GPU_PARTS:-/tmp/ortgpu-parts}
SITE=${ORT_GPU_SITE:-/tmp/ortgpu-site}

pack() {
  local version=${1:-1.31.1} part_mib=${2:-36}
  mkdir -p "$HERE"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$HERE" "onnxruntime-gpu==$version"
  local wheel
  wheel=$(ls "$HERE"/onnxruntime_gpu-"$version"-cp312-*.whl)
  rm -rf "$HERE/unpacked" "$PARTS" && mkdir -p "$HERE/unpacked" "$PARTS"
  # the TensorRT provider needs TensorRT, which the device image lacks; the rest is the CUDA build
  python3 -m zipfile -e "$wheel" "$HERE/unpacked"
  rm -f "$HERE"/unpacked/onnxruntime/capi/libonnxruntime_providers_tensorrt.so
  tar -C "$HERE/unpacked" -cf - onnxruntime "$(basename "$wheel" .whl | sed 's/-cp312.*//').dist-info" \
    | xz -6 -T2 > "$HERE/ortgpu.tar.xz"
  split -b "${part_mib}M" -d -a 2 "$HERE/ortgpu.tar.xz" "$PARTS/part-"
  (cd "$PARTS" && sha256sum part-* > SHA256SUMS)
  rm -f "$HERE/ortgpu.tar.xz"  # the parts are what travels
  rm -rf "$HERE/unpacked"
  ls -l "$PARTS"
  echo "carry .gpu/ortgpu/parts/part-NN and .gpu/ortgpu/parts/SHA256SUMS in one call per part"
}

receive() {
  mkdir -p "$RECEIVED"
  local got=0
  for f in "$PARTS"/part-* "$PARTS"/SHA256SUMS; do
    [ -f "$f" ] || continue
    cp "$f" "$RECEIVED"/ && got=$((got + 1))
  done
  echo "received $got file(s); now in $RECEIVED:"
  ls -l "$RECEIVED"
}

ort_env() {
  # the image's CUDA 13 runtime, cuBLAS, cuDNN, cuFFT and cuRAND come with PyTorch's nvidia packages
  local sp libs
  sp=$(python3 -c 'import site; print(site.getsitepackages()[0])')
  libs=$(find "$sp/nvidia" "$sp/torch/lib" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
  echo "export PYTHONPATH=$SITE\${PYTHONPATH:+:\$PYTHONPATH} LD_LIBRARY_PATH=$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
}

install() {
  cd "$RECEIVED"
  local want
  want=$(grep -c ' part-' SHA256SUMS)
  if ! grep ' part-' SHA256SUMS | sha256sum -c --quiet; then
    echo "parts missing or damaged: $(ls part-* 2>/dev/null | wc -l) of $want here" >&2
    return 1
  fi
  rm -rf "$SITE" && mkdir -p "$SITE"
  cat part-* | xz -d | tar -C "$SITE" -xf -
  eval "$(ort_env)"
  echo "ldd of the CUDA provider (missing libraries say why CUDA would not load):"
  ldd "$SITE/onnxruntime/capi/libonnxruntime_providers_cuda.so" | grep -E 'not found|cudnn|cublas|cudart' || true
  # a session on a one-node model: ONNX Runtime names the library it cannot load (stderr) and falls back
  python3 -c "
import onnx, onnxruntime as ort
from onnx import TensorProto, helper
print('onnxruntime', ort.__version__, 'from', ort.__file__)
print('providers', ort.get_available_providers())
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [1])
g = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], 'g', [x], [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)], ir_version=8)
s = ort.InferenceSession(m.SerializeToString(), providers=['CUDAExecutionProvider', 'CPUExecutionProvider'])
print('session providers', s.get_providers())
raise SystemExit(0 if s.get_providers()[0] == 'CUDAExecutionProvider' else 'CUDAExecutionProvider did not load')
"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  receive) receive ;;
  install) install ;;
  env) ort_env ;;
  *) echo "usage: $0 pack [VERSION] [PART_MIB] | receive | install | env" >&2; exit 2 ;;
esac
