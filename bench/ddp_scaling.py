#!/usr/bin/env python3
"""Data-parallel training step time through pejit (issue 38): a small
decoder model of pejit blocks (attention with a learned T5 table and a
learned RoPE position scale, then a learned position table at the input)
trained with SGD on one global batch, three ways on this machine:

  1 process, 2 threads    the whole batch; torch and pejit each 2 threads
  1 process, 1 thread     the whole batch
  2 processes (DDP, gloo) half the batch each, 1 thread each, gradients
                          all-reduced every step

Reported: median ms per step over the timed steps (after warm-up steps),
and the speed-up of each against 1 process with 1 thread. The processes
share one kernel disk cache.

    python bench/ddp_scaling.py [--steps 10] [--width 256] [--length 256] [--batch 8]
"""
import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def make_model(width, heads, length):
    import pejit.torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.norm = torch.nn.LayerNorm(width)
            self.qkv = torch.nn.Linear(width, 3 * width)
            self.out = torch.nn.Linear(width, width)
            self.mlp = torch.nn.Sequential(torch.nn.LayerNorm(width),
                                           torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                           torch.nn.Linear(4 * width, width))
            self.table = torch.nn.Parameter(torch.randn(32, heads) * 0.5)
            self.scale = torch.nn.Parameter(torch.full((1,), 1.0))
            self.options = pejit.torch.options(rope=True, causal=True,
                                               t5={"num_buckets": 32, "bidirectional": False})

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            o = pejit.torch.attention(q, k, v, self.options, t5_table=self.table,
                                      rope_scale=self.scale)
            x = x + self.out(o.transpose(1, 2).reshape(b, s, width))
            return x + self.mlp(x)

    torch.manual_seed(7)
    return torch.nn.Sequential(pejit.torch.LearnablePositionalEmbedding(width, length),
                               Block(), Block())


def data(batch, length, width):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(batch, length, width, generator=g)
    return x, torch.randn(x.shape, generator=g)


def timed_steps(net, x, target, steps, warmup=2):
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    times = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(net(x), target).backward()
        optimizer.step()
        if step >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def single(threads, args, queue):
    os.environ["PEJIT_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    x, target = data(args.batch, args.length, args.width)
    queue.put(timed_steps(make_model(args.width, args.heads, args.length), x, target,
                          args.steps))


def rank_worker(rank, args, init_file, queue):
    os.environ["PEJIT_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        x, target = data(args.batch, args.length, args.width)
        half = args.batch // 2
        net = torch.nn.parallel.DistributedDataParallel(
            make_model(args.width, args.heads, args.length))
        ms = timed_steps(net, x[rank * half:(rank + 1) * half],
                         target[rank * half:(rank + 1) * half], args.steps)
        if rank == 0:
            queue.put(ms)
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    context = mp.get_context("spawn")
    queue = context.Queue()
    results = {}
    for name, threads in (("1 process, 2 threads", 2), ("1 process, 1 thread", 1)):
        process = context.Process(target=single, args=(threads, args, queue))
        process.start()
        results[name] = queue.get()
        process.join()
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        processes = [context.Process(target=rank_worker, args=(rank, args, init_file, queue))
                     for rank in range(2)]
        for process in processes:
            process.start()
        results["2 processes (DDP, gloo), 1 thread each"] = queue.get()
        for process in processes:
            process.join()
    base = results["1 process, 1 thread"]
    print(f"model: learned positions + 2 pejit blocks (T5 + RoPE scale), width {args.width}, "
          f"{args.heads} heads, length {args.length}, global batch {args.batch}, "
          f"torch {torch.__version__}\n")
    print("| configuration | ms per step | speed-up over 1 process, 1 thread |")
    print("| --- | ---: | ---: |")
    for name, ms in results.items():
        print(f"| {name} | {ms:.1f} | {base / ms:.2f}x |")


if __name__ == "__main__":
    main()
