"""Benchmarks: the harness, result files, the cross-machine comparison and the profiler.

Kit code (no app, no CLI imports). The pieces, each usable on its own:

- `stats`: latency statistics (mean, p50/p90/p99, min, max, std), slopes, deltas, cost;
- `timing`: the timed loop (at least N iterations and S seconds) and its own overhead;
- `memory`: host RSS and device memory sampled through a run (peak and slope), CPU contention;
- `inputs`: frames, multi-stream sources and INT8 calibration images;
- `prepare`: skip rules and the ONNX file of each precision (export, FP16, INT8; cached);
- `harness`: the matrix of combinations, first inference apart from steady state, scenarios;
- `results`: the versioned JSON result (``result.schema.json``) and its CSV;
- `compare` / `report`: merge machines, deltas against a baseline, Markdown/HTML with plots;
- `profile`: time per operator type and node (ONNX Runtime profiler, torch.profiler).

Typical use::

    from campusguard.bench.harness import BenchSettings, plan_matrix, run_matrix
    combos = plan_matrix(["yolov8n.yaml"], ["onnxruntime"], ["fp32", "int8"], [1, 8])
    records = run_matrix(combos, BenchSettings(device="cpu"), frames, calibration=calib_paths)
"""
