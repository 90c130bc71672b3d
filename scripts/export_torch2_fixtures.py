#!/usr/bin/env python3
"""Regenerates tests/data/torch2/: tiny models exported by a current PyTorch, with PyTorch's own
losses for 3 SGD steps, for tests/exec/test_torch2_fixtures.cc. CI never runs this script: the
fixtures it writes are committed and are the contract.

Needs torch 2.x, onnx and onnxscript (and transformers for the Hugging Face models, torchvision for
ConvNeXt, EfficientNet and Swin), e.g. in a venv outside the repository:
  python3 -m venv /work/venv-torch && /work/venv-torch/bin/pip install torch torchvision onnxscript onnx transformers
  /work/venv-torch/bin/python scripts/export_torch2_fixtures.py [--out tests/data/torch2]

For each model (mlp, cnn, encoder, ops, adaptive, shuffle, moe, upscale, recurrent, stn, stncubic, affine, stn3d, fold, scattermax, indexput, unpool; Hugging Face gpt2, gpt2tied,
gpt2cls, bert, roberta, distilbert, vit, llama, qwen2, mixtral from tiny random configs, which need
transformers; torchvision convnext, convnext_sd, efficientnet and swin with stochastic depth) and
exporter (dynamo: torch.onnx.export(...,
dynamo=True), the default since torch 2.9; torchscript: dynamo=False; functions: dynamo=False with
export_modules_as_functions=True, every module a model-local function; mlp and cnn only; llama,
qwen2 and mixtral dynamo only; convnext_sd TorchScript only; static: dynamo=True the default way, without
dynamic_shapes, from the batch's first 3 rows, so the file fixes the batch at 3 and spells it as a
number in its shape constants and masks; llama and gpt2 only; opset23: dynamo=True with
opset_version=23, its Attention and RMSNormalization operators; opset25: opset_version=25, the newest
torch writes itself, Attention of opset 25; llama, qwen2 and gpt2 only) it
writes <model>_<exporter>/ with
  model.onnx     the model in training mode, weights as initializers, a dynamic batch dimension
  input_0.npy    one batch of inputs (float32; token ids, int64, for the Hugging Face models),
                 labels.npy its class ids (int64)
  reference.json torch's cross-entropy losses for 3 SGD steps (lr, momentum below) on that batch
                 (null for convnext_sd, whose random draws matter), the exporter, opset and IR
                 version, and the torch/onnx/onnxscript (transformers, torchvision) versions
"""
import argparse
import json
import os
import shutil
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, STEPS, LR, MOMENTUM = 4, 3, 0.1, 0.9


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 10)
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.gelu(self.norm(self.fc2(x)))
        return self.fc3(x)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Encoder(nn.Module):
    """One pre-norm transformer encoder layer over a fixed-length sequence, mean-pooled."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                                activation="gelu", batch_first=True, norm_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.layer(x).mean(dim=1))


class Ops(nn.Module):
    """The opset 18+ forms of existing ops as the dynamo exporter writes them: Split with
    num_outputs (chunk), Resize with its opset 18 attributes (interpolate), Pad (reflect), Slice,
    ReduceMean with axes as an input."""

    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        a, b = torch.chunk(self.conv(x), 2, dim=1)
        y = F.interpolate(torch.cat([F.relu(a), torch.sigmoid(b)], 1), scale_factor=0.5, mode="bilinear")
        y = F.pad(y, (1, 1, 0, 0), mode="reflect")[..., 1:-1]
        return self.fc(y.flatten(1)) + y.mean(dim=(1, 2, 3)).unsqueeze(1)


class AdaptivePool(nn.Module):
    """adaptive_avg_pool2d to an output size that does not divide the input (torchvision VGG and
    AlexNet at small images): the dynamo exporter decomposes it into index arithmetic (Range,
    Div, Floor, Sign, Min, Max over static windows, GatherND, Where, ReduceSum); the TorchScript
    exporter cannot export it. The BatchNorm keeps the dynamo exporter's optimizer off (as for VGG),
    so the index arithmetic reaches graphpipe unfolded."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 3 * 3, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(self.bn(self.conv(x))), (3, 3)), 1))


class Shuffle(nn.Module):
    """ShuffleNetV2's unit: the channels chunked in two, one half through a convolution and
    BatchNorm, the halves concatenated and shuffled (view, transpose, view). With BatchNorm the
    dynamo exporter's optimizer is off, and the chunk stays SplitToSequence read by SequenceAt."""

    def __init__(self):
        super().__init__()
        self.stem, self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x1, x2 = self.stem(x).chunk(2, dim=1)
        y = torch.cat([x1, F.relu(self.bn(self.conv(x2)))], dim=1)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class Upscale(nn.Module):
    """Sub-pixel convolution (ESPCN, the upsamplers of generative models): PixelShuffle, which both
    exporters write as DepthToSpace (mode CRD), and its inverse PixelUnshuffle."""

    def __init__(self):
        super().__init__()
        self.up, self.conv, self.fc = nn.Conv2d(3, 12, 3, padding=1), nn.Conv2d(3, 4, 3, padding=1), nn.Linear(16, 10)

    def forward(self, x):
        y = F.relu(F.pixel_shuffle(self.up(x), 2))
        y = F.pixel_unshuffle(self.conv(y), 2)
        return self.fc(y.mean(dim=(2, 3)))


