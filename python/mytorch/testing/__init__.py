"""mytorch testing tools: the operator alignment suite (python -m mytorch.testing.align)."""
