#pragma once
// What `gpuscout doctor` judges, gathered for the doctor command and for `bench`, which records the
// warnings and failures in its result's provenance: the build, data, environment, CPU governors,
// history path, and (in a CUDA build) the driver, each local GPU through NVML, and peer access.
#include "context.hpp"
#include "gpuscout/doctor/doctor.hpp"
#include "local_gpus.hpp"

namespace gpuscout::cli {

// Never throws for a missing driver, GPU or bad data: those become facts (and findings).
doctor::Facts gather_doctor_facts(AppContext& ctx, const LocalGpus& local);

}  // namespace gpuscout::cli