class Moe(nn.Module):
    """A mixture-of-experts layer over tokens with Mixtral's router and a dense dispatch: each
    token's two best experts (TopK), their gate values softmaxed and scattered into a dense row of
    weights (ScatterElements), every expert run and the outputs weighted and summed. Gradients
    reach the router through the top-2 values only."""

    def __init__(self, dim=16, experts=4):
        super().__init__()
        self.inp, self.router = nn.Linear(8, dim), nn.Linear(dim, experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(experts))
        self.fc = nn.Linear(dim, 10)

    def forward(self, x):
        h = F.relu(self.inp(x))
        logits = self.router(h)
        top, idx = logits.topk(2, dim=-1)
        gates = torch.zeros_like(logits).scatter(-1, idx, F.softmax(top, dim=-1))
        out = torch.stack([e(h) for e in self.experts], dim=-2)
        h = h + (gates.unsqueeze(-1) * out).sum(-2)
        return self.fc(h.mean(1))


class Recurrent(nn.Module):
    """A plain recurrent classifier: a bidirectional two-layer nn.RNN (tanh: ONNX's reference
    evaluator, which checks the export, has no Relu for RNN; torch_reference.py's rnn_tagger covers
    ReLU) over a sequence of feature vectors, the last step's state to a linear head."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(8, 12, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(24, 10)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class Stn(nn.Module):
    """A spatial transformer: a linear localisation net predicts an affine map per sample, whose
    grid (built in forward: no buffer to mistake for a weight) samples the convolution's features
    with F.grid_sample (ONNX GridSample: bilinear, reflection padding, align_corners), then a head."""

    def __init__(self, size=8, mode="bilinear", padding_mode="reflection"):
        super().__init__()
        self.conv, self.loc, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(3 * size * size, 6), nn.Linear(16, 10)
        self.size, self.mode, self.padding_mode = size, mode, padding_mode
        with torch.no_grad():  # near the identity map, as STNs start
            self.loc.weight.mul_(0.1)
            self.loc.bias.copy_(torch.tensor([1.0, 0.1, 0.0, -0.1, 1.0, 0.0]))

    def forward(self, x):
        n = self.size
        lin = torch.arange(n, dtype=torch.float32) * (2.0 / (n - 1)) - 1.0
        base = torch.stack([lin.view(1, n).expand(n, n), lin.view(n, 1).expand(n, n), torch.ones(n, n)], -1)
        theta = self.loc(x.flatten(1)).view(-1, 2, 3)
        grid = torch.matmul(base.view(1, n * n, 3), theta.transpose(1, 2)).view(-1, n, n, 2)
        y = F.grid_sample(self.conv(x), grid, mode=self.mode, padding_mode=self.padding_mode, align_corners=True)
        return self.fc(F.avg_pool2d(F.relu(y), 4).flatten(1))


class AffineStn(nn.Module):
    """The spatial transformer of PyTorch's tutorial: a convolutional localisation net predicts an
    affine map per sample, F.affine_grid turns it into a sampling grid (ONNX AffineGrid in a
    TorchScript export, opset 20; the dynamo exporter decomposes it), F.grid_sample samples the
    image's features with it (bilinear, zeros padding, pixel centres), then a head."""

    min_opset = 20  # AffineGrid

    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(16, 10)
        self.loc = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(36, 6))
        with torch.no_grad():  # near the identity map, as STNs start
            self.loc[3].weight.mul_(0.1)
            self.loc[3].bias.copy_(torch.tensor([1.0, 0.1, 0.0, -0.1, 1.0, 0.0]))

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3)
        f = self.conv(x)
        grid = F.affine_grid(theta, f.size(), align_corners=False)
        y = F.grid_sample(f, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        return self.fc(F.avg_pool2d(F.relu(y), 4).flatten(1))


class FoldUnfold(nn.Module):
    """Soft split and soft composition (T2T-ViT's, FuseFormer's): nn.Unfold cuts overlapping 3x3
    patches of a convolution's features (stride 2, padding 1), a linear layer mixes each patch, and
    nn.Fold sums the patches back into the image (ONNX Col2Im; Unfold is exported as a Pad and a
    Gather of the patches), then a head."""

    min_opset = 18  # Col2Im

    def __init__(self):
        super().__init__()
        self.conv, self.mix, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(36, 36), nn.Linear(16, 10)
        self.unfold, self.fold = nn.Unfold(3, padding=1, stride=2), nn.Fold((8, 8), 3, padding=1, stride=2)

    def forward(self, x):
        patches = self.unfold(self.conv(x))  # [N, 4*9, 16]
        y = self.fold(self.mix(patches.transpose(1, 2)).transpose(1, 2))
        return self.fc(F.avg_pool2d(F.relu(y), 4).flatten(1))


class ScatterMax(nn.Module):
    """Message passing as graph networks pool it (PyG's max aggregation): each of 6 nodes' features
    goes through a linear layer and is max-pooled into its destination (of 3) with
    scatter_reduce(amax, include_self) (ONNX ScatterElements, reduction max, opset 18), then a
    head."""

    min_opset = 18  # ScatterElements' max

    def __init__(self):
        super().__init__()
        self.msg, self.fc = nn.Linear(8, 8), nn.Linear(24, 10)
        self.register_buffer("dst", torch.tensor([0, 2, 1, 0, 2, 2]), persistent=False)

    def forward(self, x):  # x [N, 6, 8]
        m = torch.tanh(self.msg(x))
        index = self.dst.view(1, 6, 1).expand(x.shape[0], 6, 8)
        pooled = torch.full((x.shape[0], 3, 8), -1.0).scatter_reduce(1, index, m, reduce="amax", include_self=True)
        return self.fc(pooled.flatten(1))


class TokenSplit(nn.Module):
    """A class token split off with torch.tensor_split, as MViTv2's pooling attention does in every
    block: the TorchScript exporter writes tensor_split as a Loop that inserts each piece into a
    sequence (ONNX Loop, SequenceInsert; graphpipe unrolls it), the dynamo exporter as Slices."""

    def __init__(self):
        super().__init__()
        self.proj, self.fc = nn.Linear(8, 8), nn.Linear(16, 10)

    def forward(self, x):  # x [N, 5, 8]
        h = torch.tanh(self.proj(x))
        cls, rest = torch.tensor_split(h, (1,), dim=1)
        return self.fc(torch.cat([cls.squeeze(1), rest.mean(1)], dim=1))


class IndexPut(nn.Module):
    """Index assignment as models write it: a learned token over position 0 (`h[:, 0] = tok`), two
    positions rescaled in place (`h[:, idx] = h[:, idx] * s`; the dynamo exporter writes it as a
    ScatterND whose slices hold the batch, after moving the indexed axis to the front), and every
    position's features summed into one of 3 slots per row by index_put(accumulate=True) over
    (row, slot) tuples (ScatterND add, tuples that follow the batch), then a head."""

    def __init__(self):
        super().__init__()
        self.l, self.fc = nn.Linear(8, 8), nn.Linear(24, 10)
        self.tok, self.scale = nn.Parameter(torch.randn(8)), nn.Parameter(torch.rand(2, 1) + 0.5)
        self.register_buffer("slot", torch.tensor([2, 0, 2, 1, 0, 1]), persistent=False)
        self.register_buffer("idx", torch.tensor([1, 3]), persistent=False)

    def forward(self, x):  # x [N, 6, 8]
        h = self.l(x)
        h[:, 0] = self.tok
        h[:, self.idx] = h[:, self.idx] * self.scale
        rows = torch.arange(x.shape[0]).unsqueeze(1)
        pooled = torch.zeros(x.shape[0], 3, 8).index_put((rows, self.slot.unsqueeze(0)), torch.tanh(h),
                                                         accumulate=True)
        return self.fc(pooled.flatten(1))


class Spectrogram(nn.Module):
    """An audio front end: a learned filter over the waveform, the magnitude of its short-time
    Fourier transform (torch.stft, centred with reflect padding: ONNX STFT, dynamo only, the Hann
    window a buffer), averaged over time, a linear head. The filter's gradient passes through the
    STFT."""

    def __init__(self):
        super().__init__()
        self.filt = nn.Conv1d(1, 1, 5, padding=2)
        self.register_buffer("window", torch.hann_window(16))
        self.head = nn.Linear(9, 10)

    def forward(self, x):
        y = self.filt(x.unsqueeze(1)).squeeze(1)
        spec = torch.stft(y, n_fft=16, hop_length=4, window=self.window, return_complex=True)
        return self.head(spec.abs().mean(-1))


class Unpool(nn.Module):
    """SegNet's and ENet's decoder: max pooling that returns its indices (ONNX MaxPool's Indices
    output), a convolution, and nn.MaxUnpool2d putting each value back where its maximum was (the
    dynamo exporter writes it as a ScatterND into the flattened output, the indices made relative
    to each plane by a second MaxPool's and offset by a Range over the batch), then a head."""

    def __init__(self):
        super().__init__()
        self.enc, self.mid, self.dec = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 1)
        self.pool, self.unpool, self.fc = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2), nn.Linear(64, 10)

    def forward(self, x):
        y, idx = self.pool(F.relu(self.enc(x)))
        z = self.dec(F.relu(self.unpool(self.mid(y), idx)))
        return self.fc(F.avg_pool2d(z, 2).flatten(1))


