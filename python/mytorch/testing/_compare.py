"""The tolerance rule, for the tests and the testing tools: it lives in mytorch._tolerance (Note [Alignment
tolerance]), the product module mytorch.optimize checks its swaps with; mytorch.testing is a leaf that product code
never imports (test/test_layering.py)."""

from .._tolerance import (  # noqa: F401
    FLOORS,
    Errors,
    assert_aligned,
    assert_sum_within_bound,
    compare_outputs,
    compare_tensor,
    misalignment,
    phase_aligned,
    same_complement,
    select_equivalent,
    sum_error_bound,
)
