#!/usr/bin/env python3
"""Exports real architectures with a current PyTorch and tries each with graphpipe, as a user would:
torch.onnx.export in training mode with a dynamic batch (both exporters), then `graphpipe train`
for 2 steps on synthetic data. Prints one Markdown row per model: "trains (loss a -> b)" or
graphpipe's one-line refusal. A measurement for the README, not a test: CI never runs it.

Needs torch, torchvision, onnx, onnxscript and transformers, e.g. the venv of
scripts/export_torch2_fixtures.py:
  /work/venv-torch/bin/python scripts/sweep_architectures.py [--graphpipe build/cli/graphpipe]
      [--models resnet18,hf_bert,...] [--exporters dynamo,torchscript] [--out /tmp/sweep]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch2_fixtures as fx  # noqa: E402  (the exporters' settings and the HF wrappers)

IMAGE = 64
VISION = ["alexnet", "vgg11_bn", "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "densenet121",
          "googlenet", "inception_v3", "squeezenet1_1", "mobilenet_v2", "mobilenet_v3_small", "mnasnet0_5",
          "shufflenet_v2_x0_5", "efficientnet_b0", "efficientnet_v2_s", "regnet_x_400mf", "regnet_y_400mf",
          "convnext_tiny", "swin_t", "swin_v2_t", "vit_b_32", "maxvit_t"]
# Vision transformers with a fixed image size.
FIXED_IMAGE = {"vit_b_32": 224, "maxvit_t": 224, "inception_v3": 75}
# Segmentation (their per-pixel logits averaged into one score per class, so that the sweep's
# classification labels train them) and video models ([N, 3, T, H, W] clips; added 2026-12-03).
SEGMENTATION = ["deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large", "fcn_resnet50"]
VIDEO = ["r3d_18", "mc3_18", "r2plus1d_18", "s3d", "swin3d_t", "mvit_v2_s"]
CLIP = {"s3d": (3, 16, 224, 224), "mvit_v2_s": (3, 16, 224, 224)}  # the smallest clip each accepts


class PixelMean(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, x):
        return self.m(x)["out"].mean((2, 3))


def vision(name):
    import torchvision
    if name in SEGMENTATION:
        seg = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, num_classes=10)
        return PixelMean(seg), (3, IMAGE, IMAGE)
    if name in VIDEO:
        return getattr(torchvision.models.video, name)(weights=None, num_classes=10), CLIP.get(name, (3, 4, 32, 32))
    kwargs = {"weights": None, "num_classes": 10}
    if name in ("googlenet", "inception_v3"):
        kwargs["aux_logits"] = False
        kwargs["init_weights"] = True
    return getattr(torchvision.models, name)(**kwargs), (3, FIXED_IMAGE.get(name, IMAGE), FIXED_IMAGE.get(name, IMAGE))


def hf(name):
    import transformers as t
    small = dict(vocab_size=fx.VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=16)
    makers = {
        "hf_bert": lambda: t.BertForSequenceClassification(t.BertConfig(num_labels=4, **small)),
        "hf_roberta": lambda: t.RobertaForSequenceClassification(t.RobertaConfig(num_labels=4, pad_token_id=1,
                                                                                 **dict(small, max_position_embeddings=20))),
        "hf_albert": lambda: t.AlbertForSequenceClassification(t.AlbertConfig(num_labels=4, embedding_size=8, **small)),
        "hf_electra": lambda: t.ElectraForSequenceClassification(t.ElectraConfig(num_labels=4, embedding_size=8, **small)),
        "hf_gpt2": lambda: t.GPT2ForSequenceClassification(t.GPT2Config(
            vocab_size=fx.VOCAB, n_positions=16, n_embd=16, n_layer=2, n_head=2, num_labels=4, pad_token_id=0)),
        "hf_llama": lambda: t.LlamaForSequenceClassification(t.LlamaConfig(num_key_value_heads=1, num_labels=4,
                                                                           pad_token_id=0, **small)),
        "hf_qwen2": lambda: t.Qwen2ForSequenceClassification(t.Qwen2Config(num_key_value_heads=1, num_labels=4,
                                                                           pad_token_id=0, **small)),
        "hf_mistral": lambda: t.MistralForSequenceClassification(t.MistralConfig(num_key_value_heads=1, num_labels=4,
                                                                                 pad_token_id=0, **small)),
        "hf_phi": lambda: t.PhiForSequenceClassification(t.PhiConfig(num_labels=4, pad_token_id=0, **small)),
        "hf_vit": lambda: t.ViTForImageClassification(t.ViTConfig(image_size=32, patch_size=8, num_labels=4,
                                                                   **{k: v for k, v in small.items()
                                                                      if k not in ("vocab_size", "max_position_embeddings")})),
    }
    # Current decoder, encoder and vision families (added 2026-12-02).
    dec = dict(small, num_key_value_heads=1, num_labels=4, pad_token_id=0)
    vit = dict(image_size=32, patch_size=8, num_labels=4, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=32)
    def batched_experts(cfg):
        # transformers 5 runs MoE experts through its own grouped_mm op by default, which torch's
        # exporter cannot convert; "batched_mm" runs every expert on every token (no data-dependent
        # shapes) and exports.
        cfg._experts_implementation = "batched_mm"
        return cfg

    makers.update({
        "hf_gemma": lambda: t.GemmaForSequenceClassification(t.GemmaConfig(head_dim=8, **dec)),
        "hf_gemma2": lambda: t.Gemma2ForSequenceClassification(t.Gemma2Config(head_dim=8, sliding_window=4, **dec)),
        "hf_gemma3": lambda: t.Gemma3TextForSequenceClassification(t.Gemma3TextConfig(head_dim=8, sliding_window=4,
                                                                                       **dec)),
        "hf_phi3": lambda: t.Phi3ForSequenceClassification(t.Phi3Config(**dec)),
        "hf_qwen3": lambda: t.Qwen3ForSequenceClassification(t.Qwen3Config(head_dim=8, **dec)),
        "hf_olmo2": lambda: t.Olmo2ForSequenceClassification(t.Olmo2Config(**dec)),
        "hf_starcoder2": lambda: t.Starcoder2ForSequenceClassification(t.Starcoder2Config(**dec)),
        "hf_gpt_neox": lambda: t.GPTNeoXForSequenceClassification(t.GPTNeoXConfig(num_labels=4, pad_token_id=0,
                                                                                  **small)),
        "hf_opt": lambda: t.OPTForSequenceClassification(t.OPTConfig(
            vocab_size=fx.VOCAB, hidden_size=16, num_hidden_layers=2, ffn_dim=32, num_attention_heads=2,
            max_position_embeddings=16, word_embed_proj_dim=16, num_labels=4, pad_token_id=0)),
        "hf_bloom": lambda: t.BloomForSequenceClassification(t.BloomConfig(
            vocab_size=fx.VOCAB, hidden_size=16, n_layer=2, n_head=2, num_labels=4, pad_token_id=0)),
        "hf_falcon": lambda: t.FalconForSequenceClassification(t.FalconConfig(
            vocab_size=fx.VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, num_labels=4,
            pad_token_id=0)),
        "hf_mixtral": lambda: t.MixtralForSequenceClassification(batched_experts(t.MixtralConfig(
            num_local_experts=4, num_experts_per_tok=2, **dec))),
        "hf_qwen2_moe": lambda: t.Qwen2MoeForSequenceClassification(batched_experts(t.Qwen2MoeConfig(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=16,
            **dec))),
        "hf_deberta_v2": lambda: t.DebertaV2ForSequenceClassification(t.DebertaV2Config(num_labels=4, **small)),
        "hf_mpnet": lambda: t.MPNetForSequenceClassification(t.MPNetConfig(num_labels=4, **small)),
        "hf_modernbert": lambda: t.ModernBertForSequenceClassification(t.ModernBertConfig(num_labels=4, pad_token_id=0,
                                                                                          **small)),
        "hf_mobilebert": lambda: t.MobileBertForSequenceClassification(t.MobileBertConfig(
            num_labels=4, embedding_size=8, intra_bottleneck_size=8, **small)),
        "hf_deit": lambda: t.DeiTForImageClassification(t.DeiTConfig(**vit)),
        "hf_beit": lambda: t.BeitForImageClassification(t.BeitConfig(use_relative_position_bias=True, **vit)),
        "hf_dinov2": lambda: t.Dinov2ForImageClassification(t.Dinov2Config(**vit)),
        "hf_convnext": lambda: t.ConvNextForImageClassification(t.ConvNextConfig(
            num_labels=4, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1])),
        "hf_segformer": lambda: t.SegformerForImageClassification(t.SegformerConfig(
            num_labels=4, hidden_sizes=[8, 16, 32, 64], decoder_hidden_size=32, depths=[1, 1, 1, 1])),
        "hf_mobilevit": lambda: t.MobileViTForImageClassification(t.MobileViTConfig(image_size=32, num_labels=4)),
    })
    enc_small = dict(small, num_labels=4, pad_token_id=0)
    # A third wave (2026-12-03, stop 56): encoder-decoders trained on the next token after the
    # sequence (the decoder reads the sequence too), audio classifiers on waveforms or log-mel
    # frames, and the families the earlier waves left out.
    enc = dict(vocab_size=fx.VOCAB, num_labels=4, pad_token_id=0)
    makers.update({
        "hf_t5": lambda: t.T5ForConditionalGeneration(t.T5Config(
            d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2, relative_attention_num_buckets=8,
            decoder_start_token_id=0, **enc)),
        "hf_bart": lambda: t.BartForConditionalGeneration(t.BartConfig(
            d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=16, **enc)),
        "hf_distilbert": lambda: t.DistilBertForSequenceClassification(t.DistilBertConfig(
            dim=16, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=16, **enc)),
        "hf_xlnet": lambda: t.XLNetForSequenceClassification(t.XLNetConfig(d_model=16, n_layer=2, n_head=2,
                                                                         d_inner=32, **enc)),
        "hf_funnel": lambda: t.FunnelForSequenceClassification(t.FunnelConfig(
            block_sizes=[1, 1], d_model=16, n_head=2, d_head=8, d_inner=32, **enc)),
        "hf_gptj": lambda: t.GPTJForSequenceClassification(t.GPTJConfig(n_embd=16, n_layer=2, n_head=2, rotary_dim=4,
                                                                        n_positions=16, **enc)),
        "hf_gpt_bigcode": lambda: t.GPTBigCodeForSequenceClassification(t.GPTBigCodeConfig(
            n_embd=16, n_layer=2, n_head=2, n_positions=16, multi_query=True, **enc)),
        "hf_squeezebert": lambda: t.SqueezeBertForSequenceClassification(t.SqueezeBertConfig(
            embedding_size=16, q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2, intermediate_groups=2,
            output_groups=2, **dict(small, num_labels=4, pad_token_id=0))),
        "hf_esm": lambda: t.EsmForSequenceClassification(t.EsmConfig(position_embedding_type="rotary", mask_token_id=1,
                                                                     **dict(small, num_labels=4, pad_token_id=0))),
        "hf_longformer": lambda: t.LongformerForSequenceClassification(t.LongformerConfig(
            attention_window=4, **dict(small, num_labels=4, pad_token_id=0, max_position_embeddings=20))),
        "hf_mamba": lambda: t.MambaForCausalLM(t.MambaConfig(vocab_size=fx.VOCAB, hidden_size=16, state_size=4,
                                                             num_hidden_layers=2, expand=2, conv_kernel=4)),
        "hf_rwkv": lambda: t.RwkvForCausalLM(t.RwkvConfig(vocab_size=fx.VOCAB, hidden_size=16, num_hidden_layers=2,
                                                          attention_hidden_size=16, intermediate_size=32,
                                                          context_length=16)),
        "hf_whisper": lambda: t.WhisperForAudioClassification(t.WhisperConfig(
            num_mel_bins=8, max_source_positions=16, d_model=16, encoder_layers=2, encoder_attention_heads=2,
            encoder_ffn_dim=32, decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=32, num_labels=4,
            vocab_size=fx.VOCAB)),
        "hf_wav2vec2": lambda: t.Wav2Vec2ForSequenceClassification(t.Wav2Vec2Config(
            conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4,
            num_conv_pos_embedding_groups=2, classifier_proj_size=8, num_labels=4, mask_time_prob=0.0, layerdrop=0.0,
            **{k: v for k, v in small.items() if k not in ("vocab_size", "max_position_embeddings")})),
        "hf_hubert": lambda: t.HubertForSequenceClassification(t.HubertConfig(
            conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4,
            num_conv_pos_embedding_groups=2, classifier_proj_size=8, num_labels=4, mask_time_prob=0.0, layerdrop=0.0,
            **{k: v for k, v in small.items() if k not in ("vocab_size", "max_position_embeddings")})),
        "hf_swin": lambda: t.SwinForImageClassification(t.SwinConfig(image_size=32, patch_size=4, embed_dim=8,
                                                                     depths=[1, 1], num_heads=[2, 2], window_size=2,
                                                                     num_labels=4)),
        "hf_clip": lambda: t.CLIPForImageClassification(t.CLIPConfig(
            vision_config=dict(image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=2,
                               num_attention_heads=2, intermediate_size=32),
            text_config=dict(vocab_size=fx.VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=32), num_labels=4)),
        "hf_levit": lambda: t.LevitForImageClassification(t.LevitConfig(
            image_size=32, hidden_sizes=[16, 32, 48], num_attention_heads=[2, 2, 2], depths=[1, 1, 1],
            key_dim=[8, 8, 8], num_labels=4)),
        "hf_poolformer": lambda: t.PoolFormerForImageClassification(t.PoolFormerConfig(
            hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_labels=4)),
    })
    # A fourth wave (2026-12-03, stop 56): more encoders (FNet's Fourier mixing among them), audio
    # and vision families.
    wav = {k: v for k, v in small.items() if k not in ("vocab_size", "max_position_embeddings")}
    wav.update(conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4,
               num_conv_pos_embedding_groups=2, classifier_proj_size=8, num_labels=4, mask_time_prob=0.0,
               layerdrop=0.0)
    img = dict(image_size=32, num_labels=4)
    makers.update({
        "hf_fnet": lambda: t.FNetForSequenceClassification(t.FNetConfig(
            **{k: v for k, v in small.items() if k != "num_attention_heads"}, num_labels=4, pad_token_id=0)),
        "hf_roformer": lambda: t.RoFormerForSequenceClassification(t.RoFormerConfig(embedding_size=16, **enc_small)),
        "hf_deberta": lambda: t.DebertaForSequenceClassification(t.DebertaConfig(**enc_small)),
        "hf_xlm_roberta": lambda: t.XLMRobertaForSequenceClassification(t.XLMRobertaConfig(
            **dict(enc_small, max_position_embeddings=20, pad_token_id=1))),
        "hf_nystromformer": lambda: t.NystromformerForSequenceClassification(t.NystromformerConfig(
            num_landmarks=4, segment_means_seq_len=8, **dict(enc_small, max_position_embeddings=20))),
        "hf_big_bird": lambda: t.BigBirdForSequenceClassification(t.BigBirdConfig(attention_type="original_full",
                                                                                  **enc_small)),
        "hf_megatron_bert": lambda: t.MegatronBertForSequenceClassification(t.MegatronBertConfig(**enc_small)),
        "hf_wavlm": lambda: t.WavLMForSequenceClassification(t.WavLMConfig(num_buckets=16, max_bucket_distance=32,
                                                                           **wav)),
        "hf_sew": lambda: t.SEWForSequenceClassification(t.SEWConfig(squeeze_factor=2, **wav)),
        "hf_data2vec_audio": lambda: t.Data2VecAudioForSequenceClassification(t.Data2VecAudioConfig(**wav)),
        "hf_swinv2": lambda: t.Swinv2ForImageClassification(t.Swinv2Config(
            patch_size=4, embed_dim=8, depths=[1, 1], num_heads=[2, 2], window_size=2, **img)),
        "hf_focalnet": lambda: t.FocalNetForImageClassification(t.FocalNetConfig(patch_size=4, embed_dim=8,
                                                                                 depths=[1, 1], **img)),
        "hf_pvt_v2": lambda: t.PvtV2ForImageClassification(t.PvtV2Config(
            hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_attention_heads=[1, 2, 2, 2], **img)),
        "hf_convnextv2": lambda: t.ConvNextV2ForImageClassification(t.ConvNextV2Config(
            hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_labels=4)),
        "hf_mobilevitv2": lambda: t.MobileViTV2ForImageClassification(t.MobileViTV2Config(image_size=64,
                                                                                          num_labels=4)),
    })
    model = makers[name]()
    for m in model.modules():  # no dropout: the sweep is about import and training, not noise
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    if name in HF_IMAGE:
        size = IMAGE_SIZE.get(name, 32)
        return fx.HfImageClassifier(lambda: model), (3, size, size)
    if name in HF_AUDIO:
        return fx.HfAudioClassifier(lambda: model, HF_AUDIO[name][0]), HF_AUDIO[name][1]
    if name in HF_SEQ2SEQ:
        return fx.HfSeq2SeqLastToken(lambda: model), "ids"
    if name in HF_CAUSAL:
        return fx.HfLastToken(lambda: model), "ids"
    return fx.HfClassifier(lambda: model), "ids"


HF = ["hf_bert", "hf_roberta", "hf_albert", "hf_electra", "hf_gpt2", "hf_llama", "hf_qwen2", "hf_mistral", "hf_phi",
      "hf_vit"]
HF_CURRENT = ["hf_gemma", "hf_gemma2", "hf_gemma3", "hf_phi3", "hf_qwen3", "hf_olmo2", "hf_starcoder2", "hf_gpt_neox",
              "hf_opt", "hf_bloom", "hf_falcon", "hf_mixtral", "hf_qwen2_moe", "hf_deberta_v2", "hf_mpnet",
              "hf_modernbert", "hf_mobilebert", "hf_deit", "hf_beit", "hf_dinov2", "hf_convnext", "hf_segformer",
              "hf_mobilevit"]
HF_WAVE3 = ["hf_t5", "hf_bart", "hf_distilbert", "hf_xlnet", "hf_funnel", "hf_gptj", "hf_gpt_bigcode", "hf_squeezebert",
            "hf_esm", "hf_longformer", "hf_mamba", "hf_rwkv", "hf_whisper", "hf_wav2vec2", "hf_hubert", "hf_swin",
            "hf_clip", "hf_levit", "hf_poolformer"]
HF_WAVE4 = ["hf_fnet", "hf_roformer", "hf_deberta", "hf_xlm_roberta", "hf_nystromformer", "hf_big_bird",
            "hf_megatron_bert", "hf_wavlm", "hf_sew", "hf_data2vec_audio", "hf_swinv2", "hf_focalnet", "hf_pvt_v2",
            "hf_convnextv2", "hf_mobilevitv2"]
IMAGE_SIZE = {"hf_mobilevitv2": 64}  # MobileViTV2's last stage needs more than 32x32
HF_SEQ2SEQ = {"hf_t5", "hf_bart"}
HF_CAUSAL = {"hf_mamba", "hf_rwkv"}
# Audio: the keyword the model reads and one example's shape (a waveform, or log-mel frames).
HF_AUDIO = {"hf_whisper": ("input_features", (8, 32)), "hf_wav2vec2": ("input_values", (400,)),
            "hf_hubert": ("input_values", (400,)), "hf_wavlm": ("input_values", (400,)),
            "hf_sew": ("input_values", (400,)), "hf_data2vec_audio": ("input_values", (400,))}
HF_IMAGE = {"hf_swinv2", "hf_focalnet", "hf_pvt_v2", "hf_convnextv2", "hf_mobilevitv2", "hf_swin", "hf_clip", "hf_levit", "hf_poolformer", "hf_vit", "hf_deit", "hf_beit", "hf_dinov2", "hf_convnext", "hf_segformer", "hf_mobilevit"}


def try_one(name, exporter, graphpipe, out_dir):
    torch.manual_seed(0)
    model, shape = hf(name) if name.startswith("hf_") else vision(name)
    model.train()
    x = torch.randint(1, fx.VOCAB, (2, fx.SEQ)) if shape == "ids" else torch.randn((2,) + shape)
    path = os.path.join(out_dir, f"{name}_{exporter}.onnx")
    t0 = time.time()
    try:
        fx.export(model, x, path, exporter)
    except Exception as e:  # noqa: BLE001  (the exporter's own failure is a result too)
        return "torch cannot export it: " + str(e).strip().splitlines()[0][:160], 0.0
    export_s = time.time() - t0
    cfg = os.path.join(out_dir, f"{name}_{exporter}.yaml")
    with open(cfg, "w") as f:
        f.write(f"model: {path}\nloss: cross_entropy\noptimizer: sgd\nlr: 0.01\nbatch: 2\nsteps: 2\nlog_interval: 1\n")
    r = subprocess.run([graphpipe, "train", "--config", cfg], capture_output=True, text=True, timeout=1800)
    text = r.stdout + r.stderr
    if r.returncode != 0:
        err = [line for line in text.splitlines() if "error" in line.lower()]
        return (err[-1] if err else text.strip().splitlines()[-1])[:220], export_s
    losses = re.findall(r"^step \d+/\d+ +loss (\S+)", text, re.M)
    return ("trains" + (f" (loss {losses[0]} -> {losses[-1]})" if losses else "")), export_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--graphpipe", default=os.path.join(here, "..", "build", "cli", "graphpipe"))
    ap.add_argument("--models", default=",".join(VISION + SEGMENTATION + VIDEO + HF + HF_CURRENT + HF_WAVE3 + HF_WAVE4))
    ap.add_argument("--exporters", default="dynamo,torchscript")
    ap.add_argument("--out", default=None, help="keep the exports here (default: a temporary folder)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out_dir = args.out or tempfile.mkdtemp(prefix="gp_sweep_")
    os.makedirs(out_dir, exist_ok=True)
    print(f"torch {torch.__version__}; exports in {out_dir}", flush=True)
    print("| model | " + " | ".join(args.exporters.split(",")) + " |")
    print("| --- |" + " --- |" * len(args.exporters.split(",")))
    for name in args.models.split(","):
        cells = []
        for exporter in args.exporters.split(","):
            result, _ = try_one(name, exporter, args.graphpipe, out_dir)
            cells.append(result.replace("|", "/"))
            for f in os.listdir(out_dir):  # the exports of big models add up: keep none unless asked
                if args.out is None and f.startswith(f"{name}_{exporter}"):
                    os.remove(os.path.join(out_dir, f))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
