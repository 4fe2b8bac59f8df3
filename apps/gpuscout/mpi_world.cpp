#include "mpi_world.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "gpuscout/util/error.hpp"
#if defined(GPUSCOUT_HAVE_MPI)
#include <mpi.h>
#endif

namespace gpuscout::cli {
namespace {

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

#if defined(GPUSCOUT_HAVE_MPI)
class MpiWorld final : public bench::World {
 public:
  MpiWorld() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0) MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_free(&node);
  }
  ~MpiWorld() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string launcher() const override { return "mpi"; }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  void broadcast(void* data, std::size_t bytes, int root) override {
    MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
  }
  std::vector<std::string> gather(const std::string& mine, int root) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, MPI_COMM_WORLD);
    std::string all;
    if (rank_ == root) {
      int total = 0;
      for (int r = 0; r < size_; ++r) {
        offsets[static_cast<std::size_t>(r)] = total;
        total += lens[static_cast<std::size_t>(r)];
      }
      all.resize(static_cast<std::size_t>(total));
    }
    MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, root, MPI_COMM_WORLD);
    std::vector<std::string> out;
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r) {
        out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                                 static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
      }
    }
    return out;
  }
  double max(double value) override {
    double out = value;
    MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
  }
  [[noreturn]] void abort(int exit_code, const std::string& message) override {
    fmt::print(stderr, "gpuscout: rank {}: fatal: {}; ending every rank (MPI_Abort)\n", rank_, message);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0;
};
#endif

}  // namespace

std::optional<int> launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    if (auto v = env_int(name)) return v;
  }
  // srun without an MPI environment variable of its own: one task per rank.
  if (std::getenv("SLURM_PROCID") != nullptr && std::getenv("SLURM_STEP_ID") != nullptr) {
    if (auto v = env_int("SLURM_NTASKS")) return v;
  }
  return std::nullopt;
}

std::unique_ptr<bench::World> make_world() {
  const auto announced = launcher_world_size();
#if defined(GPUSCOUT_HAVE_MPI)
  if (announced) return std::make_unique<MpiWorld>();
#else
  if (announced && *announced > 1) {
    throw UsageError(fmt::format(
        "bench: started by an MPI launcher as one of {} ranks, but this gpuscout was built without MPI: every copy "
        "would measure alone. Rebuild with MPI (Debian: libopenmpi-dev) or run one process for all local GPUs",
        *announced));
  }
#endif
  return std::make_unique<bench::SingleProcessWorld>();
}

}  // namespace gpuscout::cli
