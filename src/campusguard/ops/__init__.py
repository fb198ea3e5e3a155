"""Pure array operations: box maths, pre-processing and post-processing."""
