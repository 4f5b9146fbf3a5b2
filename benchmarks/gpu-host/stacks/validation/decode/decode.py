"""Greedy decode of a small Llama-shaped bf16 model (random weights, seeded: nothing is downloaded), batch 1: at this
size every token is a few hundred small kernel launches, so tokens per second measure the launch path, the metric
that drifts between processes on a GPU host. 6 samples a run, each 32 new tokens after a 16-token prompt; the
greedy tokens of the last sample go to OUT/tokens.txt (the same in every run of both legs)."""

import json
import sys
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                     num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=256)
model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
prompt = torch.randint(0, config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(1)).to("cuda")
NEW, SAMPLES = 32, 6


def decode() -> torch.Tensor:
    with torch.inference_mode():
        return model.generate(prompt, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, use_cache=True,
                              pad_token_id=0)


for _ in range(3):  # warm-up: allocator, kernels chosen, clocks up
    decode()
torch.cuda.synchronize()
for _ in range(SAMPLES):
    t0 = time.perf_counter()
    out = decode()
    torch.cuda.synchronize()
    print(json.dumps({"tok_s": NEW / (time.perf_counter() - t0)}))
Path(sys.argv[1], "tokens.txt").write_text(" ".join(str(t) for t in out[0].tolist()) + "\n")
