// Host twins of the CUDA data-movement and pooling kernels: the parameters that exec/cuda/
// ops_move.cc builds (kernels/hd/move.h) and the per-element GP_HD functions the kernels
// run (kernels/hd/index.h, pool.h), looped over every element on the host and compared with the
// CPU backend's operator, forward and backward. Pure copies must match exactly; sums (pooling
// averages, Expand's backward, overlapping max-pool windows) within a relative tolerance.
#include <algorithm>
#include <numeric>
#include <optional>

#include "exec/einsum.h"
#include "exec/separable_maps.h"
#include "graph/ops/einsum.h"
#include "graph/ops/move.h"
#include "graph/ops/pool.h"
#include "kernels/hd/index.h"
#include "kernels/hd/move.h"
#include "tests/exec/op_harness.h"

namespace gp::exec::testing {
namespace {

namespace hd = kernels::hd;

std::vector<float> values(Tensor const& t) { return t.to_vector(); }

// The first element where got and want differ by more than tol · (1 + |want|) (0: exactly).
std::optional<std::string> mismatch(std::vector<float> const& got, std::vector<float> const& want, double tol = 0) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " elements, want " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    double const d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (tol == 0 ? got[i] != want[i] : d > tol * (1 + std::fabs(want[i])))
      return "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " + std::to_string(want[i]);
  }
  return std::nullopt;
}
#define EXPECT_MATCH(got, want, ...)                        \
  do {                                                      \
    auto const m_ = mismatch((got), (want), ##__VA_ARGS__); \
    EXPECT_FALSE(m_.has_value()) << *m_;                    \
  } while (0)

// The chunks a widened copy moves (uint4, uint2, uint32_t on the device).
template <int N>
struct alignas(N) Chunk {
  unsigned char bytes[N];
};

template <typename V, typename I>
void run_chunks(void const* src, void* dst, hd::StridedParams const& p) {
  auto const n = static_cast<I>(hd::strided_numel(p));
  for (I i = 0; i < n; ++i) hd::strided_assign_at(static_cast<V const*>(src), static_cast<V*>(dst), p, i);
}

template <typename T, typename I>
void run_elements(T const* src, T* dst, hd::StridedParams const& p, bool accumulate) {
  auto const n = static_cast<I>(hd::strided_numel(p));
  for (I i = 0; i < n; ++i) hd::strided_copy_at(src, dst, p, i, accumulate);
}

// kernels/cuda/move.cu's strided_copy on the host: the same plan (chunk width, index type), one
// loop iteration per device thread. Returns the plan it ran.
template <typename T>
hd::StridedCopyPlan run_strided_copy(T const* src, T* dst, hd::StridedParams const& p, bool accumulate) {
  hd::StridedCopyPlan const plan =
      hd::plan_strided_copy(p, static_cast<int>(sizeof(T)), reinterpret_cast<std::uintptr_t>(src),
                            reinterpret_cast<std::uintptr_t>(dst), accumulate);
  switch (plan.chunk_bytes) {
    case 16:
      plan.int32 ? run_chunks<Chunk<16>, int32_t>(src, dst, plan.p) : run_chunks<Chunk<16>, int64_t>(src, dst, plan.p);
      break;
    case 8:
      plan.int32 ? run_chunks<Chunk<8>, int32_t>(src, dst, plan.p) : run_chunks<Chunk<8>, int64_t>(src, dst, plan.p);
      break;
    case 4:
      plan.int32 ? run_chunks<Chunk<4>, int32_t>(src, dst, plan.p) : run_chunks<Chunk<4>, int64_t>(src, dst, plan.p);
      break;
    default:
      plan.int32 ? run_elements<T, int32_t>(src, dst, plan.p, accumulate)
                 : run_elements<T, int64_t>(src, dst, plan.p, accumulate);
  }
  return plan;
}

// The strided-copy kernel's loop on the host.
void strided_copy(float const* src, float* dst, std::vector<int64_t> const& shape, std::vector<int64_t> const& ss,
                  std::vector<int64_t> const& ds, bool accumulate) {
  hd::StridedParams p;
  ASSERT_TRUE(hd::make_strided(shape, ss, ds, p));
  run_strided_copy(src, dst, p, accumulate);
}

struct CpuRun {
  std::vector<Tensor> out;
  std::vector<Tensor> grads;
};

// The CPU backend's forward, then its backward for the inputs in `needs` with gradients gouts.
CpuRun cpu_run(OneOp const& o, std::vector<Tensor> const& gouts, std::vector<bool> const& needs) {
  CpuBackend be;
  CpuRun r;
  Saved saved;
  r.out = run_forward(be, o, true, 7, &saved);
  OpCall call{o.the_op(), o.graph, true, 7};
  Status const s = be.backward_input(call, saved, gouts, needs, r.grads);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return r;
}

TEST(HdMove, TheComparisonRejectsAPerturbedResult) {
  std::vector<float> const want{1.f, -2.f, 3.5f};
  std::vector<float> got = want;
  EXPECT_FALSE(mismatch(got, want).has_value());
  got[1] = std::nextafter(got[1], 0.f);
  EXPECT_TRUE(mismatch(got, want).has_value());
  EXPECT_FALSE(mismatch(got, want, 1e-6).has_value());
  got[2] *= 1.001f;
  EXPECT_TRUE(mismatch(got, want, 1e-5).has_value());
  EXPECT_TRUE(mismatch({1.f}, want).has_value());
}

TEST(HdMove, MakeStridedMergesContiguousDimsAndRefusesTooManyLeft) {
  std::vector<int64_t> const shape{2, 1, 3, 4};
  hd::StridedParams p;
  ASSERT_TRUE(hd::make_strided(shape, hd::row_major_strides(shape), hd::row_major_strides(shape), p));
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.shape[0], 24);
  std::vector<int64_t> big(9, 2);  // a rank-9 reversal merges nothing
  std::vector<int64_t> rev = hd::row_major_strides(big);
  std::reverse(rev.begin(), rev.end());
  EXPECT_FALSE(hd::make_strided(big, rev, hd::row_major_strides(big), p));
  EXPECT_TRUE(hd::make_strided(big, hd::row_major_strides(big), hd::row_major_strides(big), p));
}