def stn_bicubic():
    """The spatial transformer sampling bicubically with border padding (ONNX GridSample's cubic)."""
    return Stn(mode="bicubic", padding_mode="border")


class Stn3d(nn.Module):
    """A volumetric spatial transformer, as VoxelMorph registers volumes: a Conv3d predicts a
    displacement per voxel, added to the identity grid (built in forward), which samples another
    Conv3d's features with F.grid_sample on 5-D input (ONNX GridSample: trilinear, zeros padding,
    align_corners), then a head."""

    def __init__(self, size=4):
        super().__init__()
        self.feat, self.flow = nn.Conv3d(2, 3, 3, padding=1), nn.Conv3d(2, 3, 3, padding=1)
        self.fc = nn.Linear(3 * (size // 2) ** 3, 10)
        self.size = size

    def forward(self, x):
        n = self.size
        lin = torch.arange(n, dtype=torch.float32) * (2.0 / (n - 1)) - 1.0
        # grid_sample's last dim is (x, y, z) = (W, H, D)
        base = torch.stack([lin.view(1, 1, n).expand(n, n, n), lin.view(1, n, 1).expand(n, n, n),
                            lin.view(n, 1, 1).expand(n, n, n)], -1)
        grid = base + 0.3 * torch.tanh(self.flow(x)).permute(0, 2, 3, 4, 1)
        y = F.grid_sample(self.feat(x), grid, mode="bilinear", padding_mode="zeros", align_corners=True)
        return self.fc(F.avg_pool3d(F.relu(y), 2).flatten(1))


VOCAB, SEQ, PAD = 32, 8, 0


class HfLastToken(nn.Module):
    """A Hugging Face causal LM (tiny random config, no dropout) trained on the next token after
    the sequence: the logits of the last position, cross-entropy over the vocabulary."""

    def __init__(self, make_model):
        super().__init__()
        self.m = make_model()

    def forward(self, x):
        return self.m(input_ids=x).logits[:, -1, :]


class HfClassifier(nn.Module):
    """A Hugging Face *ForSequenceClassification model (tiny random config, no dropout)."""

    def __init__(self, make_model):
        super().__init__()
        self.m = make_model()

    def forward(self, x):
        return self.m(input_ids=x).logits


class HfSeq2SeqLastToken(nn.Module):
    """A Hugging Face encoder-decoder LM (T5, BART; tiny random config, no dropout) whose decoder
    reads the sequence too, trained on the token after it: the last position's logits."""

    def __init__(self, make_model):
        super().__init__()
        self.m = make_model()

    def forward(self, x):
        return self.m(input_ids=x, decoder_input_ids=x).logits[:, -1, :]


class HfAudioClassifier(nn.Module):
    """A Hugging Face audio classifier (tiny random config, no dropout) on a waveform
    (`input_values`: Wav2Vec2, HuBERT) or log-mel frames (`input_features`: Whisper)."""

    def __init__(self, make_model, keyword):
        super().__init__()
        self.m = make_model()
        self.keyword = keyword

    def forward(self, x):
        return self.m(**{self.keyword: x}).logits


def hf_gpt2():
    import transformers
    # Untied lm_head: the dynamo exporter's optimizer folds the tied head's Transpose into a new
    # initializer, so the file holds two copies that train apart.
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=False)
    return HfLastToken(lambda: transformers.GPT2LMHeadModel(cfg))


def hf_gpt2_tied():
    import transformers
    # Tied lm_head (HF's default): the dynamo exporter's optimizer folds the head's Transpose of the
    # token embedding into a new initializer, which graphpipe's importer reads as that Transpose
    # again (retie_transposed_copies); the TorchScript export reads the one initializer twice.
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True)
    return HfLastToken(lambda: transformers.GPT2LMHeadModel(cfg))


