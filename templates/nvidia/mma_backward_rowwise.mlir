// The row-wise kernels of the NVIDIA attention backward (templates/nvidia/
// mma_attention_backward.mlir), put in place of its `// @pejit-blocks` line
// with the other blocks: the types and parameters are that file's.
//   pejit_backward_transform  Q' = R q, K' = R k (before the phases)
//   pejit_backward_finish     dq, dk = the transform's adjoint of dQ', dK'
//                             (after them), with the operand gradients
//                             that read whole rows

// Block (64-row tile x, head y, batch z): y < HQ is a query head (q -> tq),
// else KV head y - HQ (k -> tk). Rows staged, transformed one per thread
// in shared memory (as the forward transforms its tiles), written back.
gpu.func @pejit_backward_transform(${BACKWARD_ARGS})
    workgroup(%FTs: !FT {llvm.align = 16 : i64}) kernel {
${BACKWARD_VIEWS}
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %THREADS = arith.constant ${THREADS} : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %D = arith.constant ${D} : index
  %keep_f32 = arith.constant ${KEEP_F32}
  %tid = gpu.thread_id x
  %bx = gpu.block_id x
  %y = gpu.block_id y
  %b = gpu.block_id z
  %key = arith.cmpi uge, %y, %HQ : index
  %kh = arith.subi %y, %HQ : index
  %head = arith.select %key, %kh, %y : index
  %S = arith.select %key, %SKV, %SQ : index
  %H = arith.select %key, %HKV, %HQ : index
  %i0 = arith.muli %bx, %c64 : index
  %any = arith.cmpi ult, %i0, %S : index
  scf.if %any {
    %left = arith.subi %S, %i0 : index
    %valid = arith.minui %left, %c64 : index
    %bh0 = arith.muli %b, %H : index
    %bh = arith.addi %bh0, %head : index
    %r0 = arith.muli %bh, %S : index
    %r1 = arith.addi %r0, %i0 : index
    %first = arith.muli %r1, %D : index
    scf.if %key {
      func.call @stage_t(%FTs, %k_arg, %first, %valid, %tid) : (!FT, !PT, index, index, index) -> ()
    } else {
      func.call @stage_t(%FTs, %q_arg, %first, %valid, %tid) : (!FT, !PT, index, index, index) -> ()
    }
    gpu.barrier
    // In f32, then rounded to T: the forward's Q' and K' (it rotates its
    // tiles in f32 and stores them in T); kept in f32 too for the
    // transform's operand gradients.
    scf.for %r = %tid to %valid step %THREADS {
      %i = arith.addi %i0, %r : index
      %row = memref.subview %FTs[%r, 0] [1, ${D}] [1, 1] : !FT to !FROW
      scf.if %key {
        attn.qk_transform %row, %c1, %i, %b, %scratch key lengths(%SQ, %SKV) : !FROW, !SCRATCH
      } else {
        attn.qk_transform %row, %c1, %i, %b, %scratch lengths(%SQ, %SKV) : !FROW, !SCRATCH
      }
    }
    gpu.barrier
    scf.if %key {
      func.call @unstage_f(%FTs, %tk_arg, %first, %valid, %tid) : (!FT, !PT, index, index, index) -> ()
      scf.if %keep_f32 {
        func.call @unstage_ff(%FTs, %tkf_arg, %first, %valid, %tid)
            : (!FT, !PF, index, index, index) -> ()
      }
    } else {
      func.call @unstage_f(%FTs, %tq_arg, %first, %valid, %tid) : (!FT, !PT, index, index, index) -> ()
      scf.if %keep_f32 {
        func.call @unstage_ff(%FTs, %tqf_arg, %first, %valid, %tid)
            : (!FT, !PF, index, index, index) -> ()
      }
    }
  }
  gpu.return
}

