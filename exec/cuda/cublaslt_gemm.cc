#include "exec/cuda/cublaslt_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "exec/cuda/cuda_check.h"
#include "exec/cuda/device_context.h"
#include "kernels/cuda/device_ops.h"

namespace gp::exec::cuda {
namespace {

template <typename T>
struct LtType;
template <>
struct LtType<float> {
  static constexpr cudaDataType_t kData = CUDA_R_32F;
  static constexpr DType kDType = DType::kFloat32;
};
// Mixed precision: 16-bit operands and results, float32 compute and scale (alpha, beta).
template <>
struct LtType<__nv_bfloat16> {
  static constexpr cudaDataType_t kData = CUDA_R_16BF;
  static constexpr DType kDType = DType::kBFloat16;
};
template <>
struct LtType<__half> {
  static constexpr cudaDataType_t kData = CUDA_R_16F;
  static constexpr DType kDType = DType::kFloat16;
};

// Largest power of two (≤ 256, cuBLASLt's default assumption) dividing the address: the heuristic
// must not pick a kernel that needs more alignment than a batch-split or offset operand has.
uint32_t alignment(void const* p) {
  auto const a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 4 && a % al != 0) al /= 2;
  return al;
}

cublasOperation_t op_of(LtOp op) { return op == LtOp::kT ? CUBLAS_OP_T : CUBLAS_OP_N; }

cublasLtEpilogue_t epilogue_of(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::kBgradA:
      return CUBLASLT_EPILOGUE_BGRADA;
    case LtEpilogue::kBgradB:
      return CUBLASLT_EPILOGUE_BGRADB;
    case LtEpilogue::kNone:
      break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

struct Layouts {
  cublasLtMatrixLayout_t l[4] = {nullptr, nullptr, nullptr, nullptr};  // A, B, C, D
  ~Layouts() {
    for (auto* x : l)
      if (x) cublasLtMatrixLayoutDestroy(x);
  }
};

struct MatmulEntry {
  cublasLtMatmulDesc_t desc = nullptr;
  Layouts layouts;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;  // false: the heuristic found none (kept, so the miss is not re-asked)
  ~MatmulEntry() {
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Status make_layout(cublasLtMatrixLayout_t& l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                   int64_t batch, int64_t stride) {
  GP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    int32_t const count = static_cast<int32_t>(batch);
    GP_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    GP_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return Status::ok();
}

struct Ptrs {
  void const* a;
  void const* b;
  void const* c;
  void* d;
  void* bias;
};

template <typename T>
Result<MatmulEntry*> matmul_entry(DeviceContext const& ctx, LtCall const& c, Ptrs const& p) {
  cudaDataType_t const type = LtType<T>::kData;
  uint32_t const al[4] = {alignment(p.a), alignment(p.b), alignment(p.c), alignment(p.d)};
  // TF32 applies to float32 operands only.
  bool const tf32 = ctx.tf32_matmul && type == CUDA_R_32F;
  PlanKey const key = matmul_plan_key(c, static_cast<int64_t>(type), tf32, std::min({al[0], al[1], al[2], al[3]}),
                                      p.bias ? alignment(p.bias) : 0, ctx.device);
  thread_local PlanCache<MatmulEntry> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();

  auto e = std::make_unique<MatmulEntry>();
  GP_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&e->desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t const ta = op_of(c.op_a), tb = op_of(c.op_b);
  cublasLtEpilogue_t const epi = epilogue_of(c.epilogue);
  GP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  GP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  GP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (p.bias)
    GP_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)));
  bool const na = c.op_a == LtOp::kN, nb = c.op_b == LtOp::kN;
  RETURN_IF_ERROR(make_layout(e->layouts.l[0], type, na ? c.m : c.k, na ? c.k : c.m, c.lda, c.batch, c.stride_a));
  RETURN_IF_ERROR(make_layout(e->layouts.l[1], type, nb ? c.k : c.n, nb ? c.n : c.k, c.ldb, c.batch, c.stride_b));
  RETURN_IF_ERROR(make_layout(e->layouts.l[2], type, c.m, c.n, c.ldc, c.batch, c.stride_c));
  RETURN_IF_ERROR(make_layout(e->layouts.l[3], type, c.m, c.n, c.ldc, c.batch, c.stride_c));

  cublasLtMatmulPreference_t pref = nullptr;
  GP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)> pref_guard(
      pref, cublasLtMatmulPreferenceDestroy);
  uint64_t const ws = ctx.cublaslt_workspace_bytes;
  GP_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulPreferenceAttributes_t const align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    GP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &al[i], sizeof(al[i])));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t const st = cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt, e->desc, e->layouts.l[0], e->layouts.l[1],
                                                           e->layouts.l[2], e->layouts.l[3], pref, 1, &result, &found);
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
    return cublas_error(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  e->has_algo = st == CUBLAS_STATUS_SUCCESS && found > 0;
  if (e->has_algo) e->algo = result.algo;
  return cache.emplace(key, std::move(e)).first->second.get();
}

