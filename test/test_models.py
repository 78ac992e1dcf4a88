"""A model zoo on mytorch (issue 18): Hugging Face transformers models of many families, built from small configs
with random weights (no download), trained and run through generate() on mytorch and on the CPU from one seed,
with the CPU fallback forbidden. Left-padded batches (a fully masked attention row for the padding under the
causal mask) generate the same tokens as the CPU."""

import copy

import pytest
import torch

from mytorch.testing._compare import compare_tensor

transformers = pytest.importorskip("transformers")

SMALL = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    head_dim=16,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)
MOE = dict(
    num_local_experts=4,
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=64,
    shared_expert_intermediate_size=64,
)
# Family -> the config's own names for what differs from SMALL (dropout off: the two sides draw other numbers;
# None: leave SMALL's key out).
DECODERS = {
    "llama": {},
    "mistral": {},
    "qwen2": {},
    "qwen3": {},
    "gemma": {},
    "gemma2": {},
    "phi3": {},
    "gpt_neox": {},
    "bloom": {},
    "olmo": {},
    "starcoder2": {},
    "granite": {},
    "gpt2": dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
    "opt": dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, word_embed_proj_dim=64, ffn_dim=128),
    "falcon": dict(hidden_dropout=0.0, attention_dropout=0.0, num_kv_heads=2, head_dim=None),
    # mixture of experts, with transformers' default experts path (grouped GEMM, histc on the device)
    "mixtral": MOE,
    "qwen2_moe": MOE,
    "qwen3_moe": MOE,
    "gpt_oss": MOE,
    "deepseek_v3": dict(
        moe_intermediate_size=32,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_shared_experts=1,
        first_k_dense_replace=1,
        n_group=1,
        topk_group=1,
        kv_lora_rank=16,
        q_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=16,
        head_dim=8,
        num_key_value_heads=4,
    ),
    "olmoe": MOE,
    "granitemoe": MOE,
    "minimax": MOE,
    "ernie4_5_moe": MOE,
    "glm4_moe": dict(MOE, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=0, n_group=1, topk_group=1),
    "hunyuan_v1_moe": MOE,
    "flex_olmo": MOE,
    "dots1": dict(MOE, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=0, n_group=1, topk_group=1),
    "cohere2_moe": MOE,
    "exaone_moe": MOE,
    "nemotron_h": MOE,
    "granitemoeshared": MOE,
    "laguna": MOE,
    "mellum": MOE,
    "solar_open": MOE,
    # multi-head latent attention with a complex rotary embedding (polar, complex mul; Complex.cpp) and experts
    "deepseek_v2": dict(
        moe_intermediate_size=32,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_shared_experts=1,
        first_k_dense_replace=1,
        kv_lora_rank=16,
        q_lora_rank=None,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=16,
        head_dim=8,
        num_key_value_heads=4,
    ),
    # state-space / convolution layers beside attention, with experts (transformers' PyTorch reference paths)
    "jamba": dict(
        MOE,
        expert_layer_period=2,
        expert_layer_offset=1,
        attn_layer_period=2,
        attn_layer_offset=1,
        mamba_d_state=8,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_dt_rank=8,
    ),
    "granitemoehybrid": dict(
        MOE,
        layer_types=["mamba", "attention"],
        mamba_n_heads=4,
        mamba_d_head=32,
        mamba_d_state=8,
        mamba_n_groups=1,
        mamba_chunk_size=8,
    ),
    "lfm2_moe": dict(
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        num_dense_layers=1,
        layer_types=["full_attention", "conv"],
    ),
    "zaya": dict(MOE, num_experts_per_tok=1),
    # linear attention (gated delta rule: a triangular solve) and experts
    "qwen3_next": dict(
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        linear_num_value_heads=4,
        linear_num_key_heads=2,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        layer_types=["linear_attention", "full_attention"],
    ),
}
LOSS_RTOL = 1e-4  # the parity rule for training (reduction order)


