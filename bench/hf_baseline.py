#!/usr/bin/env python3
"""Hugging Face transformers baseline for refdec-speed-bench: plain greedy decoding of a Llama model
with random weights (Llama-2-7B's shape by default) at batch 1, after a context of random tokens,
through `generate()` as a user of transformers runs it. Prints tokens/s of the decoding steps (the
prefill excluded) and optionally writes them as JSON.

    python3 bench/hf_baseline.py --shape 7b --context 512 --tokens 128 --json hf.json

Needs torch and transformers (the GPU machine has both); not part of the test suite.
"""
import argparse
import json
import time

import torch

SHAPES = {  # the shapes of bench/shapes.hpp
    "tiny": dict(hidden_size=64, intermediate_size=172, num_hidden_layers=5, num_attention_heads=8,
                 num_key_value_heads=4, vocab_size=512),
    "1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
               num_key_value_heads=4, vocab_size=32000),
    "7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=32, vocab_size=32000),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="7b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compile", action="store_true",
                        help="a static KV cache and the forward pass compiled by torch.compile (mode reduce-overhead: "
                             "CUDA graphs), as Hugging Face recommends for fast decoding")
    parser.add_argument("--json")
    args = parser.parse_args()

    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    config = LlamaConfig(max_position_embeddings=4096, **SHAPES[args.shape])
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    with torch.device(args.device):
        model = LlamaForCausalLM(config)
    torch.set_default_dtype(previous)
    model.eval()
    # Random weights make the greedy output repeat early: no end-of-sequence token may stop it.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    ids = torch.randint(3, config.vocab_size, (1, args.context), device=args.device)
    if args.compile:
        # generate() compiles the decoding step itself once the cache is static (its compile_config:
        # fullgraph, mode "reduce-overhead"); wrapping model.forward by hand instead lets the CUDA
        # graphs overwrite the cache between calls.
        model.generation_config.cache_implementation = "static"
        if hasattr(transformers, "CompileConfig"):
            model.generation_config.compile_config = transformers.CompileConfig(fullgraph=True, mode="reduce-overhead")

    def sync():
        if torch.device(args.device).type == "cuda":
            torch.cuda.synchronize()

    def timed(new_tokens):
        sync()
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        sync()
        assert out.shape[1] == args.context + new_tokens
        return time.perf_counter() - start

    timed(4)  # warm-up (with --compile: the compilations and graph captures)
    if args.compile:
        timed(args.tokens + 1)
    rates = []
    for _ in range(args.repeats):
        prefill = timed(1)
        whole = timed(args.tokens + 1)
        rates.append(args.tokens / (whole - prefill))
    rates.sort()
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "shape": args.shape,
              "dtype": args.dtype, "device": args.device, "context": args.context, "tokens": args.tokens,
              "mode": "static cache, torch.compile reduce-overhead" if args.compile else "eager",
              "tokens_per_s": rates, "median_tokens_per_s": rates[len(rates) // 2]}
    if torch.device(args.device).type == "cuda":
        result["gpu"] = torch.cuda.get_device_name()
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
