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


def timm_model(name):
    """A timm model (random weights, 4 classes) at 64x64 where it takes another image size, else at
    the size its configuration fixes."""
    import timm
    arch = name[len("timm_"):]
    try:
        if name in TIMM_IMAGE:
            raise TypeError("a fixed image size")
        model = timm.create_model(arch, pretrained=False, num_classes=4, img_size=64)
        size = 64
    except TypeError:  # no img_size argument: any size its strides allow, or the size it needs
        model = timm.create_model(arch, pretrained=False, num_classes=4)
        size = TIMM_IMAGE.get(name, 64)
    for m in model.modules():  # no dropout or stochastic depth draws: the sweep is about import
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model, (3, size, size)


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
    # A vision and a text tower (CLIP, SigLIP), classified from the image.
    towers = dict(vision_config=dict(image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32),
                  text_config=dict(vocab_size=fx.VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=32), num_labels=4)
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
        "hf_clip": lambda: t.CLIPForImageClassification(t.CLIPConfig(**towers)),
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
    # A fifth wave (2026-12-03, stop 57): more decoders (state-space, hybrid and mixture-of-experts
    # ones among them), encoders, encoder-decoders, vision and audio families.
    lm = dict(small, num_key_value_heads=1, pad_token_id=0)
    s2s = dict(d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
               encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=16, decoder_start_token_id=0, **enc)
    makers.update({
        "hf_cohere": lambda: t.CohereForCausalLM(t.CohereConfig(**lm)),
        "hf_stablelm": lambda: t.StableLmForSequenceClassification(t.StableLmConfig(**dec)),
        "hf_persimmon": lambda: t.PersimmonForSequenceClassification(t.PersimmonConfig(**enc_small)),
        "hf_codegen": lambda: t.CodeGenForCausalLM(t.CodeGenConfig(vocab_size=fx.VOCAB, n_embd=16, n_layer=2, n_head=2,
                                                                   rotary_dim=4, n_positions=16, n_ctx=16)),
        "hf_gpt_neo": lambda: t.GPTNeoForSequenceClassification(t.GPTNeoConfig(
            hidden_size=16, num_layers=2, num_heads=2, attention_types=[[["global", "local"], 1]], window_size=4,
            max_position_embeddings=16, **enc)),
        "hf_xglm": lambda: t.XGLMForCausalLM(t.XGLMConfig(vocab_size=fx.VOCAB, d_model=16, num_layers=2,
                                                          attention_heads=2, ffn_dim=32, max_position_embeddings=16)),
        "hf_mamba2": lambda: t.Mamba2ForCausalLM(t.Mamba2Config(vocab_size=fx.VOCAB, hidden_size=16, state_size=4,
                                                                num_hidden_layers=2, expand=2, conv_kernel=4,
                                                                n_groups=1, num_heads=4, head_dim=8, chunk_size=8)),
        "hf_falcon_mamba": lambda: t.FalconMambaForCausalLM(t.FalconMambaConfig(
            vocab_size=fx.VOCAB, hidden_size=16, state_size=4, num_hidden_layers=2, expand=2, conv_kernel=4)),
        "hf_jamba": lambda: t.JambaForSequenceClassification(batched_experts(t.JambaConfig(
            num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2,
            attn_layer_offset=1, mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4,
            use_mamba_kernels=False, **dec))),
        "hf_olmoe": lambda: t.OlmoeForCausalLM(batched_experts(t.OlmoeConfig(num_experts=4, num_experts_per_tok=2,
                                                                             **lm))),
        "hf_nemotron": lambda: t.NemotronForSequenceClassification(t.NemotronConfig(head_dim=8, **dec)),
        "hf_glm": lambda: t.GlmForSequenceClassification(t.GlmConfig(head_dim=8, **dec)),
        "hf_granite": lambda: t.GraniteForCausalLM(t.GraniteConfig(**lm)),
        "hf_deepseek_v3": lambda: t.DeepseekV3ForCausalLM(batched_experts(t.DeepseekV3Config(
            vocab_size=fx.VOCAB, hidden_size=16, intermediate_size=32, moe_intermediate_size=16, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=2, n_shared_experts=1, n_routed_experts=4,
            num_experts_per_tok=2, n_group=1, topk_group=1, q_lora_rank=8, kv_lora_rank=8, qk_rope_head_dim=4,
            v_head_dim=8, qk_nope_head_dim=4, first_k_dense_replace=1, max_position_embeddings=16, pad_token_id=0))),
        "hf_lfm2": lambda: t.Lfm2ForCausalLM(t.Lfm2Config(vocab_size=fx.VOCAB, hidden_size=16, intermediate_size=32,
                                                          num_hidden_layers=2, num_attention_heads=2,
                                                          num_key_value_heads=1, full_attn_idxs=[1],
                                                          max_position_embeddings=16, pad_token_id=0)),
        "hf_smollm3": lambda: t.SmolLM3ForSequenceClassification(t.SmolLM3Config(**dec)),
        "hf_convbert": lambda: t.ConvBertForSequenceClassification(t.ConvBertConfig(embedding_size=16,
                                                                                    conv_kernel_size=3, **enc_small)),
        "hf_ernie": lambda: t.ErnieForSequenceClassification(t.ErnieConfig(**enc_small)),
        "hf_rembert": lambda: t.RemBertForSequenceClassification(t.RemBertConfig(
            input_embedding_size=16, output_embedding_size=16, **enc_small)),
        "hf_ibert": lambda: t.IBertForSequenceClassification(t.IBertConfig(**dict(enc_small, max_position_embeddings=20,
                                                                                pad_token_id=1))),
        "hf_layoutlm": lambda: t.LayoutLMForSequenceClassification(t.LayoutLMConfig(**enc_small)),
        "hf_canine": lambda: t.CanineForSequenceClassification(t.CanineConfig(
            hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=64, num_hash_functions=2, num_hash_buckets=64, downsampling_rate=2,
            local_transformer_stride=4, num_labels=4)),
        "hf_pegasus": lambda: t.PegasusForConditionalGeneration(t.PegasusConfig(**s2s)),
        "hf_mbart": lambda: t.MBartForConditionalGeneration(t.MBartConfig(**s2s)),
        "hf_marian": lambda: t.MarianMTModel(t.MarianConfig(**s2s)),
        "hf_blenderbot": lambda: t.BlenderbotForConditionalGeneration(t.BlenderbotConfig(**s2s)),
        "hf_m2m100": lambda: t.M2M100ForConditionalGeneration(t.M2M100Config(**s2s)),
        "hf_led": lambda: t.LEDForConditionalGeneration(t.LEDConfig(
            attention_window=[4, 4], max_encoder_position_embeddings=16, max_decoder_position_embeddings=16,
            **{k: v for k, v in s2s.items() if k != "max_position_embeddings"})),
        "hf_longt5": lambda: t.LongT5ForConditionalGeneration(t.LongT5Config(
            d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2, relative_attention_num_buckets=8, local_radius=2,
            encoder_attention_type="local", decoder_start_token_id=0, **enc)),
        "hf_switch_transformers": lambda: t.SwitchTransformersForConditionalGeneration(t.SwitchTransformersConfig(
            d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=2, num_experts=4,
            expert_capacity=16, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1,
            relative_attention_num_buckets=8, decoder_start_token_id=0, **enc)),
        "hf_cvt": lambda: t.CvtForImageClassification(t.CvtConfig(embed_dim=[8, 16, 32], num_heads=[1, 2, 2],
                                                                   depth=[1, 2, 3], num_labels=4)),
        "hf_regnet": lambda: t.RegNetForImageClassification(t.RegNetConfig(
            embedding_size=8, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], groups_width=8, num_labels=4)),
        "hf_resnet": lambda: t.ResNetForImageClassification(t.ResNetConfig(
            embedding_size=8, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_labels=4)),
        "hf_bit": lambda: t.BitForImageClassification(t.BitConfig(
            embedding_size=8, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_groups=4, num_labels=4)),
        "hf_efficientnet": lambda: t.EfficientNetForImageClassification(t.EfficientNetConfig(
            image_size=32, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=64, num_labels=4)),
        "hf_mobilenet_v2": lambda: t.MobileNetV2ForImageClassification(t.MobileNetV2Config(
            image_size=32, depth_multiplier=0.25, num_labels=4)),
        "hf_swiftformer": lambda: t.SwiftFormerForImageClassification(t.SwiftFormerConfig(
            depths=[1, 1, 1, 1], embed_dims=[8, 16, 32, 64], num_labels=4)),
        "hf_data2vec_vision": lambda: t.Data2VecVisionForImageClassification(t.Data2VecVisionConfig(**vit)),
        "hf_pvt": lambda: t.PvtForImageClassification(t.PvtConfig(
            image_size=32, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_attention_heads=[1, 2, 2, 2],
            num_labels=4)),
        "hf_unispeech": lambda: t.UniSpeechForSequenceClassification(t.UniSpeechConfig(**wav)),
        "hf_unispeech_sat": lambda: t.UniSpeechSatForSequenceClassification(t.UniSpeechSatConfig(**wav)),
        "hf_sew_d": lambda: t.SEWDForSequenceClassification(t.SEWDConfig(squeeze_factor=2, position_buckets=16,
                                                                         max_relative_positions=16, **wav)),
        "hf_ast": lambda: t.ASTForAudioClassification(t.ASTConfig(
            hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, patch_size=8,
            frequency_stride=8, time_stride=8, max_length=32, num_mel_bins=16, num_labels=4)),
        "hf_wav2vec2_conformer": lambda: t.Wav2Vec2ConformerForSequenceClassification(t.Wav2Vec2ConformerConfig(
            conv_depthwise_kernel_size=3, **wav)),
    })
    # A seventh wave (2026-12-04, stop 58): current decoders (mixture-of-experts, state-space and
    # hybrid, recurrent, linear-attention ones among them), encoders, encoder-decoders and vision
    # families.
    vit_reg = {k: v for k, v in vit.items() if k != "intermediate_size"}
    hybrid_mamba = dict(mamba_n_heads=4, mamba_d_head=8, mamba_n_groups=1, mamba_d_state=4, mamba_d_conv=4,
                        mamba_expand=2, mamba_chunk_size=8)
    t5ish = dict(d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2, relative_attention_num_buckets=8,
                 decoder_start_token_id=0, **enc)
    def dbrx_config():
        cfg = t.DbrxConfig(vocab_size=fx.VOCAB, d_model=16, n_heads=2, n_layers=2, max_seq_len=16, pad_token_id=0,
                           attn_config=dict(kv_n_heads=1, clip_qkv=8.0),  # as DBRX itself; None fails
                           ffn_config=dict(ffn_hidden_size=32, moe_num_experts=4, moe_top_k=2))
        cfg.attn_config.rope_theta = 10000.0  # DbrxAttention reads it, DbrxAttentionConfig no longer has it
        return cfg

    makers.update({
        "hf_phimoe": lambda: t.PhimoeForSequenceClassification(batched_experts(t.PhimoeConfig(
            num_local_experts=4, num_experts_per_tok=2, **dec))),
        "hf_granitemoe": lambda: t.GraniteMoeForCausalLM(batched_experts(t.GraniteMoeConfig(
            num_local_experts=4, num_experts_per_tok=2, **lm))),
        "hf_dbrx": lambda: t.DbrxForCausalLM(batched_experts(dbrx_config())),
        "hf_helium": lambda: t.HeliumForSequenceClassification(t.HeliumConfig(head_dim=8, **dec)),
        "hf_bitnet": lambda: t.BitNetForCausalLM(t.BitNetConfig(**lm)),
        "hf_zamba2": lambda: t.Zamba2ForSequenceClassification(t.Zamba2Config(
            vocab_size=fx.VOCAB, hidden_size=16, num_hidden_layers=2, layers_block_type=["mamba", "hybrid"],
            mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, mamba_ngroups=1, n_mamba_heads=2, use_mamba_kernels=False,
            chunk_size=8, intermediate_size=32, num_attention_heads=2, num_key_value_heads=2, num_mem_blocks=1,
            adapter_rank=4, max_position_embeddings=16, num_labels=4, pad_token_id=0)),
        "hf_bamba": lambda: t.BambaForCausalLM(t.BambaConfig(attn_layer_indices=[1], **hybrid_mamba, **lm)),
        "hf_recurrent_gemma": lambda: t.RecurrentGemmaForCausalLM(t.RecurrentGemmaConfig(
            vocab_size=fx.VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, lru_width=16, attention_window_size=8, conv1d_width=4,
            block_types=["recurrent", "attention"], pad_token_id=0)),
        "hf_openai_gpt": lambda: t.OpenAIGPTForSequenceClassification(t.OpenAIGPTConfig(
            vocab_size=fx.VOCAB, n_positions=16, n_embd=16, n_layer=2, n_head=2, num_labels=4, pad_token_id=0)),
        "hf_biogpt": lambda: t.BioGptForSequenceClassification(t.BioGptConfig(
            **dict(enc_small, max_position_embeddings=20))),
        "hf_ctrl": lambda: t.CTRLForSequenceClassification(t.CTRLConfig(
            vocab_size=fx.VOCAB, n_positions=16, n_embd=16, dff=32, n_layer=2, n_head=2, num_labels=4, pad_token_id=0)),
        "hf_exaone4": lambda: t.Exaone4ForSequenceClassification(t.Exaone4Config(
            sliding_window=4, layer_types=["sliding_attention", "full_attention"], **dec)),
        "hf_arcee": lambda: t.ArceeForSequenceClassification(t.ArceeConfig(**dec)),
        "hf_qwen3_moe": lambda: t.Qwen3MoeForSequenceClassification(batched_experts(t.Qwen3MoeConfig(
            head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, **dec))),
        "hf_qwen3_next": lambda: t.Qwen3NextForSequenceClassification(batched_experts(t.Qwen3NextConfig(
            head_dim=8, linear_conv_kernel_dim=4, linear_key_head_dim=8, linear_value_head_dim=8,
            linear_num_key_heads=2, linear_num_value_heads=2, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=16, shared_expert_intermediate_size=16,
            layer_types=["linear_attention", "full_attention"], **dec))),
        "hf_falcon_h1": lambda: t.FalconH1ForCausalLM(t.FalconH1Config(mamba_d_ssm=32, **hybrid_mamba, **lm)),
        "hf_granitemoe_hybrid": lambda: t.GraniteMoeHybridForCausalLM(batched_experts(t.GraniteMoeHybridConfig(
            layer_types=["mamba", "attention"], num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=32,
            **hybrid_mamba, **lm))),
        "hf_ernie4_5": lambda: t.Ernie4_5ForCausalLM(t.Ernie4_5Config(head_dim=8, **lm)),
        "hf_glm4": lambda: t.Glm4ForSequenceClassification(t.Glm4Config(head_dim=8, **dec)),
        "hf_deepseek_v2": lambda: t.DeepseekV2ForSequenceClassification(batched_experts(t.DeepseekV2Config(
            vocab_size=fx.VOCAB, hidden_size=16, intermediate_size=32, moe_intermediate_size=16, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=2, n_shared_experts=1, n_routed_experts=4,
            num_experts_per_tok=2, n_group=1, topk_group=1, q_lora_rank=None, kv_lora_rank=8, qk_rope_head_dim=4,
            v_head_dim=8, qk_nope_head_dim=4, head_dim=4, first_k_dense_replace=1, max_position_embeddings=16,
            num_labels=4, pad_token_id=0))),
        "hf_gpt_oss": lambda: t.GptOssForSequenceClassification(batched_experts(t.GptOssConfig(
            head_dim=8, sliding_window=4, num_local_experts=4, num_experts_per_tok=2, **dec))),
        "hf_xlm": lambda: t.XLMForSequenceClassification(t.XLMConfig(
            vocab_size=fx.VOCAB, emb_dim=16, n_layers=2, n_heads=2, max_position_embeddings=16, num_labels=4,
            pad_token_id=0)),
        "hf_flaubert": lambda: t.FlaubertForSequenceClassification(t.FlaubertConfig(
            vocab_size=fx.VOCAB, emb_dim=16, n_layers=2, n_heads=2, max_position_embeddings=16, layerdrop=0.0,
            num_labels=4, pad_token_id=0)),  # not pre_norm: its pre-norm path indexes a cache object
        "hf_xmod": lambda: t.XmodForSequenceClassification(t.XmodConfig(
            languages=["en_XX", "de_DE"], default_language="en_XX", adapter_reduction_factor=2,
            **dict(enc_small, max_position_embeddings=20, pad_token_id=1))),
        "hf_roc_bert": lambda: t.RoCBertForSequenceClassification(t.RoCBertConfig(
            pronunciation_embed_dim=8, pronunciation_vocab_size=16, shape_embed_dim=8, shape_vocab_size=16,
            **enc_small)),
        "hf_yoso": lambda: t.YosoForSequenceClassification(t.YosoConfig(
            use_expectation=True, hash_code_len=4, num_hash=4, conv_window=3,
            **dict(enc_small, max_position_embeddings=20))),
        "hf_markuplm": lambda: t.MarkupLMForSequenceClassification(t.MarkupLMConfig(
            max_depth=4, xpath_unit_hidden_size=8, **dict(enc_small, max_position_embeddings=20, pad_token_id=1))),
        "hf_lilt": lambda: t.LiltForSequenceClassification(t.LiltConfig(
            channel_shrink_ratio=4, max_2d_position_embeddings=64,  # six layout embeddings of hidden_size // 6
            **dict(enc_small, hidden_size=24, intermediate_size=48, max_position_embeddings=20, pad_token_id=1))),
        "hf_luke": lambda: t.LukeForSequenceClassification(t.LukeConfig(
            entity_vocab_size=8, entity_emb_size=8, **dict(enc_small, max_position_embeddings=20, pad_token_id=1))),
        "hf_mt5": lambda: t.MT5ForConditionalGeneration(t.MT5Config(**t5ish)),
        "hf_umt5": lambda: t.UMT5ForConditionalGeneration(t.UMT5Config(**t5ish)),
        "hf_plbart": lambda: t.PLBartForConditionalGeneration(t.PLBartConfig(**s2s)),
        "hf_prophetnet": lambda: t.ProphetNetForConditionalGeneration(t.ProphetNetConfig(
            vocab_size=fx.VOCAB, hidden_size=16, encoder_ffn_dim=32, num_encoder_layers=2, num_encoder_attention_heads=2,
            decoder_ffn_dim=32, num_decoder_layers=2, num_decoder_attention_heads=2, max_position_embeddings=16,
            ngram=2, num_buckets=8, relative_max_distance=16, decoder_start_token_id=0, pad_token_id=0)),
        "hf_fsmt": lambda: t.FSMTForConditionalGeneration(t.FSMTConfig(
            langs=["en", "de"], src_vocab_size=fx.VOCAB, tgt_vocab_size=fx.VOCAB,
            **{k: v for k, v in s2s.items() if k not in ("vocab_size", "num_labels")})),
        "hf_bigbird_pegasus": lambda: t.BigBirdPegasusForConditionalGeneration(t.BigBirdPegasusConfig(
            attention_type="original_full", **s2s)),
        "hf_nllb_moe": lambda: t.NllbMoeForConditionalGeneration(t.NllbMoeConfig(
            num_experts=4, expert_capacity=16, encoder_sparse_step=2, decoder_sparse_step=2, encoder_layerdrop=0.0,
            decoder_layerdrop=0.0, **s2s)),
        "hf_mvp": lambda: t.MvpForConditionalGeneration(t.MvpConfig(use_prompt=True, prompt_length=4,
                                                                    prompt_mid_dim=16, **s2s)),
        "hf_vit_msn": lambda: t.ViTMSNForImageClassification(t.ViTMSNConfig(**vit)),
        "hf_ijepa": lambda: t.IJepaForImageClassification(t.IJepaConfig(**vit)),
        "hf_hiera": lambda: t.HieraForImageClassification(t.HieraConfig(
            embed_dim=8, image_size=[32, 32], depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8], num_labels=4)),
        "hf_siglip": lambda: t.SiglipForImageClassification(t.SiglipConfig(**towers)),
        "hf_dinov2_registers": lambda: t.Dinov2WithRegistersForImageClassification(t.Dinov2WithRegistersConfig(
            num_register_tokens=2, **vit_reg)),
        "hf_textnet": lambda: t.TextNetForImageClassification(t.TextNetConfig(
            stem_out_channels=8, hidden_sizes=[8, 8, 16, 32, 64], num_labels=4)),
        "hf_hgnet_v2": lambda: t.HGNetV2ForImageClassification(t.HGNetV2Config(
            stem_channels=[3, 8, 16], stage_in_channels=[16, 16, 32, 64], stage_mid_channels=[8, 16, 32, 64],
            stage_out_channels=[16, 32, 64, 128], stage_num_blocks=[1, 1, 1, 1], stage_numb_of_layers=[2, 2, 2, 2],
            hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], use_learnable_affine_block=True, num_labels=4)),
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
HF_WAVE5 = ["hf_cohere", "hf_stablelm", "hf_persimmon", "hf_codegen", "hf_gpt_neo", "hf_xglm", "hf_mamba2",
            "hf_falcon_mamba", "hf_jamba", "hf_olmoe", "hf_nemotron", "hf_glm", "hf_granite", "hf_deepseek_v3",
            "hf_lfm2", "hf_smollm3", "hf_convbert", "hf_ernie", "hf_rembert", "hf_ibert", "hf_layoutlm", "hf_canine",
            "hf_pegasus", "hf_mbart", "hf_marian", "hf_blenderbot", "hf_m2m100", "hf_led", "hf_longt5",
            "hf_switch_transformers", "hf_cvt", "hf_regnet", "hf_resnet", "hf_bit", "hf_efficientnet",
            "hf_mobilenet_v2", "hf_swiftformer", "hf_data2vec_vision", "hf_pvt", "hf_unispeech", "hf_unispeech_sat",
            "hf_sew_d", "hf_ast", "hf_wav2vec2_conformer"]
