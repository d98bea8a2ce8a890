"""A small GPT in the nanoGPT register: read it top to bottom.

Pre-LayerNorm decoder-only transformer with learned absolute positions, multi-head causal self-attention
(``scaled_dot_product_attention``), a 4x GELU MLP and an LM head tied to the token embedding (Press & Wolf 2017,
arXiv 1608.05859). Parameter counts follow Kaplan et al. (arXiv 2001.08361): ``n_params`` is the *non-embedding*
count (everything except the token and position embeddings; the tied head adds nothing), ``n_params_total``
everything.

Named sizes go from ``debug`` (a forward/backward in milliseconds on CPU, used by CI) to ``25m``
(≈ 25M non-embedding parameters). Per layer the non-embedding count is ≈ 12·d² (4·d² attention, 8·d² MLP).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from mixlaw.errors import InputError

__all__ = ["GPT", "GPTConfig", "SIZES", "gpt_config", "n_params_of"]


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a GPT.

    Parameters
    ----------
    vocab_size
        Tokenizer vocabulary (256 for plain bytes, 4096 for the default BPE).
    block_size
        Context length in tokens.
    n_layer, n_head, d_model
        Depth, attention heads, width (``d_model % n_head == 0``).
    dropout
        Dropout probability (0 for the probe: single-epoch-ish training on small models).
    """

    vocab_size: int = 4096
    block_size: int = 256
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 64
    dropout: float = 0.0

    def to_dict(self) -> dict[str, int | float]:
        return asdict(self)


# name -> (d_model, n_layer, n_head). Non-embedding params ≈ 12·d²·n_layer (+ LayerNorm/bias terms).
SIZES: dict[str, tuple[int, int, int]] = {
    "debug": (16, 1, 2),  # ≈ 3.4k: the real loop in CI, milliseconds per step
    "12k": (16, 4, 2),  # ≈ 13k
    "25k": (24, 3, 2),  # ≈ 21k
    "50k": (32, 4, 4),  # ≈ 50k
    "100k": (48, 4, 4),  # ≈ 111k
    "200k": (64, 4, 4),  # ≈ 199k
    "250k": (72, 4, 4),  # ≈ 250k (2.2× 100k: the target size of examples/mixture_probe)
    "400k": (80, 5, 4),  # ≈ 389k (a factor-2 ladder 25k…400k → 1.6m for the planner)
    "450k": (96, 4, 4),  # ≈ 445k
    "1m": (128, 5, 4),  # ≈ 0.99M
    "1.6m": (160, 5, 4),  # ≈ 1.55M
    "3m": (192, 7, 6),  # ≈ 3.1M
    "10m": (320, 8, 8),  # ≈ 9.9M
    "25m": (512, 8, 8),  # ≈ 25.2M
}


def gpt_config(size: str, *, vocab_size: int, block_size: int) -> GPTConfig:
    """The :class:`GPTConfig` of a named size (see :data:`SIZES`)."""
    if size not in SIZES:
        raise InputError(f"unknown model size {size!r}; expected one of {', '.join(SIZES)}")
    d_model, n_layer, n_head = SIZES[size]
    return GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head, d_model=d_model)


def n_params_of(size: str) -> int:
    """Non-embedding parameters of a named size without building it: ``L·(12d² + 13d) + 2d`` (per layer two
    LayerNorms 4d, attention 4d² + 4d, MLP 8d² + 5d; the final LayerNorm 2d). Equals ``GPT(...).n_params``."""
    if size not in SIZES:
        raise InputError(f"unknown model size {size!r}; expected one of {', '.join(SIZES)}")
    d, n_layer, _ = SIZES[size]
    return n_layer * (12 * d * d + 13 * d) + 2 * d


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        if cfg.d_model % cfg.n_head:
            raise InputError(f"d_model={cfg.d_model} is not divisible by n_head={cfg.n_head}")
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout
        self.fp32_attention = False  # set by GPT.set_fp32_attention (a speed setting, not part of the shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # batch, time, channels
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        p = self.dropout if self.training else 0.0
        if self.fp32_attention:  # under bf16 autocast on CPU: the fp32 kernel is faster (and exact-er) there
            with torch.autocast(x.device.type, enabled=False):
                y = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, dropout_p=p)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)


_SQRT_8_OVER_PI = math.sqrt(8.0 / math.pi)  # 2·sqrt(2/π): tanh(u) = 2·σ(2u) − 1


def gelu_tanh_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """The tanh-approximate GELU written with a sigmoid, the same function to float rounding:

    ``0.5·x·(1 + tanh(u)) = x·σ(2u)``, ``u = sqrt(2/π)·(x + 0.044715·x³)`` (Hendrycks & Gimpel, arXiv 1606.08415;
    ``tanh(u) = 2σ(2u) − 1``). Under ``torch.compile`` on CPU the sigmoid (one vectorised exp) compiles to a
    kernel 2.2× faster, forward and backward, than ``tanh`` (1M bf16 elements: 4.4 vs 9.6 ms, one thread)."""
    return x * torch.sigmoid(_SQRT_8_OVER_PI * (x + 0.044715 * x * x * x))