// dst[c · ds] (+)= src[c · ss] for every coordinate c of shape, by coordinates (no hd code).
template <typename T>
void naive_copy(T const* src, T* dst, std::vector<int64_t> const& shape, std::vector<int64_t> const& ss,
                std::vector<int64_t> const& ds, bool accumulate) {
  std::vector<int64_t> c(shape.size(), 0);
  for (int64_t i = 0; i < hd::numel_of(shape); ++i) {
    int64_t s = 0, d = 0;
    for (std::size_t k = 0; k < shape.size(); ++k) {
      s += c[k] * ss[k];
      d += c[k] * ds[k];
    }
    dst[d] = accumulate ? static_cast<T>(dst[d] + src[s]) : src[s];
    for (std::size_t k = shape.size(); k-- > 0;) {
      if (++c[k] < shape[k]) break;
      c[k] = 0;
    }
  }
}

// One copy through the kernel's plan and through naive_copy; returns the plan.
template <typename T>
hd::StridedCopyPlan check_copy(T const* src, std::vector<int64_t> const& shape, std::vector<int64_t> const& ss,
                               std::vector<int64_t> const& ds, int64_t dst_numel, bool accumulate = false) {
  std::vector<T> got(dst_numel + 4), want(dst_numel + 4);
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = want[i] = static_cast<T>(i % 7);
  hd::StridedParams p;
  EXPECT_TRUE(hd::make_strided(shape, ss, ds, p));
  hd::StridedCopyPlan const plan = run_strided_copy(src, got.data(), p, accumulate);
  naive_copy(src, want.data(), shape, ss, ds, accumulate);
  EXPECT_TRUE(got == want) << "copy over " << graph::ops::dims_string(shape) << " in chunks of " << plan.chunk_bytes;
  return plan;
}

std::vector<int64_t> permuted_strides(std::vector<int64_t> const& shape, std::vector<int64_t> const& perm,
                                      std::vector<int64_t>& out_shape) {
  std::vector<int64_t> const in = hd::row_major_strides(shape);
  std::vector<int64_t> s(perm.size());
  out_shape.resize(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    out_shape[i] = shape[perm[i]];
    s[i] = in[perm[i]];
  }
  return s;
}

TEST(HdMove, CopiesMoveWideChunksWhereTheLayoutAllowsAndTheSameBytes) {
  std::vector<float> x(2 * 6 * 3 * 8 + 8);
  std::iota(x.begin(), x.end(), 0.f);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(x.data()) % 16, 0u);  // malloc's alignment on x86-64
  std::vector<int64_t> y_shape;
  // A GPT's head permutation [B, S, H, D] -> [B, H, S, D]: D stays innermost, 16-byte chunks.
  auto ss = permuted_strides({2, 6, 3, 8}, {0, 2, 1, 3}, y_shape);
  hd::StridedCopyPlan plan = check_copy(x.data(), y_shape, ss, hd::row_major_strides(y_shape), 2 * 6 * 3 * 8);
  EXPECT_EQ(plan.chunk_bytes, 16);
  EXPECT_TRUE(plan.int32);
  EXPECT_EQ(plan.p.shape[plan.p.rank - 1], 2);  // 8 floats: 2 chunks
  // D = 6: 8-byte chunks.
  ss = permuted_strides({2, 6, 3, 6}, {0, 2, 1, 3}, y_shape);
  EXPECT_EQ(check_copy(x.data(), y_shape, ss, hd::row_major_strides(y_shape), 2 * 6 * 3 * 6).chunk_bytes, 8);
  // A source one float off 16 and 8 bytes: element by element.
  ss = permuted_strides({2, 6, 3, 8}, {0, 2, 1, 3}, y_shape);
  EXPECT_EQ(check_copy(x.data() + 1, y_shape, ss, hd::row_major_strides(y_shape), 2 * 6 * 3 * 8).chunk_bytes, 0);
  // Swapping the last two axes: the innermost axis is strided in the source, element by element.
  ss = permuted_strides({2, 6, 3, 8}, {0, 1, 3, 2}, y_shape);
  EXPECT_EQ(check_copy(x.data(), y_shape, ss, hd::row_major_strides(y_shape), 2 * 6 * 3 * 8).chunk_bytes, 0);
  // Accumulating (a gradient added into its slot) never moves raw chunks.
  ss = permuted_strides({2, 6, 3, 8}, {0, 2, 1, 3}, y_shape);
  EXPECT_EQ(check_copy(x.data(), y_shape, ss, hd::row_major_strides(y_shape), 2 * 6 * 3 * 8, true).chunk_bytes, 0);
  // A Split's part: the part's rows are 4 of the 8 floats of a whole row, 16-byte chunks.
  EXPECT_EQ(check_copy(x.data() + 4, {12, 4}, {8, 1}, {4, 1}, 48).chunk_bytes, 16);
  // An odd row stride (a part of 3 of 7 floats): elements.
  EXPECT_EQ(check_copy(x.data(), {6, 4}, {7, 1}, {4, 1}, 24).chunk_bytes, 0);
  // A bool mask broadcast over the batch: rows of 12 bytes, 4-byte chunks.
  std::vector<uint8_t> mask(4 * 3);
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = static_cast<uint8_t>(i % 2);
  std::vector<int64_t> const expanded{2, 3, 4, 3};
  EXPECT_EQ(check_copy(mask.data(), expanded, hd::broadcast_strides({1, 1, 4, 3}, expanded),
                       hd::row_major_strides(expanded), 72)
                .chunk_bytes,
            4);
  // int64 ids: pairs in 16-byte chunks when the rows hold an even count, else elements.
  std::vector<int64_t> ids(2 * 4);
  std::iota(ids.begin(), ids.end(), int64_t{100});
  EXPECT_EQ(check_copy(ids.data(), {3, 2, 4}, {0, 4, 1}, {8, 4, 1}, 24).chunk_bytes, 16);
  EXPECT_EQ(check_copy(ids.data(), {3, 3}, {0, 1}, {3, 1}, 9).chunk_bytes, 0);
}