# A seventh wave (2026-12-04, stop 58): current decoders (mixture-of-experts, state-space and hybrid,
# recurrent, linear-attention ones among them), encoders, encoder-decoders and vision families.
HF_WAVE6 = ["hf_phimoe", "hf_granitemoe", "hf_dbrx", "hf_helium", "hf_bitnet", "hf_zamba2", "hf_bamba",
            "hf_recurrent_gemma", "hf_openai_gpt", "hf_biogpt", "hf_ctrl", "hf_exaone4", "hf_arcee", "hf_qwen3_moe",
            "hf_qwen3_next", "hf_falcon_h1", "hf_granitemoe_hybrid", "hf_ernie4_5", "hf_glm4", "hf_deepseek_v2",
            "hf_gpt_oss", "hf_xlm", "hf_flaubert", "hf_xmod", "hf_roc_bert", "hf_yoso", "hf_markuplm",
            "hf_lilt", "hf_luke", "hf_mt5", "hf_umt5", "hf_plbart", "hf_prophetnet", "hf_fsmt", "hf_bigbird_pegasus",
            "hf_nllb_moe", "hf_mvp", "hf_vit_msn", "hf_ijepa", "hf_hiera", "hf_siglip", "hf_dinov2_registers",
            "hf_textnet", "hf_hgnet_v2"]