def hf_bert():
    import transformers
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, num_labels=4)
    return HfClassifier(lambda: transformers.BertForSequenceClassification(cfg))


def hf_roberta():
    import transformers
    # Position ids come from the ids at run time: cumsum(ids != pad) * (ids != pad) + pad (CumSum
    # and GatherElements of the token_type_ids buffer over integers).
    cfg = transformers.RobertaConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=20, pad_token_id=1,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=4)
    return HfClassifier(lambda: transformers.RobertaForSequenceClassification(cfg))


def hf_t5():
    import transformers
    # Relative position buckets (a log of the distance, cast to int64, Min, Where), RMS norms, the
    # decoder's causal and cross attention, the head tied to the embedding (scaled by d_model^-0.5).
    # With dropout_rate=0.0 torch 2.15's dynamo export fails ("Cannot view a tensor with shape
    # [s77, 8, 2, 8] ... as (s77, 8, 16)"): the config keeps its dropout, and the modules and the
    # attention's functional dropout get 0.
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
                                relative_attention_num_buckets=8, decoder_start_token_id=0, pad_token_id=0)

    def model():
        m = transformers.T5ForConditionalGeneration(cfg)
        for d in m.modules():
            if isinstance(d, nn.Dropout):
                d.p = 0.0
            if isinstance(getattr(d, "dropout", None), float):  # the attention's functional dropout
                d.dropout = 0.0
        return m
    return HfSeq2SeqLastToken(model)


def hf_longt5():
    import transformers
    # LongT5's local attention: each block of `local_radius` tokens attends to itself and its
    # neighbours (the sequence padded to whole blocks, blocks concatenated with their neighbours,
    # a local relative-position bias and a block mask), over T5's relative position buckets.
    cfg = transformers.LongT5Config(vocab_size=VOCAB, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
                                    relative_attention_num_buckets=8, local_radius=2, encoder_attention_type="local",
                                    dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)
    return HfSeq2SeqLastToken(lambda: transformers.LongT5ForConditionalGeneration(cfg))


def hf_pegasus():
    import transformers
    # Sinusoidal positions kept as a parameter that never trains (requires_grad off), scaled
    # embeddings, pre-norm layers with a final LayerNorm in both stacks, a tied head.
    cfg = transformers.PegasusConfig(vocab_size=VOCAB, d_model=16, encoder_layers=2, decoder_layers=2,
                                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                                     decoder_ffn_dim=32, max_position_embeddings=16, dropout=0.0,
                                     attention_dropout=0.0, activation_dropout=0.0, decoder_start_token_id=0,
                                     pad_token_id=0)
    return HfSeq2SeqLastToken(lambda: transformers.PegasusForConditionalGeneration(cfg))


def hf_bart():
    import transformers
    # Learned positions offset by 2, a tied head, and final_logits_bias: a buffer of zeros added to
    # the logits, which torch never trains.
    cfg = transformers.BartConfig(vocab_size=VOCAB, d_model=16, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                                  decoder_ffn_dim=32, max_position_embeddings=16, dropout=0.0, attention_dropout=0.0,
                                  activation_dropout=0.0, pad_token_id=0)
    return HfSeq2SeqLastToken(lambda: transformers.BartForConditionalGeneration(cfg))


def hf_xlnet():
    import transformers
    # Works in [T, N] (the ids transposed: the batch is axis 1 inside), relative attention by Einsum.
    cfg = transformers.XLNetConfig(vocab_size=VOCAB, d_model=16, n_layer=2, n_head=2, d_inner=32, dropout=0.0,
                                   summary_last_dropout=0.0, num_labels=4)
    return HfClassifier(lambda: transformers.XLNetForSequenceClassification(cfg))


