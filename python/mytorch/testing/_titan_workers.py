"""Rank bodies of test/test_torchtitan.py (issue 54): TorchTitan's own llama3 debug model, parallelized by
TorchTitan's own parallelize function (FSDP2 or TP) and trained a few steps with its varlen attention (torch.cuda's
varlen flash operator: mytorch's kernels), on mytorch ranks over the mytorch backend, or, as the reference, on CPU
ranks over Gloo from the same seeded weights, where varlen attention (which the CPU lacks) is the per-document
causal math of _cpu_varlen_attn."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from mytorch.testing._dist_workers import _init, _write

SEQ, BATCH, VOCAB = 64, 2, 2048


def _cpu_varlen_attn(q, k, v, cu_seq_q, cu_seq_k, max_q, max_k, *, scale=None, window_size=(-1, -1), **kwargs):
    """torch.nn.attention.varlen.varlen_attn for the CPU reference: causal attention per packed document (the
    window TorchTitan asks for, (-1, 0)), in float32, returned in the inputs' dtype as the flash kernels do; for the
    float64 reference in float64, not rounded."""
    acc = torch.get_default_dtype()
    if k.shape[1] != q.shape[1]:  # grouped-query attention: each key/value head serves q_heads / kv_heads heads
        k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for t in (k, v))
    cq, ck = cu_seq_q.tolist(), cu_seq_k.tolist()
    out = torch.empty(q.shape[0], q.shape[1], v.shape[-1], dtype=acc)
    for i in range(len(cq) - 1):
        qi, ki, vi = (
            t.to(acc).transpose(0, 1) for t in (q[cq[i] : cq[i + 1]], k[ck[i] : ck[i + 1]], v[ck[i] : ck[i + 1]])
        )
        s = qi @ ki.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        out[cq[i] : cq[i + 1]] = (torch.softmax(s, -1) @ vi).transpose(0, 1)
    return out if acc == torch.float64 else out.to(q.dtype)


def _exact_experts(self, x_RD, num_tokens_per_expert_E):
    """GroupedExperts' math without its bfloat16 casts, one expert at a time (torch._grouped_mm has no float64): the
    float64 reference's experts, so that the rule's golden value is the exact function and not TorchTitan's bfloat16
    rounding of it (which a fused activation rounds differently, and more accurately)."""
    w1, w2, w3 = (w.to_local() if hasattr(w, "to_local") else w for w in (self.w1_EFD, self.w2_EDF, self.w3_EFD))
    out = x_RD.new_zeros(x_RD.shape[0], w2.shape[1])
    start = 0
    for e, n in enumerate(num_tokens_per_expert_E.tolist()):
        rows = x_RD[start : start + n]
        out[start : start + n] = (F.silu(rows @ w1[e].T) * (rows @ w3[e].T)) @ w2[e].T
        start += n
    return out


def _batches(steps: int, repeat: bool = False, seq: int = SEQ):
    g = torch.Generator().manual_seed(5)
    out = []
    for _ in range(steps):
        tokens = torch.randint(0, VOCAB, (BATCH, seq + 1), generator=g)
        pos = torch.arange(seq).repeat(BATCH, 1)
        pos[0, 24:] -= 24  # documents of 24 and seq - 24 tokens in the first row, one of seq in the second
        out.append((tokens[:, :-1], tokens[:, 1:], pos))
    return [out[0]] * steps if repeat else out


MOE_LAYERS = 2  # of the qwen3 MoE debug model's 8 (64 experts, top-8 softmax routing): the test's time


# cp: torch's CP block mask needs the sequence to be a multiple of 2 ranks x flex's 128-token block
CP_SEQ = 256


def _model(converter=None, moe: bool = False, parallelism=None, attn: str = "varlen"):
    """TorchTitan's llama3 debug model, or (moe) its qwen3 MoE debug model cut to MOE_LAYERS layers, its sharding
    configured for `parallelism` (a ParallelismConfig) as TorchTitan's trainer does; converter: a
    MytorchFusedOpsConverter.Config or None."""
    if moe:
        from torchtitan.models.qwen3 import model_registry

        flavor = "debugmodel_moe"
    else:
        from torchtitan.models.llama3 import model_registry

        flavor = "debugmodel"
    converters = None if converter is None else [converter]
    config = model_registry(flavor, attn_backend=attn, converters=converters).model
    if moe:
        from torchtitan.models.common.moe import TokenChoiceTopKRouter

        config.layers = config.layers[:MOE_LAYERS]
        # TorchTitan's debug routing (round-robin experts, the scores still the router's): top-k routing is
        # discontinuous, and rounding differences of 1e-7 flip a few tokens' experts between any two runs (float32
        # against float64 included), which moves the loss by 1e-4 whichever run is the more accurate.
        for _fqn, router, _parent, _attr in config.traverse(TokenChoiceTopKRouter.Config):
            router._debug_force_load_balance = True
        if parallelism is not None:
            from types import SimpleNamespace

            config.update_from_config(config=SimpleNamespace(parallelism=parallelism))
    with torch.device("meta"):
        model = config.build()
    return model


def _train(model, device, steps, repeat=False, seq=SEQ, cp_mesh=None, loss_fn=None):
    """cp_mesh: TorchTitan's context parallelism over that mesh (each rank's loss is over its share of the tokens).
    loss_fn: a TorchTitan ChunkedLossWrapper (mytorch's fused LM head + cross-entropy), given the LM head and the
    model's hidden states as TorchTitan's trainer does; else cross-entropy over the model's logits."""
    if loss_fn is not None:
        loss_fn.set_lm_head(model.lm_head)
        model._skip_lm_head = True
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    losses = []
    for tokens, labels, pos in _batches(steps, repeat, seq):
        tokens, labels, pos = tokens.to(device), labels.to(device), pos.to(device)
        masks = model.get_attention_masks(positions=pos)
        if cp_mesh is not None:
            from torchtitan.distributed.context_parallel import prepare_context_parallel_input

            extra = {"positions": pos, "attention_masks": masks}
            tokens, labels, extra = prepare_context_parallel_input(tokens, labels, extra, cp_mesh, device)
            pos, masks = extra["positions"], extra["attention_masks"]
        logits = model(tokens, positions=pos, attention_masks=masks)

        if loss_fn is not None:
            loss = loss_fn(logits, labels, torch.tensor(labels.numel(), device=device))[0]
        else:
            if hasattr(logits, "full_tensor"):
                logits = logits.full_tensor()
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def _launcher_shims() -> None:
    """examples/torchtitan_train.py's shims of what torch 2.13 lacks (the pipeline schedules' microbatch step)."""
    import importlib.util
    import pathlib

    import mytorch

    path = pathlib.Path(mytorch.__file__).resolve().parents[2] / "examples" / "torchtitan_train.py"
    spec = importlib.util.spec_from_file_location("_torchtitan_train", path)
    launcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launcher)
    launcher.apply_shims()


