"""Hand-written reference, nanoGPT-style: the zoo's gpt_mini (``--size mini``: byte vocabulary 256, 64 tokens,
3 pre-norm causal layers of width 128 with 4 heads, no dropout) or gpt2_small (``--size gpt2_small``: GPT-2
small, vocabulary 50257, 1024 tokens, 12 layers of width 768 with 12 heads, dropout 0.1), tanh GELU, head
tied to the token embedding; one fused qkv projection and ``scaled_dot_product_attention(is_causal=True)``,
fused AdamW, gradients clipped to norm 1, cosine schedule, next-token cross-entropy over every position;
trained for throughput. ``--block`` overrides the context length (the GPU bench's CPU dry run)."""

import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_common import cosine, parse_args, train  # noqa: E402

SIZES = {"mini": (256, 64, 128, 3, 4, 0.0, 1e-3), "gpt2_small": (50257, 1024, 768, 12, 12, 0.1, 6e-4)}
ARGS = parse_args(__doc__, (("--size", str, "mini"), ("--block", int, 0))) if __name__ == "__main__" else None
VOCAB, BLOCK, WIDTH, DEPTH, HEADS, DROPOUT, LR = SIZES[ARGS.size if ARGS else "mini"]
BLOCK = (ARGS.block if ARGS else 0) or BLOCK


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in self.c_attn(x).split(WIDTH, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=DROPOUT if self.training else 0.0, is_causal=True)
        return self.drop(self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(WIDTH), CausalSelfAttention(), nn.LayerNorm(WIDTH)
        self.c_fc, self.c_proj = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        hidden = self.drop(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))  # as torch's encoder layer
        return x + self.drop(self.c_proj(hidden))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Parameter(torch.zeros(BLOCK, WIDTH))
        self.h = nn.Sequential(*[Block() for _ in range(DEPTH)])
        self.ln_f = nn.LayerNorm(WIDTH)
        self.drop = nn.Dropout(DROPOUT)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.wpe, 0.0, 0.02)
        for m in self.h.modules():
            if isinstance(m, nn.Linear):
                bound = 1 / math.sqrt(m.in_features)
                nn.init.uniform_(m.weight, -bound, bound)
                nn.init.uniform_(m.bias, -bound, bound)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.ln_f(self.h(self.drop(self.wte(idx) + self.wpe)))
        return F.linear(x, self.wte.weight)  # the head tied to the token embedding


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


if __name__ == "__main__":
    torch.manual_seed(0)
    train(GPT(), lambda m: torch.optim.AdamW(m.parameters(), lr=LR, weight_decay=0.1, fused=True), ARGS,
          schedule=cosine(ARGS.steps, LR), loss_fn=next_token_loss, clip_norm=1.0)