// Block (64-row tile x, head y, batch z), y as the transform's: the rows of
// dQ' (gq) or dK' (gk) give the transform's operand gradients (into this
// warp's partial, lane by lane), then go through its adjoint in shared
// memory, one row per thread, and are rounded to T into dq or dk.
gpu.func @pejit_backward_finish(${BACKWARD_ARGS})
    workgroup(%FTs: !FT {llvm.align = 16 : i64}) kernel {
${BACKWARD_VIEWS}
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %THREADS = arith.constant ${THREADS} : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %D = arith.constant ${D} : index
  %has_grads = arith.constant ${HAS_FINISH_GRADS}
  %has_transform_grads = arith.constant ${HAS_TRANSFORM_GRADS}
  %has_key_term = arith.constant ${HAS_KEY_TERM}
  %has_term_grads = arith.constant ${HAS_TERM_GRADS}
  %true = arith.constant true
  %tid = gpu.thread_id x
  %bx = gpu.block_id x
  %y = gpu.block_id y
  %b = gpu.block_id z
  %gx = gpu.grid_dim x
  %warp = arith.divui %tid, %c32 : index
  %lane = arith.remui %tid, %c32 : index
  %key = arith.cmpi uge, %y, %HQ : index
  %kh = arith.subi %y, %HQ : index
  %head = arith.select %key, %kh, %y : index
  %S = arith.select %key, %SKV, %SQ : index
  %H = arith.select %key, %HKV, %HQ : index
  %i0 = arith.muli %bx, %c64 : index
  // This warp's partial: after the q blocks' (partial_slots).
  %parts:2 = func.call @partial_slots(%SQ, %SKV, %B) : (index, index, index) -> (index, index)
  %sides = arith.addi %HQ, %HKV : index
  %blk0 = arith.muli %b, %sides : index
  %blk1 = arith.addi %blk0, %y : index
  %blk2 = arith.muli %blk1, %gx : index
  %blk3 = arith.addi %blk2, %bx : index
  %blk = arith.addi %blk3, %parts#0 : index
  %pbase = func.call @slot_base(%blk, %warp) : (index, index) -> index
  scf.if %has_grads {
    func.call @zero_slot(%part_arg, %parts#1, %pbase, %lane) : (!PF, index, index, index) -> ()
  }
  %any = arith.cmpi ult, %i0, %S : index
  scf.if %any {
    %left = arith.subi %S, %i0 : index
    %valid = arith.minui %left, %c64 : index
    %bh0 = arith.muli %b, %H : index
    %bh = arith.addi %bh0, %head : index
    %r0 = arith.muli %bh, %S : index
    %r1 = arith.addi %r0, %i0 : index
    %first = arith.muli %r1, %D : index
    scf.if %key {
      func.call @stage_f(%FTs, %gk_arg, %first, %valid, %tid) : (!FT, !PF, index, index, index) -> ()
    } else {
      func.call @stage_f(%FTs, %gq_arg, %first, %valid, %tid) : (!FT, !PF, index, index, index) -> ()
    }
    gpu.barrier
    // The query side: the key term's share of dQ', then the terms' table
    // gradients (this thread's row, before the adjoint and the transform's
    // operand gradients read it).
    %query_side = arith.xori %key, %true : i1
    %add_key = arith.andi %query_side, %has_key_term : i1
    scf.if %add_key {
      scf.for %r = %tid to %valid step %THREADS {
        %i = arith.addi %i0, %r : index
        func.call @key_term_dq(%FTs, %r, %b, %head, %i, %terms_arg, %B, %SQ${ENCODING_CALL_ARGS})
            : (!FT, index, index, index, index, !PF, index, index${ENCODING_CALL_TYPES}) -> ()
      }
    }
    %add_grads = arith.andi %query_side, %has_term_grads : i1
    scf.if %add_grads {
      func.call @term_grads(%tid, %valid, %i0, %b, %head, %lane, %tqf_arg, %do_arg, %terms_arg,
                            %B, %SQ, %part_arg, %parts#1, %pbase${ENCODING_CALL_ARGS})
          : (index, index, index, index, index, index, !PF, !POT, !PF, index, index, !PF, index,
             index${ENCODING_CALL_TYPES}) -> ()
    }
    scf.if %has_transform_grads {
      func.call @transform_grads(%FTs, %tid, %valid, %i0, %first, %b, %key, %lane, %tqf_arg,
                                 %tkf_arg, %part_arg, %parts#1, %pbase, %qpos_arg, %kpos_arg,
                                 %SQ, %SKV${ENCODING_CALL_ARGS})
          : (!FT, index, index, index, index, index, i1, index, !PF, !PF, !PF, index, index, !PI,
             !PI, index, index${ENCODING_CALL_TYPES}) -> ()
    }
    scf.for %r = %tid to %valid step %THREADS {
      %i = arith.addi %i0, %r : index
      %row = memref.subview %FTs[%r, 0] [1, ${D}] [1, 1] : !FT to !FROW
      scf.if %key {
        attn.qk_transform adjoint %row, %c1, %i, %b, %scratch key lengths(%SQ, %SKV)
            : !FROW, !SCRATCH
      } else {
        attn.qk_transform adjoint %row, %c1, %i, %b, %scratch lengths(%SQ, %SKV)
            : !FROW, !SCRATCH
      }
    }
    gpu.barrier
    scf.if %key {
      func.call @unstage_f(%FTs, %dk_arg, %first, %valid, %tid) : (!FT, !PT, index, index, index) -> ()
    } else {
      func.call @unstage_f(%FTs, %dq_arg, %first, %valid, %tid) : (!FT, !PT, index, index, index) -> ()
    }
  }
  gpu.return
}