TEST(HdMove, Int32IndexMathOnlyWhereEveryOffsetFits) {
  auto params = [](std::vector<int64_t> const& shape, std::vector<int64_t> const& src) {
    hd::StridedParams p;
    p.rank = static_cast<int>(shape.size());
    for (int k = 0; k < p.rank; ++k) {
      p.shape[k] = shape[k];
      p.src[k] = src[k];
      p.dst[k] = hd::row_major_strides(shape)[k];
    }
    return p;
  };
  int64_t const two31 = int64_t{1} << 31;
  EXPECT_TRUE(hd::strided_fits_int32(params({1 << 15, (1 << 15) - 1}, {(1 << 15) - 1, 1})));
  EXPECT_FALSE(hd::strided_fits_int32(params({1 << 15, 1 << 15}, {1 << 15, 1})));  // 2^30 elements
  EXPECT_TRUE(hd::strided_fits_int32(params({2, 4}, {two31 / 2, 1})));
  EXPECT_FALSE(hd::strided_fits_int32(params({2, 4}, {two31, 1})));          // an offset past 2^31
  EXPECT_FALSE(hd::strided_fits_int32(params({2, 4}, {-two31, 1})));         // ... counted by magnitude
  EXPECT_FALSE(hd::strided_fits_int32(params({3, 4}, {two31 / 2 + 1, 1})));  // reached by the last row only
  // Where they fit, 32-bit offsets equal 64-bit ones for every element (negative strides too).
  hd::StridedParams const p = params({5, 7, 3, 4}, {-84, 12, -4, 1});
  ASSERT_TRUE(hd::strided_fits_int32(p));
  for (int32_t i = 0; i < 5 * 7 * 3 * 4; ++i) {
    int32_t s32 = 0, d32 = 0;
    int64_t s64 = 0, d64 = 0;
    hd::strided_offsets(i, p, s32, d32);
    hd::strided_offsets(int64_t{i}, p, s64, d64);
    ASSERT_EQ(s32, s64) << i;
    ASSERT_EQ(d32, d64) << i;
  }
  hd::ReduceParams r;
  ASSERT_TRUE(hd::make_reduce({1 << 16, 1 << 15}, {1, 1 << 15}, r));
  EXPECT_TRUE(hd::reduce_fits_int32(r));  // the last summed element sits at 2^31 - 1
  ASSERT_TRUE(hd::make_reduce({(1 << 16) + 1, 1 << 15}, {1, 1 << 15}, r));
  EXPECT_FALSE(hd::reduce_fits_int32(r));
  EXPECT_TRUE(hd::gather_fits_int32(1, 50257, 768, 16 * 256));  // a GPT's token embedding
  EXPECT_FALSE(hd::gather_fits_int32(1, 1 << 20, 1 << 11, 4));  // the table is 2^31 elements
  EXPECT_FALSE(hd::gather_fits_int32(4, 3, 1 << 20, 1 << 8));   // the output is 2^30
  EXPECT_FALSE(hd::gather_fits_int32(int64_t{1} << 40, int64_t{1} << 40, 1, 1));
}

TEST(HdMove, TransposeMatchesTheCpuBackendExactly) {
  Tensor x = random_tensor({2, 3, 4, 5}, 1);
  std::vector<int64_t> const perm{2, 0, 3, 1};
  OneOp o = make_op("Transpose", graph::TransposeAttrs{perm}, {{"x", x, kIn}});
  Tensor gy = random_tensor({4, 2, 5, 3}, 2);
  CpuRun cpu = cpu_run(o, {gy}, {true});
  std::vector<int64_t> const xs = hd::row_major_strides(x.shape());
  std::vector<int64_t> shape, strides;
  for (int64_t a : perm) {
    shape.push_back(x.dim(static_cast<int>(a)));
    strides.push_back(xs[a]);
  }
  std::vector<float> y(x.numel());
  strided_copy(x.data<float>(), y.data(), shape, strides, hd::row_major_strides(shape), false);
  EXPECT_MATCH(y, values(cpu.out[0]));
  // Backward: the inverse permutation of the gradient.
  std::vector<int64_t> const gs = hd::row_major_strides(gy.shape());
  std::vector<int64_t> inv_shape(4), inv_strides(4);
  for (std::size_t i = 0; i < 4; ++i) {
    inv_shape[perm[i]] = gy.dim(static_cast<int>(i));
    inv_strides[perm[i]] = gs[i];
  }
  std::vector<float> dx(x.numel());
  strided_copy(gy.data<float>(), dx.data(), inv_shape, inv_strides, hd::row_major_strides(inv_shape), false);
  EXPECT_MATCH(dx, values(cpu.grads[0]));
}