pytestmark = pytest.mark.native


def _config(family):
    return transformers.AutoConfig.for_model(
        family, **{k: v for k, v in {**SMALL, **DECODERS[family]}.items() if v is not None}
    )


def _pair(make):
    torch.manual_seed(0)
    model = make().float()
    return model, copy.deepcopy(model).to("mytorch")


def _gold(model):
    """A float64 copy for the tolerance rule; experts through transformers' eager path (the CPU's grouped GEMM
    has no float64)."""
    gold = copy.deepcopy(model).double()
    if getattr(gold.config, "_experts_implementation", None) not in (None, "eager"):
        gold.set_experts_implementation("eager")
    return gold


def _train(model, dev, batch, steps=3):
    """Losses of `steps` AdamW steps on both sides, relative difference checked at each. The device model then
    takes the CPU's trained weights, so what the caller compares next (logits, generation) runs on the same
    weights: Adam turns the rounding noise of gradients that cancel to near zero into full-size steps, and that
    noise depends on the CPU's vector instruction set (OLMoE's weights drifted by 8e-5 on an AMD EPYC, enough to
    move its logits out of the tolerance while every loss agreed)."""
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, dev)]
    for _ in range(steps):
        losses = []
        for m, opt, b in ((model, opts[0], batch), (dev, opts[1], {k: v.to("mytorch") for k, v in batch.items()})):
            loss = m(**b).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert abs(losses[1] - losses[0]) <= LOSS_RTOL * abs(losses[0]), losses
    dev.load_state_dict(model.state_dict())


