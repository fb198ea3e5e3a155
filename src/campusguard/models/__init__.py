"""Model resolution (ONNX files, Ultralytics checkpoints, architecture names, the bundled default), export and quantisation."""