struct SliceCase {
  std::vector<int64_t> starts, ends, axes, steps;
};

TEST(HdMove, SliceWithNegativeStepsAndClampingMatchesTheCpuBackendExactly) {
  std::vector<SliceCase> const cases{{{1, -1}, {4, 100}, {1, 2}, {1, 2}},
                                     {{-1, 3}, {-100, 0}, {0, 2}, {-1, -2}},
                                     {{5, 0}, {0, 2}, {1, 0}, {-2, 1}},
                                     {{2}, {2}, {2}, {1}}};  // empty
  for (SliceCase const& c : cases) {
    Tensor x = random_tensor({3, 6, 5}, 3);
    OneOp o = make_op("Slice", graph::SliceAttrs{c.starts, c.ends, c.axes, c.steps}, {{"x", x, kIn}});
    Result<graph::ops::SliceGeometry> const r = graph::ops::slice_geometry(o.the_op(), x.shape());
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    graph::ops::SliceGeometry const& g = *r;
    Tensor gy = random_tensor(g.out_shape, 4);
    CpuRun cpu = cpu_run(o, {gy}, {true});
    ASSERT_EQ(cpu.out[0].shape(), g.out_shape);
    std::vector<float> y(hd::numel_of(g.out_shape));
    strided_copy(x.data<float>() + g.offset, y.data(), g.out_shape, g.src_strides, hd::row_major_strides(g.out_shape),
                 false);
    EXPECT_MATCH(y, values(cpu.out[0]));
    // Backward, accumulating into an existing gradient of 0.5: the CPU's fresh gradient + 0.5.
    std::vector<float> dx(x.numel(), 0.5f), want = values(cpu.grads[0]);
    for (float& v : want) v += 0.5f;
    strided_copy(gy.data<float>(), dx.data() + g.offset, g.out_shape, hd::row_major_strides(g.out_shape), g.src_strides,
                 true);
    EXPECT_MATCH(dx, want);
  }
}

TEST(HdMove, ExpandMatchesTheCpuBackendAndItsBackwardSumsBroadcastDims) {
  Tensor x = random_tensor({3, 1, 4, 1}, 5);
  std::vector<int64_t> const target{2, 3, 5, 4, 6};
  OneOp o = make_op("Expand", graph::ExpandAttrs{target}, {{"x", x, kIn}});
  std::vector<int64_t> shape;
  ASSERT_TRUE(hd::broadcast_shapes(x.shape(), target, shape));
  ASSERT_EQ(shape, target);
  Tensor gy = random_tensor(shape, 6);
  CpuRun cpu = cpu_run(o, {gy}, {true});
  std::vector<float> y(hd::numel_of(shape));
  strided_copy(x.data<float>(), y.data(), shape, hd::broadcast_strides(x.shape(), shape), hd::row_major_strides(shape),
               false);
  EXPECT_MATCH(y, values(cpu.out[0]));
  hd::ReduceParams p;
  ASSERT_TRUE(hd::make_reduce(shape, x.shape(), p));
  EXPECT_EQ(p.reduced_count, 2 * 5 * 6);
  std::vector<float> dx(x.numel());
  ASSERT_TRUE(hd::reduce_fits_int32(p));  // as the kernel runs it: int32 index math
  for (int32_t i = 0; i < static_cast<int32_t>(x.numel()); ++i) hd::reduce_at(gy.data<float>(), dx.data(), p, i, false);
  EXPECT_MATCH(dx, values(cpu.grads[0]), 1e-5);
  std::vector<int64_t> bad;
  EXPECT_FALSE(hd::broadcast_shapes({3, 2}, {4, 3}, bad));
}

TEST(HdMove, ConcatAndItsBackwardMatchTheCpuBackendExactly) {
  Tensor a = random_tensor({2, 3, 4}, 7), b = random_tensor({2, 1, 4}, 8), c = random_tensor({2, 5, 4}, 9);
  OneOp o = make_op("Concat", graph::ConcatAttrs{-2}, {{"a", a, kIn}, {"b", b, kIn}, {"c", c, kIn}});
  std::vector<int64_t> const whole{2, 9, 4};
  Tensor gy = random_tensor(whole, 10);
  CpuRun cpu = cpu_run(o, {gy}, {true, true, true});
  std::vector<int64_t> const ws = hd::row_major_strides(whole);
  std::vector<float> y(hd::numel_of(whole));
  int64_t off = 0;
  for (Tensor const* t : {&a, &b, &c}) {
    strided_copy(t->data<float>(), y.data() + off * ws[1], t->shape(), hd::row_major_strides(t->shape()), ws, false);
    std::vector<float> g(t->numel());
    strided_copy(gy.data<float>() + off * ws[1], g.data(), t->shape(), ws, hd::row_major_strides(t->shape()), false);
    EXPECT_MATCH(g, values(cpu.grads[t == &a ? 0 : t == &b ? 1 : 2]));
    off += t->dim(1);
  }
  EXPECT_MATCH(y, values(cpu.out[0]));
}

