#pragma once
// What `gpuscout doctor` judges, gathered for the doctor command and for `bench`, which records the
// warnings and failures in its result's provenance: the build, data, environment, CPU governors,
// history path, and (in a CUDA build) the driver, each local GPU through NVML, and peer access.
#include <initializer_list>
#include <map>
#include <string>

#include "context.hpp"
#include "gpuscout/doctor/doctor.hpp"
#include "local_gpus.hpp"

namespace gpuscout::cli {

// The environment variables named in `names` or starting with one of `prefixes`.
std::map<std::string, std::string> environment_variables(std::initializer_list<const char*> prefixes,
                                                         std::initializer_list<const char*> names);

// Never throws for a missing driver, GPU or bad data: those become facts (and findings).
doctor::Facts gather_doctor_facts(AppContext& ctx, const LocalGpus& local);

}  // namespace gpuscout::cli
