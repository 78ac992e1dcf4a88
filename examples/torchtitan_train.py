"""TorchTitan's trainer on torch 2.13 (issue 54; docs/torchtitan.md): torchtitan 0.3.0's train.py, with what it expects
of a newer torch than the one mytorch pins supplied here and nothing else. Run it where you would run
`python -m torchtitan.train`:

    torchrun --nproc_per_node 2 examples/torchtitan_train.py --module llama3 \
        --config llama3_debugmodel --parallelism.spmd_backend partial_dtensor ...

mytorch itself needs no patch: TorchTitan picks the `mytorch` device and its c10d backend (torch's backend autoload
imports mytorch), and its compiled flex attention runs on the sim (Note [Compiled flex attention on the sim's C++
path], mytorch/_flex.py). Each shim below is applied only where torch lacks the function.
"""

from __future__ import annotations

import torch.distributed as dist


def _set_timeout(timeout, group=None) -> None:
    """torch.distributed.set_timeout (newer torch): the group's timeout, through ProcessGroup.set_timeout (2.13)."""
    from torch.distributed.distributed_c10d import _get_default_group

    (group if group is not None else _get_default_group()).set_timeout(timeout)


def _microbatch_step(original):
    """Pipeline schedules' step(arg_mbs=, kwarg_mbs=, target_mbs=) (newer torch: microbatches already split, as
    torchtitan 0.3.0's trainer passes them), on torch 2.13's whole-batch step: the same per-iteration set-up, then
    the schedule's own _step_microbatches. Whole-batch calls go to torch's step unchanged."""

    def step(
        self,
        *args,
        arg_mbs=None,
        kwarg_mbs=None,
        target_mbs=None,
        losses=None,
        return_outputs=True,
        loss_kwargs=None,
        **kwargs,
    ):
        if arg_mbs is None and kwarg_mbs is None and target_mbs is None:
            return original(
                self, *args, losses=losses, return_outputs=return_outputs, loss_kwargs=loss_kwargs, **kwargs
            )
        stages = getattr(self, "_stages", None) or [self._stage]
        for stage in stages:
            stage.has_backward = self._has_backward
            stage.clear_runtime_states()
        self._step_microbatches(arg_mbs, kwarg_mbs, target_mbs, losses, return_outputs, loss_kwargs=loss_kwargs)
        for stage in stages:
            if stage.is_last and return_outputs:
                return self._merge_outputs(stage.output_chunks)
        return None

    step._microbatches = True
    return step


def apply_shims() -> list[str]:
    import inspect

    from torch.distributed.pipelining import schedules

    applied = []
    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = _set_timeout
        applied.append("torch.distributed.set_timeout")
    for cls in (schedules.PipelineScheduleSingle, schedules.PipelineScheduleMulti):
        if "arg_mbs" not in inspect.signature(cls.step).parameters:
            cls.step = _microbatch_step(cls.step)
            applied.append(f"{cls.__name__}.step(arg_mbs=...)")
    return applied


if __name__ == "__main__":
    import mytorch  # noqa: F401  (also imported by torch's backend autoload)

    apply_shims()
    from torchtitan.train import main

    main()
