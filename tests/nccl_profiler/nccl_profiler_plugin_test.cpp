// The plugin as NCCL sees it: NCCL dlopens the library named by NCCL_PROFILER_PLUGIN, takes
// ncclProfiler_v5 (or _v4), calls init per communicator with a pointer to its activation mask and
// startEvent per collective. Here this test plays NCCL against the built library, and
// NcclProfilerControl (what the collectives benchmark uses) reads the result.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "gpuscout/cuda/nccl_profiler_control.hpp"
#include "nccl_profiler_abi.hpp"

namespace nccl_abi = gpuscout::nccl_profiler_abi;
using gpuscout::bench::NcclCallKey;
using gpuscout::cuda::NcclProfilerControl;
using gpuscout::cuda::plan_profiler_plugin;

namespace {

constexpr const char* kPlugin = GPUSCOUT_NCCL_PROFILER_PLUGIN;

// The library as NCCL opens it (same path: the same loaded instance as the control's).
void* nccl_side_open() {
  void* lib = dlopen(kPlugin, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib, nullptr) << dlerror();
  return lib;
}

nccl_abi::EventDescrV5 coll_v5(int rank, const char* func, std::size_t count, const char* dtype, const char* algo,
                               const char* proto, int channels) {
  nccl_abi::EventDescrV5 d{};
  d.type = nccl_abi::kEventColl;
  d.rank = rank;
  d.coll.v4.func = func;
  d.coll.v4.count = count;
  d.coll.v4.datatype = dtype;
  d.coll.v4.algo = algo;
  d.coll.v4.proto = proto;
  d.coll.v4.nChannels = static_cast<std::uint8_t>(channels);
  return d;
}

}  // namespace

TEST(NcclProfilerPlugin, RecordsOnlyWhileRecordingAndKeepsMaskOffOtherwise) {
  unsetenv("NCCL_PROFILER_PLUGIN");
  NcclProfilerControl control;
  control.prepare(true, kPlugin);
  ASSERT_STREQ(std::getenv("NCCL_PROFILER_PLUGIN"), kPlugin);
  EXPECT_TRUE(control.env_set_by_gpuscout());
  // Before NCCL initialised it for any communicator, the plugin says so.
  EXPECT_NE(control.unavailable_reason("2.28.3").find("never initialised"), std::string::npos);

  void* lib = nccl_side_open();
  auto* v5 = static_cast<nccl_abi::ProfilerV5*>(dlsym(lib, "ncclProfiler_v5"));
  ASSERT_NE(v5, nullptr);
  ASSERT_NE(dlsym(lib, "ncclProfiler_v4"), nullptr);
  int mask = -1;  // NCCL's global activation mask
  void* ctx0 = nullptr;
  void* ctx1 = nullptr;
  ASSERT_EQ(v5->init(&ctx0, 11, &mask, "c", 1, 2, 0, nullptr), 0);
  ASSERT_EQ(v5->init(&ctx1, 11, &mask, "c", 1, 2, 1, nullptr), 0);
  EXPECT_EQ(mask, 0) << "no events while not recording";
  EXPECT_EQ(control.communicators(), 2);
  EXPECT_EQ(control.nccl_interface(), 5);
  EXPECT_EQ(control.unavailable_reason("2.28.3"), "");

  void* handle = reinterpret_cast<void*>(1);
  auto before = coll_v5(0, "AllReduce", 2, "ncclFloat32", "TREE", "SIMPLE", 1);
  v5->startEvent(ctx0, &handle, &before);  // NCCL would not send it with mask 0; ignored anyway
  EXPECT_EQ(handle, nullptr);
  EXPECT_FALSE(control.find({0, "AllReduce", 2, "ncclFloat32"}));

  control.set_recording(true);
  EXPECT_EQ(mask, nccl_abi::kEventColl | nccl_abi::kEventP2p);
  auto r0 = coll_v5(0, "AllReduce", 2, "ncclFloat32", "RING", "LL", 24);
  auto r1 = coll_v5(1, "AllReduce", 2, "ncclFloat32", "RING", "LL", 24);
  v5->startEvent(ctx0, &handle, &r0);
  v5->startEvent(ctx1, &handle, &r1);
  nccl_abi::EventDescrV5 send{};
  send.type = nccl_abi::kEventP2p;
  send.p2p.v4.func = "Send";
  send.p2p.v4.count = 1024;
  send.p2p.v4.datatype = "ncclFloat32";
  send.p2p.v4.nChannels = 8;
  v5->startEvent(ctx1, &handle, &send);
  control.set_recording(false);
  EXPECT_EQ(mask, 0);

  const auto c = control.find({0, "AllReduce", 2, "ncclFloat32"});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->algorithm, "RING");
  EXPECT_EQ(c->protocol, "LL");
  EXPECT_EQ(c->channels, 24);
  EXPECT_FALSE(control.find({0, "AllReduce", 4, "ncclFloat32"})) << "another count is another call";
  ASSERT_TRUE(control.find_any_count(0, "AllReduce", "ncclFloat32")) << "the only AllReduce of rank 0";
  EXPECT_EQ(control.find_any_count(0, "AllReduce", "ncclFloat32")->algorithm, "RING");
  EXPECT_FALSE(control.find({0, "AllReduce", 2, "ncclBfloat16"}));
  const auto p = control.find({1, "Send", 1024, "ncclFloat32"});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->algorithm, "");
  EXPECT_EQ(p->channels, 8);
  control.clear();
  EXPECT_FALSE(control.find({1, "AllReduce", 2, "ncclFloat32"}));
  EXPECT_EQ(v5->finalize(ctx0), 0);
  EXPECT_EQ(v5->finalize(ctx1), 0);

  // Interface v4: a uint8_t type and another init argument order; the same table.
  auto* v4 = static_cast<nccl_abi::ProfilerV4*>(dlsym(lib, "ncclProfiler_v4"));
  void* ctx4 = nullptr;
  ASSERT_EQ(v4->init(&ctx4, &mask, "c", 11, 1, 2, 3, nullptr), 0);
  EXPECT_EQ(control.nccl_interface(), 4);
  control.set_recording(true);
  nccl_abi::EventDescrV4 d4{};
  d4.type = nccl_abi::kEventColl;
  d4.coll.func = "AllGather";
  d4.coll.count = 256;
  d4.coll.datatype = "ncclBfloat16";
  d4.coll.algo = "RING";
  d4.coll.proto = "SIMPLE";
  d4.coll.nChannels = 16;
  v4->startEvent(ctx4, &handle, &d4);
  control.set_recording(false);
  const auto g = control.find({3, "AllGather", 256, "ncclBfloat16"});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->protocol, "SIMPLE");
  EXPECT_EQ(g->channels, 16);
  v4->finalize(ctx4);
  dlclose(lib);
  unsetenv("NCCL_PROFILER_PLUGIN");
}

