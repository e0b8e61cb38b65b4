// NVIDIA linear attention template (attn.linear_attention,
// docs/linear-attention.md), the GPU form of templates/x86/
// linear_attention.mlir with the same state and row rules:
//   S[c, :] = sum_j k~_jc v_j  (d x dv)   k~: phi(R k), or R phi(k)
//   z[c]    = sum_j k^_jc      (d)        k^: phi(R k), or phi(k)
//   out_i = (q~_i . S_i) / (q^_i . z_i)   elu_plus_one, relu (0 if q^.z == 0)
//   out_i = q~_i . S_i                    identity
//   out_i = sum_c q_ic S_i[c, :] / z_i[c] softmax_keys (S, z of the weights
//                                         exp(k - m), m the running max)
// with S_i, z_i the state of the keys j < upto(i) (all skv, or
// clamp(i + skv - sq + 1, 0, skv) when causal); a row that sees no key (and
// no carried state) is zero.
//
// One thread block = (query head h, batch b), a scan over the sequence:
// thread (p, c), p < P = D / KS, c < DV, holds S[p KS + e, c], e < KS, in
// registers; z, m and the per-key rescale live in shared memory. The query
// rows go in chunks of R. A chunk first brings the state up to the keys its
// first row sees, R keys per step, then stages its own keys (fewer than R)
// and its rows, and before each row adds the own keys that row sees:
//   add keys [from, to) of the staged tile:
//     A (a thread per channel t): z[t] += sum_j k^_jt, or for softmax_keys
//       m' = max(m, max_j k_jt), a = exp(m - m'), w_jt = exp(k_jt - m'),
//       z[t] = z[t] a + sum_j w_jt (a channel with z = 0 ignores its m)
//     B (every thread): S[k, c] = S[k, c] a[k] + sum_j w_jk (or k~_jk) v_jc
//   row r: partial[p, c] = sum_e coef(p KS + e) S[p KS + e, c] (coef: q~,
//     or q / z for softmax_keys), then threads p = 0 sum the P partials,
//     divide by q^ . z and write O[b, h, i, c].
// Staging reads K, V (KV head h / GROUP) and Q rows coalesced into shared
// f32 tiles, keys in rows [0, R) and queries in [R, 2R) of num and den (row
// stride D + 1: a thread per row, 32 rows in 32 banks); a thread per row
// applies the fused RoPE's hooks (attn.qk_transform) and phi.
// With a state ([b, hq, d, dv + 2] f32: S, z, m) S, z and m start from it
// and go back to it after the call's last key.
//
// Parameters (pejit/compiler/passes/InstantiateNvidiaLinearAttention.cpp):
//   ${BD} ${SQD} ${SKVD} ${SCRATCHD}: sizes or `?`; ${HQ} ${GROUP} ${D}
//   ${DP} = D + 1, ${DV}, ${DVS} = DV + 2, ${R} rows per tile, ${R2} = 2 R,
//   ${KS} rows of
//   S per thread, ${P} = D / KS, ${THREADS} = P DV; ${T} ${OT} element
//   types of Q/K/V and O; ${CAUSAL} ${ON_NUMERATOR} ${SOFTMAX_KEYS}
//   ${NORMALIZE} ${HAS_STATE}: true or false; ${E0} the RoPE's runtime
//   scale (memref<1xf32> if none); LENGTH_ARGS, PROLOGUE_VIEWS,
//   LINEAR_VIEWS: the call's lengths and the views of the bare pointers;
//   PHI: the body of @phi (one f32).

!PT = memref<1x${T}>
!POT = memref<1x${OT}>
!PF = memref<1xf32>
!PI = memref<1xi64>
!Q = memref<${BD}x${HQ}x${SQD}x${D}x${T}>
!K = memref<${BD}x${HKV}x${SKVD}x${D}x${T}>
!V = memref<${BD}x${HKV}x${SKVD}x${DV}x${T}>
!O = memref<${BD}x${HQ}x${SQD}x${DV}x${OT}>
!QPOS = memref<${QPB}x${SQD}xi64>
!KPOS = memref<${KPB}x${SKVD}xi64>
!SCRATCH = memref<${SCRATCHD}xf32>
!ST = memref<${BD}x${HQ}x${D}x${DVS}xf32>
!E0 = ${E0}
!TILE = memref<${R2}x${DP}xf32, #gpu.address_space<workgroup>>
!VTILE = memref<${R}x${DV}xf32, #gpu.address_space<workgroup>>
!PART = memref<${P}x${DV}xf32, #gpu.address_space<workgroup>>
!CH = memref<${D}xf32, #gpu.address_space<workgroup>>
!ROW = memref<1x${D}xf32, strided<[${DP}, 1], offset: ?>, #gpu.address_space<workgroup>>
!SREG = memref<${KS}xf32>