// Pad (every mode, a constant that is not 0, a negative pad that crops) and Tile of ids and masks:
// the CUDA backend's passes (the op's axis maps, hd::axis_copy_source per output element, Pad's
// value as the element, separable_fill_as) replayed on the host give the CPU backend's bytes.
template <typename T>
std::vector<T> copy_passes_on_host(OpCall const& call, Tensor const& x, MapsFn maps_of) {
  auto const maps = maps_of(call, x.shape());
  EXPECT_TRUE(maps.is_ok()) << maps.status().message();
  std::vector<int64_t> shape = x.shape();
  std::vector<T> y(static_cast<T const*>(x.raw()), static_cast<T const*>(x.raw()) + x.numel());
  T const fill = separable_fill_as<T>(separable_fill(call));
  for (std::size_t a = 0; a < maps->size(); ++a) {
    AxisMap const& m = (*maps)[a];
    if (m.identity()) continue;
    EXPECT_EQ(m.taps, 1);
    int64_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < a; ++d) outer *= shape[d];
    for (std::size_t d = a + 1; d < shape.size(); ++d) inner *= shape[d];
    std::vector<T> next(static_cast<std::size_t>(outer * m.out * inner));
    for (int64_t e = 0; e < static_cast<int64_t>(next.size()); ++e) {
      int64_t const s = hd::axis_copy_source<int64_t>(e, m.in, m.out, inner, m.index.data());
      next[static_cast<std::size_t>(e)] = s < 0 ? fill : y[static_cast<std::size_t>(s)];
    }
    y = std::move(next);
    shape[a] = m.out;
  }
  return y;
}

TEST(HdMove, PadAndTileOfIdsAndMasksCopyAsTheCpuBackend) {
  CpuBackend cpu;
  Tensor ids = int_tensor({2, 3}, {11, -12, 13, 14, 15, -16});
  Tensor mask({2, 3}, DType::kBool);
  for (int i = 0; i < 6; ++i) mask.data<uint8_t>()[i] = static_cast<uint8_t>(i % 2);
  struct Case {
    std::string name;
    graph::OpAttrs attrs;
    MapsFn maps;
  };
  std::vector<Case> const cases = {
      {"Pad constant 7", graph::PadAttrs{graph::PadMode::kConstant, {1, 2, 0, 1}, 7.f}, pad_maps},
      {"Pad constant -2.7 (truncated), a cropping pad",
       graph::PadAttrs{graph::PadMode::kConstant, {0, -1, 1, 2}, -2.7f}, pad_maps},
      {"Pad reflect", graph::PadAttrs{graph::PadMode::kReflect, {1, 2, 1, 2}, 0.f}, pad_maps},
      {"Pad edge", graph::PadAttrs{graph::PadMode::kEdge, {2, 1, 0, 2}, 0.f}, pad_maps},
      {"Pad wrap", graph::PadAttrs{graph::PadMode::kWrap, {1, 2, 1, 1}, 0.f}, pad_maps},
      {"Tile", graph::TileAttrs{{3, 2}}, tile_maps},
  };
  for (Case const& c : cases)
    for (Tensor const* x : {&ids, &mask}) {
      SCOPED_TRACE(c.name + (x == &ids ? " int64" : " bool"));
      OneOp const o =
          make_op(c.name.substr(0, 3) == "Pad" ? "Pad" : "Tile", c.attrs, {{"x", *x, kIn}}, 1, {x->dtype()});
      ASSERT_TRUE(cpu.supports(o.the_op(), o.graph).is_ok());
      OpCall const call{o.the_op(), o.graph, true, 7};
      std::vector<Tensor> want;
      ASSERT_TRUE(cpu.forward(call, o.inputs, want, nullptr).is_ok());
      if (x == &ids) {
        std::vector<int64_t> const got = copy_passes_on_host<int64_t>(call, *x, c.maps);
        EXPECT_EQ(got, std::vector<int64_t>(want[0].data<int64_t>(), want[0].data<int64_t>() + want[0].numel()));
      } else {
        std::vector<uint8_t> const got = copy_passes_on_host<uint8_t>(call, *x, c.maps);
        EXPECT_EQ(got, std::vector<uint8_t>(static_cast<uint8_t const*>(want[0].raw()),
                                            static_cast<uint8_t const*>(want[0].raw()) + want[0].numel()));
      }
    }
}

TEST(HdMove, SplitAndItsBackwardMatchTheCpuBackendExactly) {
  Tensor x = random_tensor({3, 4, 7}, 11);
  std::vector<int64_t> const sizes{2, 0, 5};
  OneOp o = make_op("Split", graph::SplitAttrs{2, sizes}, {{"x", x, kIn}}, 3);
  std::vector<Tensor> gys{random_tensor({3, 4, 2}, 12), Tensor(), random_tensor({3, 4, 5}, 13)};
  CpuRun cpu = cpu_run(o, gys, {true});
  std::vector<int64_t> const ws = hd::row_major_strides(x.shape());
  std::vector<float> dx(x.numel(), 0.f);  // the op zeroes the gradient (an output may have none)
  int64_t off = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> s = x.shape();
    s[2] = sizes[i];
    std::vector<float> y(hd::numel_of(s));
    strided_copy(x.data<float>() + off, y.data(), s, ws, hd::row_major_strides(s), false);
    EXPECT_MATCH(y, values(cpu.out[i]));
    if (gys[i].defined()) strided_copy(gys[i].data<float>(), dx.data() + off, s, hd::row_major_strides(s), ws, false);
    off += sizes[i];
  }
  EXPECT_MATCH(dx, values(cpu.grads[0]));
}

