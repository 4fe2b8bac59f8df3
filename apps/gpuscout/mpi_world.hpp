#pragma once
// The ranks of a `gpuscout bench` run: MPI when this gpuscout was built with MPI and an MPI launcher
// (mpirun, srun with PMI/PMIx) started it, else the single-process world.
#include <memory>
#include <optional>

#include "gpuscout/bench/world.hpp"

namespace gpuscout::cli {

// The world size an MPI launcher announced through the environment (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE, PMIX_SIZE, SLURM_NTASKS under srun); nullopt when none did.
std::optional<int> launcher_world_size();

// Throws UsageError when a launcher started several ranks but MPI support is not built in (each
// copy would otherwise measure alone and write its own file).
std::unique_ptr<bench::World> make_world();

}  // namespace gpuscout::cli
