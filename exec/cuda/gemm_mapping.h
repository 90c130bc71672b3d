// ONNX Gemm/MatMul (row-major) as cuBLASLt calls (column-major): pure functions, no CUDA header,
// so the mapping is tested on any machine against a naive GEMM fed the mapped parameters.
//
// The trick: row-major D[M,N] = op(X)·op(Y) is column-major Dᵀ[N,M] = op(Y)ᵀ·op(X)ᵀ, and a row-major
// [r,c] matrix read column-major is its transpose with ld c. So cuBLASLt's A is our Y, its B our X,
// m = N, n = M, and no data moves.
//
// A plan is a list of calls on named buffers (Buf); the executor binds each name to a pointer.
// Semantics of one call (column-major, element offsets added to the bound pointers first):
//   kMatmul:  for b in [0, batch): D_b = alpha·op_a(A_b)·op_b(B_b) + beta·C_b, D_b has C_b's layout;
//             A_b = a + b·stride_a (0: the same matrix every batch), likewise B, C and D (stride_c).
//             Epilogue kBias adds bias[i] to row i of D; kBgradA writes bias[i] = Σ_k op_a(A)[i,k],
//             kBgradB writes bias[j] = Σ_k op_b(B)[k,j] (unscaled; only used with alpha = 1).
//   kAxpby:   D = alpha·A + beta·C elementwise over an m×n matrix (lda, ldc = ldd); c may be kNone.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/cuda/plan_key.h"
#include "graph/ops/linalg.h"

namespace gp::exec::cuda {

enum class LtOp : uint8_t { kN, kT };
enum class LtEpilogue : uint8_t { kNone, kBias, kBgradA, kBgradB };
enum class LtKind : uint8_t { kMatmul, kAxpby };
// kOnes: a vector of ones (GemmPlan::ones elements); kTmp: scratch (GemmPlan::tmp elements).
enum class Buf : uint8_t { kNone, kA, kB, kC, kY, kDY, kDA, kDB, kDC, kOnes, kTmp };

struct LtCall {
  LtKind kind = LtKind::kMatmul;
  Buf a = Buf::kNone, b = Buf::kNone, c = Buf::kNone, d = Buf::kNone, bias = Buf::kNone;
  int64_t m = 0, n = 0, k = 0;
  LtOp op_a = LtOp::kN, op_b = LtOp::kN;
  int64_t lda = 1, ldb = 1, ldc = 1;
  float alpha = 1.f, beta = 0.f;
  LtEpilogue epilogue = LtEpilogue::kNone;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t offset_a = 0, offset_b = 0, offset_c = 0;  // offset_c is D's offset too
};

struct GemmPlan {
  std::vector<LtCall> calls;
  int64_t ones = 0;  // elements of kOnes the calls read
  int64_t tmp = 0;   // elements of kTmp
  // Set when the last call wrote a fresh gradient into kTmp that the executor adds into kDC
  // (accumulating a full-matrix Gemm C gradient: cuBLASLt documents no in-place transform).
  bool add_tmp_into_dc = false;
};

std::string describe(LtCall const& c);

// The key of a kMatmul call's cuBLASLt descriptors and algorithm: everything they are made from
// (data type, TF32, m/n/k, leading dimensions, batch and strides, transposes, epilogue, the
// operands' smallest alignment and the bias's), not alpha, beta or the offsets (call arguments).
PlanKey matmul_plan_key(LtCall const& c, int64_t data_type, bool tf32, uint32_t min_alignment, uint32_t bias_alignment,
                        int device);
char const* buf_name(Buf b);  // "A", "dY", "ones", ... ("-" for kNone)

// The device pointers a plan's buffer names are bound to. A class with member functions, not an
// array with a free `bind`: on a std::array, argument-dependent lookup also finds std::bind, which
// for a non-const void* beat our function and bound nothing (the first H100 run: every output and
// gradient buffer stayed null).
class GemmBuffers {
 public:
  // Read-only operands are never written through the pointer.
  void set(Buf name, void const* ptr) { ptrs_[static_cast<std::size_t>(name)] = const_cast<void*>(ptr); }
  void* get(Buf name) const { return ptrs_[static_cast<std::size_t>(name)]; }