def hf_mamba():
    import transformers
    # The selective scan's Python loop over the sequence, unrolled by the exporter; a depthwise
    # causal Conv1d, Softplus, Exp.
    cfg = transformers.MambaConfig(vocab_size=VOCAB, hidden_size=16, state_size=4, num_hidden_layers=2, expand=2,
                                   conv_kernel=4)
    return HfLastToken(lambda: transformers.MambaForCausalLM(cfg))


def hf_whisper():
    import transformers
    # The encoder over log-mel frames: two Conv1d with GELU, a sinusoidal position table (frozen in
    # torch: it must not train), the classifier over the mean of the layers' weighted states.
    cfg = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=8, max_source_positions=16, d_model=16,
                                     encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=32, decoder_layers=1,
                                     decoder_attention_heads=2, decoder_ffn_dim=32, dropout=0.0, num_labels=4)
    return HfAudioClassifier(lambda: transformers.WhisperForAudioClassification(cfg), "input_features")


def hf_wav2vec2():
    import transformers
    # A convolutional feature encoder over the waveform (GroupNorm), and a positional convolution
    # whose weight is weight-normalised (weight = g * v / ||v||: g and v train, the weight is computed).
    cfg = transformers.Wav2Vec2Config(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                                      conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
                                      num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2,
                                      classifier_proj_size=8, num_labels=4, mask_time_prob=0.0, layerdrop=0.0,
                                      hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                                      feat_proj_dropout=0.0, final_dropout=0.0)
    return HfAudioClassifier(lambda: transformers.Wav2Vec2ForSequenceClassification(cfg), "input_values")


def hf_fnet():
    import transformers
    # Token mixing by Fourier transforms instead of attention: the real part of a DFT over the
    # hidden size and then over the sequence (torch.fft.fftn; ONNX DFT, dynamo only: TorchScript
    # cannot export aten::fft_fftn).
    cfg = transformers.FNetConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, intermediate_size=32,
                                  max_position_embeddings=16, hidden_dropout_prob=0.0, num_labels=4)
    return HfClassifier(lambda: transformers.FNetForSequenceClassification(cfg))


def hf_distilbert():
    import transformers
    cfg = transformers.DistilBertConfig(vocab_size=VOCAB, dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                                        max_position_embeddings=16, dropout=0.0, attention_dropout=0.0,
                                        seq_classif_dropout=0.0, num_labels=4)
    return HfClassifier(lambda: transformers.DistilBertForSequenceClassification(cfg))


class HfImageClassifier(nn.Module):
    """A Hugging Face *ForImageClassification model (tiny random config, no dropout)."""

    def __init__(self, make_model):
        super().__init__()
        self.m = make_model()

    def forward(self, x):
        return self.m(pixel_values=x).logits


def hf_vit():
    import transformers
    cfg = transformers.ViTConfig(image_size=8, patch_size=4, num_channels=3, hidden_size=16, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=32, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0, num_labels=4)
    return HfImageClassifier(lambda: transformers.ViTForImageClassification(cfg))


def hf_llama():
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16)
    return HfLastToken(lambda: transformers.LlamaForCausalLM(cfg))


def hf_qwen2():
    import transformers
    cfg = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16)
    return HfLastToken(lambda: transformers.Qwen2ForCausalLM(cfg))


def hf_mixtral():
    """Mixtral's sparse MoE (4 experts, top-2 router). transformers 5 runs the experts through its
    own grouped_mm op by default, which torch's exporter cannot convert; "batched_mm" runs every
    expert on every token, weighted by the router's scattered top-2 gates, and exports."""
    import transformers
    cfg = transformers.MixtralConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                                     num_local_experts=4, num_experts_per_tok=2)
    cfg._experts_implementation = "batched_mm"
    return HfLastToken(lambda: transformers.MixtralForCausalLM(cfg))


def hf_deepseek_v3():
    """DeepSeek-V3: multi-head latent attention (queries and keys/values through low-rank
    projections, a rotary part split off each head), a first dense layer, then a MoE layer with
    a shared expert and 4 routed ones picked by a sigmoid router's group-limited top-2 (a bias
    added for the choice only), experts run "batched_mm" as for Mixtral. Its TorchScript file
    builds a Tile's repeats from a OneHot of constants, which graphpipe folds at import."""
    import transformers
    cfg = transformers.DeepseekV3Config(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=32, moe_intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, n_shared_experts=1, n_routed_experts=4, num_experts_per_tok=2,
        n_group=1, topk_group=1, q_lora_rank=8, kv_lora_rank=8, qk_rope_head_dim=4, v_head_dim=8, qk_nope_head_dim=4,
        first_k_dense_replace=1, max_position_embeddings=16, pad_token_id=None, attention_dropout=0.0)
    cfg._experts_implementation = "batched_mm"
    return HfLastToken(lambda: transformers.DeepseekV3ForCausalLM(cfg))


def hf_gpt2_classifier():
    import transformers
    # GPT2ForSequenceClassification: the logits at each row's last non-padding token, found with
    # argmax over positions · mask and picked with arange(batch) (Range over the batch, then Gather
    # or GatherND). The batch (make) pads the rows' ends with different lengths.
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, num_labels=4,
                                  pad_token_id=PAD, bos_token_id=1, eos_token_id=1)
    return HfClassifier(lambda: transformers.GPT2ForSequenceClassification(cfg))


