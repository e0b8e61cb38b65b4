// x86 linear attention template (attn.linear_attention,
// docs/linear-attention.md): one work item = (batch b, query head h), its
// query rows in order with the state of the keys they see.
//
// State after keys [0, n) of KV head kh = h / GROUP:
//   S[c, :] = sum_j k~_jc v_j      (d x dv, f32)   k~: phi(R k), or R phi(k)
//   z[c]    = sum_j k^_jc          (d)             k^: phi(R k), or phi(k)
// softmax_keys keeps, per channel, the running max m[c] and rescales:
//   S[c, :] = sum_j exp(k_jc - m_c) v_j, z[c] = sum_j exp(k_jc - m_c).
// Query row i first adds the keys it sees (n = skv, or min(i + skv - sq +
// 1, skv) when causal: the prefix sum of a causal row), then
//   out_i = (q~_i . S) / (q^_i . z)    elu_plus_one, relu (0 if q^.z == 0)
//   out_i = q~_i . S                   identity
//   out_i = sum_c q_ic S[c, :] / z[c]  softmax_keys
// and n = 0 gives a zero row (unless a carried state holds earlier keys).
// With a state (op state(...), slot %e3: [b, hq, d, dv + 2] f32 = S, z,
// m), S, z and m start from it and, after every key of the call, are
// written back to it. A channel whose z is 0 has seen no key: its m is
// ignored, so a zero tensor is the state of no keys. Q and K rows are read R at a time into f32
// tiles: the fused RoPE's hooks rotate them (attn.qk_transform) before phi
// (rope_before_feature_map) or after it, on the numerator side only
// (rope_on_numerator, the tile's unrotated copy kept for the denominator).
//
// Parameters, substituted as text before parsing
// (compiler/passes/InstantiateX86LinearAttention.cpp):
//   ${B} ${SQ} ${SKV}: sizes or `?`; ${HQ} ${HKV} ${GROUP} ${D} ${DV} ${R}
//   ${T} ${OT} element types of Q/K/V and O; ${QPB} ${KPB} id rows
//   ${CAUSAL} ${ON_NUMERATOR} ${SOFTMAX_KEYS} ${NORMALIZE} ${HAS_STATE}: true
//   or false; ${E0} the RoPE's operand (its runtime scale) or !UNUSED,
//   ${E3} the state's memref type or !UNUSED; ${DVS} = DV + 2
//   PHI8, WIDEN8, NARROW8: the bodies of @phi8, @widen8, @narrow8

!Q = memref<${B}x${HQ}x${SQ}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!K = memref<${B}x${HKV}x${SKV}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!V = memref<${B}x${HKV}x${SKV}x${DV}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!O = memref<${B}x${HQ}x${SQ}x${DV}x${OT}, strided<[?, ?, ?, 1], offset: ?>>
!QPOS = memref<${QPB}x${SQ}xi64>
!KPOS = memref<${KPB}x${SKV}xi64>
!SCRATCH = memref<?xf32>
!UNUSED = memref<1xf32>
!E0 = ${E0}
!E3 = ${E3}
!ROWS = memref<?x${D}x${T}, strided<[?, 1], offset: ?>>
!TILE = memref<${R}x${D}xf32>
!STATE = memref<${D}x${DV}xf32>
!VEC = memref<${D}xf32>
!V8 = vector<8xf32>
!IN8 = vector<8x${T}>
!OUT8 = vector<8x${OT}>

// Once per call, before any item: the RoPE's cos/sin tables for the Q and
// K ids (nothing without a RoPE).
// The four operand slots are the attention template's (one entry point
// convention): slot 0 is the RoPE's runtime scale, slot 3 the state.
func.func @pejit_prologue(%qpos: !QPOS, %kpos: !KPOS, %scratch: !SCRATCH, %first: index,
                          %step: index, %e0: !E0, %e1: !UNUSED, %e2: !UNUSED, %e3: !E3)
    attributes {llvm.emit_c_interface, pejit.cold} {
  attn.qk_prologue %qpos, %kpos, %scratch rows(%first, %step) operands(%e0 : !E0)
      : !QPOS, !KPOS, !SCRATCH
  return
}

