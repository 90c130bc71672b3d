#include "exec/cuda/gemm_mapping.h"
#include "core/units.h"

#include <algorithm>
#include <sstream>

namespace gp::exec::cuda {
namespace {

int64_t prod(std::vector<int64_t> const& v, std::size_t from, std::size_t to) {
  int64_t p = 1;
  for (std::size_t i = from; i < to; ++i) p *= v[i];
  return p;
}

// Element strides of an operand's batch dims within the full batch (0 where it is broadcast).
std::vector<int64_t> batch_strides(std::vector<int64_t> const& shape, std::vector<int64_t> const& full_batch) {
  std::size_t const nb = full_batch.size();
  std::vector<int64_t> s(nb, 0);
  int64_t step = shape[nb] * shape[nb + 1];
  for (std::size_t i = nb; i-- > 0;) {
    s[i] = shape[i] == 1 ? 0 : step;
    step *= shape[i];
  }
  return s;
}

// Splits a batched row-major product over `dims` into strided-batched calls. x and y are the
// operands in base.b and base.a (rowmajor_call's swap), d the output, whose stride is 0 on the
// dims it is summed over. Summed dims are looped outermost, so the first call to touch a slice
// of D uses first_beta and every later one adds (beta 1); one call never writes a slice twice.
void add_batched(GemmPlan& plan, LtCall const& base, std::vector<int64_t> const& dims, std::vector<int64_t> const& sx,
                 std::vector<int64_t> const& sy, std::vector<int64_t> const& sd, float first_beta) {
  std::vector<std::size_t> reduced, kept;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    (sd[i] == 0 ? reduced : kept).push_back(i);
  }
  std::vector<std::size_t> order = reduced;
  order.insert(order.end(), kept.begin(), kept.end());
  int64_t count = 1, rx = 0, ry = 0, rd = 0;
  std::size_t run_start = order.size();
  if (!kept.empty()) {
    std::size_t const last = order.back();
    count = dims[last];
    rx = sx[last], ry = sy[last], rd = sd[last];
    run_start = order.size() - 1;
    while (run_start > reduced.size()) {
      std::size_t const j = order[run_start - 1];
      if (sx[j] != rx * count || sy[j] != ry * count || sd[j] != rd * count) break;
      count *= dims[j];
      --run_start;
    }
  }
  std::vector<std::size_t> const outer(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(run_start));
  std::vector<int64_t> idx(outer.size(), 0);
  while (true) {
    LtCall c = base;
    bool first = true;
    for (std::size_t i = 0; i < outer.size(); ++i) {
      std::size_t const dim = outer[i];
      c.offset_b += idx[i] * sx[dim];
      c.offset_a += idx[i] * sy[dim];
      c.offset_c += idx[i] * sd[dim];
      if (i < reduced.size() && idx[i] != 0) first = false;
    }
    c.beta = first ? first_beta : 1.f;
    c.batch = count;
    if (count > 1) c.stride_b = rx, c.stride_a = ry, c.stride_c = rd;
    plan.calls.push_back(c);
    std::size_t i = outer.size();
    for (; i > 0; --i) {
      if (++idx[i - 1] < dims[outer[i - 1]]) break;
      idx[i - 1] = 0;
    }
    if (i == 0) break;
  }
}

}  // namespace

char const* buf_name(Buf b) {
  switch (b) {
    case Buf::kNone:
      return "-";
    case Buf::kA:
      return "A";
    case Buf::kB:
      return "B";
    case Buf::kC:
      return "C";
    case Buf::kY:
      return "Y";
    case Buf::kDY:
      return "dY";
    case Buf::kDA:
      return "dA";
    case Buf::kDB:
      return "dB";
    case Buf::kDC:
      return "dC";
    case Buf::kOnes:
      return "ones";
    case Buf::kTmp:
      return "tmp";
  }
  return "?";
}

PlanKey matmul_plan_key(LtCall const& c, int64_t data_type, bool tf32, uint32_t min_alignment, uint32_t bias_alignment,
                        int device) {
  PlanKey key(PlanKind::kMatmul, device, data_type);
  for (int64_t v : {int64_t{tf32}, c.m, c.n, c.k, c.lda, c.ldb, c.ldc, c.batch, c.stride_a, c.stride_b, c.stride_c,
                    static_cast<int64_t>(c.op_a), static_cast<int64_t>(c.op_b), static_cast<int64_t>(c.epilogue),
                    int64_t{min_alignment}, int64_t{bias_alignment}})
    key.add(v);
  return key;
}

