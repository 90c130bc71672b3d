// The CUDA backend's activation family (the ops themselves: exec/cuda/activation.h).
#include "exec/cuda/activation.h"
#include "exec/cuda/cuda_ops.h"

namespace gp::exec::cuda {
namespace {

namespace hd = kernels::hd;

// Clip with a bound computed at run time (a third data input) stays on the CPU.
Status clip_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::ClipAttrs>(op, graph));
  for (std::size_t i = 1; i < op.inputs.size(); ++i)
    if (op.inputs[i] != graph::kNoTensor)
      return unsupported("Clip with a bound computed at run time (the CPU runs it; static bounds run here)");
  return Status::ok();
}

}  // namespace

std::optional<hd::Pointwise> pointwise_of(OpKind kind) {
  using P = hd::Pointwise;
  switch (kind) {
    case OpKind::kSelu:
      return P::kSelu;
    case OpKind::kCelu:
      return P::kCelu;
    case OpKind::kSoftsign:
      return P::kSoftsign;
    case OpKind::kHardSigmoid:
      return P::kHardSigmoid;
    case OpKind::kThresholdedRelu:
      return P::kThresholdedRelu;
    case OpKind::kSin:
      return P::kSin;
    case OpKind::kCos:
      return P::kCos;
    case OpKind::kTan:
      return P::kTan;
    case OpKind::kAsin:
      return P::kAsin;
    case OpKind::kAcos:
      return P::kAcos;
    case OpKind::kAtan:
      return P::kAtan;
    case OpKind::kSinh:
      return P::kSinh;
    case OpKind::kCosh:
      return P::kCosh;
    case OpKind::kAsinh:
      return P::kAsinh;
    case OpKind::kAcosh:
      return P::kAcosh;
    case OpKind::kAtanh:
      return P::kAtanh;
    case OpKind::kSign:
      return P::kSign;
    case OpKind::kFloor:
      return P::kFloor;
    case OpKind::kCeil:
      return P::kCeil;
    case OpKind::kRound:
      return P::kRound;
    case OpKind::kClip:
      return P::kClip;
    case OpKind::kHardSwish:
      return P::kHardSwish;
    case OpKind::kSoftplus:
      return P::kSoftplus;
    case OpKind::kReciprocal:
      return P::kReciprocal;
    case OpKind::kElu:
      return P::kElu;
    default:
      return std::nullopt;
  }
}

std::vector<KernelEntry> activation_kernels() {
  constexpr DType f32 = DType::kFloat32;
  OpKernels const unary{unary_forward<float>, unary_backward<float>, unary_backward<float>, no_check};
  std::vector<KernelEntry> t;
  for (OpKind u : {OpKind::kRelu, OpKind::kLeakyRelu, OpKind::kSigmoid, OpKind::kTanh, OpKind::kGelu, OpKind::kSqrt,
                   OpKind::kErf, OpKind::kExp, OpKind::kLog, OpKind::kAbs, OpKind::kNeg})
    t.push_back({u, f32, unary, 1});
  OpKernels const pointwise{pointwise_forward<float>, pointwise_backward<float>, pointwise_backward<float>, no_check};
  for (OpKind p :
       {OpKind::kSelu,      OpKind::kCelu,     OpKind::kSoftsign,   OpKind::kHardSigmoid, OpKind::kThresholdedRelu,
        OpKind::kSin,       OpKind::kCos,      OpKind::kTan,        OpKind::kAsin,        OpKind::kAcos,
        OpKind::kAtan,      OpKind::kSinh,     OpKind::kCosh,       OpKind::kAsinh,       OpKind::kAcosh,
        OpKind::kAtanh,     OpKind::kSign,     OpKind::kFloor,      OpKind::kCeil,        OpKind::kRound,
        OpKind::kHardSwish, OpKind::kSoftplus, OpKind::kReciprocal, OpKind::kElu})
    t.push_back({p, f32, pointwise, 1});
  t.push_back({OpKind::kClip,
               f32,
               {pointwise_forward<float>, pointwise_backward<float>, pointwise_backward<float>, clip_check},
               1});
  return t;
}

}  // namespace gp::exec::cuda