TEST(NcclProfilerPlugin, PlanLeavesTheUsersProfilerAndSaysWhy) {
  const auto own = plan_profiler_plugin(true, nullptr, "/x/libgpuscout_nccl_profiler.so", true);
  EXPECT_TRUE(own.use);
  EXPECT_TRUE(own.set_env);
  const auto same =
      plan_profiler_plugin(true, "/x/libgpuscout_nccl_profiler.so", "/x/libgpuscout_nccl_profiler.so", true);
  EXPECT_TRUE(same.use);
  EXPECT_FALSE(same.set_env);
  const auto user = plan_profiler_plugin(true, "inspector", "/x/libgpuscout_nccl_profiler.so", true);
  EXPECT_FALSE(user.use);
  EXPECT_NE(user.reason.find("NCCL_PROFILER_PLUGIN is set to 'inspector'"), std::string::npos);
  const auto off = plan_profiler_plugin(false, nullptr, "/x/libgpuscout_nccl_profiler.so", true);
  EXPECT_FALSE(off.use);
  EXPECT_NE(off.reason.find("turned off"), std::string::npos);
  const auto missing = plan_profiler_plugin(true, nullptr, "/x/libgpuscout_nccl_profiler.so", false);
  EXPECT_FALSE(missing.use);
  EXPECT_NE(missing.reason.find("missing"), std::string::npos);
}

TEST(NcclProfilerPlugin, UserSettingIsNotReplaced) {
  setenv("NCCL_PROFILER_PLUGIN", "/elsewhere/libnccl-profiler-inspector.so", 1);
  NcclProfilerControl control;
  control.prepare(true, kPlugin);
  EXPECT_STREQ(std::getenv("NCCL_PROFILER_PLUGIN"), "/elsewhere/libnccl-profiler-inspector.so");
  EXPECT_NE(control.unavailable_reason("2.28.3").find("libnccl-profiler-inspector"), std::string::npos);
  EXPECT_FALSE(control.find({0, "AllReduce", 2, "ncclFloat32"}));
  unsetenv("NCCL_PROFILER_PLUGIN");
}