module attributes {gpu.container_module} {
gpu.module @pejit_nvidia {

// The RoPE's cos/sin tables for the Q and K ids, over all threads of the
// grid (launched only with a RoPE).
gpu.func @pejit_prologue(%qpos_arg: !PI, %kpos_arg: !PI, %scratch_arg: !PF, ${LENGTH_ARGS},
                         %e0: !E0) kernel {
${PROLOGUE_VIEWS}
  %tid = gpu.thread_id x
  %bid = gpu.block_id x
  %bdim = gpu.block_dim x
  %gdim = gpu.grid_dim x
  %first0 = arith.muli %bid, %bdim : index
  %first = arith.addi %first0, %tid : index
  %step = arith.muli %gdim, %bdim : index
  attn.qk_prologue %qpos, %kpos, %scratch rows(%first, %step) operands(%e0 : !E0)
      : !QPOS, !KPOS, !SCRATCH
  gpu.return
}

// The keys row i sees: j < upto(i).
func.func private @upto(%i: index, %off: index, %skv: index) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %causal = arith.constant ${CAUSAL}
  %last = arith.addi %i, %off : index
  %end0 = arith.addi %last, %c1 : index
  %end1 = arith.maxsi %end0, %c0 : index
  %end2 = arith.minsi %end1, %skv : index
  %end = arith.select %causal, %end2, %skv : index
  return %end : index
}

func.func private @phi(%x: f32) -> f32 {
  ${PHI}
}

// Block = (h, b): grid [1, HQ, B].
gpu.func @pejit_linear(%q_arg: !PT, %k_arg: !PT, %v_arg: !PT, %o_arg: !POT, %scratch_arg: !PF,
                       %qpos_arg: !PI, %kpos_arg: !PI, %st_arg: !PF, ${LENGTH_ARGS}, %e0: !E0)
    workgroup(%num: !TILE {llvm.align = 16 : i64}, %den: !TILE {llvm.align = 16 : i64},
              %vt: !VTILE {llvm.align = 16 : i64}, %part: !PART {llvm.align = 16 : i64},
              %z: !CH {llvm.align = 16 : i64}, %m: !CH {llvm.align = 16 : i64},
              %a: !CH {llvm.align = 16 : i64}) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %true = arith.constant true
  %R = arith.constant ${R} : index
  %R2 = arith.constant ${R2} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %on_numerator = arith.constant ${ON_NUMERATOR}
  %rope_first = arith.xori %on_numerator, %true : i1
  %KS = arith.constant ${KS} : index
  %P = arith.constant ${P} : index
  %THREADS = arith.constant ${THREADS} : index
  %GROUP = arith.constant ${GROUP} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %false = arith.constant false
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %normalize = arith.constant ${NORMALIZE}
  %has_state = arith.constant ${HAS_STATE}
  %no_state = arith.xori %has_state, %true : i1
${LINEAR_VIEWS}
  %DVZ = arith.constant ${DV} : index
  %DVM = arith.addi %DVZ, %c1 : index
  %tid = gpu.thread_id x
  %h = gpu.block_id y
  %b = gpu.block_id z
  %kh = arith.divui %h, %GROUP : index
  %p = arith.divui %tid, %DV : index
  %c = arith.remui %tid, %DV : index
  %k0 = arith.muli %p, %KS : index
  %OFF = arith.subi %SKV, %SQ : index

