// The NCCL transport: one MPI rank per GPU (mpirun -np N graphpipe train --launcher mpi with the
// CUDA backend), bootstrapped over MPI: rank 0's ncclUniqueId is broadcast, then an MPI barrier
// (NVIDIA/cuDecomp#24: HCOLL may defer the broadcast's progress, and NCCL's init makes no MPI
// call), the local rank from an MPI_COMM_TYPE_SHARED split picks the GPU, and the communicator is
// non-blocking (config.blocking = 0), polled under a deadline. Every rank agrees over MPI on the
// outcome of each start-up phase, so a failure on one rank fails every rank, fast; without a GPU
// every rank returns kUnsupported "no usable CUDA GPU ...".
//
// Design, and why it cannot deadlock for a schedule that passes check_ordered_transport
// (schedule/p2p_order.h, whose dry run models exactly this):
//   - One NCCL communicator (plus one per replica group, made with ncclCommSplit at start) and one
//     stream per device. NCCL serializes a communicator's kernels whatever the stream
//     (NVIDIA/nccl#574, #592), and CUDA does not promise that kernels on two streams progress
//     independently (#783, #781), so a second p2p stream would buy nothing and risk a hang.
//   - send() only queues the tensors (the schedule's SEND is eager; NCCL's send is not). The next
//     recv() issues ONE group: every queued send plus this receive's header (the fix the NCCL
//     maintainers give in #479 and #783: delay the send and merge it with the receive). So two
//     devices that both send and then both receive exchange within one group each. ALLREDUCE,
//     flush (STEP) and barrier issue the queued sends first.
//   - The host waits for each group before issuing the next, so at most one group (one
//     communicator) of this device is in flight: communicators are used in different epochs as
//     the NCCL documentation requires, lazy p2p connects (#783, pytorch#113281) happen inside a
//     group whose peer is also inside the matching group, and the non-blocking comm keeps even
//     a stalled connect under the deadline.
//   - NCCL is tagless and per-pair ordered: every message is a fixed-size header (key, dtypes,
//     shapes), then one send per tensor. The receiver takes the header, checks the key (a
//     different key means the two schedules order the pair differently) and check_header, and
//     only then posts the payload receives, so a wrong shape is an error, never a truncation.
//   - Every wait polls cudaEventQuery, ncclCommGetAsyncError, the MPI abort message and the
//     deadline; a timeout (kTimeout naming the key and the peer), a fatal NCCL code or an abort
//     anywhere calls abort(): ncclCommAbort on every communicator of this rank (replica groups
//     first) and an abort message to every other rank, which then aborts its own (#863: every
//     local rank must abort). A communicator is never reused after an abort.
//   - all_reduce_sum is ncclAllReduce: every member gets identical bits, summed in NCCL's order
//     (not replica order as in the in-process and MPI transports).
#pragma once

#include <memory>
#include <vector>

#include "exec/comm/communicator.h"

namespace gp::exec {

struct NcclOptions {
  // The replica groups all_reduce_sum will be called with (devices in replica order), the same
  // list on every rank (derive it from the plan: each replicated stage's devices). The group of
  // every device in order needs no entry (the world communicator serves it).
  std::vector<std::vector<int>> groups;
  double init_timeout_s = 60;  // each start-up phase
  // The worker's streams (cudaStream_t), e.g. CudaBackend::stream(): the communicator's work waits
  // for the compute stream; it runs on `comm_stream`. Null: the legacy default stream / a stream
  // of its own.
  void* compute_stream = nullptr;
  void* comm_stream = nullptr;
  // Where received tensors are allocated: this rank's GPU (CudaBackend::allocator()).
  Allocator* memory = nullptr;
};

// The GPU of this rank (its local rank on the node), selected with cudaSetDevice. MPI must be
// started (MpiSession). Collective: every rank calls it, and every rank fails if one does
// (kUnsupported "no usable CUDA GPU ..." without one; an error naming the local rank and the
// device count when a node has more ranks than GPUs). Call it before creating the backend.
Result<int> select_local_gpu(double timeout_s);

// The endpoint of this rank (device = MPI rank). Collective, like select_local_gpu (which it
// calls again, harmlessly, if the caller did not).
Result<std::unique_ptr<Communicator>> make_nccl_communicator(NcclOptions const& options);

}  // namespace gp::exec
