// The in-process communicator and the replica routing, on their own.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "exec/comm/in_process.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/runtime/link_probe.h"
#include "exec/runtime/routing.h"
#include "tests/exec/device_like_backend.h"

namespace gp::exec {
namespace {

MessageKey key(int mb = 0) { return {0, 1, false, mb, 0, 1}; }

TEST(InProcessCommunicator, SendThenReceiveChecksTheHeader) {
  InProcessHub hub(2);
  auto a = hub.endpoint(0), b = hub.endpoint(1);
  ASSERT_TRUE(a->send(key(), {Tensor::from_floats({2, 3}, {1, 2, 3, 4, 5, 6})}).is_ok());
  EXPECT_EQ(b->undelivered().size(), 1u);
  auto got = b->recv(key(), {{DType::kFloat32, {2, 3}}}, deadline_after(1));
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ((*got)[0].to_vector()[5], 6.f);
  EXPECT_TRUE(b->undelivered().empty());

  ASSERT_TRUE(a->send(key(1), {Tensor::from_floats({3, 2}, {1, 2, 3, 4, 5, 6})}).is_ok());
  auto bad = b->recv(key(1), {{DType::kFloat32, {2, 3}}}, deadline_after(1));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("float32[3,2] from d0 but d1 expects float32[2,3]"), std::string::npos)
      << bad.status().message();
}

// A GPU sender's tensors may still be being written when they are posted; the receiver copies them
// on its own stream, which nothing orders after the sender's kernels. So it waits for the sender's
// fence first: here the "kernel" writes the values only when the fence is waited for, and a copy
// made before that would hold zeros.
TEST(InProcessCommunicator, ARecvCopiesOnlyAfterTheSendersFence) {
  InProcessHub hub(2);
  auto a = hub.endpoint(0), b = hub.endpoint(1);
  Tensor pending = Tensor::from_floats({2, 2}, {0, 0, 0, 0});
  int waited = 0;
  HostFence const ready = [pending, &waited]() mutable {
    ++waited;
    for (int i = 0; i < 4; ++i) pending.data<float>()[i] = static_cast<float>(i + 1);
    return Status::ok();
  };
  ASSERT_TRUE(a->send(key(), {pending}, ready).is_ok());
  EXPECT_EQ(waited, 0);  // sending does not wait
  auto got = b->recv(key(), {{DType::kFloat32, {2, 2}}}, deadline_after(1));
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(waited, 1);
  EXPECT_EQ((*got)[0].to_vector(), (std::vector<float>{1, 2, 3, 4}));

  // A fence that reports the sender's failure fails the receive, naming the message.
  HostFence const failed = [] { return internal_error("an illegal address in the sender's kernel"); };
  ASSERT_TRUE(a->send(key(1), {Tensor::from_floats({1}, {5})}, failed).is_ok());
  auto bad = b->recv(key(1), {{DType::kFloat32, {1}}}, deadline_after(1));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("an illegal address in the sender's kernel"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("m1 d0->d1"), std::string::npos) << bad.status().message();
}

TEST(InProcessCommunicator, DuplicateSendAndMissingMessage) {
  InProcessHub hub(2);
  auto a = hub.endpoint(0), b = hub.endpoint(1);
  ASSERT_TRUE(a->send(key(), {}).is_ok());
  EXPECT_FALSE(a->send(key(), {}).is_ok());
  auto const t0 = std::chrono::steady_clock::now();
  auto r = b->recv(key(3), {}, deadline_after(0.2));
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_NE(r.status().message().find("step 0 e1 m3 d0->d1"), std::string::npos) << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(InProcessCommunicator, AbortWakesEveryWaiter) {
  InProcessHub hub(3);
  auto a = hub.endpoint(0), b = hub.endpoint(1), c = hub.endpoint(2);
  Status rb, rc;
  std::thread tb([&] { rb = b->recv(key(), {}, deadline_after(30)).status(); });
  std::thread tc([&] {
    std::vector<Tensor> t{Tensor::from_floats({1}, {1})};
    rc = c->all_reduce_sum({0, 0}, {0, 2}, t, deadline_after(30));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto const t0 = std::chrono::steady_clock::now();
  a->abort(numerical_error("device 0: loss is NaN"));
  tb.join();
  tc.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_EQ(rb.code(), StatusCode::kAborted);
  EXPECT_EQ(rc.code(), StatusCode::kAborted);
  EXPECT_NE(rb.message().find("loss is NaN"), std::string::npos);
  ASSERT_TRUE(b->aborted().has_value());
  EXPECT_EQ(b->aborted()->code(), StatusCode::kNumerical);  // the first cause, not a secondary one
}

// Every replica gets identical bits, summed in replica order whatever the arrival order.
TEST(InProcessCommunicator, AllReduceSumsInReplicaOrder) {
  for (int trial = 0; trial < 3; ++trial) {
    InProcessHub hub(3);
    std::vector<std::unique_ptr<Communicator>> ep;
    for (int d = 0; d < 3; ++d) ep.push_back(hub.endpoint(d));
    // Values whose float sum depends on the order: (1e8 + 1) - 1e8 = 0, 1e8 + (1 - 1e8) = 8 ...
    std::vector<std::vector<float>> vals = {{1e8f}, {1.f}, {-1e8f}};
    std::vector<std::vector<Tensor>> t(3);
    std::vector<Status> st(3);
    std::vector<std::thread> th;
    for (int d : {2, 0, 1}) {
      t[d] = {Tensor::from_floats({1}, vals[d])};
      th.emplace_back([&, d] { st[d] = ep[d]->all_reduce_sum({0, 4}, {1, 0, 2}, t[d], deadline_after(5)); });
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * ((trial + d) % 3)));
    }
    for (auto& x : th) x.join();
    float const expect = (1.f + 1e8f) + -1e8f;  // replica order: device 1, 0, 2
    for (int d = 0; d < 3; ++d) {
      ASSERT_TRUE(st[d].is_ok()) << st[d].message();
      EXPECT_EQ(t[d][0].to_vector()[0], expect) << "device " << d;
    }
  }
}

// Device workers' links are priced by moving a tensor through the transport as a pipeline moves an
// activation: sent with the sender's fence, which the receiver waits for before its copy, into the
// receiver's memory; a small and a large tensor give the latency and the bandwidth. Fails when the
// probe skips the fence (a GPU's copy would then not wait for the kernel that wrote the tensor).
TEST(LinkProbe, DeviceLinksAreMeasuredThroughTheTransportAfterTheSendersFence) {
  testing::DeviceLikeBackend from, to;
  testing::DeviceLikeBackend::FenceCounts fences;
  from.fences = &fences;
  auto const link = measure_device_link(from, to, int64_t{1} << 20, 3);
  ASSERT_TRUE(link.is_ok()) << link.status().message();
  EXPECT_EQ(fences.made.load(), 8);  // two sizes, each one warm-up and 3 timed transfers
  EXPECT_EQ(fences.waited.load(), 8);
  EXPECT_GT(link->latency_s, 0.0);
  EXPECT_GT(link->bandwidth_bytes_per_s, 1e8);  // host memory moves far more than 100 MB/s
}

TEST(Routing, BackendCopiesChunksBothWays) {
  CpuBackend be;
  std::vector<float> v(2 * 6 * 3);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  Tensor t = Tensor::from_floats({2, 6, 3}, v);  // batch axis 1, chunks of 2 rows
  Tensor piece = be.empty({2, 4, 3});
  ASSERT_TRUE(be.copy_chunks(t, {2, 0}, piece, {0, 1}, 1, 2).is_ok());
  auto p = piece.to_vector();
  EXPECT_EQ(p[0], 12.f);   // outer 0, row 4
  EXPECT_EQ(p[6], 0.f);    // outer 0, row 0
  EXPECT_EQ(p[12], 30.f);  // outer 1, row 4
  Tensor back = be.zeros({2, 6, 3});
  ASSERT_TRUE(be.copy_chunks(piece, {0, 1}, back, {2, 0}, 1, 2).is_ok());
  auto b = back.to_vector();
  for (int o = 0; o < 2; ++o)
    for (int r = 0; r < 6; ++r)
      for (int k = 0; k < 3; ++k) {
        float const want = (r / 2 == 1) ? 0.f : v[(o * 6 + r) * 3 + k];
        EXPECT_EQ(b[(o * 6 + r) * 3 + k], want);
      }
}

TEST(Routing, PiecesOfDividingReplicaCounts) {
  // Chunks c of replica j (of r) are c mod r == j; L = lcm = 4.
  auto pos = RuntimePlan::positions({1, 3}, 2);
  EXPECT_EQ(pos, (std::vector<int>{0, 1}));
  pos = RuntimePlan::positions({2}, 4);
  EXPECT_EQ(pos, (std::vector<int>{0}));
}

}  // namespace
}  // namespace gp::exec