// Rows [start, start + n) of Q (isKey false) or K, batch b, as the
// numerator tile (num) and the denominator tile (den): phi(R x) in both, or
// R phi(x) in num and phi(x) in den.
func.func private @load_query_rows(%rows: !ROWS, %n: index, %start: index, %b: index,
                                   %scratch: !SCRATCH, %sq: index, %skv: index, %num: !TILE,
                                   %den: !TILE) {
  %on_numerator = arith.constant ${ON_NUMERATOR}
  scf.if %on_numerator {
    func.call @copy_rows(%rows, %n, %num) : (!ROWS, index, !TILE) -> ()
    func.call @phi_rows(%num, %n, %den) : (!TILE, index, !TILE) -> ()
    attn.qk_transform %num, %n, %start, %b, %scratch lengths(%sq, %skv) : !TILE, !SCRATCH
  } else {
    attn.qk_transform %num from %rows, %n, %start, %b, %scratch lengths(%sq, %skv)
        : !TILE from !ROWS, !SCRATCH
    func.call @phi_rows(%num, %n, %den) : (!TILE, index, !TILE) -> ()
  }
  return
}

func.func private @load_key_rows(%rows: !ROWS, %n: index, %start: index, %b: index,
                                 %scratch: !SCRATCH, %sq: index, %skv: index, %num: !TILE,
                                 %den: !TILE) {
  %on_numerator = arith.constant ${ON_NUMERATOR}
  scf.if %on_numerator {
    func.call @copy_rows(%rows, %n, %num) : (!ROWS, index, !TILE) -> ()
    func.call @phi_rows(%num, %n, %den) : (!TILE, index, !TILE) -> ()
    attn.qk_transform %num, %n, %start, %b, %scratch key lengths(%sq, %skv) : !TILE, !SCRATCH
  } else {
    attn.qk_transform %num from %rows, %n, %start, %b, %scratch key lengths(%sq, %skv)
        : !TILE from !ROWS, !SCRATCH
    func.call @phi_rows(%num, %n, %den) : (!TILE, index, !TILE) -> ()
  }
  return
}

// tile[r] = rows[r] widened to f32, r < n.
func.func private @copy_rows(%rows: !ROWS, %n: index, %tile: !TILE) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  scf.for %r = %c0 to %n step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      %x = vector.load %rows[%r, %c] : !ROWS, !IN8
      %w = func.call @widen8(%x) : (!IN8) -> !V8
      vector.store %w, %tile[%r, %c] : !TILE, !V8
    }
  }
  return
}

// tile[r] = phi(tile[r]) and copy[r] = tile[r], r < n.
func.func private @phi_rows(%tile: !TILE, %n: index, %copy: !TILE) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  scf.for %r = %c0 to %n step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      %x = vector.load %tile[%r, %c] : !TILE, !V8
      %y = func.call @phi8(%x) : (!V8) -> !V8
      vector.store %y, %tile[%r, %c] : !TILE, !V8
      vector.store %y, %copy[%r, %c] : !TILE, !V8
    }
  }
  return
}