# torchvision models with stochastic depth (RandomUniformLike < survival rate, divided by it). The
# rate is 1e-9 per block, which float32 rounds to a survival of exactly 1: the random ops are in the
# file and run, every draw survives, and torch's losses (whose draws cannot be replayed) stay
# comparable. tests/exec/test_ops_random.cc checks the draws themselves and a pipeline with p = 0.5.
SD_PROB = 1e-9


def tv_convnext():
    from torchvision.models.convnext import ConvNeXt, CNBlockConfig
    return ConvNeXt([CNBlockConfig(8, 16, 2), CNBlockConfig(16, None, 2)], stochastic_depth_prob=SD_PROB, num_classes=4)


def tv_convnext_sd():
    """ConvNeXt with stochastic depth 0.5 (0.25 and 0.5 in the blocks that draw): the random ops
    matter here, so torch's losses are not comparable (its draws cannot be replayed). For
    RuntimeEquivalence: a pipeline's draws equal one device's."""
    from torchvision.models.convnext import ConvNeXt, CNBlockConfig
    return ConvNeXt([CNBlockConfig(8, 16, 2), CNBlockConfig(16, None, 2)], stochastic_depth_prob=0.5, num_classes=4)


def tv_efficientnet():
    from functools import partial
    from torchvision.models.efficientnet import EfficientNet, MBConvConfig
    block = partial(MBConvConfig, width_mult=1.0, depth_mult=1.0)
    return EfficientNet([block(1, 3, 1, 8, 8, 1), block(2, 3, 2, 8, 16, 2)], dropout=0.0,
                        stochastic_depth_prob=SD_PROB, num_classes=4, last_channel=32)


def tv_swin():
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[2, 2], embed_dim=8, depths=[2, 2], num_heads=[1, 2], window_size=[2, 2],
                           stochastic_depth_prob=SD_PROB, num_classes=4)


# name: (constructor, one sample's shape, classes; token ids in [0, VOCAB) where classes is VOCAB
# for the language models and the input is a sequence of ids)
MODELS = {
    "mlp": (Mlp, (16,), 10),
    "cnn": (Cnn, (3, 8, 8), 10),
    "encoder": (Encoder, (6, 16), 4),
    "ops": (Ops, (3, 8, 8), 10),
    "adaptive": (AdaptivePool, (3, 8, 8), 10),
    "shuffle": (Shuffle, (3, 8, 8), 10),
    "moe": (Moe, (4, 8), 10),
    "upscale": (Upscale, (3, 8, 8), 10),
    "recurrent": (Recurrent, (6, 8), 10),
    "stn": (Stn, (3, 8, 8), 10),
    "stncubic": (stn_bicubic, (3, 8, 8), 10),
    "affine": (AffineStn, (3, 8, 8), 10),
    "fold": (FoldUnfold, (3, 8, 8), 10),
    "scattermax": (ScatterMax, (6, 8), 10),
    "indexput": (IndexPut, (6, 8), 10),
    "tokensplit": (TokenSplit, (5, 8), 10),
    "unpool": (Unpool, (3, 8, 8), 10),
    "stn3d": (Stn3d, (2, 4, 4, 4), 10),
    "gpt2": (hf_gpt2, "ids", VOCAB),
    "gpt2tied": (hf_gpt2_tied, "ids", VOCAB),
    "bert": (hf_bert, "ids", 4),
    "roberta": (hf_roberta, "ids", 4),
    "distilbert": (hf_distilbert, "ids", 4),
    "vit": (hf_vit, (3, 8, 8), 4),
    "llama": (hf_llama, "ids", VOCAB),
    "qwen2": (hf_qwen2, "ids", VOCAB),
    "mixtral": (hf_mixtral, "ids", VOCAB),
    "deepseek": (hf_deepseek_v3, "ids", VOCAB),
    "gpt2cls": (hf_gpt2_classifier, "padded ids", 4),
    "convnext": (tv_convnext, (3, 16, 16), 4),
    "convnext_sd": (tv_convnext_sd, (3, 16, 16), 4),
    "efficientnet": (tv_efficientnet, (3, 16, 16), 4),
    "swin": (tv_swin, (3, 16, 16), 4),
    "t5": (hf_t5, "ids", VOCAB),
    "bart": (hf_bart, "ids", VOCAB),
    "longt5": (hf_longt5, "ids", VOCAB),
    "pegasus": (hf_pegasus, "ids", VOCAB),
    "xlnet": (hf_xlnet, "ids", 4),
    "mamba": (hf_mamba, "ids", VOCAB),
    "whisper": (hf_whisper, (8, 32), 4),
    "wav2vec2": (hf_wav2vec2, (400,), 4),
    "fnet": (hf_fnet, "ids", 4),
    "stft": (Spectrogram, (64,), 10),
}
# The TorchScript exporter cannot export grouped-query attention (scaled_dot_product_attention
# with enable_gqa), adaptive pooling to a size that does not divide the input, nor a 5-D
# grid_sample: these are exported by dynamo only; indexput's TorchScript file computes another
# forward than torch's (0.97 apart: check_forward refuses it), and the TorchScript exporter fails
# on max_unpool2d ("cond must be a bool").
# Mamba's TorchScript file is invalid: tensor_split's sizes come from a Tile whose repeats have rank
# 2 (graphpipe and ONNX Runtime 1.32 both refuse it).
# TorchScript cannot export FNet's torch.fft.fftn.
# TorchScript cannot export torch.stft's complex output ("STFT does not currently support complex types").
DYNAMO_ONLY = {"llama", "qwen2", "mixtral", "adaptive", "stn3d", "indexput", "unpool", "mamba", "fnet", "stft"}
# Exported with a fixed batch (exporter "static"): the batch size of their example input.
STATIC = {"llama", "gpt2"}
STATIC_BATCH = 3
# Exported a second way at opset 23, where torch writes scaled_dot_product_attention as ONNX's
# Attention and RMSNorm as RMSNormalization (graphpipe imports both as their ONNX function bodies).
OPSET23 = {"llama", "qwen2", "gpt2"}
# Models whose random ops change the result: no forward check against torch, no torch losses.
RANDOM = {"convnext_sd"}
# T5 without dropout fails torch 2.15's dynamo export ("Failed to decompose the FX graph ... Cannot
# view a tensor with shape [s77, 8, 2, 8] and strides (128, 8, 64, 1) as (s77, 8, 16)"); with its
# attention dropout kept it exports (the architecture sweep trains that file) but is random.
# torch 2.15's dynamo exporter fails on LongT5 ("'NoneType' object has no attribute 'shape'" in
# torch.export).
TORCHSCRIPT_ONLY = {"convnext_sd", "t5", "longt5"}


