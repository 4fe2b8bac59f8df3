#pragma once
// The processes of one `gpuscout bench` run: one process driving every local GPU (size 1), or one
// process per GPU started by mpirun/srun (apps/gpuscout/mpi_world.cpp, built when MPI is found).
// Benchmarks that span ranks (collectives) use it to share the NCCL id, line up their timed
// samples and agree on outcomes; rank 0 gathers every rank's records. No MPI header here.
#include <cstddef>
#include <string>
#include <vector>

namespace gpuscout::bench {

class World {
 public:
  virtual ~World() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;        // index among the ranks of this host
  virtual std::string launcher() const = 0;  // "single_process", "mpi"
  virtual void barrier() = 0;
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // Rank `root` gets every rank's string (index = rank); the others get an empty vector.
  virtual std::vector<std::string> gather(const std::string& mine, int root) = 0;
  // Largest value over all ranks (every rank gets it).
  virtual double max(double value) = 0;
  // Ends every rank at once (MPI_Abort): used when this rank cannot go on, so the others do not hang.
  [[noreturn]] virtual void abort(int exit_code, const std::string& message) = 0;
};

// The single-process world: rank 0 of 1.
class SingleProcessWorld final : public World {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string launcher() const override { return "single_process"; }
  void barrier() override {}
  void broadcast(void*, std::size_t, int) override {}
  std::vector<std::string> gather(const std::string& mine, int) override { return {mine}; }
  double max(double value) override { return value; }
  [[noreturn]] void abort(int exit_code, const std::string& message) override;
};

}  // namespace gpuscout::bench