// Key row jr of the tiles, with V row j of KV head kh, into the state.
func.func private @add_key(%num: !TILE, %den: !TILE, %jr: index, %v: !V, %b: index, %kh: index,
                           %j: index, %S: !STATE, %z: !VEC, %m: !VEC, %w: !VEC, %a: !VEC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  scf.if %softmax_keys {
    // Per channel: the new max, the old terms' factor a = exp(m_old -
    // m_new), the key's weight w = exp(k - m_new).
    scf.for %c = %c0 to %D step %c8 {
      %k8 = vector.load %num[%jr, %c] : !TILE, !V8
      %z_old = vector.load %z[%c] : !VEC, !V8
      // z = 0: the channel has seen no key, so its m (0 in a fresh state)
      // does not count.
      %m_kept = vector.load %m[%c] : !VEC, !V8
      %ninf8 = arith.constant dense<0xFF800000> : !V8
      %zero8 = arith.constant dense<0.0> : !V8
      %empty = arith.cmpf oeq, %z_old, %zero8 : !V8
      %m_old = arith.select %empty, %ninf8, %m_kept : vector<8xi1>, !V8
      %m_new = arith.maximumf %m_old, %k8 : !V8
      %d_old = arith.subf %m_old, %m_new : !V8
      %a8 = math.exp %d_old : !V8
      %d_key = arith.subf %k8, %m_new : !V8
      %w8 = math.exp %d_key : !V8
      %z_new = math.fma %z_old, %a8, %w8 : !V8
      vector.store %m_new, %m[%c] : !VEC, !V8
      vector.store %z_new, %z[%c] : !VEC, !V8
      vector.store %a8, %a[%c] : !VEC, !V8
      vector.store %w8, %w[%c] : !VEC, !V8
    }
    scf.for %e = %c0 to %DV step %c8 {
      %vx = vector.load %v[%b, %kh, %j, %e] : !V, !IN8
      %v8 = func.call @widen8(%vx) : (!IN8) -> !V8
      scf.for %c = %c0 to %D step %c1 {
        %as = memref.load %a[%c] : !VEC
        %ws = memref.load %w[%c] : !VEC
        %a8 = vector.broadcast %as : f32 to !V8
        %w8 = vector.broadcast %ws : f32 to !V8
        %s = vector.load %S[%c, %e] : !STATE, !V8
        %scaled = arith.mulf %s, %a8 : !V8
        %s_new = math.fma %w8, %v8, %scaled : !V8
        vector.store %s_new, %S[%c, %e] : !STATE, !V8
      }
    }
  } else {
    scf.for %c = %c0 to %D step %c8 {
      %k8 = vector.load %den[%jr, %c] : !TILE, !V8
      %z_old = vector.load %z[%c] : !VEC, !V8
      %z_new = arith.addf %z_old, %k8 : !V8
      vector.store %z_new, %z[%c] : !VEC, !V8
    }
    scf.for %e = %c0 to %DV step %c8 {
      %vx = vector.load %v[%b, %kh, %j, %e] : !V, !IN8
      %v8 = func.call @widen8(%vx) : (!IN8) -> !V8
      scf.for %c = %c0 to %D step %c1 {
        %ks = memref.load %num[%jr, %c] : !TILE
        %k8 = vector.broadcast %ks : f32 to !V8
        %s = vector.load %S[%c, %e] : !STATE, !V8
        %s_new = math.fma %k8, %v8, %s : !V8
        vector.store %s_new, %S[%c, %e] : !STATE, !V8
      }
    }
  }
  return
}

// Output row i of head h from query row r of the tiles and the state of
// `seen` keys.
func.func private @emit_row(%num: !TILE, %den: !TILE, %r: index, %seen: index, %S: !STATE,
                            %z: !VEC, %coef: !VEC, %o: !O, %b: index, %h: index, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %zero = arith.constant 0.0 : f32
  %zero8 = arith.constant dense<0.0> : !V8
  %true = arith.constant true
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %normalize = arith.constant ${NORMALIZE}
  // The numerator's coefficient per channel: q~_c, or q_c / z_c.
  scf.for %c = %c0 to %D step %c8 {
    %q8 = vector.load %num[%r, %c] : !TILE, !V8
    %k8 = scf.if %softmax_keys -> !V8 {
      // A channel with no key (z = 0) adds nothing.
      %z8 = vector.load %z[%c] : !VEC, !V8
      %d8 = arith.divf %q8, %z8 : !V8
      %no_key = arith.cmpf oeq, %z8, %zero8 : !V8
      %c8v = arith.select %no_key, %zero8, %d8 : vector<8xi1>, !V8
      scf.yield %c8v : !V8
    } else {
      scf.yield %q8 : !V8
    }
    vector.store %k8, %coef[%c] : !VEC, !V8
  }
  // The denominator q^ . z (1 when the map has none).
  %den_sum = scf.if %normalize -> f32 {
    %acc = scf.for %c = %c0 to %D step %c8 iter_args(%acc = %zero8) -> !V8 {
      %q8 = vector.load %den[%r, %c] : !TILE, !V8
      %z8 = vector.load %z[%c] : !VEC, !V8
      %next = math.fma %q8, %z8, %acc : !V8
      scf.yield %next : !V8
    }
    %sum = vector.reduction <add>, %acc : !V8 into f32
    scf.yield %sum : f32
  } else {
    %one = arith.constant 1.0 : f32
    scf.yield %one : f32
  }
  // No key seen (in this call and, with a state, before it), or a zero
  // denominator: a zero row (no epsilon). A state's keys are in S and z.
  %has_state = arith.constant ${HAS_STATE}
  %no_state = arith.xori %has_state, %true : i1
  %none_here = arith.cmpi eq, %seen, %c0 : index
  %none = arith.andi %none_here, %no_state : i1
  %zero_den = arith.cmpf oeq, %den_sum, %zero : f32
  %zero_row = arith.ori %none, %zero_den : i1
  %recip0 = arith.constant 1.0 : f32
  %recip = arith.divf %recip0, %den_sum : f32
  %factor = arith.select %zero_row, %zero, %recip : f32
  %factor8 = vector.broadcast %factor : f32 to !V8
  scf.for %e = %c0 to %DV step %c8 {
    %acc = scf.for %c = %c0 to %D step %c1 iter_args(%acc = %zero8) -> !V8 {
      %ks = memref.load %coef[%c] : !VEC
      %k8 = vector.broadcast %ks : f32 to !V8
      %s = vector.load %S[%c, %e] : !STATE, !V8
      %next = math.fma %k8, %s, %acc : !V8
      scf.yield %next : !V8
    }
    %out = arith.mulf %acc, %factor8 : !V8
    // A zero row stays zero even where the state holds inf or NaN.
    %zero_rows = vector.broadcast %zero_row : i1 to vector<8xi1>
    %clean = arith.select %zero_rows, %zero8, %out : vector<8xi1>, !V8
    %n = func.call @narrow8(%clean) : (!V8) -> !OUT8
    vector.store %n, %o[%b, %h, %i, %e] : !O, !OUT8
  }
  return
}