# timm (1.0), a sixth wave (2026-12-03, stop 57): efficient CNNs and hybrids, MLP mixers, hierarchical
# and convolutional transformers, a recurrent one (Sequencer2D), MambaOut.
TIMM = ["timm_ghostnet_100", "timm_rexnet_100", "timm_hardcorenas_a", "timm_mixnet_s", "timm_lcnet_050",
        "timm_fbnetv3_b", "timm_efficientvit_b0", "timm_fastvit_t8", "timm_repvit_m1", "timm_edgenext_xx_small",
        "timm_efficientformer_l1", "timm_efficientformerv2_s0", "timm_levit_128s", "timm_pit_ti_224",
        "timm_xcit_nano_12_p16_224", "timm_crossvit_tiny_240", "timm_cait_xxs24_224", "timm_deit3_small_patch16_224",
        "timm_eva02_tiny_patch14_224", "timm_resmlp_12_224", "timm_mixer_s32_224", "timm_gmlp_ti16_224",
        "timm_poolformerv2_s12", "timm_caformer_s18", "timm_inception_next_tiny", "timm_hrnet_w18_small", "timm_dla34",
        "timm_dpn68", "timm_res2net50_14w_8s", "timm_skresnet18", "timm_selecsls42b", "timm_ese_vovnet19b_dw",
        "timm_cspresnet50", "timm_cspdarknet53", "timm_dm_nfnet_f0", "timm_regnetz_b16", "timm_coatnet_nano_rw_224",
        "timm_maxvit_nano_rw_256", "timm_coat_lite_tiny", "timm_twins_svt_small", "timm_visformer_tiny",
        "timm_nest_tiny", "timm_sequencer2d_s", "timm_gcvit_xxtiny", "timm_davit_tiny", "timm_hiera_tiny_224",
        "timm_mambaout_femto", "timm_starnet_s1", "timm_tiny_vit_5m_224", "timm_nextvit_small",
        "timm_ghostnetv2_100", "timm_mobilenetv4_conv_small", "timm_mobilenetv4_hybrid_medium", "timm_efficientvit_m0",
        "timm_convnextv2_atto", "timm_resnest14d", "timm_volo_d1_224", "timm_tnt_s_patch16_224"]