// Gather's backward as the kernels run it: keys sorted stably (the CUB radix sort), then one
// segmented sum per distinct index.
std::vector<float> gather_backward_twin(Tensor const& gy, int64_t outer, int64_t axis_dim, int64_t inner,
                                        std::vector<int64_t> const& idx) {
  int64_t const n = static_cast<int64_t>(idx.size());
  std::vector<int32_t> keys(n), pos(n);
  for (int64_t j = 0; j < n; ++j) keys[j] = hd::gather_key(idx.data(), j, axis_dim);
  std::iota(pos.begin(), pos.end(), 0);
  std::stable_sort(pos.begin(), pos.end(), [&](int32_t a, int32_t b) { return keys[a] < keys[b]; });
  std::vector<int32_t> sorted(n);
  for (int64_t p = 0; p < n; ++p) sorted[p] = keys[pos[p]];
  std::vector<float> dx(outer * axis_dim * inner, 0.f);
  EXPECT_TRUE(hd::gather_fits_int32(outer, axis_dim, inner, n));  // the kernel's int32 element index
  for (int32_t e = 0; e < static_cast<int32_t>(outer * n * inner); ++e)
    hd::gather_backward_at(gy.data<float>(), axis_dim, inner, sorted.data(), pos.data(), n, dx.data(), e);
  return dx;
}

TEST(HdMove, GatherAndItsDeterministicScatterAddMatchTheCpuBackendExactly) {
  for (int64_t axis : {0, 1, 2}) {
    Tensor data = random_tensor({4, 5, 3}, 14);
    std::vector<int64_t> const idx{1, -1, 2, 1, 0, 1, -2};  // repeats: the backward sums them
    OneOp o = make_op("Gather", graph::GatherAttrs{axis}, {{"data", data, kIn}, {"idx", int_tensor({7}, idx), kIn}});
    std::vector<int64_t> shape = data.shape();
    shape[axis] = 7;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
    for (int64_t i = axis + 1; i < 3; ++i) inner *= shape[i];
    int64_t const axis_dim = data.dim(static_cast<int>(axis));
    Tensor gy = random_tensor(shape, 15);
    CpuRun cpu = cpu_run(o, {gy}, {true, false});
    std::vector<float> y(hd::numel_of(shape));
    ASSERT_TRUE(hd::gather_fits_int32(outer, axis_dim, inner, 7));
    for (int32_t e = 0; e < static_cast<int32_t>(y.size()); ++e)
      EXPECT_TRUE(hd::gather_at(data.data<float>(), axis_dim, inner, idx.data(), 7, y.data(), e));
    EXPECT_MATCH(y, values(cpu.out[0]));
    EXPECT_MATCH(gather_backward_twin(gy, outer, axis_dim, inner, idx), values(cpu.grads[0]));
  }
}

TEST(HdMove, AnOutOfRangeGatherIndexIsFlaggedAndNeverReadLikeTheCpuError) {
  Tensor data = random_tensor({4, 3}, 16);
  std::vector<int64_t> const idx{0, 4, -5, 3};
  OneOp o = make_op("Gather", graph::GatherAttrs{0}, {{"data", data, kIn}, {"idx", int_tensor({4}, idx), kIn}});
  CpuBackend be;
  std::vector<Tensor> out;
  Status const s = be.forward(OpCall{o.the_op(), o.graph, true, 7}, o.inputs, out, nullptr);
  EXPECT_FALSE(s.is_ok());
  std::vector<float> y(12, 9.f);
  std::vector<bool> ok;
  for (int64_t e = 0; e < 12; ++e) ok.push_back(hd::gather_at(data.data<float>(), 4, 3, idx.data(), 4, y.data(), e));
  EXPECT_TRUE(ok[0] && ok[9]);
  EXPECT_FALSE(ok[3] || ok[6]);  // positions 1 and 2: the kernel's flag takes the smallest, 1
  EXPECT_EQ(y[3], 0.f);
  // The index noted beside the flag, on the device right after the check (what its error names).
  uint64_t verdict[2] = {1, 0};
  hd::note_bad_index(verdict, idx.data(), true, 1);
  EXPECT_EQ(static_cast<int64_t>(verdict[1]), 4);
  EXPECT_EQ(s.message(), "Gather 'Gather_0': index 4 (position 1) is out of range for axis 0 of [4,3]");  // the GPU's
  std::vector<int32_t> const idx32{5, 6, 7, -9};  // int32 indices, a flag in tuples of 3 (GatherND)
  verdict[0] = 1;
  hd::note_bad_index(verdict, idx32.data(), false, 3);
  EXPECT_EQ(static_cast<int64_t>(verdict[1]), -9);
  uint64_t fine[2] = {~uint64_t{0}, 77};  // every index in range: nothing is read or written
  hd::note_bad_index(fine, nullptr, true, 1);
  EXPECT_EQ(fine[1], 77u);
  // The backward skips them (key axis_dim sorts last).
  EXPECT_EQ(hd::gather_key(idx.data(), 1, 4), 4);
  EXPECT_EQ(hd::gather_key(idx.data(), 2, 4), 4);
  Tensor gy = random_tensor({4, 3}, 17);
  std::vector<float> dx = gather_backward_twin(gy, 1, 4, 3, idx);
  std::vector<float> want(12, 0.f);
  for (int64_t w = 0; w < 3; ++w) {
    want[0 * 3 + w] = gy.data<float>()[0 * 3 + w];
    want[3 * 3 + w] = gy.data<float>()[3 * 3 + w];
  }
  EXPECT_MATCH(dx, want);
}

struct PoolCase {
  std::string type;
  graph::PoolAttrs attrs;
  std::vector<int64_t> x_shape;
  double tol;  // 0: exact (max pooling without overlapping windows)
};

hd::PoolMode mode_of(graph::PoolAttrs const& a) {
  if (a.kind == graph::PoolKind::kMax) return hd::PoolMode::kMax;
  return a.count_include_pad && a.kind != graph::PoolKind::kGlobalAverage ? hd::PoolMode::kAverageIncludePad
                                                                          : hd::PoolMode::kAverageExcludePad;
}