// Item = b HQ + h.
func.func @pejit_item(%q: !Q, %k: !K, %v: !V, %o: !O, %scratch: !SCRATCH, %kcache: !UNUSED,
                      %e0: !E0, %e1: !UNUSED, %e2: !UNUSED, %e3: !E3, %qpos: !QPOS,
                      %kpos: !KPOS, %item: index) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %HQ = arith.constant ${HQ} : index
  %GROUP = arith.constant ${GROUP} : index
  %causal = arith.constant ${CAUSAL}
  %zero8 = arith.constant dense<0.0> : !V8
  %ninf8 = arith.constant dense<0xFF800000> : !V8
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
  %h = arith.remui %item, %HQ : index
  %b = arith.divui %item, %HQ : index
  %kh = arith.divui %h, %GROUP : index
  %S = memref.alloca() {alignment = 64 : i64} : !STATE
  %z = memref.alloca() {alignment = 64 : i64} : !VEC
  %m = memref.alloca() {alignment = 64 : i64} : !VEC
  %w = memref.alloca() {alignment = 64 : i64} : !VEC
  %a = memref.alloca() {alignment = 64 : i64} : !VEC
  %coef = memref.alloca() {alignment = 64 : i64} : !VEC
  %qnum = memref.alloca() {alignment = 64 : i64} : !TILE
  %qden = memref.alloca() {alignment = 64 : i64} : !TILE
  %knum = memref.alloca() {alignment = 64 : i64} : !TILE
  %kden = memref.alloca() {alignment = 64 : i64} : !TILE
  scf.for %c = %c0 to %D step %c1 {
    scf.for %e = %c0 to %DV step %c8 {
      vector.store %zero8, %S[%c, %e] : !STATE, !V8
    }
  }
  scf.for %c = %c0 to %D step %c8 {
    vector.store %zero8, %z[%c] : !VEC, !V8
    vector.store %ninf8, %m[%c] : !VEC, !V8
  }
  %has_state = arith.constant ${HAS_STATE}
  scf.if %has_state {
    func.call @state_in(%e3, %b, %h, %S, %z, %m) : (!E3, index, index, !STATE, !VEC, !VEC) -> ()
  }
  %sq_up0 = arith.addi %SQ, %R : index
  %sq_up = arith.subi %sq_up0, %c1 : index
  %NQT = arith.divui %sq_up, %R : index
  %done = scf.for %t = %c0 to %NQT step %c1 iter_args(%seen_tile = %c0) -> index {
    %i0 = arith.muli %t, %R : index
    %left = arith.subi %SQ, %i0 : index
    %nq = arith.minui %left, %R : index
    %qrows = memref.subview %q[%b, %h, %i0, 0] [1, 1, %nq, ${D}] [1, 1, 1, 1] : !Q to !ROWS
    func.call @load_query_rows(%qrows, %nq, %i0, %b, %scratch, %SQ, %SKV, %qnum, %qden)
        : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
    %seen_out = scf.for %r = %c0 to %nq step %c1 iter_args(%seen = %seen_tile) -> index {
      %i = arith.addi %i0, %r : index
      // The keys row i sees: all, or those j <= i + skv - sq.
      %last = arith.addi %i, %OFF : index
      %upto0 = arith.addi %last, %c1 : index
      %upto1 = arith.maxsi %upto0, %c0 : index
      %upto2 = arith.minsi %upto1, %SKV : index
      %upto = arith.select %causal, %upto2, %SKV : index
      scf.for %j = %seen to %upto step %c1 {
        %jr = arith.remui %j, %R : index
        %first = arith.cmpi eq, %jr, %c0 : index
        scf.if %first {
          %kleft = arith.subi %SKV, %j : index
          %nk = arith.minui %kleft, %R : index
          %krows = memref.subview %k[%b, %kh, %j, 0] [1, 1, %nk, ${D}] [1, 1, 1, 1] : !K to !ROWS
          func.call @load_key_rows(%krows, %nk, %j, %b, %scratch, %SQ, %SKV, %knum, %kden)
              : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
        }
        func.call @add_key(%knum, %kden, %jr, %v, %b, %kh, %j, %S, %z, %m, %w, %a)
            : (!TILE, !TILE, index, !V, index, index, index, !STATE, !VEC, !VEC, !VEC, !VEC) -> ()
      }
      %seen_now = arith.maxsi %seen, %upto : index
      func.call @emit_row(%qnum, %qden, %r, %seen_now, %S, %z, %coef, %o, %b, %h, %i)
          : (!TILE, !TILE, index, index, !STATE, !VEC, !VEC, !O, index, index, index) -> ()
      scf.yield %seen_now : index
    }
    scf.yield %seen_out : index
  }
  scf.if %has_state {
    // Every key of the call joins the state (sq = 0 rows saw none), and the
    // state goes back to the caller.
    scf.for %j = %done to %SKV step %c1 {
      %jr = arith.remui %j, %R : index
      %first = arith.cmpi eq, %jr, %c0 : index
      %fresh = arith.cmpi eq, %j, %done : index
      %load = arith.ori %first, %fresh : i1
      scf.if %load {
        %j0 = arith.subi %j, %jr : index
        %kleft = arith.subi %SKV, %j0 : index
        %nk = arith.minui %kleft, %R : index
        %krows = memref.subview %k[%b, %kh, %j0, 0] [1, 1, %nk, ${D}] [1, 1, 1, 1] : !K to !ROWS
        func.call @load_key_rows(%krows, %nk, %j0, %b, %scratch, %SQ, %SKV, %knum, %kden)
            : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
      }
      func.call @add_key(%knum, %kden, %jr, %v, %b, %kh, %j, %S, %z, %m, %w, %a)
          : (!TILE, !TILE, index, !V, index, index, index, !STATE, !VEC, !VEC, !VEC, !VEC) -> ()
    }
    func.call @state_out(%e3, %b, %h, %S, %z, %m) : (!E3, index, index, !STATE, !VEC, !VEC) -> ()
  }
  return
}

// The carried state of (b, h) into S, z, m: columns [0, DV), DV, DV + 1.
func.func private @state_in(%st: !E3, %b: index, %h: index, %S: !STATE, %z: !VEC, %m: !VEC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %DV1 = arith.constant ${DVS} : index
  %DVM = arith.subi %DV1, %c1 : index
  ${STATE_IN}
  return
}

// S, z, m back into the carried state of (b, h).
func.func private @state_out(%st: !E3, %b: index, %h: index, %S: !STATE, %z: !VEC, %m: !VEC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %DV1 = arith.constant ${DVS} : index
  %DVM = arith.subi %DV1, %c1 : index
  ${STATE_OUT}
  return
}

// phi of 8 lanes (the feature map; identity for softmax_keys).
func.func private @phi8(%x: !V8) -> !V8 {
  ${PHI8}
}

// 8 elements of Q/K/V as f32.
func.func private @widen8(%x: !IN8) -> !V8 {
  ${WIDEN8}
}

// 8 f32 lanes as the output type.
func.func private @narrow8(%x: !V8) -> !OUT8 {
  ${NARROW8}
}
