// Per-row math of the reductions ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp over
// an input seen as [rows, cols] (the reduced axes last, graph::ops::ReduceShape), and per-line math
// of the ops along one axis (LogSoftmax, Hardmax, CumSum, ArgMax/ArgMin, TopK) over an input seen as
// [outer, dim, inner] (graph::ops::AxisSplit), a line being the dim elements of one (outer, inner)
// position, `inner` apart. The CPU backend's exec/cpu/reduce.cc runs these functions row by row and
// line by line, and the CUDA kernels (kernels/cuda/reduce.cu) run them one thread per row or line,
// so the two backends compute the same values. Sums accumulate in double.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "kernels/hd/hd.h"

namespace gp::kernels::hd {

enum class Reduction : int32_t { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

GP_HD bool reduction_reads_x(Reduction r) {
  return r == Reduction::kProd || r == Reduction::kL1 || r == Reduction::kL2 || r == Reduction::kSumSquare ||
         r == Reduction::kLogSumExp;
}
GP_HD bool reduction_reads_y(Reduction r) {
  return r == Reduction::kL2 || r == Reduction::kLogSum || r == Reduction::kLogSumExp;
}
GP_HD bool reduction_is_extremum(Reduction r) { return r == Reduction::kMax || r == Reduction::kMin; }

// One row's reduction; `arg` gets the extremum's index for Max/Min (the first one on ties, a NaN
// wins), -1 otherwise.
GP_HD double reduce_row(Reduction r, float const* x, int64_t n, int64_t& arg) {
  double acc = 0;
  arg = -1;
  switch (r) {
    case Reduction::kSum:
    case Reduction::kMean:
      for (int64_t j = 0; j < n; ++j) acc += x[j];
      return r == Reduction::kMean ? acc / static_cast<double>(n) : acc;
    case Reduction::kMax:
    case Reduction::kMin: {
      bool const max = r == Reduction::kMax;
      double best = max ? -HUGE_VAL : HUGE_VAL;
      for (int64_t j = 0; j < n; ++j) {
        double const v = x[j];
        if (v != v) {  // NaN
          arg = j;
          return v;
        }
        if (arg < 0 || (max ? v > best : v < best)) {
          best = v;
          arg = j;
        }
      }
      return best;
    }
    case Reduction::kProd:
      acc = 1;
      for (int64_t j = 0; j < n; ++j) acc *= x[j];
      return acc;
    case Reduction::kL1:
      for (int64_t j = 0; j < n; ++j) acc += fabs(static_cast<double>(x[j]));
      return acc;
    case Reduction::kL2:
    case Reduction::kSumSquare:
      for (int64_t j = 0; j < n; ++j) acc += static_cast<double>(x[j]) * x[j];
      return r == Reduction::kL2 ? sqrt(acc) : acc;
    case Reduction::kLogSum:
      for (int64_t j = 0; j < n; ++j) acc += x[j];
      return log(acc);
    case Reduction::kLogSumExp: {
      double m = -HUGE_VAL;
      for (int64_t j = 0; j < n; ++j) m = fmax(m, static_cast<double>(x[j]));
      if (m == HUGE_VAL || m == -HUGE_VAL) return m;  // empty, all -inf, or a +inf element
      for (int64_t j = 0; j < n; ++j) acc += exp(static_cast<double>(x[j]) - m);
      return m + log(acc);
    }
  }
  return acc;
}

// d(reduction)/dx of one row times the output gradient g, into dx[0..n). x is read where
// reduction_reads_x(r), y (the forward's value) where reduction_reads_y(r), arg for Max/Min.
GP_HD void reduce_row_backward(Reduction r, float const* x, double y, int64_t arg, double g, int64_t n, float* dx) {
  switch (r) {
    case Reduction::kSum:
    case Reduction::kMean: {
      float const v = static_cast<float>(r == Reduction::kMean ? g / static_cast<double>(n) : g);
      for (int64_t j = 0; j < n; ++j) dx[j] = v;
      return;
    }
    case Reduction::kMax:
    case Reduction::kMin:
      for (int64_t j = 0; j < n; ++j) dx[j] = 0.f;
      if (arg >= 0 && arg < n) dx[arg] = static_cast<float>(g);
      return;
    case Reduction::kProd: {
      // The product of every other element: of the non-zero ones divided by x_j when the row has
      // no zero; at the one zero of a row with one, the others' product; else 0. Exact at zeros.
      int64_t zeros = 0, zero_at = -1;
      double others = 1;
      for (int64_t j = 0; j < n; ++j) {
        if (x[j] == 0.f) {
          ++zeros;
          zero_at = j;
        } else {
          others *= x[j];
        }
      }
      for (int64_t j = 0; j < n; ++j)
        dx[j] = zeros == 0                   ? static_cast<float>(g * others / static_cast<double>(x[j]))
                : zeros == 1 && j == zero_at ? static_cast<float>(g * others)
                                             : 0.f;
      return;
    }
    case Reduction::kL1:
      for (int64_t j = 0; j < n; ++j)
        dx[j] = x[j] > 0 ? static_cast<float>(g) : x[j] < 0 ? static_cast<float>(-g) : 0.f;
      return;
    case Reduction::kL2:
      for (int64_t j = 0; j < n; ++j) dx[j] = y > 0 ? static_cast<float>(g * x[j] / y) : 0.f;
      return;
    case Reduction::kSumSquare:
      for (int64_t j = 0; j < n; ++j) dx[j] = static_cast<float>(2 * g * x[j]);
      return;
    case Reduction::kLogSum: {
      float const v = static_cast<float>(g / exp(y));
      for (int64_t j = 0; j < n; ++j) dx[j] = v;
      return;
    }
    case Reduction::kLogSumExp: {
      bool const inf = y == HUGE_VAL || y == -HUGE_VAL;
      for (int64_t j = 0; j < n; ++j) dx[j] = inf ? 0.f : static_cast<float>(g * exp(static_cast<double>(x[j]) - y));
      return;
    }
  }
}

// ---- lines along one axis: element k of a line is x[k * stride] ----

// y = x - max - log(sum(exp(x - max))).
GP_HD void log_softmax_line(float const* x, int64_t dim, int64_t stride, float* y) {
  double m = -HUGE_VAL, sum = 0;
  for (int64_t k = 0; k < dim; ++k) m = fmax(m, static_cast<double>(x[k * stride]));
  for (int64_t k = 0; k < dim; ++k) sum += exp(x[k * stride] - m);
  double const lse = m + log(sum);
  for (int64_t k = 0; k < dim; ++k) y[k * stride] = static_cast<float>(x[k * stride] - lse);
}

// dx = g - softmax(x) · Σ g, with softmax(x) = exp(y).
GP_HD void log_softmax_line_backward(float const* y, float const* g, int64_t dim, int64_t stride, float* dx) {
  double gsum = 0;
  for (int64_t k = 0; k < dim; ++k) gsum += g[k * stride];
  for (int64_t k = 0; k < dim; ++k)
    dx[k * stride] = static_cast<float>(g[k * stride] - exp(static_cast<double>(y[k * stride])) * gsum);
}

// The index of the line's maximum (or minimum); ties: the first, or the last when `last`.
template <typename T>
GP_HD int64_t arg_extremum_line(T const* x, int64_t dim, int64_t stride, bool max, bool last) {
  int64_t best = 0;
  for (int64_t k = 1; k < dim; ++k) {
    T const v = x[k * stride], b = x[best * stride];
    if (max ? (v > b || (last && v == b)) : (v < b || (last && v == b))) best = k;
  }
  return best;
}

// TopK's order: whether a comes strictly before b among the k largest (or smallest). NaN sorts
// above every number (torch's order): first among the largest, never before a number among the
// smallest.
template <typename T>
GP_HD bool topk_before(T a, T b, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    bool const a_nan = a != a, b_nan = b != b;
    if (a_nan || b_nan) return largest ? a_nan && !b_nan : !a_nan && b_nan;
  }
  return largest ? a > b : a < b;
}

// The k best elements of the line in order into y and their positions into idx (both `out_stride`
// apart): each element is inserted where it belongs among the best so far, behind any equal one,
// so ties keep the lower index first (ONNX's rule). One pass; O(dim * k) at worst, O(dim) once the
// best k have been seen.
template <typename T>
GP_HD void topk_line(T const* x, int64_t dim, int64_t stride, int64_t k, bool largest, T* y, int64_t* idx,
                     int64_t out_stride) {
  if (k <= 0) return;
  int64_t filled = 0;
  for (int64_t j = 0; j < dim; ++j) {
    T const v = x[j * stride];
    if (filled == k && !topk_before(v, y[(k - 1) * out_stride], largest)) continue;
    int64_t p = filled < k ? filled++ : k - 1;
    for (; p > 0 && topk_before(v, y[(p - 1) * out_stride], largest); --p) {
      y[p * out_stride] = y[(p - 1) * out_stride];
      idx[p * out_stride] = idx[(p - 1) * out_stride];
    }
    y[p * out_stride] = v;
    idx[p * out_stride] = j;
  }
}

// TopK's backward: the position in the input [outer, dim, inner] that output element e of
// [outer, k, inner] came from (its index along the axis is `index`).
GP_HD int64_t topk_source(int64_t e, int64_t k, int64_t dim, int64_t inner, int64_t index) {
  int64_t const o = e / (k * inner), j = e % inner;
  return (o * dim + index) * inner + j;
}

// Running sums along the line (from the end when reverse; exclusive: without the element itself):
// floats accumulate in double; integers wrap on overflow (unsigned arithmetic, never undefined).
GP_HD void cumsum_line(float const* x, int64_t dim, int64_t stride, bool exclusive, bool reverse, float* y) {
  double run = 0;
  for (int64_t step = 0; step < dim; ++step) {
    int64_t const e = (reverse ? dim - 1 - step : step) * stride;
    double const before = run;
    run += x[e];
    y[e] = static_cast<float>(exclusive ? before : run);
  }
}
template <typename T, typename U>
GP_HD void cumsum_line_int(T const* x, int64_t dim, int64_t stride, bool exclusive, bool reverse, T* y) {
  U run = 0;
  for (int64_t step = 0; step < dim; ++step) {
    int64_t const e = (reverse ? dim - 1 - step : step) * stride;
    U const before = run;
    run += static_cast<U>(x[e]);
    y[e] = static_cast<T>(exclusive ? before : run);
  }
}

}  // namespace gp::kernels::hd