def _train_pp(schedule, parts, device, steps, last: bool):
    """TorchTitan's trainer's pipeline step (Trainer.pp_forward_backward_step): a microbatch a row, its attention
    metadata made from its positions, the loss summed over microbatches and divided by the batch's tokens; the rank
    holding the last stage returns the losses, the other none."""
    _launcher_shims()
    params = [p for part in parts for p in part.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=False)
    losses = []
    for tokens, labels, pos in _batches(steps):
        tokens, labels, pos = tokens.to(device), labels.to(device), pos.to(device)
        kwarg_mbs = [
            {"positions": pos[i : i + 1], "attention_masks": parts[0].get_attention_masks(positions=pos[i : i + 1])}
            for i in range(BATCH)
        ]
        mb_losses = [] if last else None
        schedule.step(
            arg_mbs=[(tokens[i : i + 1],) for i in range(BATCH)] if schedule._stages[0].is_first else None,
            kwarg_mbs=kwarg_mbs,
            target_mbs=[labels[i : i + 1] for i in range(BATCH)] if last else None,
            losses=mb_losses,
            loss_kwargs={"global_valid_tokens": torch.tensor(labels.numel(), device=device)},
            return_outputs=False,
        )
        opt.step()
        opt.zero_grad()
        if last:
            losses.append(torch.stack(mb_losses).sum().item())
    return losses