std::string describe(LtCall const& c) {
  std::ostringstream o;
  if (c.kind == LtKind::kAxpby) {
    o << "axpby " << buf_name(c.d) << "[" << c.m << "x" << c.n << " ld " << c.ldc << "] = " << c.alpha << "*"
      << buf_name(c.a) << "(ld " << c.lda << ") + " << c.beta << "*" << buf_name(c.c);
    return o.str();
  }
  o << "matmul m=" << c.m << " n=" << c.n << " k=" << c.k << " " << buf_name(c.d) << " = " << c.alpha << "*"
    << buf_name(c.a) << (c.op_a == LtOp::kT ? "^T" : "") << "(ld " << c.lda << ")*" << buf_name(c.b)
    << (c.op_b == LtOp::kT ? "^T" : "") << "(ld " << c.ldb << ") + " << c.beta << "*" << buf_name(c.c) << " (ld "
    << c.ldc << ")";
  if (c.epilogue != LtEpilogue::kNone)
    o << " epilogue "
      << (c.epilogue == LtEpilogue::kBias     ? "BIAS"
          : c.epilogue == LtEpilogue::kBgradA ? "BGRADA"
                                              : "BGRADB")
      << " " << buf_name(c.bias);
  if (c.batch > 1) o << " batch " << c.batch << " strides " << c.stride_a << "/" << c.stride_b << "/" << c.stride_c;
  if (c.offset_a || c.offset_b || c.offset_c) o << " offsets " << c.offset_a << "/" << c.offset_b << "/" << c.offset_c;
  return o.str();
}

LtCall rowmajor_call(Buf x, bool tx, Buf y, bool ty, Buf d, int64_t m, int64_t n, int64_t k, float alpha, float beta) {
  LtCall c;
  c.a = y;
  c.op_a = ty ? LtOp::kT : LtOp::kN;
  c.lda = std::max<int64_t>(1, ty ? k : n);
  c.b = x;
  c.op_b = tx ? LtOp::kT : LtOp::kN;
  c.ldb = std::max<int64_t>(1, tx ? m : k);
  c.m = n;
  c.n = m;
  c.k = k;
  c.c = d;
  c.d = d;
  c.ldc = std::max<int64_t>(1, n);
  c.alpha = alpha;
  c.beta = beta;
  return c;
}

LtCall strided_rowmajor_call(Buf x, bool tx, int64_t ldx, Buf y, bool ty, int64_t ldy, Buf d, int64_t ldd, int64_t m,
                             int64_t n, int64_t k, bool accumulate) {
  LtCall c = rowmajor_call(x, tx, y, ty, d, m, n, k, 1.f, accumulate ? 1.f : 0.f);
  c.lda = ldy;
  c.ldb = ldx;
  c.ldc = ldd;
  return c;
}

LtCall bgrad_as_matmul(LtCall const& c) {
  LtCall r;
  r.d = r.c = c.bias;
  r.k = c.k;
  if (c.epilogue == LtEpilogue::kBgradA) {  // bias[m,1] = op_a(A)[m,k] · ones[k,1]
    r.a = c.a, r.op_a = c.op_a, r.lda = c.lda, r.offset_a = c.offset_a;
    r.b = Buf::kOnes, r.ldb = std::max<int64_t>(1, c.k);
    r.m = c.m, r.n = 1, r.ldc = std::max<int64_t>(1, c.m);
  } else {  // bias[1,n] = ones[1,k] · op_b(B)[k,n]
    r.a = Buf::kOnes, r.lda = 1;
    r.b = c.b, r.op_b = c.op_b, r.ldb = c.ldb, r.offset_b = c.offset_b;
    r.m = 1, r.n = c.n, r.ldc = 1;
  }
  return r;
}