TIMM_IMAGE = {"timm_efficientformer_l1": 224, "timm_crossvit_tiny_240": 240}  # sizes their position tables fix
HF_SEQ2SEQ = {"hf_t5", "hf_bart", "hf_pegasus", "hf_mbart", "hf_marian", "hf_blenderbot", "hf_m2m100", "hf_led",
              "hf_longt5", "hf_switch_transformers", "hf_mt5", "hf_umt5", "hf_plbart", "hf_prophetnet", "hf_fsmt",
              "hf_bigbird_pegasus", "hf_nllb_moe", "hf_mvp"}
HF_CAUSAL = {"hf_mamba", "hf_rwkv", "hf_cohere", "hf_codegen", "hf_xglm", "hf_mamba2", "hf_falcon_mamba", "hf_olmoe",
             "hf_granite", "hf_deepseek_v3", "hf_lfm2", "hf_granitemoe", "hf_dbrx", "hf_bitnet", "hf_bamba",
             "hf_recurrent_gemma", "hf_falcon_h1", "hf_granitemoe_hybrid", "hf_ernie4_5"}
# Audio: the keyword the model reads and one example's shape (a waveform, or log-mel frames).
HF_AUDIO = {"hf_whisper": ("input_features", (8, 32)), "hf_wav2vec2": ("input_values", (400,)),
            "hf_hubert": ("input_values", (400,)), "hf_wavlm": ("input_values", (400,)),
            "hf_sew": ("input_values", (400,)), "hf_data2vec_audio": ("input_values", (400,)),
            "hf_unispeech": ("input_values", (400,)), "hf_unispeech_sat": ("input_values", (400,)),
            "hf_sew_d": ("input_values", (400,)), "hf_ast": ("input_values", (32, 16)),
            "hf_wav2vec2_conformer": ("input_values", (400,))}
HF_IMAGE = {"hf_cvt", "hf_regnet", "hf_resnet", "hf_bit", "hf_efficientnet", "hf_mobilenet_v2", "hf_swiftformer",
            "hf_data2vec_vision", "hf_pvt", "hf_swinv2", "hf_focalnet", "hf_pvt_v2", "hf_convnextv2", "hf_mobilevitv2", "hf_swin", "hf_clip", "hf_levit", "hf_poolformer", "hf_vit", "hf_deit", "hf_beit", "hf_dinov2", "hf_convnext", "hf_segformer", "hf_mobilevit",
            "hf_vit_msn", "hf_ijepa", "hf_hiera", "hf_siglip", "hf_dinov2_registers", "hf_textnet", "hf_hgnet_v2"}


def try_one(name, exporter, graphpipe, out_dir):
    torch.manual_seed(0)
    model, shape = hf(name) if name.startswith("hf_") else timm_model(name) if name.startswith("timm_") else vision(name)
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
    ap.add_argument("--models", default=",".join(VISION + SEGMENTATION + VIDEO + HF + HF_CURRENT + HF_WAVE3 + HF_WAVE4 +
                                                 HF_WAVE5 + HF_WAVE6 + TIMM))
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
