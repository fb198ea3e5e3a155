"""Inference backends: ONNX Runtime (production) and PyTorch (reference)."""