TEST(HdMove, PoolingForwardAndBackwardMatchTheCpuBackend) {
  using K = graph::PoolKind;
  std::vector<PoolCase> const cases{
      {"MaxPool", {K::kMax, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, false, {}}, {2, 3, 6, 8}, 0},
      {"MaxPool", {K::kMax, {3, 3}, {2, 1}, {1, 1, 1, 0}, false, true, {}}, {2, 2, 7, 6}, 1e-6},
      {"MaxPool", {K::kMax, {3}, {2}, {1, 1}, false, true, {}}, {2, 3, 10}, 1e-6},
      {"AveragePool", {K::kAverage, {3, 2}, {2, 2}, {1, 0, 1, 1}, false, true, {}}, {2, 3, 7, 6}, 1e-5},
      {"AveragePool", {K::kAverage, {3, 2}, {2, 2}, {1, 0, 1, 1}, true, true, {}}, {2, 3, 7, 6}, 1e-5},
      {"AveragePool", {K::kAverage, {2, 3, 2}, {1, 2, 2}, {0, 1, 1, 1, 0, 0}, true, false, {}}, {1, 2, 4, 5, 5}, 1e-5},
      {"AveragePool", {K::kAverage, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, false, {}}, {1, 2, 5, 5}, 1e-5},
      {"GlobalAveragePool", {K::kGlobalAverage, {}, {}, {}, false, false, {}}, {2, 4, 5, 3}, 1e-5},
      // Dilated: taps 2 and 3 apart, clipped by pads and ceil_mode's last window.
      {"MaxPool", {K::kMax, {2, 3}, {1, 2}, {1, 0, 0, 2}, false, false, {2, 2}}, {2, 2, 5, 7}, 1e-6},
      {"MaxPool", {K::kMax, {3}, {2}, {2, 1}, false, true, {3}}, {1, 3, 11}, 1e-6},
      {"AveragePool", {K::kAverage, {2, 2}, {2, 1}, {1, 1, 1, 1}, false, true, {3, 2}}, {2, 2, 6, 5}, 1e-5},
      {"AveragePool", {K::kAverage, {2, 2}, {2, 1}, {1, 1, 1, 1}, true, true, {3, 2}}, {2, 2, 6, 5}, 1e-5},
      // count_include_pad where ceil_mode's last window reaches past the end pad.
      {"AveragePool", {K::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, true, {}}, {1, 2, 6, 7}, 1e-5},
      {"AveragePool",
       {K::kAverage, {2, 2, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 1}, false, false, {2, 1, 3}},
       {1, 2, 4, 5, 6},
       1e-5},
  };
  for (PoolCase const& c : cases) {
    SCOPED_TRACE(c.type + " on " + Tensor(c.x_shape).shape_string());
    Tensor x = distinct_tensor(c.x_shape, 18);
    OneOp o = make_op(c.type, c.attrs, {{"x", x, kIn}});
    Result<graph::ops::PoolWindow> const w = graph::ops::pool_window(o.the_op(), c.x_shape);
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    hd::PoolParams p;
    hd::pool_params(c.x_shape, w->out_shape, w->kernel, w->strides, w->dilations, w->pads_begin, w->counted_pads_end,
                    mode_of(c.attrs), p);
    std::vector<int64_t> const& y_shape = w->out_shape;
    Tensor gy = random_tensor(y_shape, 19);
    CpuRun cpu = cpu_run(o, {gy}, {true});
    ASSERT_EQ(cpu.out[0].shape(), y_shape);
    std::vector<float> y(hd::numel_of(y_shape));
    std::vector<int32_t> argmax(y.size());
    for (int64_t e = 0; e < static_cast<int64_t>(y.size()); ++e)
      y[e] = hd::pool_forward_at(x.data<float>(), p, e, argmax[e], std::numeric_limits<float>::lowest());
    EXPECT_MATCH(y, values(cpu.out[0]), p.mode == hd::PoolMode::kMax ? 0 : c.tol);
    std::vector<float> dx(x.numel());
    for (int64_t e = 0; e < x.numel(); ++e)
      hd::pool_backward_at(gy.data<float>(), argmax.data(), p, e, dx.data(), false);
    EXPECT_MATCH(dx, values(cpu.grads[0]), c.tol);
    // The GPU's int32 index math (these shapes fit) gives the same bits.
    ASSERT_TRUE(hd::pool_fits_int32(p));
    std::vector<float> y32(y.size()), dx32(dx.size());
    std::vector<int32_t> argmax32(y.size());
    for (int32_t e = 0; e < static_cast<int32_t>(y.size()); ++e)
      y32[e] = hd::pool_forward_at<float, float, int32_t>(x.data<float>(), p, e, argmax32[e],
                                                          std::numeric_limits<float>::lowest());
    for (int32_t e = 0; e < static_cast<int32_t>(dx.size()); ++e)
      hd::pool_backward_at<float, float, int32_t>(gy.data<float>(), argmax32.data(), p, e, dx32.data(), false);
    EXPECT_EQ(y32, y);
    EXPECT_EQ(argmax32, argmax);
    EXPECT_EQ(dx32, dx);
  }
}

TEST(HdMove, PoolWindowRejectsWhatTheCpuBackendRejects) {
  auto const window = [](std::vector<int64_t> const& x_shape, std::vector<int64_t> const& kernel,
                         std::vector<int64_t> const& pads) {
    graph::PoolAttrs a{graph::PoolKind::kMax, kernel, {1, 1}, pads, false, false, {}};
    OneOp o = make_op("MaxPool", a, {{"x", Tensor(x_shape), kIn}});
    return graph::ops::pool_window(o.the_op(), x_shape);
  };
  EXPECT_FALSE(window({1, 2, 3, 3}, {5, 5}, {0, 0, 0, 0}).is_ok());
  EXPECT_FALSE(window({1, 2}, {1}, {}).is_ok());
  Result<graph::ops::PoolWindow> const w = window({1, 2, 3, 3}, {5, 5}, {1, 1, 1, 1});
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  EXPECT_EQ(w->out_shape, (std::vector<int64_t>{1, 2, 1, 1}));
}

