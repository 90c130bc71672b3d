// Whether a schedule can run on an ordered, tagless transport (the NCCL communicator,
// exec/comm/nccl_communicator.h). NCCL matches a device pair's messages by their order, not by a
// key, and its sends are not eager, so two checks come on top of validate_schedule:
//
// 1. Channel order: for every device pair a -> b, the SENDs on a to b and the RECVs on b from a
//    name the same messages (edge, direction, micro-batch) in the same order.
// 2. A dry run under the NCCL communicator's semantics, exactly as it behaves:
//      - SEND only queues the message on the host (the schedule's SEND is eager; NCCL's is not);
//      - RECV issues one NCCL group: every queued send plus this receive, and the device waits
//        until the whole group is done: each send until its peer has reached the matching RECV,
//        the receive until its sender has issued the matching send;
//      - ALLREDUCE s first issues the queued sends and waits for them, then waits until every
//        device with an ALLREDUCE s (the replica group) has arrived there;
//      - STEP issues the queued sends and waits for them, then the step's loss all-reduce waits
//        for every device.
//    A device blocked with no way forward is part of a cyclic wait; the error names every device
//    and line of the cycle.
//
// Because a send and the receive it is grouped with progress together, a pair of devices that
// both send and then both receive (NVIDIA/nccl#479) is safe. There is one communicator and one
// stream per device, so no schedule relies on two NCCL streams progressing independently
// (NVIDIA/nccl#783); a schedule that would need that (a device waiting in a RECV while its queued
// send is only received after a third device progresses) is a cyclic wait here and is rejected.
#pragma once

#include "core/status.h"
#include "schedule/instruction.h"

namespace gp::schedule {

// Ok, or kInvalidArgument naming both devices, the lines and the first mismatch (channel order),
// or every device and line of the cyclic wait (dry run), with the fix.
Status check_ordered_transport(Schedule const& schedule);

}  // namespace gp::schedule