def initial_weights(moe: bool = False) -> dict:
    """The model's seeded initial weights, made in float32 on the CPU (the same on every rank and device)."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        model = _model(moe=moe)
        model.to_empty(device="cpu")
        torch.manual_seed(0)
        model.init_weights(buffer_device=torch.device("cpu"))
        return {k: v.clone() for k, v in model.state_dict().items()}
    finally:
        torch.set_default_dtype(default)


def torchtitan_worker(rank: int, world: int, out: str, port: int, mode: str, steps: int, dev: str) -> None:
    """dev: "mytorch", or the references "cpu" (float32) and "cpu64" (the same run in float64). mode: "fsdp" or "tp"
    (llama3), or "ep" (the qwen3 MoE model, FSDP over the 2 ranks with its experts sharded over them: expert
    parallelism through TorchTitan's all-to-all dispatcher, or mytorch.distributed.ep's with the converter), with
    "+converter" for mytorch's fused ops (mytorch.torchtitan): on the mytorch run all of them, on the float32 CPU
    reference the same fused modules (mytorch.ops' CPU implementations) with TorchTitan's dispatcher, so that both
    compute the same function; the float64 reference is the unconverted model (the exact function)."""
    converter = loss_fn = None
    if mode.endswith("+converter") and dev != "cpu64":
        from mytorch.torchtitan import MytorchFusedOpsConverter, MytorchLinearCrossEntropyLoss

        converter = MytorchFusedOpsConverter.Config(token_dispatcher=dev == "mytorch")
        loss_fn = MytorchLinearCrossEntropyLoss.Config().build()
    mode = mode.removesuffix("+converter")
    if dev == "cpu64":
        torch.set_default_dtype(torch.float64)
        dev = "cpu"
        from torchtitan.models.common.moe import GroupedExperts

        GroupedExperts.forward = _exact_experts
    dist = _init(rank, world, port, backend="mytorch" if dev == "mytorch" else "gloo")
    import mytorch
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed import utils as dist_utils
    from torchtitan.models.llama3 import parallelize_llama
    from torchtitan.models.qwen3 import parallelize_qwen3

    moe, cp, pp, flex = mode == "ep", mode == "cp", mode == "pp", mode in ("cp", "flex")  # flex: cp's model, 1 rank
    state = initial_weights(moe)
    dist_utils.set_spmd_backend("partial_dtensor")
    dims = ParallelDims(
        dp_replicate=1,
        dp_shard=world if mode in ("fsdp", "ep") else 1,
        cp=world if cp else 1,
        tp=world if mode == "tp" else 1,
        pp=world if pp else 1,
        ep=world if moe else 1,
        world_size=world,
        spmd_backend="partial_dtensor",
    )
    if dev != "mytorch":
        import torchtitan.distributed.parallel_dims as pdm
        import torchtitan.models.common.attention as attention

        attention.varlen_attn = _cpu_varlen_attn
        # The CPU has flex attention for inference only: Inductor's C++ template makes no backward, and eager
        # flex_attention's device check refuses CPU tensors that require grad. The eager math that check guards (the
        # higher-order op's dense path) runs on any device, so the reference runs it, uncompiled and unchecked.
        import torch.nn.attention.flex_attention as flex_module

        attention.FlexAttention._compiled_flex_attn = attention.flex_attention
        flex_module._validate_device = lambda query, key, value: None
        pdm.device_type = "cpu"
    dims.build_mesh()
    parallelism = ParallelismConfig(
        spmd_backend="partial_dtensor",
        expert_parallel_degree=dims.ep,
        pipeline_parallel_degree=dims.pp,
        pipeline_parallel_schedule="Interleaved1F1B",
    )
    model = _model(converter, moe, parallelism, attn="flex" if flex else "varlen")
    common = dict(
        parallel_dims=dims,
        training=TrainingConfig(
            local_batch_size=BATCH, mixed_precision_param="float32", mixed_precision_reduce="float32"
        ),
        parallelism=parallelism,
        compile_config=CompileConfig(),
        ac_config=None,
        dump_folder=out,
    )
    if (
        pp
    ):  # TorchTitan's pipeline split (Interleaved1F1B: 2 stages a rank), each stage parallelized as its trainer does
        from torchtitan.components.loss import CrossEntropyLoss
        from torchtitan.distributed.pipeline_parallel import pipeline_llm

        loss_fn = CrossEntropyLoss.Config().build()
        schedule, parts, _first, last = pipeline_llm(
            model,
            **common,
            device=torch.device(dev),
            model_config=model.config,
            parallelize_fn=parallelize_llama,
            loss_fn=loss_fn,
        )
    else:
        schedule, parts = None, [(parallelize_qwen3 if moe else parallelize_llama)(model, **common)]
    for part in parts:
        if dev != "mytorch":  # Gloo has no PREMUL_SUM (FSDP2's gradient scaling): sum, then divide
            for m in part.modules():
                if hasattr(m, "set_force_sum_reduction_for_comms"):
                    m.set_force_sum_reduction_for_comms(True)
        part.to_empty(device=dev)
        part.init_weights(buffer_device=torch.device(dev))
        # The CPU reference's initial weights, sharded as the parallelization placed them; through load_state_dict,
        # whose hooks map the fused QKV projection's state-dict names onto its parameter.
        sharded = {}
        for name, p in part.state_dict().items():
            dtype = torch.get_default_dtype() if state[name].is_floating_point() else state[name].dtype
            full = state[name].to(device=dev, dtype=dtype)
            sharded[name] = distribute_tensor(full, p.device_mesh, p.placements) if isinstance(p, DTensor) else full
        part.load_state_dict(sharded)
    calls0 = mytorch._C._fallback_totals()[0]
    if pp:
        losses = _train_pp(schedule, parts, dev, steps, last)
    else:
        seq, cp_mesh = (CP_SEQ if flex else SEQ), (dims.get_mesh("cp") if cp else None)
        # MoE: one batch, the loss falling
        losses = _train(model, dev, steps, repeat=moe, seq=seq, cp_mesh=cp_mesh, loss_fn=loss_fn)
    fallback = mytorch._C._fallback_totals()[0] - calls0  # the CPU fallback's calls (none expected on mytorch)
    fused = {}  # the converter's modules whose self-checks all passed, by type
    for m in [m for part in parts for m in part.modules()] + ([loss_fn] if loss_fn is not None else []):
        if type(m).__name__.startswith("Mytorch") and all(m.__dict__.get("_mytorch_checked", {0: False}).values()):
            fused[type(m).__name__] = fused.get(type(m).__name__, 0) + 1
    _write(out, rank, {"losses": losses, "fallback_calls": fallback, "fused": fused})
    dist.destroy_process_group()


def make_assets(folder) -> tuple[str, str]:
    """A tokenizer and a text dataset of our own for TorchTitan's trainer (its repository's test assets are not in
    the wheel): a byte-level BPE trained on random sentences, and those sentences as c4_test-shaped JSON lines.
    Returns (tokenizer folder, dataset folder)."""
    import json
    import os
    import random

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(0)
    words = "the model trains on a device called mytorch with ranks tokens and attention layers of data".split()
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(20, 120))) for _ in range(400)]
    tok_dir, data_dir = os.path.join(folder, "tokenizer"), os.path.join(folder, "c4_test")
    os.makedirs(tok_dir, exist_ok=True)
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, "data.json"), "w") as f:
        f.writelines(json.dumps({"text": line}) + "\n" for line in lines)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<unk>"]
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=300, special_tokens=specials))
    tok.save(os.path.join(tok_dir, "tokenizer.json"))
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": specials[0], "eos_token": specials[1]}, f)
    return tok_dir, data_dir