 private:
  std::array<void*, static_cast<std::size_t>(Buf::kTmp) + 1> ptrs_{};
};

// Ok when every buffer the plan's calls read or write is bound (kOnes and kTmp included: the
// executor binds them before it checks); else kInternal naming the first unbound one and its call.
Status check_bound(GemmPlan const& plan, GemmBuffers const& buffers);  // one line, for error messages and debugging

// ---- Gemm: Y[M,N] = alpha·op(A)·op(B) + beta·C, C unidirectionally broadcast to [M,N] ----
enum class BiasKind : uint8_t { kNone, kScalar, kPerColumn /* [N], [1,N] */, kPerRow /* [M,1] */, kFull };

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 1.f;
  BiasKind bias = BiasKind::kNone;
};

// Kind of C for an [M,N] output, or kInvalidArgument when C does not broadcast to it.
Result<BiasKind> gemm_bias_kind(std::vector<int64_t> const& c_shape, int64_t m, int64_t n);
// Shapes as stored (A is [K,M] when trans_a, ...); the problem with bias kNone.
Result<GemmProblem> gemm_problem(std::vector<int64_t> const& a, std::vector<int64_t> const& b, bool trans_a,
                                 bool trans_b, float alpha, float beta);

GemmPlan gemm_forward_plan(GemmProblem const& p);
// Gradients for A, B, C (those wanted) from kDY, each set or (accumulate) added into kDA/kDB/kDC.
GemmPlan gemm_backward_plan(GemmProblem const& p, bool want_a, bool want_b, bool want_c, bool accumulate);

// The buffers of the linalg and conv ops, bound exactly as those ops bind them (what a host test
// runs on fake pointers). `c`, `da`, `db`, `dc` may be null (no C input, gradient not wanted).
GemmBuffers forward_buffers(void const* a, void const* b, void const* c, void* y);
GemmBuffers backward_buffers(void const* a, void const* b, void const* dy, void* da, void* db, void* dc);

// ---- MatMul: numpy matmul with batch broadcasting and 1-D operands (graph/ops/linalg.h) ----
using graph::ops::matmul_shapes;
using graph::ops::MatMulShapes;

// Y = alpha·op(A)·op(B), a transposed operand (s.trans_a, s.trans_b) read as stored.
GemmPlan matmul_forward_plan(MatMulShapes const& s, float alpha = 1.f);
// dop(A) = alpha·dY·op(B)ᵀ and dop(B) = alpha·op(A)ᵀ·dY, written as the operands are stored, summed
// over the batch dims where the operand was broadcast.
GemmPlan matmul_backward_plan(MatMulShapes const& s, bool want_a, bool want_b, bool accumulate, float alpha = 1.f);

// The bias gradient a kBgradA/kBgradB call writes, as a separate product with kOnes (k elements):
// the fallback where cuBLASLt offers no algorithm for the epilogue (batch 1 calls only).
LtCall bgrad_as_matmul(LtCall const& c);

// Row-major D[M,N] (ld N) = alpha·op(X)·op(Y) + beta·D, X stored [M,K] (or [K,M] when tx), Y stored
// [K,N] (or [N,K] when ty): the one place the row-major → column-major swap is written.
LtCall rowmajor_call(Buf x, bool tx, Buf y, bool ty, Buf d, int64_t m, int64_t n, int64_t k, float alpha, float beta);
// The same product on strided views: stored X rows `ldx` apart, Y rows `ldy` apart, D rows `ldd`
// apart (a block of gate columns inside a wider matrix: the recurrent layers' per-step products);
// D += the product when accumulate.
LtCall strided_rowmajor_call(Buf x, bool tx, int64_t ldx, Buf y, bool ty, int64_t ldy, Buf d, int64_t ldd, int64_t m,
                             int64_t n, int64_t k, bool accumulate);

// ---- Conv's bias through GEMMs (y [N,K,S], bias [K]) ----
// y_n[K,S] += bias[K,1]·ones[1,S] for every n: one strided-batched rank-1 product (kC: bias, kY: y).
GemmPlan conv_bias_forward_plan(int64_t n, int64_t k, int64_t spatial);
// db[K] (kDC) = Σ_{n,s} dy[n,K,s] (kDY): dy·ones over s into tmp[N,K], then ones·tmp over n.
GemmPlan conv_bias_grad_plan(int64_t n, int64_t k, int64_t spatial, bool accumulate);

}  // namespace gp::exec::cuda
