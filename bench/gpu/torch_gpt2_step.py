#!/usr/bin/env python3
"""GPT-2 124M training step in plain PyTorch, timed like gpt2_gpu_bench.

The reference for //bench/gpu:gpt2_gpu_bench: the same model (learned token
and position embeddings, pre-LN blocks with causal
F.scaled_dot_product_attention, GELU-tanh MLP, final LayerNorm, head tied to
the token embedding), the same batch of random tokens, bf16 autocast, fused
AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1 on matrices) and gradient
clipping at 1.0 as the engine's defaults. Prints tokens/s over the median
step, MFU = tokens/s * (6*psi + 12*L*C*T) / peak, and one line for
tools/gpu-check:

  GPU_BENCH impl=pytorch status=ok tokens_per_s=... mfu=... step_ms=... ...
  GPU_BENCH impl=pytorch status=skipped reason=<sentence>

Without PyTorch or a GPU it prints the skip line and exits 0. --device cpu
with a tiny shape exercises the script without a GPU.
"""
import argparse
import math
import statistics
import sys
import time


def skip(reason):
    print(f"torch_gpt2_step: skipped: {reason}")
    print(f"GPU_BENCH impl=pytorch status=skipped reason={reason}", flush=True)
    sys.exit(0)


def build_model(torch, nn, F, L, H, C, Vp, T):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=1e-5)
            self.c_attn = nn.Linear(C, 3 * C)
            self.attn_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C, eps=1e-5)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            B, T_, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T_, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(B, T_, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class Gpt2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(Vp, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif "ln_" in name:
                    nn.init.ones_(p)
                else:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, idx, targets):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
            return F.cross_entropy(logits.view(-1, Vp).float(), targets.view(-1))

    return Gpt2()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16, help="sequences per optimizer step")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--grad_accum", type=int, default=1, help="micro-batches per step")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--n_layer", type=int, default=12)
    ap.add_argument("--n_head", type=int, default=12)
    ap.add_argument("--n_embd", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--vocab_multiple", type=int, default=128, help="embedding rows padded to a multiple of this")
    ap.add_argument("--peak_flops", type=float, default=989e12, help="dense bf16 peak for MFU")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to exercise the script")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (off: plain eager PyTorch)")
    args = ap.parse_args()
    if args.batch < 1 or args.grad_accum < 1 or args.batch % args.grad_accum or not 1 <= args.seq <= 1024:
        ap.error("need 1 <= --seq <= 1024 and --batch a multiple of --grad_accum")

    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except Exception as e:  # any import failure means no PyTorch to compare with
        skip(f"PyTorch not importable: {e}")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            skip(f"no usable GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device")
        name = torch.cuda.get_device_name(0)
    else:
        name = "cpu"

    L, H, C, V, T = args.n_layer, args.n_head, args.n_embd, args.vocab, args.seq
    Vp = (V + args.vocab_multiple - 1) // args.vocab_multiple * args.vocab_multiple
    dev = torch.device(args.device)
    torch.manual_seed(1234)
    model = build_model(torch, nn, F, L, H, C, Vp, 1024).to(dev)
    psi = sum(p.numel() for p in model.parameters()) - (Vp - V) * C  # padding rows not counted
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model) if args.compile else model

    micro = args.batch // args.grad_accum
    g = torch.Generator().manual_seed(1234)
    batches = []
    for _ in range(args.grad_accum):
        tokens = torch.randint(0, V, (micro, T + 1), generator=g)
        batches.append((tokens[:, :-1].contiguous().to(dev), tokens[:, 1:].contiguous().to(dev)))

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times, losses = [], []
    for s in range(args.warmup + args.steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for x, y in batches:
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                loss = step_model(x, y) / args.grad_accum
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        loss_value = float(total)  # a host read, like the engine's StepResult
        sync()
        dt = time.perf_counter() - t0
        if not math.isfinite(loss_value):
            print(f"GPU_BENCH impl=pytorch status=failed reason=non-finite loss at step {s + 1}", flush=True)
            sys.exit(1)
        losses.append(loss_value)
        if s >= args.warmup:
            times.append(dt)

    step = statistics.median(times)
    tokens_per_s = args.batch * T / step
    flops_per_token = 6.0 * psi + 12.0 * L * C * T
    mfu = tokens_per_s * flops_per_token / args.peak_flops
    print(f"PyTorch {torch.__version__} on {name}: GPT-2 {psi} params (L={L} C={C} NH={H} V={V} padded to {Vp}),"
          f" batch {args.batch} x {T} tokens ({args.grad_accum} micro-batches), bf16 autocast,"
          f" {'compiled' if args.compile else 'eager'}")
    print(f"  median step {1e3 * step:.2f} ms over {args.steps} steps (after {args.warmup} warm-up),"
          f" min {1e3 * min(times):.2f} ms")
    print(f"  {tokens_per_s:.0f} tokens/s, {flops_per_token:.3g} model FLOPs per token,"
          f" MFU {100 * mfu:.1f}% of {args.peak_flops / 1e12:.0f} TFLOP/s")
    print(f"  loss {losses[0]:.4f} at step 1, {losses[-1]:.4f} at step {len(losses)} (ln V = {math.log(V):.4f})")
    print(f"GPU_BENCH impl=pytorch status=ok tokens_per_s={tokens_per_s:.1f} mfu={mfu:.4f} step_ms={1e3 * step:.3f}"
          f" batch={args.batch} seq={T} params={psi} flops_per_token={flops_per_token:.6g} loss={losses[-1]:.4f}",
          flush=True)


if __name__ == "__main__":
    main()
