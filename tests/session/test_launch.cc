// Which launcher started a rank (mpirun, srun, torchrun) from their variables, and the check of
// MPI's ranks against it: each launcher read, a mix refused, a mismatch explained with the fix.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "exec/session/registry.h"

namespace gp::session {
namespace {

std::map<std::string, std::string> g_env;
char const* fake_getenv(char const* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

Result<LaunchEnvironment> launched_with(std::map<std::string, std::string> env) {
  g_env = std::move(env);
  return launch_environment(&fake_getenv);
}

TEST(Launch, NoLauncherIsOneProcess) {
  auto env = launched_with({});
  ASSERT_TRUE(env.is_ok());
  EXPECT_EQ(env->launcher, "");
  EXPECT_EQ(env->world, 1);
  EXPECT_TRUE(check_launch(*env, RankInfo{0, 1}).is_ok());
}

TEST(Launch, ReadsEachLauncher) {
  auto ompi = launched_with(
      {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  ASSERT_TRUE(ompi.is_ok()) << ompi.status().message();
  EXPECT_EQ(ompi->launcher, "mpirun");
  EXPECT_EQ(ompi->rank, 2);
  EXPECT_EQ(ompi->world, 4);
  auto srun =
      launched_with({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  ASSERT_TRUE(srun.is_ok()) << srun.status().message();
  EXPECT_EQ(srun->launcher, "srun");
  EXPECT_EQ(srun->rank, 3);
  EXPECT_EQ(srun->local_rank, 1);
  auto torchrun = launched_with({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  ASSERT_TRUE(torchrun.is_ok()) << torchrun.status().message();
  EXPECT_EQ(torchrun->launcher, "torchrun");
  EXPECT_EQ(torchrun->world, 2);
}

TEST(Launch, MpirunInsideASlurmAllocationIsMpirun) {
  auto env = launched_with({{"SLURM_STEP_ID", "batch"},
                            {"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "4"},
                            {"OMPI_COMM_WORLD_RANK", "3"},
                            {"OMPI_COMM_WORLD_SIZE", "4"}});
  ASSERT_TRUE(env.is_ok()) << env.status().message();
  EXPECT_EQ(env->launcher, "mpirun");
  EXPECT_EQ(env->rank, 3);
}

TEST(Launch, AMixThatDisagreesIsRefusedWithTheFix) {
  auto env =
      launched_with({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"RANK", "3"}, {"WORLD_SIZE", "4"}});
  ASSERT_FALSE(env.is_ok());
  EXPECT_NE(env.status().message().find("started by both mpirun (rank 0 of 2) and torchrun (rank 3 of 4)"),
            std::string::npos)
      << env.status().message();
  EXPECT_NE(env.status().message().find("mpirun -np N"), std::string::npos);
}

TEST(Launch, BrokenVariablesAreNamed) {
  auto bad = launched_with({{"RANK", "x"}, {"WORLD_SIZE", "2"}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("RANK='x'"), std::string::npos) << bad.status().message();
  auto missing = launched_with({{"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "2"}});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("SLURM_PROCID is missing"), std::string::npos);
  auto beyond = launched_with({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
  ASSERT_FALSE(beyond.is_ok());
}

TEST(Launch, TorchrunProcessesThatAreNotOneMpiJobGetTheFix) {
  auto env = launched_with({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}});
  ASSERT_TRUE(env.is_ok());
  Status s = check_launch(*env, RankInfo{0, 1});  // an MPI singleton
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("torchrun started this process as rank 1 of 4 but MPI sees rank 0 of 1"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("mpirun -np 4"), std::string::npos);
  EXPECT_TRUE(check_launch(*env, RankInfo{1, 4}).is_ok());  // torchrun's variables inside one MPI job
}

}  // namespace
}  // namespace gp::session