def make(name, seed=0):
    cls, shape, classes = MODELS[name]
    torch.manual_seed(seed)
    model = cls().train()
    # No parameter starts constant (norm scales of ones, zero biases): the dynamo exporter's
    # optimizer merges equal initializers (tying norm1 and norm2) and drops the addition of a zero
    # bias (which torch then trains and the file no longer has).
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                if pname.endswith("weight"):
                    p.uniform_(0.5, 1.5)
                else:
                    p.uniform_(-0.5, 0.5)
    g = torch.Generator().manual_seed(seed + 1)
    if shape == "ids":
        x = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    elif shape == "padded ids":  # no padding id inside a row; row b ends in b padding ids
        x = torch.randint(PAD + 1, VOCAB, (BATCH, SEQ), generator=g)
        for b in range(BATCH):
            if b:
                x[b, SEQ - b:] = PAD
    else:
        x = torch.randn((BATCH,) + shape, generator=g)
    y = torch.randint(0, classes, (BATCH,), generator=g)
    return model, x, y


def export(model, x, path, exporter):
    kwargs = dict(input_names=["input"], output_names=["logits"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "static":  # torch.onnx.export's default: every dimension as the example has it
            torch.onnx.export(model, (x[:STATIC_BATCH],), path, dynamo=True, external_data=False, **kwargs)
        elif exporter in ("dynamo", "opset23", "opset25"):
            batch = torch.export.Dim("batch", min=2, max=1024)
            # The default optimizer folds BatchNormalization into the convolution before it with the
            # running statistics (inference semantics), even for a model in training mode: models with
            # BatchNorm are exported without it.
            optimize = not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
            if exporter == "opset23":  # opset 23's Attention, RMSNormalization (and RotaryEmbedding)
                kwargs["opset_version"] = 23
            if exporter == "opset25":  # the newest torch writes itself: Attention of opset 24 and 25
                kwargs["opset_version"] = 25
            torch.onnx.export(model, (x,), path, dynamo=True, external_data=False, optimize=optimize,
                              dynamic_shapes={"x": {0: batch}}, **kwargs)
        else:  # torchscript, and functions: each torch.nn module a model-local ONNX function
            # opset 17, or the model's own minimum (Col2Im is opset 18)
            opset = max(17, getattr(model, "min_opset", 17))
            torch.onnx.export(model, (x,), path, dynamo=False, opset_version=opset, do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING,
                              dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                              export_modules_as_functions=exporter == "functions", **kwargs)


def check_forward(path, model, x, bn_eval):
    """The exported file computes what the module computes (ONNX's reference evaluator)."""
    import onnx.inliner
    from onnx.reference import ReferenceEvaluator
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)] if bn_eval else []
    for m in bns:
        m.eval()
    with torch.no_grad():
        want = model(x).numpy()
    for m in bns:
        m.train()
    got = ReferenceEvaluator(onnx.inliner.inline_local_functions(onnx.load(path))).run(None, {"input": x.numpy()})[0]
    err = float(np.abs(got - want).max())
    if err > 1e-4:
        raise SystemExit(f"{path}: the ONNX forward differs from torch's by {err}")


