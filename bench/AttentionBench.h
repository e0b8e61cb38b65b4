// `pejit bench`: fused RoPE attention vs an unfused path (a RoPE pass over Q
// and K, then attention) vs naive attention, with GFLOP/s, the fraction of
// this machine's measured fp32 FMA peak, JIT cold compile and cache-hit time.
#ifndef PEJIT_BENCH_ATTENTIONBENCH_H
#define PEJIT_BENCH_ATTENTIONBENCH_H

namespace pejit::bench {

/// argv: [--json] [--repeats=N] [--quick] [--cases=prefill-512,...]
int runAttentionBench(int argc, char **argv);

/// `pejit bench --encodings`: fused T5 and ALiBi against plain attention
/// (EncodingBench.cpp). argv: [--repeats=N]
int runEncodingBench(int argc, char **argv);

/// `pejit bench --shape-classes`: static against `?` lengths, and the
/// decode loop through one kernel (ShapeClassBench.cpp). argv:
/// [--repeats=N] [--rounds=R]
int runShapeClassBench(int argc, char **argv);

/// `pejit bench --varlen`: a packed batch of 8 mixed lengths against a
/// loop of calls and a padded batch (VarlenBench.cpp). argv: [--repeats=N]
int runVarlenBench(int argc, char **argv);
/// `pejit bench --rope`: the standalone pe.rope kernel (prefill Q, in
/// place, a decode step's KV-append) against the measured read bandwidth.
int runRopeBench(int argc, char **argv);
/// `pejit bench --standalone`: the embedding and materialized-bias kernels
/// against the measured read bandwidth (StandaloneBench.cpp).
int runStandaloneBench(int argc, char **argv);
/// `pejit bench --backward` (BackwardBench.cpp).
int runBackwardBench(int argc, char **argv);
/// `pejit bench --isa`: the forward in every x86 ISA family the host has, f32
/// and bf16 (bench/IsaBench.cpp).
int runIsaBench(int argc, char **argv);
/// `pejit bench --linear`: linear attention with fused RoPE against softmax
/// attention with fused RoPE at s = 2048, 8192, 32768 (LinearBench.cpp).
int runLinearBench(int argc, char **argv);

} // namespace pejit::bench

#endif // PEJIT_BENCH_ATTENTIONBENCH_H