class _CrossEntropy(torch.autograd.Function):
    """Mean next-token cross-entropy ``mean(logsumexp(z) − z_y)`` with its gradient written out,
    ``(softmax(z) − onehot(y)) / n``: the same function and gradient as ``F.cross_entropy`` (no ignore index, no
    weights), which inductor compiles to one pass over the logits instead of two (decomposed ``nll_loss``
    backward: a reduction and an int64 compare per logit). Computed in at least fp32 (bf16 logits are upcast)."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # (n, V), (n,)
        z = logits.to(torch.promote_types(logits.dtype, torch.float32))  # bf16 -> fp32; fp64 stays
        lse = torch.logsumexp(z, dim=-1)  # (n,)
        ctx.save_for_backward(logits, y, lse)
        return (lse - z.gather(1, y[:, None]).squeeze(1)).mean()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        logits, y, lse = ctx.saved_tensors
        n, V = logits.shape
        onehot = torch.arange(V, device=y.device, dtype=torch.int32)[None, :] == y.to(torch.int32)[:, None]
        z = logits.to(lse.dtype)
        grad = (torch.exp(z - lse[:, None]) - onehot.to(lse.dtype)) * (g / n)  # (n, V)
        return grad.to(logits.dtype), None


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model)
        self.compiled_forms = True  # see GPT.set_compiled_forms

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.compiled_forms and torch.compiler.is_compiling():
            return self.proj(gelu_tanh_sigmoid(self.fc(x)))  # (B, T, C)
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))  # (B, T, C)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))  # (B, T, C)
        x = x + self.mlp(self.ln2(x))  # (B, T, C)
        return x


class GPT(nn.Module):
    """Decoder-only transformer; ``forward(idx, targets)`` returns ``(logits, loss)``.

    The loss is the mean next-token cross-entropy in nats/token.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: the head counts as embedding
        self.compiled_forms = True  # see set_compiled_forms
        self.apply(self._init_weights)
        # GPT-2 scaled init of the residual projections: keeps the residual stream's variance flat with depth
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    @property
    def n_params_total(self) -> int:
        """All distinct parameters (the tied head counted once)."""
        return sum(p.numel() for p in self.parameters())

    @property
    def n_params(self) -> int:
        """Non-embedding parameters: total minus token and position embeddings."""
        return self.n_params_total - self.wte.weight.numel() - self.wpe.weight.numel()

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T = idx.shape  # batch, time
        if T > self.cfg.block_size:
            raise InputError(f"sequence of {T} tokens exceeds block_size={self.cfg.block_size}")
        pos = torch.arange(T, device=idx.device)  # (T,)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        x = self.ln_f(x)  # (B, T, C)
        logits = self.lm_head(x)  # (B, T, V)
        if targets is None:
            return logits, None
        if self.compiled_forms and torch.compiler.is_compiling():
            loss = _CrossEntropy.apply(logits.view(B * T, -1), targets.reshape(B * T))
        else:
            loss = F.cross_entropy(logits.float().view(B * T, -1), targets.reshape(B * T))
        return logits, loss

    def set_compiled_forms(self, on: bool) -> None:
        """Under ``torch.compile`` (only there: eager keeps the single aten kernels), write the GELU with a
        sigmoid (:func:`gelu_tanh_sigmoid`) and the cross-entropy with its gradient written out
        (:class:`_CrossEntropy`): the same functions to float rounding, in forms inductor compiles to faster
        CPU kernels. On by default; ``False`` compiles ``F.gelu``/``F.cross_entropy`` (the benchmark's ablation)."""
        self.compiled_forms = on
        for m in self.modules():
            if isinstance(m, MLP):
                m.compiled_forms = on

    def set_fp32_attention(self, on: bool) -> None:
        """Compute attention in fp32 even under bf16 autocast. On CPU the fp32 flash kernel's backward is faster
        than the bf16 one at probe shapes (head size 16–64, context 256: 35 vs 51 ms per layer at 1M, one thread);
        on CUDA the bf16 kernel is the fast one, so leave it off there. The weights and the result's meaning are
        unchanged (the attention is only computed more exactly)."""
        for m in self.modules():
            if isinstance(m, CausalSelfAttention):
                m.fp32_attention = on

    def configure_optimizer(
        self, *, lr: float, weight_decay: float, betas: tuple[float, float], fused: bool | None = None
    ) -> torch.optim.AdamW:
        """AdamW with decay on matrices only (biases, LayerNorm gains and nothing else are not decayed).

        ``fused=None`` picks the fused CPU/GPU kernel when this torch has it (faster than foreach here).
        """
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        groups = [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        if fused is None:
            fused = True
        try:
            return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused)
        except (RuntimeError, TypeError):  # a build without the fused kernel for this device
            return torch.optim.AdamW(groups, lr=lr, betas=betas, foreach=True)