@pytest.mark.parametrize("family", sorted(DECODERS))
def test_decoder_trains_and_generates_like_the_cpu(family):
    cfg = _config(family)
    model, dev = _pair(lambda: transformers.AutoModelForCausalLM.from_config(cfg))
    ids = torch.randint(3, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    _train(model, dev, {"input_ids": ids, "labels": ids})
    model.eval()
    dev.eval()
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[0, :4] = 0  # left padding
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
        gold = _gold(model)(input_ids=ids, attention_mask=mask).logits
        got = dev(input_ids=ids.to("mytorch"), attention_mask=mask.to("mytorch")).logits
    assert torch.isfinite(got).all()
    e = compare_tensor(got[:, 4:], logits[:, 4:], gold[:, 4:])  # the padded positions' values are arbitrary
    assert e.ok, e.problems or f"{e.bad} of {e.total} logits out of tolerance"
    greedy = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    want = model.generate(input_ids=ids, attention_mask=mask, **greedy)
    assert torch.equal(
        dev.generate(input_ids=ids.to("mytorch"), attention_mask=mask.to("mytorch"), **greedy).cpu(), want
    )
    sampled = []
    for _ in range(2):  # seeded sampling: the device's generator, so reproducible on mytorch (not the CPU's draws)
        torch.mytorch.manual_seed(7)
        sampled.append(
            dev.generate(
                input_ids=ids.to("mytorch"),
                attention_mask=mask.to("mytorch"),
                do_sample=True,
                top_k=5,
                max_new_tokens=6,
                pad_token_id=0,
            ).cpu()
        )
    assert torch.equal(sampled[0], sampled[1]) and int(sampled[0].max()) < 96
    assert torch.mytorch.fallback_stats() == {}


def test_encoder_trains_like_the_cpu():
    cfg = transformers.BertConfig(
        vocab_size=96,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model, dev = _pair(lambda: transformers.BertForMaskedLM(cfg))
    ids = torch.randint(3, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 8:] = 0  # right padding
    _train(model, dev, {"input_ids": ids, "attention_mask": mask, "labels": ids})
    assert torch.mytorch.fallback_stats() == {}


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_seq2seq_trains_and_beam_searches_like_the_cpu(family):
    if family == "t5":
        cfg = transformers.T5Config(
            vocab_size=96,
            d_model=64,
            d_ff=128,
            d_kv=16,
            num_layers=2,
            num_heads=4,
            dropout_rate=0.0,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        )
        make = lambda: transformers.T5ForConditionalGeneration(cfg)  # noqa: E731
    else:
        cfg = transformers.BartConfig(
            vocab_size=96,
            d_model=64,
            encoder_ffn_dim=128,
            decoder_ffn_dim=128,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=2,
            forced_eos_token_id=None,
        )
        make = lambda: transformers.BartForConditionalGeneration(cfg)  # noqa: E731
    model, dev = _pair(make)
    src = torch.randint(3, 96, (2, 10), generator=torch.Generator().manual_seed(1))
    tgt = torch.randint(3, 96, (2, 7), generator=torch.Generator().manual_seed(2))
    _train(model, dev, {"input_ids": src, "labels": tgt})
    model.eval()
    dev.eval()
    beam = dict(num_beams=3, max_new_tokens=6, do_sample=False, early_stopping=True)
    want = model.generate(input_ids=src, **beam)
    assert torch.equal(dev.generate(input_ids=src.to("mytorch"), **beam).cpu(), want)
    assert torch.mytorch.fallback_stats() == {}


def test_vision_transformer_trains_like_the_cpu():
    cfg = transformers.ViTConfig(
        image_size=16,
        patch_size=4,
        num_channels=3,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_labels=5,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model, dev = _pair(lambda: transformers.ViTForImageClassification(cfg))
    g = torch.Generator().manual_seed(1)
    _train(model, dev, {"pixel_values": torch.randn(2, 3, 16, 16, generator=g), "labels": torch.tensor([1, 3])})
    assert torch.mytorch.fallback_stats() == {}


@pytest.mark.parametrize("family", ["llama", "mixtral"])
@pytest.mark.parametrize("mode", ["bf16", "autocast"])
def test_low_precision_matches_the_cpu(family, mode):
    """bf16 weights, or float32 weights under autocast to bf16: the loss against the CPU doing the same, within
    the tolerance rule at bfloat16 (against the float64 loss)."""
    cfg = _config(family)
    model, dev = _pair(lambda: transformers.AutoModelForCausalLM.from_config(cfg))
    gold = _gold(model)
    ids = torch.randint(3, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    if mode == "bf16":
        model, dev = model.bfloat16(), dev.bfloat16()
    losses = []
    for m, device in ((model, "cpu"), (dev, "mytorch")):
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=mode == "autocast"):
            losses.append(m(input_ids=ids.to(device), labels=ids.to(device)).logits.float())
    with torch.no_grad():
        want64 = gold(input_ids=ids, labels=ids).logits
    e = compare_tensor(losses[1].bfloat16(), losses[0].bfloat16(), want64)
    assert e.ok, e.problems or f"{e.bad} of {e.total} logits out of tolerance"
    assert torch.mytorch.fallback_stats() == {}


def test_wav2vec2_with_ctc_trains_like_the_cpu():
    """wav2vec2: the weight-normed positional convolution and the CTC loss, natively."""
    cfg = transformers.Wav2Vec2Config(
        vocab_size=32,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        conv_dim=(32, 32),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        feat_proj_dropout=0.0,
        layerdrop=0.0,
        mask_time_prob=0.0,
        final_dropout=0.0,
        pad_token_id=0,
    )
    model, dev = _pair(lambda: transformers.Wav2Vec2ForCTC(cfg))
    g = torch.Generator().manual_seed(1)
    _train(
        model,
        dev,
        {"input_values": torch.randn(2, 1600, generator=g), "labels": torch.randint(1, 32, (2, 5), generator=g)},
    )
    assert torch.mytorch.fallback_stats() == {}


@pytest.mark.parametrize("family", ["clip", "siglip", "whisper"])
def test_multimodal_and_speech_models_train_like_the_cpu(family):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 96, (2, 10), generator=g)
    tower = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)
    if family in ("clip", "siglip"):
        text = dict(vocab_size=96, max_position_embeddings=16, **tower)
        vision = dict(image_size=16, patch_size=4, **tower)
        if family == "clip":

            def make():
                return transformers.CLIPModel(
                    transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
                )
        else:

            def make():
                return transformers.SiglipModel(transformers.SiglipConfig(text_config=text, vision_config=vision))

        batch = {
            "input_ids": ids,
            "pixel_values": torch.randn(2, 3, 16, 16, generator=g),
            "return_loss": torch.tensor(True),
        }
    else:
        cfg = transformers.WhisperConfig(
            vocab_size=96,
            d_model=32,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            num_mel_bins=16,
            max_source_positions=10,
            max_target_positions=16,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
            dropout=0.0,
        )
        make = lambda: transformers.WhisperForConditionalGeneration(cfg)  # noqa: E731
        batch = {"input_features": torch.randn(2, 16, 20, generator=g), "labels": ids[:, :6]}
    model, dev = _pair(make)
    _train(model, dev, batch)
    assert torch.mytorch.fallback_stats() == {}


_ENC = dict(SMALL, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
_DROP = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
_S2S = dict(
    vocab_size=96,
    d_model=64,
    encoder_ffn_dim=128,
    decoder_ffn_dim=128,
    encoder_layers=1,
    decoder_layers=1,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    max_position_embeddings=64,
    dropout=0.0,
    attention_dropout=0.0,
    pad_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
    bos_token_id=1,
)
# family -> (task, config): more architectures, trained 3 AdamW steps against the CPU
MORE = {
    "roberta": ("mlm", _ENC),
    "electra": ("mlm", _ENC),
    "albert": ("mlm", dict(_ENC, embedding_size=32)),
    "deberta-v2": ("mlm", _ENC),
    "xlm-roberta": ("mlm", _ENC),
    "mpnet": ("mlm", _ENC),
    "distilbert": (
        "mlm",
        dict(
            vocab_size=96,
            dim=64,
            hidden_dim=128,
            n_layers=2,
            n_heads=4,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
            pad_token_id=0,
        ),
    ),
    "gptj": ("clm", dict(vocab_size=96, n_embd=64, n_layer=2, n_head=4, n_positions=64, rotary_dim=8, **_DROP)),
    "codegen": ("clm", dict(vocab_size=96, n_embd=64, n_layer=2, n_head=4, n_positions=64, rotary_dim=8, **_DROP)),
    "gpt_bigcode": ("clm", dict(vocab_size=96, n_embd=64, n_layer=2, n_head=4, n_positions=64, **_DROP)),
    "stablelm": ("clm", dict(SMALL, head_dim=None)),
    "cohere": ("clm", SMALL),
    "persimmon": ("clm", dict(SMALL, head_dim=None)),
    "phi": ("clm", dict(SMALL, head_dim=None, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)),
    "mpt": ("clm", dict(vocab_size=96, d_model=64, n_heads=4, n_layers=2, max_seq_len=64)),
    "mamba": ("clm", dict(vocab_size=96, hidden_size=64, num_hidden_layers=2, state_size=8)),
    "resnet": ("image", dict(hidden_sizes=[16, 32], depths=[1, 1], embedding_size=16, num_labels=5)),
    "swin": (
        "image",
        dict(
            image_size=32,
            patch_size=4,
            embed_dim=16,
            depths=[1, 1],
            num_heads=[2, 2],
            window_size=4,
            num_labels=5,
            drop_path_rate=0.0,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        ),
    ),
    "marian": ("s2s", _S2S),
    "mbart": ("s2s", _S2S),
    "pegasus": ("s2s", _S2S),
    "mt5": (
        "s2s",
        dict(
            vocab_size=96,
            d_model=64,
            d_ff=128,
            d_kv=16,
            num_layers=1,
            num_heads=4,
            dropout_rate=0.0,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        ),
    ),
}


@pytest.mark.parametrize("family", sorted(MORE))
def test_more_families_train_like_the_cpu(family):
    task, kw = MORE[family]
    cfg = transformers.AutoConfig.for_model(family, **{k: v for k, v in kw.items() if v is not None})
    auto = {
        "mlm": transformers.AutoModelForMaskedLM,
        "clm": transformers.AutoModelForCausalLM,
        "image": transformers.AutoModelForImageClassification,
        "s2s": transformers.AutoModelForSeq2SeqLM,
    }[task]
    model, dev = _pair(lambda: auto.from_config(cfg))
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 96, (2, 12), generator=g)
    batch = {
        "image": {"pixel_values": torch.randn(2, 3, 32, 32, generator=g), "labels": torch.tensor([1, 3])},
        "s2s": {"input_ids": ids[:, :10].contiguous(), "labels": ids[:, 2:9].contiguous()},
    }.get(task, {"input_ids": ids, "labels": ids})
    _train(model, dev, batch)
    assert torch.mytorch.fallback_stats() == {}


TRAINER_SCRIPT = """
import json, sys, torch, mytorch, transformers
torch.mytorch.set_fallback_mode("error")
torch.manual_seed(0)
cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2, n_positions=32, bos_token_id=0,
                              eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = transformers.GPT2LMHeadModel(cfg)
class Data(torch.utils.data.Dataset):
    def __len__(self): return 8
    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}
args = transformers.TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=4, max_steps=2, report_to=[],
                                      use_cpu=sys.argv[2] == "cpu", save_strategy="no", logging_steps=1,
                                      disable_tqdm=True, dataloader_pin_memory=False, seed=0)
trainer = transformers.Trainer(model=model, args=args, train_dataset=Data())
trainer.train()
print(json.dumps({"device": str(next(model.parameters()).device),
                  "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h]}))
"""


def test_trainer_picks_mytorch(tmp_path):
    """Hugging Face Trainer picks mytorch by itself (mytorch/_accelerate.py; docs/ecosystem.md): with default
    arguments the parameters train on the device, with the losses of a CPU run, and use_cpu=True trains on the
    CPU. The adaptations are written for one accelerate and one transformers version: a bump fails here."""
    import importlib.metadata
    import json
    import os
    import subprocess
    import sys

    from mytorch import _accelerate

    pytest.importorskip("accelerate")
    script = tmp_path / "train.py"
    script.write_text(TRAINER_SCRIPT)
    runs = {}
    for package, tested in _accelerate.TESTED.items():
        assert importlib.metadata.version(package).startswith(tested), (package, "re-read the adaptation")
    for name in ("mytorch", "cpu"):
        full = {k: v for k, v in os.environ.items() if k not in ("ACCELERATE_TORCH_DEVICE", "ACCELERATE_USE_CPU")}
        r = subprocess.run(
            [sys.executable, str(script), str(tmp_path / name), name],
            capture_output=True,
            text=True,
            env=full,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        runs[name] = json.loads(r.stdout.strip().splitlines()[-1])
    assert runs["mytorch"]["device"] == "mytorch:0" and runs["cpu"]["device"] == "cpu"
    assert len(runs["mytorch"]["losses"]) == 2
    # accelerate and transformers imported before mytorch (no backend autoload): adapted at `import mytorch`
    late = (
        "import accelerate.state, transformers.training_args, mytorch\n"
        "args = transformers.TrainingArguments(output_dir='x', report_to=[])\n"
        "print(accelerate.state.PartialState().device, args.device)"
    )
    r = subprocess.run(
        [sys.executable, "-c", late],
        capture_output=True,
        text=True,
        env={**full, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0 and r.stdout.split() == ["mytorch", "mytorch"], r.stdout + r.stderr[-2000:]
    for got, want in zip(runs["mytorch"]["losses"], runs["cpu"]["losses"]):
        assert abs(got - want) <= LOSS_RTOL * abs(want)
