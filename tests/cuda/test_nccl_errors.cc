// The NCCL error wrapper with injected codes (no GPU needed: NCCL's message lookup is a host
// function): it names the call, NCCL's code and message, file and line, and maps the code to the
// Status code the runtime reports.
#include <gtest/gtest.h>
#include <nccl.h>

#include "exec/comm/nccl_check.h"

namespace gp::exec {
namespace {

Status checked_nccl(ncclResult_t rc) {
  GP_NCCL_CHECK(rc);
  return Status::ok();
}

TEST(NcclErrors, SuccessIsOk) { EXPECT_TRUE(checked_nccl(ncclSuccess).is_ok()); }

TEST(NcclErrors, CodesCarryNcclsNameAndMapToTheRuntimesStatus) {
  Status const n = checked_nccl(ncclRemoteError);
  EXPECT_EQ(n.code(), StatusCode::kAborted);  // another rank failed: a secondary error
  EXPECT_NE(n.message().find("NCCL error 6"), std::string::npos) << n.message();
  EXPECT_NE(n.message().find("in rc ("), std::string::npos) << n.message();  // the checked expression as written
  EXPECT_NE(n.message().find("test_nccl_errors.cc:"), std::string::npos) << n.message();
  EXPECT_EQ(checked_nccl(ncclInvalidUsage).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gp::exec
