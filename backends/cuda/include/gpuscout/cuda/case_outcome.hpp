#pragma once
// A measured case's failure becomes its record's outcome and the run goes on: a CUDA or cuBLASLt
// error fails the case (the sticky error state is cleared); a std::runtime_error (an interruption,
// a memory shortfall) skips it, with its message as the reason.
#include <stdexcept>

#include "gpuscout/cuda/check.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::cuda {

template <typename Body>
void record_case(results::Record& rec, Body&& body) {
  try {
    body();
  } catch (const CudaError& e) {
    rec.outcome = results::Outcome::failed;
    rec.reason = e.what();
    (void)cudaGetLastError();
  } catch (const std::runtime_error& e) {
    rec.outcome = results::Outcome::skipped;
    rec.reason = e.what();
  }
}

}  // namespace gpuscout::cuda