template <typename T>
Status run_matmul(DeviceContext const& ctx, LtCall const& c, GemmBuffers const& buf) {
  auto at = [&](Buf b, int64_t offset) -> char* {
    char* base = static_cast<char*>(buf.get(b));
    return base ? base + offset * static_cast<int64_t>(sizeof(T)) : nullptr;
  };
  Ptrs p{at(c.a, c.offset_a), at(c.b, c.offset_b), nullptr, at(c.d, c.offset_c), nullptr};
  p.c = c.c == Buf::kNone ? p.d : at(c.c, c.offset_c);
  if (c.epilogue != LtEpilogue::kNone) p.bias = at(c.bias, 0);  // every buffer bound: check_bound
  ASSIGN_OR_RETURN(MatmulEntry * e, matmul_entry<T>(ctx, c, p));
  if (!e->has_algo) {
    // No fp32 kernel for a bias-gradient epilogue: the plain product, then the reduction with ones.
    if (c.epilogue == LtEpilogue::kBgradA || c.epilogue == LtEpilogue::kBgradB) {
      LtCall plain = c;
      plain.epilogue = LtEpilogue::kNone;
      plain.bias = Buf::kNone;
      RETURN_IF_ERROR(run_matmul<T>(ctx, plain, buf));
      return run_matmul<T>(ctx, bgrad_as_matmul(c), buf);
    }
    return unsupported("cuBLASLt has no algorithm for " + describe(c));
  }
  if (p.bias)  // the cached descriptor may have been made for another buffer of the same alignment
    GP_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)));
  float const alpha = c.alpha, beta = c.beta;
  GP_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt, e->desc, &alpha, p.a, e->layouts.l[0], p.b, e->layouts.l[1], &beta, p.c,
                                 e->layouts.l[2], p.d, e->layouts.l[3], &e->algo, ctx.cublaslt_workspace,
                                 ctx.cublaslt_workspace_bytes, ctx.compute));
  return Status::ok();
}

template <typename T>
Status run_axpby(DeviceContext const& ctx, LtCall const& c, GemmBuffers const& buf) {
  cudaDataType_t const type = LtType<T>::kData;
  auto at = [&](Buf b, int64_t offset) -> char* {
    char* base = static_cast<char*>(buf.get(b));
    return base ? base + offset * static_cast<int64_t>(sizeof(T)) : nullptr;
  };
  void const* a = at(c.a, c.offset_a);
  void const* other = c.c == Buf::kNone ? nullptr : at(c.c, c.offset_c);
  void* d = at(c.d, c.offset_c);  // a and d bound: check_bound
  cublasLtMatrixTransformDesc_t desc = nullptr;
  GP_CUBLAS_CHECK(cublasLtMatrixTransformDescCreate(&desc, CUDA_R_32F));
  std::unique_ptr<cublasLtMatrixTransformDescOpaque_t, cublasStatus_t (*)(cublasLtMatrixTransformDesc_t)> guard(
      desc, cublasLtMatrixTransformDescDestroy);
  Layouts l;
  RETURN_IF_ERROR(make_layout(l.l[0], type, c.m, c.n, c.lda, 1, 0));
  RETURN_IF_ERROR(make_layout(l.l[2], type, c.m, c.n, c.ldc, 1, 0));
  RETURN_IF_ERROR(make_layout(l.l[3], type, c.m, c.n, c.ldc, 1, 0));
  float const alpha = c.alpha, beta = other ? c.beta : 0.f;
  GP_CUBLAS_CHECK(cublasLtMatrixTransform(ctx.cublaslt, desc, &alpha, a, l.l[0], &beta, other, other ? l.l[2] : nullptr,
                                          d, l.l[3], ctx.compute));
  return Status::ok();
}

}  // namespace

template <typename T>
Status run_gemm_plan(GemmPlan const& plan, GemmBuffers buffers) {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  int64_t ones_needed = plan.ones;
  for (LtCall const& c : plan.calls)
    if (c.epilogue == LtEpilogue::kBgradA || c.epilogue == LtEpilogue::kBgradB)
      ones_needed = std::max(ones_needed, c.k);
  Tensor ones, tmp;
  if (ones_needed > 0) {
    ASSIGN_OR_RETURN(ones, empty({ones_needed}, LtType<T>::kDType));
    GP_CUDA_CHECK(kernels::cuda::fill<T>(ones.data<T>(), 1.f, ones_needed, ctx->compute));
    buffers.set(Buf::kOnes, ones.raw());
  }
  if (plan.tmp > 0) {
    ASSIGN_OR_RETURN(tmp, empty({plan.tmp}, LtType<T>::kDType));
    buffers.set(Buf::kTmp, tmp.raw());
  }
  RETURN_IF_ERROR(check_bound(plan, buffers));
  for (LtCall const& c : plan.calls)
    RETURN_IF_ERROR(c.kind == LtKind::kAxpby ? run_axpby<T>(*ctx, c, buffers) : run_matmul<T>(*ctx, c, buffers));
  if (plan.add_tmp_into_dc) {
    T* dc = static_cast<T*>(buffers.get(Buf::kDC));  // bound: check_bound
    GP_CUDA_CHECK(kernels::cuda::add_inplace<T>(dc, tmp.data<T>(), plan.tmp, ctx->compute));
  }
  return Status::ok();
}

template Status run_gemm_plan<float>(GemmPlan const& plan, GemmBuffers buffers);
template Status run_gemm_plan<__nv_bfloat16>(GemmPlan const& plan, GemmBuffers buffers);
template Status run_gemm_plan<__half>(GemmPlan const& plan, GemmBuffers buffers);

}  // namespace gp::exec::cuda