Result<BiasKind> gemm_bias_kind(std::vector<int64_t> const& c, int64_t m, int64_t n) {
  int64_t numel = 1;
  for (int64_t v : c) numel *= v;
  if (numel == 1) return BiasKind::kScalar;
  if (c.size() == 1 && c[0] == n) return BiasKind::kPerColumn;
  if (c.size() == 2 && c[0] == 1 && c[1] == n) return BiasKind::kPerColumn;
  if (c.size() == 2 && c[0] == m && c[1] == 1) return BiasKind::kPerRow;
  if (c.size() == 2 && c[0] == m && c[1] == n) return BiasKind::kFull;
  return invalid_argument("C " + dims_string(c) + " does not broadcast to [" + std::to_string(m) + "," +
                          std::to_string(n) + "]");
}

Result<GemmProblem> gemm_problem(std::vector<int64_t> const& a, std::vector<int64_t> const& b, bool trans_a,
                                 bool trans_b, float alpha, float beta) {
  ASSIGN_OR_RETURN(graph::ops::GemmDims const d, graph::ops::gemm_dims(a, b, trans_a, trans_b));
  GemmProblem p;
  p.m = d.m;
  p.k = d.k;
  p.n = d.n;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

GemmPlan gemm_forward_plan(GemmProblem const& p) {
  GemmPlan plan;
  LtCall main = rowmajor_call(Buf::kA, p.trans_a, Buf::kB, p.trans_b, Buf::kY, p.m, p.n, p.k, p.alpha, 0.f);
  if (p.bias == BiasKind::kNone || p.beta == 0.f) {
    plan.calls.push_back(main);
    return plan;
  }
  if (p.bias == BiasKind::kFull) {
    main.c = Buf::kC;
    main.beta = p.beta;
    plan.calls.push_back(main);
    return plan;
  }
  if (p.bias == BiasKind::kPerColumn && p.beta == 1.f) {
    main.epilogue = LtEpilogue::kBias;  // bias[i] per column-major row = per row-major column
    main.bias = Buf::kC;
    plan.calls.push_back(main);
    return plan;
  }
  // Y = beta·C broadcast, written as rank-1 products with a ones vector; then the product adds.
  if (p.bias == BiasKind::kPerColumn) {
    plan.calls.push_back(rowmajor_call(Buf::kOnes, false, Buf::kC, false, Buf::kY, p.m, p.n, 1, p.beta, 0.f));
    plan.ones = p.m;
  } else if (p.bias == BiasKind::kPerRow) {
    plan.calls.push_back(rowmajor_call(Buf::kC, false, Buf::kOnes, false, Buf::kY, p.m, p.n, 1, p.beta, 0.f));
    plan.ones = p.n;
  } else {  // scalar: tmp[1,N] = c·ones, Y = beta·ones[M,1]·tmp
    plan.calls.push_back(rowmajor_call(Buf::kC, false, Buf::kOnes, false, Buf::kTmp, 1, p.n, 1, 1.f, 0.f));
    plan.calls.push_back(rowmajor_call(Buf::kOnes, false, Buf::kTmp, false, Buf::kY, p.m, p.n, 1, p.beta, 0.f));
    plan.ones = std::max(p.m, p.n);
    plan.tmp = p.n;
  }
  main.beta = 1.f;
  plan.calls.push_back(main);
  return plan;
}

GemmPlan gemm_backward_plan(GemmProblem const& p, bool want_a, bool want_b, bool want_c, bool accumulate) {
  GemmPlan plan;
  float const acc = accumulate ? 1.f : 0.f;
  if (want_a) {
    plan.calls.push_back(
        p.trans_a ? rowmajor_call(Buf::kB, p.trans_b, Buf::kDY, true, Buf::kDA, p.k, p.m, p.n, p.alpha, acc)
                  : rowmajor_call(Buf::kDY, false, Buf::kB, !p.trans_b, Buf::kDA, p.m, p.k, p.n, p.alpha, acc));
  }
  want_c = want_c && p.bias != BiasKind::kNone;
  // The bias gradient Σ_m dY[m,n] rides on the dB product when nothing scales or accumulates it.
  bool const fuse_c =
      want_c && want_b && p.bias == BiasKind::kPerColumn && p.alpha == 1.f && p.beta == 1.f && !accumulate;
  if (want_b) {
    LtCall c = p.trans_b ? rowmajor_call(Buf::kDY, true, Buf::kA, p.trans_a, Buf::kDB, p.n, p.k, p.m, p.alpha, acc)
                         : rowmajor_call(Buf::kA, !p.trans_a, Buf::kDY, false, Buf::kDB, p.k, p.n, p.m, p.alpha, acc);
    if (fuse_c) {
      c.epilogue = p.trans_b ? LtEpilogue::kBgradB : LtEpilogue::kBgradA;
      c.bias = Buf::kDC;
    }
    plan.calls.push_back(c);
  }
  if (!want_c || fuse_c) return plan;
  switch (p.bias) {
    case BiasKind::kPerColumn:
      plan.calls.push_back(rowmajor_call(Buf::kOnes, false, Buf::kDY, false, Buf::kDC, 1, p.n, p.m, p.beta, acc));
      plan.ones = p.m;
      break;
    case BiasKind::kPerRow:
      plan.calls.push_back(rowmajor_call(Buf::kDY, false, Buf::kOnes, false, Buf::kDC, p.m, 1, p.n, p.beta, acc));
      plan.ones = p.n;
      break;
    case BiasKind::kScalar:
      plan.calls.push_back(rowmajor_call(Buf::kOnes, false, Buf::kDY, false, Buf::kTmp, 1, p.n, p.m, 1.f, 0.f));
      plan.calls.push_back(rowmajor_call(Buf::kTmp, false, Buf::kOnes, false, Buf::kDC, 1, 1, p.n, p.beta, acc));
      plan.ones = std::max(p.m, p.n);
      plan.tmp = p.n;
      break;
    case BiasKind::kFull: {
      LtCall c;
      c.kind = LtKind::kAxpby;
      c.a = Buf::kDY;
      c.d = accumulate ? Buf::kTmp : Buf::kDC;
      c.m = p.n;
      c.n = p.m;
      c.lda = c.ldc = std::max<int64_t>(1, p.n);
      c.alpha = p.beta;
      c.beta = 0.f;
      plan.calls.push_back(c);
      if (accumulate) {
        plan.tmp = p.m * p.n;
        plan.add_tmp_into_dc = true;
      }
      break;
    }
    case BiasKind::kNone:
      break;
  }
  return plan;
}

GemmPlan matmul_forward_plan(MatMulShapes const& s, float alpha) {
  GemmPlan plan;
  std::size_t const r = s.y.size();
  int64_t const m = s.a[r - 2], k = s.a[r - 1], n = s.b[r - 1];
  if (s.fold) {  // A is not transposed here
    plan.calls.push_back(
        rowmajor_call(Buf::kA, false, Buf::kB, s.trans_b, Buf::kY, prod(s.a, 0, r - 1), n, k, alpha, 0.f));
    return plan;
  }
  std::vector<int64_t> const batch(s.y.begin(), s.y.end() - 2);
  add_batched(plan, rowmajor_call(Buf::kA, s.trans_a, Buf::kB, s.trans_b, Buf::kY, m, n, k, alpha, 0.f), batch,
              batch_strides(s.a, batch), batch_strides(s.b, batch), batch_strides(s.y, batch), 0.f);
  return plan;
}

GemmPlan matmul_backward_plan(MatMulShapes const& s, bool want_a, bool want_b, bool accumulate, float alpha) {
  GemmPlan plan;
  float const acc = accumulate ? 1.f : 0.f;
  std::size_t const r = s.y.size();
  int64_t const m = s.a[r - 2], k = s.a[r - 1], n = s.b[r - 1];
  if (s.fold) {  // A is not transposed here
    int64_t const rows = prod(s.a, 0, r - 1);
    if (want_a)  // dA = dY · op(B)ᵀ
      plan.calls.push_back(rowmajor_call(Buf::kDY, false, Buf::kB, !s.trans_b, Buf::kDA, rows, k, n, alpha, acc));
    if (want_b)  // dB = Aᵀ · dY over all rows (B stored transposed: dYᵀ · A)
      plan.calls.push_back(s.trans_b ? rowmajor_call(Buf::kDY, true, Buf::kA, false, Buf::kDB, n, k, rows, alpha, acc)
                                     : rowmajor_call(Buf::kA, true, Buf::kDY, false, Buf::kDB, k, n, rows, alpha, acc));
    return plan;
  }
  std::vector<int64_t> const batch(s.y.begin(), s.y.end() - 2);
  // Batch strides are the same for an operand as stored and as op(X): its last two dims' product.
  std::vector<int64_t> const sa = batch_strides(s.a, batch), sb = batch_strides(s.b, batch),
                             sy = batch_strides(s.y, batch);
  if (want_a) {
    if (s.trans_a)  // A stored [K, M]: dA = op(B) · dYᵀ
      add_batched(plan, rowmajor_call(Buf::kB, s.trans_b, Buf::kDY, true, Buf::kDA, k, m, n, alpha, 0.f), batch, sb, sy,
                  sa, acc);
    else
      add_batched(plan, rowmajor_call(Buf::kDY, false, Buf::kB, !s.trans_b, Buf::kDA, m, k, n, alpha, 0.f), batch, sy,
                  sb, sa, acc);
  }
  if (want_b) {
    if (s.trans_b)  // B stored [N, K]: dB = dYᵀ · op(A)
      add_batched(plan, rowmajor_call(Buf::kDY, true, Buf::kA, s.trans_a, Buf::kDB, n, k, m, alpha, 0.f), batch, sy, sa,
                  sb, acc);
    else
      add_batched(plan, rowmajor_call(Buf::kA, !s.trans_a, Buf::kDY, false, Buf::kDB, k, n, m, alpha, 0.f), batch, sa,
                  sy, sb, acc);
  }
  return plan;
}

Status check_bound(GemmPlan const& plan, GemmBuffers const& buffers) {
  auto need = [&](Buf b, LtCall const& c) -> Status {
    if (b == Buf::kNone || buffers.get(b) != nullptr) return Status::ok();
    return internal_error(std::string("GEMM plan reads or writes buffer ") + buf_name(b) +
                          ", which is not bound: " + describe(c));
  };
  for (LtCall const& c : plan.calls) {
    RETURN_IF_ERROR(need(c.a, c));
    if (c.kind == LtKind::kMatmul) RETURN_IF_ERROR(need(c.b, c));
    RETURN_IF_ERROR(need(c.c, c));
    RETURN_IF_ERROR(need(c.d, c));
    if (c.epilogue != LtEpilogue::kNone) RETURN_IF_ERROR(need(c.bias, c));
  }
  if (plan.add_tmp_into_dc) {
    if (buffers.get(Buf::kDC) == nullptr) return internal_error("GEMM plan adds into an unbound dC");
    if (buffers.get(Buf::kTmp) == nullptr) return internal_error("GEMM plan adds an unbound tmp into dC");
  }
  return Status::ok();
}

GemmBuffers forward_buffers(void const* a, void const* b, void const* c, void* y) {
  GemmBuffers buf;
  buf.set(Buf::kA, a);
  buf.set(Buf::kB, b);
  buf.set(Buf::kC, c);
  buf.set(Buf::kY, y);
  return buf;
}

GemmBuffers backward_buffers(void const* a, void const* b, void const* dy, void* da, void* db, void* dc) {
  GemmBuffers buf;
  buf.set(Buf::kA, a);
  buf.set(Buf::kB, b);
  buf.set(Buf::kDY, dy);
  buf.set(Buf::kDA, da);
  buf.set(Buf::kDB, db);
  buf.set(Buf::kDC, dc);
  return buf;
}

GemmPlan conv_bias_forward_plan(int64_t n, int64_t k, int64_t spatial) {
  GemmPlan plan;
  LtCall c = rowmajor_call(Buf::kC, false, Buf::kOnes, false, Buf::kY, k, spatial, 1, 1.f, 1.f);
  c.batch = n, c.stride_c = k * spatial;  // bias and ones: stride 0, the same for every n
  plan.calls.push_back(c);
  plan.ones = spatial;
  return plan;
}

GemmPlan conv_bias_grad_plan(int64_t n, int64_t k, int64_t spatial, bool accumulate) {
  GemmPlan plan;
  plan.calls.push_back(rowmajor_call(Buf::kDY, false, Buf::kOnes, false, Buf::kTmp, n * k, 1, spatial, 1.f, 0.f));
  plan.calls.push_back(
      rowmajor_call(Buf::kOnes, false, Buf::kTmp, false, Buf::kDC, 1, k, n, 1.f, accumulate ? 1.f : 0.f));
  plan.ones = std::max(n, spatial);
  plan.tmp = n * k;
  return plan;
}

}  // namespace gp::exec::cuda