// Einsum as the CUDA backend runs it (exec/einsum.h's plan; its strided sums through
// EinsumSumPlan on hd::strided_copy_at / hd::reduce_at, as kernels/cuda/move.cu runs them; a plain
// GEMM) against the CPU backend: the output and every operand's gradient.
TEST(HdMove, EinsumOnTheDevicePlanMatchesTheCpuBackend) {
  EinsumPrimitives const device_like{
      [](Tensor const& x, std::vector<int64_t> const& x_strides,
         std::vector<int64_t> const& y_shape) -> Result<Tensor> {
        hd::StridedParams p;
        if (!hd::make_strided(y_shape, x_strides, hd::row_major_strides(y_shape), p))
          return unsupported("too many dims");
        Tensor y(y_shape);
        for (int64_t e = 0; e < y.numel(); ++e) hd::strided_copy_at(x.data<float>(), y.data<float>(), p, e, false);
        return y;
      },
      [](Tensor const& src, std::vector<int64_t> const& src_strides, std::vector<int64_t> const& out_strides,
         std::vector<int64_t> const& space, std::vector<int64_t> const& out_shape) -> Result<Tensor> {
        EinsumSumPlan plan;
        if (!einsum_sum_plan(src_strides, out_strides, space, plan)) return unsupported("too many dims");
        Tensor out = Tensor::zeros(out_shape);  // a copy writes only the kept positions (a diagonal)
        if (!plan.copy_only && plan.targets != out.numel())
          return internal_error("the kept labels do not cover the output");
        for (int64_t i = 0; i < plan.targets; ++i) {
          if (plan.copy_only)
            hd::strided_copy_at(src.data<float>(), out.data<float>(), plan.copy, i, false);
          else
            hd::reduce_at(src.data<float>(), out.data<float>(), plan.reduce, i, false);
        }
        return out;
      },
      [](Tensor const& a, Tensor const& b, int64_t nb, int64_t nm, int64_t nk, int64_t nn) -> Result<Tensor> {
        Tensor c = Tensor::zeros({nb, nm, nn});
        for (int64_t q = 0; q < nb; ++q)
          for (int64_t i = 0; i < nm; ++i)
            for (int64_t j = 0; j < nn; ++j) {
              double acc = 0;
              for (int64_t k = 0; k < nk; ++k)
                acc += static_cast<double>(a.data<float>()[(q * nm + i) * nk + k]) *
                       b.data<float>()[(q * nk + k) * nn + j];
              c.data<float>()[(q * nm + i) * nn + j] = static_cast<float>(acc);
            }
        return c;
      }};
  struct Case {
    char const* eq;
    std::vector<std::vector<int64_t>> dims;
  };
  uint32_t seed = 40;
  for (Case const& c : std::vector<Case>{{"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
                                         {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
                                         {"ij->ji", {{3, 4}}},
                                         {"ij->i", {{3, 4}}},
                                         {"ii->i", {{4, 4}}},
                                         {"ii", {{4, 4}}},
                                         {"i,j->ij", {{3}, {4}}},
                                         {"...ii->...i", {{3, 4, 4}}},
                                         {"bij,bjk->bk", {{2, 3, 4}, {2, 4, 5}}},
                                         {"ijk,jl->lk", {{2, 3, 4}, {3, 5}}},
                                         {"iij,j->i", {{3, 3, 2}, {2}}},
                                         {"sec,sm->ecm", {{6, 2, 3}, {6, 4}}}}) {
    SCOPED_TRACE(c.eq);
    std::vector<In> ins;
    std::vector<int64_t> ranks;
    for (std::size_t k = 0; k < c.dims.size(); ++k) {
      ins.push_back({"x" + std::to_string(k), random_tensor(c.dims[k], seed++, 0.2f, 1.f), kIn});
      ranks.push_back(static_cast<int64_t>(c.dims[k].size()));
    }
    OneOp o = make_op("Einsum", graph::EinsumAttrs{c.eq}, ins);
    CpuBackend cpu_be;
    std::vector<Tensor> const want_y = run_forward(cpu_be, o);
    Tensor const dy = random_tensor(want_y.at(0).shape(), seed++, 0.1f, 1.f);
    CpuRun const cpu = cpu_run(o, {dy}, std::vector<bool>(o.inputs.size(), true));
    auto spec = graph::ops::parse_einsum(c.eq, ranks);
    ASSERT_TRUE(spec.is_ok()) << spec.status().message();
    auto size = graph::ops::einsum_label_sizes(*spec, c.dims);
    ASSERT_TRUE(size.is_ok()) << size.status().message();
    auto y = einsum_forward(o.inputs, *spec, *size, device_like);
    ASSERT_TRUE(y.is_ok()) << y.status().message();
    EXPECT_MATCH(values(*y), values(cpu.out[0]), 1e-5);
    for (std::size_t i = 0; i < o.inputs.size(); ++i) {
      SCOPED_TRACE("operand " + std::to_string(i));
      auto g = einsum_gradient(o.inputs, i, dy, *spec, *size, device_like);
      ASSERT_TRUE(g.is_ok()) << g.status().message();
      EXPECT_MATCH(values(*g), values(cpu.grads.at(i)), 1e-5);
    }
  }
}

}  // namespace
}  // namespace gp::exec::testing
