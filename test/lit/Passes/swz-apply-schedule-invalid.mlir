// Errors of swz-apply-schedule.
// RUN: swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%schedules/sm_80.json -verify-diagnostics
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=/nonexistent/sm_99.json 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not swizzle-opt %s -swz-apply-schedule 2>&1 | FileCheck %s --check-prefix=NOOPT
// NOFILE: error: swz-apply-schedule: cannot read schedule file /nonexistent/sm_99.json
// NOOPT: error: swz-apply-schedule needs schedule=<path to compiler/schedules/<target>.json>

// expected-error @+1 {{element type 'bf16' of @g differs from the sm_80 schedule's gemm element_type f16}}
swz.gemm_tile @g : bf16

// -----

// A row-derived swizzle needs power-of-two rows of at least 2^(M+B) elements.
// expected-error @+1 {{the schedule derives the swizzle shift from the row length, which needs a power of two >= 2^(M+B) = 64, got 80}}
swz.attention_tile @a : f16 head_dim(80)