  // This thread's S[k0 + e, c]: registers once the loops are unrolled.
  %S = memref.alloca() : !SREG
  scf.for %e = %c0 to %KS step %c1 {
    %kr = arith.addi %k0, %e : index
    %s0 = scf.if %has_state -> f32 {
      %x = memref.load %st[%b, %h, %kr, %c] : !ST
      scf.yield %x : f32
    } else {
      scf.yield %zero : f32
    }
    memref.store %s0, %S[%e] : !SREG
  } {pejit.unroll}
  scf.for %t = %tid to %D step %THREADS {
    %z0 = scf.if %has_state -> f32 {
      %x = memref.load %st[%b, %h, %t, %DVZ] : !ST
      scf.yield %x : f32
    } else {
      scf.yield %zero : f32
    }
    %m0 = scf.if %has_state -> f32 {
      %x = memref.load %st[%b, %h, %t, %DVM] : !ST
      scf.yield %x : f32
    } else {
      scf.yield %zero : f32
    }
    memref.store %z0, %z[%t] : !CH
    memref.store %m0, %m[%t] : !CH
  }
  gpu.barrier

  %R1 = arith.subi %R, %c1 : index
  %sq_up = arith.addi %SQ, %R1 : index
  %chunks = arith.divui %sq_up, %R : index
  %all_added = scf.for %qc = %c0 to %chunks step %c1 iter_args(%added = %c0) -> index {
    %i0 = arith.muli %qc, %R : index
    %q_left = arith.subi %SQ, %i0 : index
    %nq = arith.minui %q_left, %R : index
    %lo = func.call @upto(%i0, %OFF, %SKV) : (index, index, index) -> index
    %i_last = arith.addi %i0, %nq : index
    %i_last1 = arith.subi %i_last, %c1 : index
    %hi = func.call @upto(%i_last1, %OFF, %SKV) : (index, index, index) -> index
    // Steps: the R-key tiles of [added, lo), then the chunk's own keys
    // [lo, hi) with its rows.
    %behind0 = arith.subi %lo, %added : index
    %behind = arith.maxsi %behind0, %c0 : index
    %behind_up = arith.addi %behind, %R1 : index
    %tiles = arith.divui %behind_up, %R : index
    %steps = arith.addi %tiles, %c1 : index
    scf.for %step = %c0 to %steps step %c1 {
      %own = arith.cmpi eq, %step, %tiles : index
      %jt = arith.muli %step, %R : index
      %jb = arith.addi %added, %jt : index
      %j0 = arith.select %own, %lo, %jb : index
      %tile_left = arith.subi %lo, %jb : index
      %tile_n = arith.minui %tile_left, %R : index
      %own_n = arith.subi %hi, %lo : index
      %nk = arith.select %own, %own_n, %tile_n : index
      // Stage keys [j0, j0 + nk) of KV head kh, and with the own keys the
      // chunk's query rows.
      %kelems = arith.muli %nk, %D : index
      scf.for %x = %tid to %kelems step %THREADS {
        %r = arith.divui %x, %D : index
        %cc = arith.remui %x, %D : index
        %j = arith.addi %j0, %r : index
        %kv = memref.load %k[%b, %kh, %j, %cc] : !K
        %kw = func.call @widen(%kv) : (${T}) -> f32
        memref.store %kw, %num[%r, %cc] : !TILE
      }
      %velems = arith.muli %nk, %DV : index
      scf.for %x = %tid to %velems step %THREADS {
        %r = arith.divui %x, %DV : index
        %cc = arith.remui %x, %DV : index
        %j = arith.addi %j0, %r : index
        %vv = memref.load %v[%b, %kh, %j, %cc] : !V
        %vw = func.call @widen(%vv) : (${T}) -> f32
        memref.store %vw, %vt[%r, %cc] : !VTILE
      }
      %rows = arith.select %own, %nq, %c0 : index
      %qelems = arith.muli %rows, %D : index
      scf.for %x = %tid to %qelems step %THREADS {
        %r = arith.divui %x, %D : index
        %cc = arith.remui %x, %D : index
        %i = arith.addi %i0, %r : index
        %rq = arith.addi %R, %r : index
        %qv = memref.load %q[%b, %h, %i, %cc] : !Q
        %qw = func.call @widen(%qv) : (${T}) -> f32
        memref.store %qw, %num[%rq, %cc] : !TILE
      }
      gpu.barrier
      // A thread per row (keys in rows [0, R), queries in [R, 2R)): phi in
      // place with a copy in den, around the RoPE: phi(R x), or on the
      // numerator den = phi(x), num = R phi(x) (softmax_keys: R x).
      scf.for %x = %tid to %R2 step %THREADS {
        %is_key = arith.cmpi ult, %x, %R : index
        %xq = arith.subi %x, %R : index
        %r = arith.select %is_key, %x, %xq : index
        %n = arith.select %is_key, %nk, %rows : index
        %start = arith.select %is_key, %j0, %i0 : index
        %live = arith.cmpi ult, %r, %n : index
        scf.if %live {
          %row = memref.subview %num[%x, 0] [1, ${D}] [1, 1] : !TILE to !ROW
          %i = arith.addi %start, %r : index
          scf.if %on_numerator {
            scf.for %cc = %c0 to %D step %c1 {
              %y0 = memref.load %num[%x, %cc] : !TILE
              %y = func.call @phi(%y0) : (f32) -> f32
              memref.store %y, %num[%x, %cc] : !TILE
              memref.store %y, %den[%x, %cc] : !TILE
            }
          }
          scf.if %is_key {
            attn.qk_transform %row, %c1, %i, %b, %scratch key lengths(%SQ, %SKV) : !ROW, !SCRATCH
          } else {
            attn.qk_transform %row, %c1, %i, %b, %scratch lengths(%SQ, %SKV) : !ROW, !SCRATCH
          }
          scf.if %rope_first {
            scf.for %cc = %c0 to %D step %c1 {
              %y0 = memref.load %num[%x, %cc] : !TILE
              %y = func.call @phi(%y0) : (f32) -> f32
              memref.store %y, %num[%x, %cc] : !TILE
              memref.store %y, %den[%x, %cc] : !TILE
            }
          }
        }
      }
      gpu.barrier
      // A key tile: one add of all its keys; the own keys: before each
      // row, the ones it sees.
      %adds = arith.select %own, %nq, %c1 : index
      scf.for %r = %c0 to %adds step %c1 iter_args(%from = %c0) -> index {
        %i = arith.addi %i0, %r : index
        %u = func.call @upto(%i, %OFF, %SKV) : (index, index, index) -> index
        %u_own = arith.subi %u, %lo : index
        %to = arith.select %own, %u_own, %nk : index
        %any = arith.cmpi ult, %from, %to : index
        scf.if %any {
          // A: z (and m) per channel, and the rescale a.
          scf.for %t = %tid to %D step %THREADS {
            %z_old = memref.load %z[%t] : !CH
            scf.if %softmax_keys {
              %m_kept = memref.load %m[%t] : !CH
              %empty = arith.cmpf oeq, %z_old, %zero : f32
              %m_old = arith.select %empty, %ninf, %m_kept : f32
              %m_new = scf.for %j = %from to %to step %c1 iter_args(%mx = %m_old) -> f32 {
                %kx = memref.load %num[%j, %t] : !TILE
                %next = arith.maximumf %mx, %kx : f32
                scf.yield %next : f32
              }
              %d_old = arith.subf %m_old, %m_new : f32
              %scale = math.exp %d_old : f32
              %wsum = scf.for %j = %from to %to step %c1 iter_args(%acc = %zero) -> f32 {
                %kx = memref.load %num[%j, %t] : !TILE
                %d_key = arith.subf %kx, %m_new : f32
                %w = math.exp %d_key : f32
                memref.store %w, %den[%j, %t] : !TILE
                %sum = arith.addf %acc, %w : f32
                scf.yield %sum : f32
              }
              %z_scaled = arith.mulf %z_old, %scale : f32
              %z_new = arith.addf %z_scaled, %wsum : f32
              memref.store %z_new, %z[%t] : !CH
              memref.store %m_new, %m[%t] : !CH
              memref.store %scale, %a[%t] : !CH
            } else {
              %ksum = scf.for %j = %from to %to step %c1 iter_args(%acc = %zero) -> f32 {
                %kx = memref.load %den[%j, %t] : !TILE
                %sum = arith.addf %acc, %kx : f32
                scf.yield %sum : f32
              }
              %z_new = arith.addf %z_old, %ksum : f32
              memref.store %z_new, %z[%t] : !CH
            }
          }
          gpu.barrier
          // B: S[k, c] = S[k, c] a[k] + sum_j w_jk v_jc.
          scf.if %softmax_keys {
            scf.for %e = %c0 to %KS step %c1 {
              %kr = arith.addi %k0, %e : index
              %s = memref.load %S[%e] : !SREG
              %ak = memref.load %a[%kr] : !CH
              %scaled = arith.mulf %s, %ak : f32
              memref.store %scaled, %S[%e] : !SREG
            } {pejit.unroll}
          }
          scf.for %j = %from to %to step %c1 {
            %vx = memref.load %vt[%j, %c] : !VTILE
            scf.for %e = %c0 to %KS step %c1 {
              %kr = arith.addi %k0, %e : index
              %wn = memref.load %num[%j, %kr] : !TILE
              %wd = memref.load %den[%j, %kr] : !TILE
              %w = arith.select %softmax_keys, %wd, %wn : f32
              %s = memref.load %S[%e] : !SREG
              %s_new = math.fma %w, %vx, %s : f32
              memref.store %s_new, %S[%e] : !SREG
            } {pejit.unroll}
          }
          gpu.barrier
        }
        scf.if %own {
          // Row i (tile row R + r): the partial products of this slice ...
          %rq = arith.addi %R, %r : index
          %acc = scf.for %e = %c0 to %KS step %c1 iter_args(%sum = %zero) -> f32 {
            %kr = arith.addi %k0, %e : index
            %qx = memref.load %num[%rq, %kr] : !TILE
            %zk = memref.load %z[%kr] : !CH
            %qz = arith.divf %qx, %zk : f32
            %no_key = arith.cmpf oeq, %zk, %zero : f32
            %qz0 = arith.select %no_key, %zero, %qz : f32
            %coef = arith.select %softmax_keys, %qz0, %qx : f32
            %s = memref.load %S[%e] : !SREG
            %next = math.fma %coef, %s, %sum : f32
            scf.yield %next : f32
          } {pejit.unroll}
          memref.store %acc, %part[%p, %c] : !PART
          gpu.barrier
          // ... summed by the threads of slice 0, over the denominator.
          %first_slice = arith.cmpi eq, %p, %c0 : index
          scf.if %first_slice {
            %o_sum = scf.for %pp = %c0 to %P step %c1 iter_args(%sum = %zero) -> f32 {
              %x = memref.load %part[%pp, %c] : !PART
              %next = arith.addf %sum, %x : f32
              scf.yield %next : f32
            }
            %den_sum = scf.if %normalize -> f32 {
              %d = scf.for %t = %c0 to %D step %c1 iter_args(%sum = %zero) -> f32 {
                %qx = memref.load %den[%rq, %t] : !TILE
                %zt = memref.load %z[%t] : !CH
                %next = math.fma %qx, %zt, %sum : f32
                scf.yield %next : f32
              }
              scf.yield %d : f32
            } else {
              scf.yield %one : f32
            }
            // No key seen (here or in a state), or a zero denominator: a
            // zero row, even where the state holds inf or NaN.
            %none_here = arith.cmpi eq, %u, %c0 : index
            %none = arith.andi %none_here, %no_state : i1
            %zero_den = arith.cmpf oeq, %den_sum, %zero : f32
            %zero_row = arith.ori %none, %zero_den : i1
            %y = arith.divf %o_sum, %den_sum : f32
            %out = arith.select %zero_row, %zero, %y : f32
            %w = func.call @narrow(%out) : (f32) -> ${OT}
            memref.store %w, %o[%b, %h, %i, %c] : !O
          }
          gpu.barrier
        }
        scf.yield %to : index
      }
    }
    %reached = arith.maxsi %added, %hi : index
    scf.yield %reached : index
  }

  // The state after every key of the call.
  scf.if %has_state {
    scf.for %e = %c0 to %KS step %c1 {
      %kr = arith.addi %k0, %e : index
      %s = memref.load %S[%e] : !SREG
      memref.store %s, %st[%b, %h, %kr, %c] : !ST
    } {pejit.unroll}
    scf.for %t = %tid to %D step %THREADS {
      %zt = memref.load %z[%t] : !CH
      %mt = memref.load %m[%t] : !CH
      %m_out = arith.select %softmax_keys, %mt, %zero : f32
      memref.store %zt, %st[%b, %h, %t, %DVZ] : !ST
      memref.store %m_out, %st[%b, %h, %t, %DVM] : !ST
    }
  }
  gpu.return
}

// One Q/K/V element as f32, one output element as OT.
func.func private @widen(%v: ${T}) -> f32 {
  ${WIDEN}
  return %w : f32
}
func.func private @narrow(%v: f32) -> ${OT} {
  ${NARROW}
  return %w : ${OT}
}

}
}