def torch_losses(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def folded_buffers(path, model, x):
    """Initializers of an optimized dynamo export that are a rotary embedding's cos/sin tables: the
    optimizer folds them out of the inv_freq buffer into initializers that look like learned tensors
    to an importer. reference.json lists them under "frozen"; the fixture test checks that
    graphpipe's importer recognises exactly these as sinusoidal position tables."""
    rotary = [m for n, m in model.named_modules() if n.endswith("rotary_emb")]
    tables = []
    if rotary:
        pos = torch.arange(x.shape[1]).unsqueeze(0)
        with torch.no_grad():
            full = [t.numpy() for t in rotary[0](torch.zeros(1, x.shape[1], 1), pos)]
        # cos and sin repeat their frequencies in two halves; DeepSeek-V3's interleaved rotary
        # reads (and its export folds) only the first.
        tables = [t.ravel() for t in full] + [t[..., : t.shape[-1] // 2].ravel() for t in full]
    # Tables torch keeps as parameters that never train (Whisper's and Pegasus's sinusoidal
    # embed_positions, requires_grad False), whatever name the file gives them, whole or their first
    # rows (the dynamo exporter folds the positions the sequence reads: Pegasus's [8, 16] of [16, 16]).
    frozen = [p.detach().numpy().reshape(p.shape[0], -1) for p in model.parameters()
              if not p.requires_grad and p.dim() >= 2]
    if not tables and not frozen:
        return []

    def first_rows_of(a, t):
        rows = a.size // t.shape[1]
        return a.size % t.shape[1] == 0 and 0 < rows <= t.shape[0] and np.allclose(a.ravel(), t[:rows].ravel())

    out = []
    for init in onnx.load(path).graph.initializer:
        a = onnx.numpy_helper.to_array(init)
        if a.dtype == np.float32 and (any(a.size == t.size and np.allclose(a.ravel(), t) for t in tables) or
                                      any(first_rows_of(a, t) for t in frozen)):
            out.append(init.name)
    return out


def buffers_in_file(path, model):
    """Float buffers of the module that a TorchScript file holds as initializers (BART's
    final_logits_bias, zeros added to the logits): the file cannot say that torch never trains them
    (a dynamo file's graph signature does), so a user names them under `frozen:`; reference.json
    lists them under "freeze" and the fixture test passes them so."""
    names = {i.name for i in onnx.load(path).graph.initializer}
    return [n for n, b in model.named_buffers() if b.is_floating_point() and n in names]


def versions(name):
    out = {"torch": torch.__version__, "onnx": onnx.__version__}
    try:
        import onnxscript
        out["onnxscript"] = onnxscript.__version__
    except ImportError:
        pass
    if MODELS[name][0].__name__.startswith("hf_"):
        import transformers
        out["transformers"] = transformers.__version__
    if MODELS[name][0].__name__.startswith("tv_"):
        import torchvision
        out["torchvision"] = torchvision.__version__
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "tests", "data", "torch2")))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--exporters", default="dynamo,torchscript,functions")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name in args.models.split(","):
        for exporter in args.exporters.split(","):
            if exporter == "functions" and name not in ("mlp", "cnn"):
                continue  # the rest have no modules worth a function beyond what mlp and cnn check
            if exporter not in ("dynamo", "static", "opset23", "opset25") and name in DYNAMO_ONLY:
                continue
            if exporter != "torchscript" and name in TORCHSCRIPT_ONLY:
                continue
            if exporter == "static" and name not in STATIC:
                continue
            if exporter in ("opset23", "opset25") and name not in OPSET23:
                continue
            model, x, y = make(name)
            d = os.path.join(args.out, f"{name}_{exporter}")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            path = os.path.join(d, "model.onnx")
            export(model, x, path, exporter)
            # Export must not have touched the weights or the BatchNorm statistics: rebuild to be sure.
            model, x, y = make(name)
            # The dynamo exporter writes BatchNormalization in inference form (running statistics, no
            # training_mode) even for a model in training mode, so the file's forward is the eval-mode
            # module's. graphpipe trains BatchNorm with batch statistics whatever the file says (as
            # torch's train() does): torch's losses are the training-mode module's.
            bn_inference_form = exporter == "dynamo" and any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
            # onnx 1.23's reference evaluator reads GridSample's opset-20 mode names only, and the
            # TorchScript exporter writes opset 16's "bilinear": that file is checked by the fixture
            # test's losses alone. Its bicubic sampling pads the point before reading the 4x4 pixels
            # around it, where torch pads each of the 16 reads (they agree with zeros padding, the
            # only one ONNX's cubic node tests use): stncubic (border padding) is checked by its
            # losses alone too. Its MaxPool with a 1x1 kernel returns indices within each plane where
            # ONNX (and its own MaxPool with a larger kernel) index the whole input, which unpool's
            # MaxUnpool rebuilds from: unpool is checked by its losses alone as well. Its Tile fails on
            # the repeats XLNet's TorchScript file computes ("Issues with types ... (operator 'Tile')"):
            # checked by its losses alone.
            if (name not in RANDOM and name not in ("stncubic", "unpool") and
                    (name, exporter) not in {("stn", "torchscript"), ("xlnet", "torchscript")}):
                check_forward(path, model, x[:STATIC_BATCH] if exporter == "static" else x, bn_inference_form)
            ids = MODELS[name][1] in ("ids", "padded ids")
            np.save(os.path.join(d, "input_0.npy"), x.numpy().astype(np.int64 if ids else np.float32))
            np.save(os.path.join(d, "labels.npy"), y.numpy().astype(np.int64))
            m = onnx.load(path)
            opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
            ref = {"model": name, "exporter": exporter, "ir_version": m.ir_version, "opset": opset,
                   "functions": len(m.functions), "batch": BATCH, "steps": STEPS, "lr": LR, "momentum": MOMENTUM,
                   "loss": "cross_entropy", "batchnorm_in_file": "inference" if bn_inference_form else "training"}
            frozen = folded_buffers(path, model, x)
            if frozen:
                ref["frozen"] = frozen
            freeze = buffers_in_file(path, model) if exporter == "torchscript" else []
            if freeze:
                ref["freeze"] = freeze
            if name in RANDOM:
                ref["losses"] = None
                ref["note"] = "random ops with effect: torch's draws cannot be replayed, so no reference losses"
            else:
                ref["losses"] = torch_losses(model, x, y)
            ref["versions"] = versions(name)
            with open(os.path.join(d, "reference.json"), "w") as f:
                json.dump(ref, f, indent=1)
                f.write("\n")
            print(f"{d}: opset {opset}, IR {m.ir_version}, {len(m.graph.node)} nodes, "
                  f"{len(m.functions)} functions, {os.path.getsize(path)} bytes, losses {ref['losses']}")


if __name__ == "__main__":
    main()
