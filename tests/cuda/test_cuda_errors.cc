// The CUDA/cuBLAS/cuDNN error wrappers (NCCL's: test_nccl_errors.cc) with injected codes (no GPU needed: the libraries'
// name and message lookups are host functions): each names the call, the library's own name and
// message, file and line, and maps the code to the Status code the CLI reports.
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn_graph.h>
#include <gtest/gtest.h>

#include "exec/cuda/cuda_check.h"

namespace gp::exec::cuda {
namespace {

Status checked_cuda(cudaError_t rc) {
  GP_CUDA_CHECK(rc);
  return Status::ok();
}
Status checked_cublas(cublasStatus_t rc) {
  GP_CUBLAS_CHECK(rc);
  return Status::ok();
}
Status checked_cudnn(cudnnStatus_t rc) {
  GP_CUDNN_CHECK(rc);
  return Status::ok();
}

TEST(CudaErrors, SuccessCodesAreOk) {
  EXPECT_TRUE(checked_cuda(cudaSuccess).is_ok());
  EXPECT_TRUE(checked_cublas(CUBLAS_STATUS_SUCCESS).is_ok());
  EXPECT_TRUE(checked_cudnn(CUDNN_STATUS_SUCCESS).is_ok());
}

TEST(CudaErrors, ACudaErrorNamesTheCallTheLibraryMessageAndTheLine) {
  Status const s = checked_cuda(cudaErrorMemoryAllocation);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInfeasible);  // out of memory: a limit, not a bug
  EXPECT_NE(s.message().find("cudaErrorMemoryAllocation"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("out of memory"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("in rc ("), std::string::npos) << s.message();  // the checked expression as written
  EXPECT_NE(s.message().find("test_cuda_errors.cc:"), std::string::npos) << s.message();
}

TEST(CudaErrors, NoDeviceAndAnOldDriverBothMeanNoUsableGpu) {
  for (cudaError_t rc : {cudaErrorNoDevice, cudaErrorInsufficientDriver}) {
    Status const s = checked_cuda(rc);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_NE(s.message().find("--backend cpu"), std::string::npos) << s.message();
  }
  Status const other = checked_cuda(cudaErrorIllegalAddress);
  EXPECT_EQ(other.code(), StatusCode::kInternal);
  EXPECT_NE(other.message().find("cudaErrorIllegalAddress"), std::string::npos) << other.message();
}

TEST(CudaErrors, CublasAndCudnnCodesCarryTheirLibrarysNames) {
  Status const b = checked_cublas(CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(b.code(), StatusCode::kUnsupported);
  EXPECT_NE(b.message().find("cuBLAS error CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << b.message();
  EXPECT_EQ(checked_cublas(CUBLAS_STATUS_ALLOC_FAILED).code(), StatusCode::kInfeasible);

  Status const d = checked_cudnn(CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(d.code(), StatusCode::kUnsupported);
  EXPECT_NE(d.message().find("CUDNN_STATUS_NOT_SUPPORTED"), std::string::npos) << d.message();
  EXPECT_EQ(checked_cudnn(CUDNN_STATUS_BAD_PARAM).code(), StatusCode::kInternal);
}

TEST(CudaErrors, DeviceAvailabilityIsReportedNotFatal) {
  Status const s = device_available();
  if (s.is_ok()) {
    EXPECT_GT(device_count(), 0);
  } else {
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
    EXPECT_NE(s.message().find("no usable CUDA GPU"), std::string::npos) << s.message();
    EXPECT_EQ(device_count(), 0);
  }
}

}  // namespace
}  // namespace gp::exec::cuda
